//! `cargo xtask check-modules`: within each crate of the workspace (`crates/*/src`,
//! `python/src` and `xtask/src`), the file-level modules import each other in no cycle, and no
//! function is longer than [`MAX_FN_LINES`].
//!
//! Each `.rs` file under `src/` is one node, named by its module path (`lib.rs`/`main.rs` is the
//! crate root, shown as `crate`; `a.rs` and `a/mod.rs` are `a`; `a/b.rs` is `a::b`). Inline
//! `mod x { .. }` blocks belong to their file. There is an edge A -> B when A's code names an
//! item of B: `crate::b::..`, `super::..`, `self::b::..`, or a bare `b::..` for a child `b`.
//!
//! `pub use` (any visibility) is a re-export, not an edge: a path through a re-export resolves
//! to the module that defines the item, so `crate::Name` with `pub use y::Name` in the root is
//! an edge to `y`, and `crate::Name` for an item defined in the root is an edge to the root.
//! Names re-exported from other crates are no edge. `mod x;` declarations are no edge.
//! Files are read with `syn`: comments, doc comments, strings and char literals are never
//! paths; macro bodies and attribute arguments are scanned token by token for paths.
//!
//! It also fails on any function over [`MAX_FN_LINES`] lines (fixture case lists apart) and on
//! any file `syn` cannot parse.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use quote::ToTokens;
use syn::visit::Visit;

/// Runs the check over the workspace; fails when any crate has a cycle.
pub fn run() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut srcs: Vec<(String, PathBuf)> = Vec::new();
    for entry in fs::read_dir(root.join("crates")).context("reading crates/")? {
        let dir = entry?.path();
        if dir.join("src").is_dir() {
            let name = dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            srcs.push((name, dir.join("src")));
        }
    }
    srcs.sort();
    srcs.push(("python".into(), root.join("python/src")));
    srcs.push(("xtask".into(), root.join("xtask/src")));

    let (mut n_modules, mut cycles, mut problems) = (0, Vec::new(), Vec::new());
    for (krate, src) in &srcs {
        let mut files = Vec::new();
        collect_rs(src, &mut files)?;
        files.sort();
        let mut inputs = Vec::new();
        for file in &files {
            let rel = file.strip_prefix(src).unwrap_or(file);
            let Some(path) = module_path(rel) else {
                continue;
            };
            let text =
                fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
            let shown = file
                .strip_prefix(&root)
                .unwrap_or(file)
                .display()
                .to_string();
            let facts = facts(&text);
            inputs.push(SourceFile { path, shown, facts });
        }
        let graph = Graph::from_sources(&inputs);
        n_modules += graph.nodes.len();
        for cycle in graph.cycles() {
            cycles.push(graph.describe(krate, &cycle));
        }
        for f in &inputs {
            if let Some(why) = &f.facts.unparsed {
                problems.push(format!("{}: not parsed: {why}", f.shown));
            }
            let exempt = FIXTURE_CASE_LISTS
                .iter()
                .any(|dir| f.shown.starts_with(dir));
            for (name, line, lines) in &f.facts.functions {
                if *lines > MAX_FN_LINES && !exempt {
                    problems.push(format!(
                        "{}:{line}: fn {name} is {lines} lines, over {MAX_FN_LINES}",
                        f.shown
                    ));
                }
            }
        }
    }
    if !cycles.is_empty() || !problems.is_empty() {
        for c in cycles.iter().chain(&problems) {
            eprintln!("{c}");
        }
        eprintln!(
            "modules: {} cycle(s), {} other problem(s)",
            cycles.len(),
            problems.len()
        );
        std::process::exit(1);
    }
    println!(
        "modules ok: {} crates, {n_modules} modules, no cycle, no function over {MAX_FN_LINES} lines",
        srcs.len()
    );
    Ok(())
}

/// The longest a function may be, in lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 250;

