//! Properties of the repository as a whole. A clone of it alone must build and pass its tests,
//! so no file may reach into a folder beside the checkout (the project grew next to a `shared/`
//! folder of reference material that users do not have); test data lives under `tests/data/`.
//! And one crypto provider is built.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use std::path::{Path, PathBuf};

/// Directories that are not part of the project's sources.
const SKIP: &[&str] = &["target", ".git", ".venv", ".e2e", ".work"];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    // A scratch directory another test removes while this one walks is no longer the tree's.
    let entries = match std::fs::read_dir(dir) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return,
        entries => entries.expect("readable tree"),
    };
    for entry in entries {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
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

/// One crypto provider for rustls, rcgen, key generation and CSR checks: aws-lc-rs. ring cannot
/// verify P-521 signatures nor generate RSA keys, and with two providers rustls cannot pick a
/// default. (Cargo.lock lists ring as an optional dependency of rustls-webpki that nothing
/// enables, so the built graph is what is checked.)
#[test]
fn one_crypto_provider_is_built() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "--workspace",
            "-e",
            "normal,build,dev",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).unwrap();
    let crates: std::collections::BTreeSet<&str> =
        tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(crates.contains("aws-lc-rs"), "aws-lc-rs is the provider");
    for other in ["ring", "openssl", "openssl-sys", "boring", "rustls-openssl"] {
        assert!(
            !crates.contains(other),
            "a second crypto provider is built: {other}"
        );
    }
}
