//! How large an object is, measured without keeping a copy: what the watches of tenant-written
//! objects weigh before they cache one.

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