/// Folders whose long functions are case lists (one fixture after another), exempt from
/// [`MAX_FN_LINES`].
const FIXTURE_CASE_LISTS: &[&str] = &["xtask/src/fixtures/"];

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect_rs(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module path of a file, given relative to `src/`; `None` for files that are not modules
/// of this crate (`src/bin/*`, which are crates of their own).
fn module_path(rel: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.len() > 1 && parts[0] == "bin" {
        return None;
    }
    let file = parts.pop()?;
    let stem = file.strip_suffix(".rs")?;
    if parts.is_empty() && (stem == "lib" || stem == "main") {
        return Some(parts);
    }
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    Some(parts)
}

/// One file of a crate, with its module path, a path to show and its text.
struct SourceFile {
    path: Vec<String>,
    shown: String,
    facts: FileFacts,
}

/// Where a name bound by a `use` points: a path from the crate root, or another crate.
#[derive(Debug, Clone)]
enum Target {
    Local(Vec<String>),
    External,
}

/// One leaf of a `use` tree: the path, the name it binds (`None` for a glob) and its line.
struct UseLeaf {
    path: Vec<String>,
    name: Option<String>,
    line: usize,
}

/// A `use` leaf in its place: a re-export (`pub`), at file level (`top`: outside inline modules
/// and bodies), inside which inline modules.
struct UseFact {
    is_pub: bool,
    top: bool,
    stack: Vec<String>,
    leaf: UseLeaf,
}

/// What one file says, before resolution: its uses, code paths and items.
#[derive(Default)]
struct FileFacts {
    /// Every `use` leaf.
    uses: Vec<UseFact>,
    /// `(inline-module stack, segments, line)` for every path in code that starts at
    /// `crate`, `$crate`, `self`, `super` or an identifier (filtered at resolution).
    paths: Vec<(Vec<String>, Vec<String>, usize)>,
    /// Names of items defined anywhere in the file (fn, struct, enum, ...).
    items: BTreeSet<String>,
    /// `(name, first line, lines)` of every function with a body.
    functions: Vec<(String, usize, usize)>,
    /// Why the file could not be parsed, if it could not.
    unparsed: Option<String>,
}

/// What a file says, read with `syn`: every `use` leaf, every path of two or more segments
/// in code (macro bodies and attribute arguments included, scanned token by token), every
/// item's name, and every function with its length in lines.
fn facts(src: &str) -> FileFacts {
    let mut collector = Collector::default();
    match syn::parse_file(src) {
        Ok(file) => {
            for attr in &file.attrs {
                collector.tokens(attr.to_token_stream());
            }
            for item in &file.items {
                collector.visit_item(item);
            }
        }
        // Not Rust we can parse (a file of a test, a half-written file): no facts, and the
        // compiler says what is wrong.
        Err(e) => collector.facts.unparsed = Some(e.to_string()),
    }
    collector.facts
}

/// Collects a file's facts while `syn` walks it.
#[derive(Default)]
struct Collector {
    facts: FileFacts,
    /// The inline modules around the current item.
    stack: Vec<String>,
    /// How many bodies (blocks, impls, traits) the walk is inside: a `use` in one is not at
    /// file level.
    bodies: usize,
}

impl Collector {
    fn item_name(&mut self, ident: &syn::Ident) {
        self.facts.items.insert(ident.to_string());
    }

    /// Records a path of code: two or more segments, or one that starts at the crate.
    fn path(&mut self, segs: Vec<String>, line: usize) {
        if segs.len() >= 2 {
            self.facts.paths.push((self.stack.clone(), segs, line));
        }
    }

    /// Scans tokens (a macro's body, an attribute's arguments) for paths: an identifier and
    /// the identifiers that follow it after `::`, `$crate` read as `crate`.
    fn tokens(&mut self, stream: proc_macro2::TokenStream) {
        use proc_macro2::{Spacing, TokenTree};
        let flat: Vec<TokenTree> = stream.into_iter().collect();
        let mut i = 0;
        let is_sep = |k: usize| {
            matches!((flat.get(k), flat.get(k + 1)),
                (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                    if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
        };
        while i < flat.len() {
            match &flat[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(first) => {
                    let after_sep = i >= 2 && is_sep(i - 2);
                    let after_dot =
                        i >= 1 && matches!(&flat[i - 1], TokenTree::Punct(p) if p.as_char() == '.');
                    if !after_sep && !after_dot && is_sep(i + 1) {
                        let line = first.span().start().line;
                        let mut segs = vec![first.to_string()];
                        let mut k = i + 1;
                        while is_sep(k) {
                            match flat.get(k + 2) {
                                Some(TokenTree::Ident(next)) => segs.push(next.to_string()),
                                _ => break,
                            }
                            k += 3;
                        }
                        self.path(segs, line);
                        i = k;
                        continue;
                    }
                }
                TokenTree::Punct(_) | TokenTree::Literal(_) => {}
            }
            i += 1;
        }
    }

    /// The leaves of a `use` tree under `prefix`.
    fn use_tree(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                Self::use_tree(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                path.push(n.ident.to_string());
                let name = if n.ident == "self" {
                    path.pop(); // `a::{self}` binds `a`
                    path.last().cloned()
                } else {
                    Some(n.ident.to_string())
                };
                let line = n.ident.span().start().line;
                out.push(UseLeaf { path, name, line });
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                path.push(r.ident.to_string());
                let name = (r.rename != "_").then(|| r.rename.to_string());
                let line = r.ident.span().start().line;
                out.push(UseLeaf { path, name, line });
            }
            syn::UseTree::Glob(g) => out.push(UseLeaf {
                path: prefix.clone(),
                name: None,
                line: g.star_token.span.start().line,
            }),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    Self::use_tree(t, prefix, out);
                }
            }
        }
    }

    /// Records a function's length.
    fn function(&mut self, ident: &syn::Ident, first: proc_macro2::Span, last: proc_macro2::Span) {
        let lines = last.end().line.saturating_sub(first.start().line) + 1;
        let at = first.start().line;
        self.facts.functions.push((ident.to_string(), at, lines));
    }
}

