//! Properties of the repository as a whole. A clone of it alone must build and pass its tests,
//! so no file may reach into a folder beside the checkout (the project grew next to a `shared/`
//! folder of reference material that users do not have); test data lives under `tests/data/`.
//! And one crypto provider is built, and `src/controllers/` keeps its layers (see `layers`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

// The test crate's root looks for modules beside it, where Cargo would take them for tests.
#[path = "repo_hygiene/layers/mod.rs"]
mod layers;

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

/// A source file the layer rule is run on, and the violations it must report.
struct LayerCase {
    name: &'static str,
    file: &'static str,
    source: &'static str,
    expect: &'static [&'static str],
}

const LAYER_FAILS: &[LayerCase] = &[
    LayerCase {
        name: "a controller uses another by crate path",
        file: "src/controllers/issuer.rs",
        source: "use crate::controllers::csr::Signer;",
        expect: &[
            "src/controllers/issuer.rs:1: crate::controllers::csr::Signer (controller issuer may not use controller csr)",
        ],
    },
    LayerCase {
        name: "a controller uses another through super, in a group",
        file: "src/controllers/issuer.rs",
        source: "use super::{csr::{self, Signer as S}, kit::Shared};",
        expect: &[
            "src/controllers/issuer.rs:1: crate::controllers::csr (controller issuer may not use controller csr)",
            "src/controllers/issuer.rs:1: crate::controllers::csr::Signer (controller issuer may not use controller csr)",
        ],
    },
    LayerCase {
        name: "a controller's submodule uses another controller through super::super",
        file: "src/controllers/certificate/issuing/decide.rs",
        source: "fn f() -> super::super::super::csr::Phase { todo!() }",
        expect: &[
            "src/controllers/certificate/issuing/decide.rs:1: crate::controllers::csr::Phase (controller certificate may not use controller csr)",
        ],
    },
    LayerCase {
        name: "a controller calls another by an inline path, in code and in a macro",
        file: "src/controllers/csr/plan.rs",
        source: "fn f() {\n    crate::controllers::issuer::check();\n    assert!(crate::controllers::issuer::ready());\n}",
        expect: &[
            "src/controllers/csr/plan.rs:2: crate::controllers::issuer::check (controller csr may not use controller issuer)",
            "src/controllers/csr/plan.rs:3: crate::controllers::issuer::ready (controller csr may not use controller issuer)",
        ],
    },
    LayerCase {
        name: "a controller names another in macro arguments that are not code",
        file: "src/controllers/csr/plan.rs",
        source: "fn f() {\n    tracing::warn!(request = %crate::controllers::issuer::describe(&r), \"failed\");\n}",
        expect: &[
            "src/controllers/csr/plan.rs:2: crate::controllers::issuer::describe (controller csr may not use controller issuer)",
        ],
    },
    LayerCase {
        name: "a controller re-exports another's item",
        file: "src/controllers/certificate.rs",
        source: "pub use super::certificaterequest::Phase;",
        expect: &[
            "src/controllers/certificate.rs:1: crate::controllers::certificaterequest::Phase (controller certificate may not use controller certificaterequest)",
        ],
    },
    LayerCase {
        name: "a name imported from another controller is reported at the import only",
        file: "src/controllers/issuer/wiring.rs",
        source: "use crate::controllers::csr as other;\n\nfn f() {\n    other::sign();\n}",
        expect: &[
            "src/controllers/issuer/wiring.rs:1: crate::controllers::csr (controller issuer may not use controller csr)",
        ],
    },
    LayerCase {
        name: "a path through the imported root reaches another controller",
        file: "src/controllers/issuer/wiring.rs",
        source: "use crate::controllers;\n\nstruct S(controllers::csr::Signer);",
        expect: &[
            "src/controllers/issuer/wiring.rs:1: crate::controllers (controller issuer may not use root)",
            "src/controllers/issuer/wiring.rs:3: crate::controllers::csr::Signer (controller issuer may not use controller csr)",
        ],
    },
    LayerCase {
        name: "a controller uses an item of the root",
        file: "src/controllers/issuer.rs",
        source: "use super::Config;\nuse super::*;",
        expect: &[
            "src/controllers/issuer.rs:1: crate::controllers::Config (controller issuer may not use root)",
            "src/controllers/issuer.rs:2: crate::controllers (controller issuer may not use root)",
        ],
    },
    LayerCase {
        name: "a use inside a function body",
        file: "src/controllers/csr/observe.rs",
        source: "fn f() {\n    use crate::controllers::certificate::Settings;\n    Settings::new();\n}",
        expect: &[
            "src/controllers/csr/observe.rs:2: crate::controllers::certificate::Settings (controller csr may not use controller certificate)",
        ],
    },
    LayerCase {
        name: "the kit uses signing",
        file: "src/controllers/kit/plan.rs",
        source: "use crate::controllers::signing::Held;\nfn f(_: super::super::signing::Memory) {}",
        expect: &[
            "src/controllers/kit/plan.rs:1: crate::controllers::signing::Held (kit may not use signing)",
            "src/controllers/kit/plan.rs:2: crate::controllers::signing::Memory (kit may not use signing)",
        ],
    },
    LayerCase {
        name: "the kit uses a controller, from a test module",
        file: "src/controllers/kit.rs",
        source: "#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::issuer::Issuer;\n}",
        expect: &[
            "src/controllers/kit.rs:4: crate::controllers::issuer::Issuer (kit may not use controller issuer)",
        ],
    },
    LayerCase {
        name: "signing uses a controller in a pattern",
        file: "src/controllers/signing/mod.rs",
        source: "fn f(p: u8) {\n    match p {\n        crate::controllers::certificaterequest::DONE => {}\n        _ => {}\n    }\n}",
        expect: &[
            "src/controllers/signing/mod.rs:3: crate::controllers::certificaterequest::DONE (signing may not use controller certificaterequest)",
        ],
    },
    LayerCase {
        name: "nothing but the root uses run",
        file: "src/controllers/signing/memory.rs",
        source: "use crate::controllers::run::RunError;",
        expect: &[
            "src/controllers/signing/memory.rs:1: crate::controllers::run::RunError (signing may not use run)",
        ],
    },
    LayerCase {
        name: "a controller uses run",
        file: "src/controllers/csr.rs",
        source: "use super::run;",
        expect: &["src/controllers/csr.rs:1: crate::controllers::run (controller csr may not use run)"],
    },
    LayerCase {
        name: "the kit uses run",
        file: "src/controllers/kit/watch/mod.rs",
        source: "fn f() { crate::controllers::run::run(); }",
        expect: &["src/controllers/kit/watch/mod.rs:1: crate::controllers::run::run (kit may not use run)"],
    },
];

