//! Which `crate::...` paths a source file names, resolved to absolute paths the way rustc would
//! for the cases that matter here: `crate::`, `self::`, `super::` (per inline module), and names
//! brought in by `use` or `mod` in the enclosing module or block. Any other leading name is an
//! external crate, a local item or a generic parameter, and is left out.

use std::collections::HashMap;

use proc_macro2::TokenTree;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Block, Expr, Item, ItemUse, Token, UseTree};

/// One absolute path the source names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub line: usize,
    /// `["crate", "controllers", ...]`.
    pub path: Vec<String>,
    /// When the path started with a name a `use` brought in: where that name points. The `use`
    /// itself is reported too, so a caller can tell what the path adds to it.
    pub through: Option<Vec<String>>,
}

/// Every absolute path named in `file`, whose module is `module` (`["crate", ...]`).
pub fn named_paths(module: Vec<String>, file: &syn::File) -> Vec<Named> {
    let mut walk = Walk {
        frames: Vec::new(),
        found: Vec::new(),
    };
    walk.enter(module, true, &file.items);
    for item in &file.items {
        walk.visit_item(item);
    }
    walk.frames.pop();
    walk.found
}

/// The names in scope in one module or block. `None` is a name that does not lead into the
/// crate (an external crate, say) but still hides the same name from an outer block.
struct Frame {
    module: Vec<String>,
    names: HashMap<String, Option<Vec<String>>>,
    /// A module does not see the names of the module around it; a block does.
    opens_module: bool,
}

struct Walk {
    frames: Vec<Frame>,
    found: Vec<Named>,
}

/// One leaf of a `use` tree: the name it binds (none for a glob or `as _`) and its path.
struct Import {
    name: Option<String>,
    path: Vec<String>,
    line: usize,
}

impl Walk {
    fn module(&self) -> &[String] {
        &self.frames.last().expect("inside a frame").module
    }

    fn lookup(&self, name: &str) -> Option<&Option<Vec<String>>> {
        for frame in self.frames.iter().rev() {
            if let Some(target) = frame.names.get(name) {
                return Some(target);
            }
            if frame.opens_module {
                break;
            }
        }
        None
    }

    /// The absolute path of `segments`: `Some((path, through))` when it leads into the crate,
    /// `None` when it does not or when its leading name is unknown.
    fn resolve(&self, segments: &[String]) -> Option<(Vec<String>, Option<Vec<String>>)> {
        let (first, rest) = segments.split_first()?;
        match first.as_str() {
            "crate" => Some((segments.to_vec(), None)),
            "self" => Some((joined(self.module(), rest), None)),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let module = self.module();
                // The crate root has no parent.
                let kept = module.len().checked_sub(ups).filter(|n| *n >= 1)?;
                Some((joined(&module[..kept], &segments[ups..]), None))
            }
            name => {
                let target = self.lookup(name)?.as_ref()?;
                Some((joined(target, rest), Some(target.clone())))
            }
        }
    }

    /// Opens a frame with the `mod` and `use` names of `items`, recording each `use`.
    fn enter<'a>(
        &mut self,
        module: Vec<String>,
        opens_module: bool,
        items: impl IntoIterator<Item = &'a Item>,
    ) {
        let mut names = HashMap::new();
        let mut imports = Vec::new();
        for item in items {
            match item {
                Item::Mod(m) => {
                    names.insert(m.ident.to_string(), Some(joined(&module, &[m.ident.to_string()])));
                }
                Item::Use(u) => imports.extend(flatten_use(u)),
                _ => {}
            }
        }
        self.frames.push(Frame {
            module,
            names,
            opens_module,
        });
        self.bind(imports);
    }

    /// Binds the imports of the newest frame. A `use` may start with a name another `use` of the
    /// same frame brings in, in any order, so binding repeats until nothing more resolves; what
    /// is left starts with a name from outside the crate.
    fn bind(&mut self, mut pending: Vec<Import>) {
        loop {
            let before = pending.len();
            pending.retain(|import| !self.try_bind(import));
            if pending.len() == before {
                break;
            }
        }
        let frame = self.frames.last_mut().expect("inside a frame");
        for name in pending.into_iter().filter_map(|import| import.name) {
            frame.names.entry(name).or_insert(None);
        }
    }

    /// Binds `import` if its leading name is known by now, and records it when it leads into
    /// the crate.
    fn try_bind(&mut self, import: &Import) -> bool {
        let Some(first) = import.path.first() else {
            return true;
        };
        let known = matches!(first.as_str(), "crate" | "self" | "super") || self.lookup(first).is_some();
        if !known {
            return false;
        }
        let resolved = self.resolve(&import.path);
        if let Some((path, through)) = &resolved {
            self.found.push(Named {
                line: import.line,
                path: path.clone(),
                through: through.clone(),
            });
        }
        if let Some(name) = &import.name {
            let frame = self.frames.last_mut().expect("inside a frame");
            frame.names.insert(name.clone(), resolved.map(|(path, _)| path));
        }
        true
    }

    fn record(&mut self, segments: &[String], line: usize) {
        if let Some((path, through)) = self.resolve(segments) {
            self.found.push(Named { line, path, through });
        }
    }

    /// Macro arguments that parse as expressions or statements are walked like code.
    fn walk_macro_tokens(&mut self, tokens: &proc_macro2::TokenStream) {
        let exprs = Punctuated::<Expr, Token![,]>::parse_terminated;
        if let Ok(exprs) = exprs.parse2(tokens.clone()) {
            for expr in &exprs {
                self.visit_expr(expr);
            }
        } else if let Ok(stmts) = Block::parse_within.parse2(tokens.clone()) {
            let block = Block {
                brace_token: syn::token::Brace::default(),
                stmts,
            };
            self.visit_block(&block);
        } else {
            self.scan_tokens(tokens.clone());
        }
    }

    /// Arguments that are not code (`tracing`'s `%value`, say) are searched for runs of
    /// `name::name...`, each taken for a path.
    fn scan_tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut at = 0;
        while at < tokens.len() {
            let TokenTree::Ident(first) = &tokens[at] else {
                if let TokenTree::Group(group) = &tokens[at] {
                    self.scan_tokens(group.stream());
                }
                at += 1;
                continue;
            };
            let mut segments = vec![first.to_string()];
            let mut next = at + 1;
            while let Some(ident) = ident_after_colons(&tokens[next..]) {
                segments.push(ident.to_string());
                next += 3;
            }
            // `::name` is always an external crate.
            let external = at >= 2 && ident_after_colons(&tokens[at - 2..]).is_some();
            if segments.len() > 1 && !external {
                self.record(&segments, first.span().start().line);
            }
            at = next;
        }
    }
}