impl<'ast> syn::visit::Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        use syn::Item;
        match item {
            Item::Use(u) => {
                let mut leaves = Vec::new();
                let mut prefix = Vec::new();
                if u.leading_colon.is_some() {
                    prefix.push("::".to_owned()); // `use ::name`: always another crate
                }
                Self::use_tree(&u.tree, &mut prefix, &mut leaves);
                let is_pub = !matches!(u.vis, syn::Visibility::Inherited);
                let top = self.bodies == 0 && self.stack.is_empty();
                for leaf in leaves {
                    self.facts.uses.push(UseFact {
                        is_pub,
                        top,
                        stack: self.stack.clone(),
                        leaf,
                    });
                }
                return;
            }
            Item::Mod(m) => {
                self.item_name(&m.ident);
                if let Some((_, items)) = &m.content {
                    for attr in &m.attrs {
                        self.visit_attribute(attr);
                    }
                    self.stack.push(m.ident.to_string());
                    for i in items {
                        self.visit_item(i);
                    }
                    self.stack.pop();
                }
                return;
            }
            Item::Fn(f) => self.item_name(&f.sig.ident),
            Item::Struct(x) => self.item_name(&x.ident),
            Item::Enum(x) => self.item_name(&x.ident),
            Item::Trait(x) => self.item_name(&x.ident),
            Item::Type(x) => self.item_name(&x.ident),
            Item::Const(x) => self.item_name(&x.ident),
            Item::Static(x) => self.item_name(&x.ident),
            Item::Union(x) => self.item_name(&x.ident),
            Item::Macro(m) => {
                if let Some(name) = &m.ident {
                    self.item_name(name);
                }
            }
            _ => {}
        }
        let body = matches!(item, Item::Impl(_) | Item::Trait(_));
        self.bodies += usize::from(body);
        syn::visit::visit_item(self, item);
        self.bodies -= usize::from(body);
    }

    fn visit_block(&mut self, block: &'ast syn::Block) {
        self.bodies += 1;
        syn::visit::visit_block(self, block);
        self.bodies -= 1;
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.function(
            &f.sig.ident,
            f.sig.fn_token.span,
            f.block.brace_token.span.close(),
        );
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.item_name(&f.sig.ident);
        self.function(
            &f.sig.ident,
            f.sig.fn_token.span,
            f.block.brace_token.span.close(),
        );
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        self.item_name(&f.sig.ident);
        if let Some(block) = &f.default {
            self.function(
                &f.sig.ident,
                f.sig.fn_token.span,
                block.brace_token.span.close(),
            );
        }
        syn::visit::visit_trait_item_fn(self, f);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.path(segs, line);
        syn::visit::visit_path(self, p);
    }

    // `pub(in crate::a)`: the path is visibility, not a use.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.tokens(m.tokens.clone());
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        // Doc comments are text, not code.
        if attr.path().is_ident("doc") {
            return;
        }
        self.tokens(attr.meta.to_token_stream());
    }
}

/// The module graph of one crate: file-level modules and where each edge comes from.
struct Graph {
    nodes: Vec<Vec<String>>,
    /// `(from, to)` -> first place the edge comes from (`file:line`).
    edges: BTreeMap<(usize, usize), String>,
}

/// Resolution context: the crate's modules, and each module's names bound by `use`.
struct Crate<'a> {
    index: BTreeMap<&'a [String], usize>,
    names: Vec<BTreeMap<String, Target>>,
    globs: Vec<Vec<Target>>,
    items: Vec<BTreeSet<String>>,
}

