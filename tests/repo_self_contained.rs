//! A clone of this repository alone must build and pass its tests: no file may reach into a
//! folder beside the checkout (the project grew next to a `shared/` folder of reference
//! material that users do not have). Test data the project needs lives under `tests/data/`.

use std::path::{Path, PathBuf};

/// Directories that are not part of the project's sources.
const SKIP: &[&str] = &["target", ".git", ".venv", ".e2e", ".work"];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable tree") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() {
            if !SKIP.contains(&name) {
                files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

#[test]
fn no_file_reads_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Spelled in pieces so this file does not match itself.
    let needles = [format!("../{}", "shared"), format!("{}/reference/", "shared")];
    let mut all = Vec::new();
    files(root, &mut all);
    assert!(all.len() > 100, "walked only {} files", all.len());
    let offenders: Vec<String> = all
        .iter()
        .filter_map(|path| {
            let text = std::fs::read(path).ok()?;
            let text = String::from_utf8_lossy(&text);
            let hit = needles.iter().find(|n| text.contains(n.as_str()))?;
            Some(format!(
                "{} mentions {hit:?}",
                path.strip_prefix(root).unwrap().display()
            ))
        })
        .collect();
    assert!(offenders.is_empty(), "{offenders:#?}");
}
