//! The layer rule of `src/controllers/`: the kit uses only itself; the signing layer uses
//! itself and the kit; a controller (any other top-level module but `run`) uses itself, the
//! signing layer and the kit; `run` and the controllers root (`mod.rs`) compose them all and
//! are used by none. Code outside `crate::controllers` is free to use from every layer.

mod resolve;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a module of `crate::controllers` stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layer {
    Kit,
    Signing,
    Controller(String),
    Run,
    /// `crate::controllers` itself, and the items it declares or re-exports.
    Root,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layer::Kit => f.write_str("kit"),
            Layer::Signing => f.write_str("signing"),
            Layer::Controller(name) => write!(f, "controller {name}"),
            Layer::Run => f.write_str("run"),
            Layer::Root => f.write_str("root"),
        }
    }
}

impl Layer {
    /// The layer of the top-level module `name` of `crate::controllers` (none: the root).
    fn of_module(name: Option<&str>) -> Layer {
        match name {
            None => Layer::Root,
            Some("kit") => Layer::Kit,
            Some("signing") => Layer::Signing,
            Some("run") => Layer::Run,
            Some(name) => Layer::Controller(name.to_owned()),
        }
    }

    /// Whether code of `self` may use `other`.
    pub fn may_use(&self, other: &Layer) -> bool {
        match self {
            Layer::Run | Layer::Root => true,
            Layer::Kit => *other == Layer::Kit,
            Layer::Signing => matches!(other, Layer::Kit | Layer::Signing),
            Layer::Controller(_) => matches!(other, Layer::Kit | Layer::Signing) || other == self,
        }
    }
}

/// One use across layers the rule forbids.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    /// Relative to the crate root, with `/`.
    pub file: String,
    pub line: usize,
    pub path: String,
    pub from: String,
    pub to: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Violation {
            file,
            line,
            path,
            from,
            to,
        } = self;
        write!(f, "{file}:{line}: {path} ({from} may not use {to})")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {path}: {source}")]
    Parse {
        path: String,
        #[source]
        source: syn::Error,
    },
}

/// The module path of a file under `src/`: `src/controllers/a/b.rs` and
/// `src/controllers/a/b/mod.rs` are both `crate::controllers::a::b`.
pub fn module_of(file: &str) -> Vec<String> {
    let inner = file.trim_start_matches("src/").trim_end_matches(".rs");
    let mut module = vec!["crate".to_owned()];
    module.extend(inner.split('/').map(str::to_owned));
    if module.last().is_some_and(|last| last == "mod") {
        module.pop();
    }
    module
}

/// The layer of an absolute path, if it is in `crate::controllers`. `modules` are the top-level
/// modules of `crate::controllers`; any other name after it is an item of the root.
fn layer_of(path: &[String], modules: &BTreeSet<String>) -> Option<Layer> {
    let [krate, controllers, rest @ ..] = path else {
        return None;
    };
    if krate != "crate" || controllers != "controllers" {
        return None;
    }
    let top = rest.first().filter(|name| modules.contains(*name));
    Some(Layer::of_module(top.map(String::as_str)))
}

/// The violations in one file `file` (relative to the crate root, e.g.
/// `src/controllers/csr/plan.rs`) with text `source`.
pub fn check_source(file: &str, source: &str, modules: &BTreeSet<String>) -> Result<Vec<Violation>, Error> {
    let parsed = syn::parse_file(source).map_err(|source| Error::Parse {
        path: file.to_owned(),
        source,
    })?;
    let module = module_of(file);
    let from = Layer::of_module(module.get(2).map(String::as_str));
    let mut found = BTreeSet::new();
    for named in resolve::named_paths(module, &parsed) {
        let Some(to) = layer_of(&named.path, modules) else {
            continue;
        };
        // A name a `use` brought in was judged at that `use`, unless the path leads on from
        // the root into another layer.
        let through = named.through.and_then(|t| layer_of(&t, modules));
        if from.may_use(&to) || through.as_ref() == Some(&to) {
            continue;
        }
        found.insert(Violation {
            file: file.to_owned(),
            line: named.line,
            path: named.path.join("::"),
            from: from.to_string(),
            to: to.to_string(),
        });
    }
    Ok(found.into_iter().collect())
}

/// The top-level modules of the controllers directory `dir`: its `.rs` files but `mod.rs`, and
/// its folders.
pub fn modules_in(dir: &Path) -> Result<BTreeSet<String>, Error> {
    let read = |source| Error::Read {
        path: dir.to_owned(),
        source,
    };
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let path = entry.map_err(read)?.path();
        let name = path.file_stem().and_then(|n| n.to_str()).unwrap_or_default();
        let is_module = path.is_dir() || path.extension().is_some_and(|e| e == "rs");
        if is_module && name != "mod" {
            modules.insert(name.to_owned());
        }
    }
    Ok(modules)
}

/// The violations in every `.rs` file under `src/controllers/` of the crate at `root`.
pub fn check_tree(root: &Path) -> Result<Vec<Violation>, Error> {
    let dir = root.join("src/controllers");
    let modules = modules_in(&dir)?;
    let mut files = Vec::new();
    rust_files(&dir, &mut files)?;
    files.sort();
    let mut violations = Vec::new();
    for path in files {
        let source = std::fs::read_to_string(&path).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })?;
        let relative = path.strip_prefix(root).unwrap_or(&path);
        let file = relative.to_string_lossy().replace('\\', "/");
        violations.extend(check_source(&file, &source, &modules)?);
    }
    Ok(violations)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let read = |source| Error::Read {
        path: dir.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let path = entry.map_err(read)?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}