impl Crate<'_> {
    /// The absolute path of `segs` as written in module `module` inside inline modules `stack`;
    /// `None` when it names another crate (or nothing of this crate).
    fn absolute(
        &self,
        module: &[String],
        stack: &[String],
        segs: &[String],
    ) -> Option<Vec<String>> {
        let first = segs.first()?.as_str();
        let mut here: Vec<String> = module.iter().chain(stack).cloned().collect();
        match first {
            "crate" => Some(segs[1..].to_vec()),
            "self" => Some([here, segs[1..].to_vec()].concat()),
            "super" => {
                let mut rest = segs;
                while rest.first().is_some_and(|s| s == "super") {
                    here.pop();
                    rest = &rest[1..];
                }
                Some([here, rest.to_vec()].concat())
            }
            _ if !stack.is_empty() => None,
            _ => {
                let child = [module, &segs[..1]].concat();
                let m = self.index[module];
                if self.index.contains_key(child.as_slice()) || self.items[m].contains(first) {
                    return Some([module, segs].concat());
                }
                // A name the file imported: `use crate::files;` then `files::kind::list()`.
                match self.names[m].get(first) {
                    Some(Target::Local(p)) => Some([p, &segs[1..]].concat()),
                    _ => None,
                }
            }
        }
    }

    /// The module that defines what an absolute path names; `None` for another crate's item.
    fn resolve(&self, abs: &[String], fuel: usize) -> Option<usize> {
        let mut cur: Vec<String> = Vec::new();
        let mut m = *self.index.get(cur.as_slice())?;
        for s in abs {
            cur.push(s.clone());
            if let Some(&child) = self.index.get(cur.as_slice()) {
                m = child;
                continue;
            }
            if fuel == 0 {
                return Some(m);
            }
            if let Some(t) = self.names[m].get(s) {
                return match t {
                    Target::Local(p) => self.resolve(p, fuel - 1),
                    Target::External => None,
                };
            }
            if self.items[m].contains(s) {
                return Some(m);
            }
            return match self.globs[m].as_slice() {
                [Target::Local(p)] => {
                    self.resolve(&[p.as_slice(), std::slice::from_ref(s)].concat(), fuel - 1)
                }
                g if !g.is_empty() && g.iter().all(|t| matches!(t, Target::External)) => None,
                _ => Some(m),
            };
        }
        Some(m)
    }
}

impl Graph {
    fn from_sources(files: &[SourceFile]) -> Graph {
        let nodes: Vec<Vec<String>> = files.iter().map(|f| f.path.clone()).collect();
        let all: Vec<&FileFacts> = files.iter().map(|f| &f.facts).collect();
        let mut cx = Crate {
            index: nodes
                .iter()
                .enumerate()
                .map(|(i, p)| (p.as_slice(), i))
                .collect(),
            names: vec![BTreeMap::new(); nodes.len()],
            globs: vec![Vec::new(); nodes.len()],
            items: all.iter().map(|f| f.items.clone()).collect(),
        };
        // Names bound at file level, for paths that go through them.
        let mut bound = Vec::new();
        for (m, f) in all.iter().enumerate() {
            for u in f.uses.iter().filter(|u| u.top && u.stack.is_empty()) {
                let target = match cx.absolute(&nodes[m], &u.stack, &u.leaf.path) {
                    Some(p) => Target::Local(p),
                    None => Target::External,
                };
                bound.push((m, u.leaf.name.clone(), target));
            }
        }
        for (m, name, target) in bound {
            match name {
                Some(n) => {
                    cx.names[m].insert(n, target);
                }
                None if matches!(&target, Target::Local(p) if p == &nodes[m]) => {}
                None => cx.globs[m].push(target),
            }
        }
        let mut edges = BTreeMap::new();
        for (m, f) in all.iter().enumerate() {
            let uses = f.uses.iter().filter(|u| !u.is_pub);
            let refs = uses.map(|u| (&u.stack, &u.leaf.path, u.leaf.line)).chain(
                f.paths
                    .iter()
                    .map(|(stack, segs, line)| (stack, segs, *line)),
            );
            for (stack, segs, line) in refs {
                let Some(abs) = cx.absolute(&nodes[m], stack, segs) else {
                    continue;
                };
                if let Some(to) = cx.resolve(&abs, 8) {
                    if to != m {
                        edges
                            .entry((m, to))
                            .or_insert_with(|| format!("{}:{line}", files[m].shown));
                    }
                }
            }
        }
        Graph { nodes, edges }
    }