impl<'ast> Visit<'ast> for Walk {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        // `::name` is always an external crate.
        if path.leading_colon.is_none() {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = path.segments.first().map_or(0, |s| s.ident.span().start().line);
            self.record(&segments, line);
        }
        visit::visit_path(self, path);
    }

    /// Recorded when its frame is entered.
    fn visit_item_use(&mut self, _: &'ast ItemUse) {}

    /// `pub(super)` and the like say who may use an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let Some((_, items)) = &m.content else {
            return; // a module in its own file is walked as that file
        };
        let module = joined(self.module(), &[m.ident.to_string()]);
        self.enter(module, true, items);
        for item in items {
            self.visit_item(item);
        }
        self.frames.pop();
    }

    fn visit_block(&mut self, block: &'ast Block) {
        let items = block.stmts.iter().filter_map(|stmt| match stmt {
            syn::Stmt::Item(item) => Some(item),
            _ => None,
        });
        self.enter(self.module().to_vec(), false, items);
        visit::visit_block(self, block);
        self.frames.pop();
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        self.walk_macro_tokens(&mac.tokens);
    }
}

/// The name in `tokens` when they start with `::name`.
fn ident_after_colons(tokens: &[TokenTree]) -> Option<&proc_macro2::Ident> {
    let colon = |t: Option<&TokenTree>| matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == ':');
    match tokens.get(2) {
        Some(TokenTree::Ident(ident)) if colon(tokens.first()) && colon(tokens.get(1)) => Some(ident),
        _ => None,
    }
}

fn joined(base: &[String], rest: &[String]) -> Vec<String> {
    base.iter().chain(rest).cloned().collect()
}

/// The leaves of a `use` item, except `use ::name...` (always an external crate).
fn flatten_use(item: &ItemUse) -> Vec<Import> {
    let mut out = Vec::new();
    if item.leading_colon.is_none() {
        flatten_tree(&item.tree, &mut Vec::new(), &mut out);
    }
    out
}

fn flatten_tree(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<Import>) {
    // `a::b::{self}` names `a::b` and binds `b`.
    let leaf = |prefix: &[String], ident: &syn::Ident| {
        let mut path = prefix.to_vec();
        if ident != "self" {
            path.push(ident.to_string());
        }
        (path, ident.span().start().line)
    };
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_tree(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => {
            let (path, line) = leaf(prefix, &n.ident);
            let name = path.last().cloned();
            out.push(Import { name, path, line });
        }
        UseTree::Rename(r) => {
            let (path, line) = leaf(prefix, &r.ident);
            let name = (r.rename != "_").then(|| r.rename.to_string());
            out.push(Import { name, path, line });
        }
        UseTree::Glob(g) => out.push(Import {
            name: None,
            path: prefix.clone(),
            line: g.star_token.span.start().line,
        }),
        UseTree::Group(g) => {
            for tree in &g.items {
                flatten_tree(tree, prefix, out);
            }
        }
    }
}