const LAYER_PASSES: &[LayerCase] = &[
    LayerCase {
        name: "a controller uses the kit and signing",
        file: "src/controllers/csr/plan.rs",
        source: "use crate::controllers::kit::{Shared, plan::{self, Plan}};\nuse crate::controllers::signing::Held;\nfn f() -> plan::Next { crate::controllers::kit::backoff::reset() }",
        expect: &[],
    },
    LayerCase {
        name: "the kit uses the rest of the crate and itself",
        file: "src/controllers/kit/plan.rs",
        source: "use crate::api::Issuer;\nuse crate::cfssl;\nuse super::events::Notice;\nuse kube::api::Api;\nfn f() { crate::telemetry::count(); self::g(); }",
        expect: &[],
    },
    LayerCase {
        name: "signing uses the kit",
        file: "src/controllers/signing/held.rs",
        source: "use super::super::kit::Shared;\nuse super::memory::Memory;",
        expect: &[],
    },
    LayerCase {
        name: "a controller's submodule uses its parent",
        file: "src/controllers/issuer/decide.rs",
        source: "use super::{Error, wiring::Wiring};\npub(super) fn f() { super::observe::look(); }",
        expect: &[],
    },
    LayerCase {
        name: "test modules in a controller use super::*",
        file: "src/controllers/csr/plan/tests.rs",
        source: "use super::*;\nuse super::super::decide::Phase;\nmod inner {\n    use super::*;\n}",
        expect: &[],
    },
    LayerCase {
        name: "an inline test module in a controller's own file",
        file: "src/controllers/csr.rs",
        source: "#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::kit::Shared;\n}",
        expect: &[],
    },
    LayerCase {
        name: "names that are not the crate's",
        file: "src/controllers/issuer.rs",
        source: "use kube::api;\nmod csr {}\nfn f() { api::Api::all(); csr::x(); ::std::mem::drop(1); }\nfn g() { tracing::info!(a = %::csr::x(), b = ?kit::y()); }",
        expect: &[],
    },
    LayerCase {
        name: "run uses everything",
        file: "src/controllers/run.rs",
        source: "use super::{Config, csr, issuer::Issuer, kit::Shared, signing::Held};",
        expect: &[],
    },
    LayerCase {
        name: "the root uses everything",
        file: "src/controllers/mod.rs",
        source: "pub use self::run::run;\npub use self::kit::Shared;\nfn f() -> certificate::Settings { todo!() }",
        expect: &[],
    },
];

fn layer_modules() -> std::collections::BTreeSet<String> {
    [
        "kit",
        "signing",
        "run",
        "issuer",
        "csr",
        "certificate",
        "certificaterequest",
    ]
    .map(str::to_owned)
    .into()
}

#[test]
fn layer_rule_reports_exactly_the_forbidden_uses() {
    let modules = layer_modules();
    for case in LAYER_FAILS.iter().chain(LAYER_PASSES) {
        let found: Vec<String> = layers::check_source(case.file, case.source, &modules)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(found, case.expect, "{}", case.name);
    }
}

/// The layers of `src/controllers/`, described in `layers`.
#[test]
fn controllers_keep_their_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let violations = layers::check_tree(root).unwrap();
    let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(
        lines.is_empty(),
        "{} uses across layers:\n{}",
        lines.len(),
        lines.join("\n")
    );
}