    /// One shortest cycle per strongly connected component with more than one module.
    fn cycles(&self) -> Vec<Vec<usize>> {
        let n = self.nodes.len();
        let mut succ = vec![Vec::new(); n];
        for &(a, b) in self.edges.keys() {
            succ[a].push(b);
        }
        let comp = tarjan(&succ);
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for start in 0..n {
            let c = comp[start];
            if !seen.insert(c) || comp.iter().filter(|&&x| x == c).count() < 2 {
                continue;
            }
            // Breadth-first search back to `start` inside its component.
            let mut prev = vec![usize::MAX; n];
            let mut queue = VecDeque::from([start]);
            'bfs: while let Some(v) = queue.pop_front() {
                for &w in &succ[v] {
                    if comp[w] != c {
                        continue;
                    }
                    if w == start {
                        let mut cycle = vec![v];
                        while *cycle.last().unwrap_or(&start) != start {
                            let last = *cycle.last().unwrap_or(&start);
                            cycle.push(prev[last]);
                        }
                        cycle.reverse();
                        out.push(cycle);
                        break 'bfs;
                    }
                    if prev[w] == usize::MAX {
                        prev[w] = v;
                        queue.push_back(w);
                    }
                }
            }
        }
        out
    }

    fn name(&self, i: usize) -> String {
        if self.nodes[i].is_empty() {
            "crate".into()
        } else {
            self.nodes[i].join("::")
        }
    }

    /// `krate: a -> b -> a`, then one line per edge with where it comes from.
    fn describe(&self, krate: &str, cycle: &[usize]) -> String {
        let mut ring: Vec<usize> = cycle.to_vec();
        ring.push(cycle[0]);
        let names: Vec<String> = ring.iter().map(|&i| self.name(i)).collect();
        let mut s = format!("module cycle in {krate}: {}", names.join(" -> "));
        for w in ring.windows(2) {
            let at = &self.edges[&(w[0], w[1])];
            s += &format!("\n  {} -> {}: {at}", self.name(w[0]), self.name(w[1]));
        }
        s
    }
}

