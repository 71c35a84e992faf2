//! How much tenant-written objects may cost: how many a list brings at once, and how large one
//! is, measured without keeping a copy, before a watch caches it.

use kube::runtime::watcher;

/// Objects per list page. kube-runtime's default of 500 decodes a whole page before any filter
/// sees it: 500 objects a tenant made as large as the API server allows (about 1.5 MiB each)
/// would be gigabytes. 10 such objects are about 15 MiB of JSON; a relist of 10,000 small
/// objects costs 1,000 list calls instead of 20.
pub const LIST_PAGE: u32 = 10;

/// The watch configuration every watch of tenant-written objects starts from.
pub fn watch_config() -> watcher::Config {
    watcher::Config::default().page_size(LIST_PAGE)
}

/// The length of `value`'s JSON, written nowhere.
pub fn json_len(value: &impl serde::Serialize) -> usize {
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        // Serializing API types cannot fail; were it to, the object counts as too large.
        Err(_) => usize::MAX,
    }
}

/// A writer that only counts.
struct Count(usize);

impl std::io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_json_it_would_write() {
        let cases: [(serde_json::Value, usize); 3] = [
            (serde_json::json!({}), 2),
            (serde_json::json!({"a": "bc"}), 10),
            (serde_json::json!(["x".repeat(1000)]), 1004),
        ];
        for (value, want) in cases {
            assert_eq!(json_len(&value), want, "{value}");
        }
    }
}