/// Tarjan's strongly connected components; returns each node's component number.
fn tarjan(succ: &[Vec<usize>]) -> Vec<usize> {
    struct State<'a> {
        succ: &'a [Vec<usize>],
        index: Vec<usize>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        comp: Vec<usize>,
        next: usize,
        comps: usize,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = s.next;
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for k in 0..s.succ[v].len() {
            let w = s.succ[v][k];
            if s.index[w] == usize::MAX {
                visit(s, w);
                s.low[v] = s.low[v].min(s.low[w]);
            } else if s.on_stack[w] {
                s.low[v] = s.low[v].min(s.index[w]);
            }
        }
        if s.low[v] == s.index[v] {
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                s.comp[w] = s.comps;
                if w == v {
                    break;
                }
            }
            s.comps += 1;
        }
    }
    let n = succ.len();
    let mut s = State {
        succ,
        index: vec![usize::MAX; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        comp: vec![0; n],
        next: 0,
        comps: 0,
    };
    for v in 0..n {
        if s.index[v] == usize::MAX {
            visit(&mut s, v);
        }
    }
    s.comp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<Vec<String>> {
        module_path(Path::new(s))
    }

    fn graph(files: &[(&str, &str)]) -> Graph {
        let inputs: Vec<SourceFile> = files
            .iter()
            .map(|(rel, text)| SourceFile {
                path: module_path(Path::new(rel)).expect("a module file"),
                shown: rel.to_string(),
                facts: facts(text),
            })
            .collect();
        Graph::from_sources(&inputs)
    }

    fn edge_names(g: &Graph) -> Vec<String> {
        g.edges
            .keys()
            .map(|&(a, b)| format!("{} -> {}", g.name(a), g.name(b)))
            .collect()
    }

    #[test]
    fn module_paths() {
        assert_eq!(p("lib.rs"), Some(vec![]));
        assert_eq!(p("main.rs"), Some(vec![]));
        assert_eq!(p("a.rs"), Some(vec!["a".to_string()]));
        assert_eq!(p("a/mod.rs"), Some(vec!["a".to_string()]));
        assert_eq!(p("a/b.rs"), Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(
            p("a/main.rs"),
            Some(vec!["a".to_string(), "main".to_string()])
        );
        assert_eq!(p("bin/tool.rs"), None);
        assert_eq!(p("notes.txt"), None);
    }

    #[test]
    fn tarjan_finds_the_cycle_and_only_it() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3; 3 is alone.
        let comp = tarjan(&[vec![1], vec![2], vec![0, 3], vec![]]);
        assert!(comp[0] == comp[1] && comp[1] == comp[2]);
        assert_ne!(comp[3], comp[0]);
        let acyclic = tarjan(&[vec![1, 2], vec![2], vec![]]);
        assert_eq!(acyclic.iter().collect::<BTreeSet<_>>().len(), 3);
    }

    #[test]
    fn a_cycle_through_use_and_super_is_reported() {
        let g = graph(&[
            ("lib.rs", "mod a; mod b;\npub use a::A;"),
            ("a/mod.rs", "mod c;\nuse crate::b::B;\npub struct A;"),
            ("a/c.rs", "// uses crate::b\nfn f() { let _ = super::A; }"),
            (
                "b.rs",
                "pub struct B;\nfn g() -> crate::A { crate::a::c::h() }",
            ),
        ]);
        assert_eq!(
            edge_names(&g),
            ["a -> b", "a::c -> a", "b -> a", "b -> a::c"]
        );
        let cycles = g.cycles();
        assert_eq!(cycles.len(), 1);
        let text = g.describe("demo", &cycles[0]);
        assert!(
            text.starts_with("module cycle in demo: a -> b -> a"),
            "{text}"
        );
        assert!(
            text.contains("a -> b: a/mod.rs:2") && text.contains("b -> a: b.rs:2"),
            "{text}"
        );
    }

    #[test]
    fn declarations_reexports_tests_comments_and_strings_are_no_edges() {
        let g = graph(&[
            (
                "lib.rs",
                "pub mod a;\nmod b;\npub use b::{B, self as bee};\npub use other::Error;\n\
                 pub struct Root;\nfn run() { b::go(); }",
            ),
            (
                "a.rs",
                "use crate::{B, Error};\n/// [`crate::Root`] in a doc\n\
                 fn f() { let s = \"crate::Root\"; /* crate::Root */ let c = '\"'; }\n\
                 #[cfg(test)]\nmod tests { use super::*; fn t() { self::f(); super::f(); } }",
            ),
            (
                "b.rs",
                "pub struct B;\npub fn go() {}\nfn h(_: &crate::a::A) {}",
            ),
        ]);
        assert_eq!(edge_names(&g), ["crate -> b", "a -> b", "b -> a"]);
        // a <-> b is a cycle; the root is in none (nothing reaches it).
        let cycles = g.cycles();
        assert_eq!(cycles.len(), 1);
        assert_eq!(cycles[0].len(), 2);

        let acyclic = graph(&[
            (
                "main.rs",
                "mod x;\nmod y;\npub struct Cfg;\nfn main() { x::run(); }",
            ),
            ("x.rs", "use crate::y::helper;\npub fn run() { helper() }"),
            (
                "y.rs",
                "pub fn helper() {}\n#[cfg(test)]\nmod tests { use super::*; }",
            ),
        ]);
        assert_eq!(edge_names(&acyclic), ["crate -> x", "x -> y"]);
        assert!(acyclic.cycles().is_empty());
    }

    #[test]
    fn a_path_through_an_imported_module_reaches_its_child() {
        let g = graph(&[
            ("lib.rs", "mod files;\nmod open;"),
            ("files/mod.rs", "pub(crate) mod kind;"),
            ("files/kind.rs", "pub fn list() { crate::open::helper() }"),
            (
                "open.rs",
                "use crate::files;\npub fn helper() {}\nfn f() { files::kind::list() }",
            ),
        ]);
        assert_eq!(
            edge_names(&g),
            [
                "files::kind -> open",
                "open -> files",
                "open -> files::kind"
            ]
        );
        assert_eq!(g.cycles().len(), 1);
    }

    #[test]
    fn a_child_using_an_item_of_the_root_makes_a_cycle_with_a_calling_root() {
        let g = graph(&[
            (
                "main.rs",
                "mod cmd;\nenum Kind { A }\nfn main() { cmd::go(); }",
            ),
            (
                "cmd.rs",
                "use crate::Kind;\npub fn go() { let _ = Kind::A; }",
            ),
        ]);
        assert_eq!(edge_names(&g), ["crate -> cmd", "cmd -> crate"]);
        assert_eq!(g.cycles().len(), 1);
    }
}
