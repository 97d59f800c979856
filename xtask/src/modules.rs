//! `cargo xtask check-modules`: within each crate of the workspace (`crates/*/src`,
//! `python/src` and `xtask/src`), the file-level modules import each other in no cycle.
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
//! Comments (doc comments included), strings and char literals are stripped before scanning.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

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

    let (mut n_modules, mut cycles) = (0, Vec::new());
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
            inputs.push(SourceFile { path, shown, text });
        }
        let graph = Graph::from_sources(&inputs);
        n_modules += graph.nodes.len();
        for cycle in graph.cycles() {
            cycles.push(graph.describe(krate, &cycle));
        }
    }
    if !cycles.is_empty() {
        for c in &cycles {
            eprintln!("{c}");
        }
        eprintln!("modules: {} cycle(s)", cycles.len());
        std::process::exit(1);
    }
    println!(
        "modules ok: {} crates, {n_modules} modules, no cycle",
        srcs.len()
    );
    Ok(())
}

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
    text: String,
}

/// A token of stripped source: an identifier, `::`, or another punctuation character.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Tokens with their 1-based lines; comments, strings, chars, numbers and lifetimes dropped.
fn tokenize(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    // Skips a quoted literal starting at the opening quote `c[k]`; returns the index after it.
    let skip_quoted = |mut k: usize, q: char, line: &mut usize| {
        k += 1;
        while k < c.len() && c[k] != q {
            if c[k] == '\\' {
                k += 1;
            }
            if c.get(k) == Some(&'\n') {
                *line += 1;
            }
            k += 1;
        }
        k + 1
    };
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = skip_quoted(i, '"', &mut line);
        } else if ch == '\'' {
            if at(i + 1) == '\\' || (at(i + 2) == '\'' && at(i + 1) != '\'') {
                i = skip_quoted(i, '\'', &mut line);
            } else {
                i += 1; // a lifetime or label: skip its name
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push((Tok::PathSep, line));
            i += 2;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // Raw strings, byte and C strings: r"..", r#".."#, b"..", br#".."#, b'x', c"..".
            let hashes = c[i..].iter().take_while(|&&h| h == '#').count();
            if matches!(word.as_str(), "r" | "br" | "cr") && at(i + hashes) == '"' {
                let close: Vec<char> = std::iter::once('"')
                    .chain("#".repeat(hashes).chars())
                    .collect();
                i += hashes + 1;
                while i < c.len() && !c[i..].starts_with(&close) {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
                i += close.len();
            } else if matches!(word.as_str(), "b" | "c") && (at(i) == '"' || at(i) == '\'') {
                i = skip_quoted(i, at(i), &mut line);
            } else if word == "r" && hashes == 1 && (at(i + 1).is_alphabetic() || at(i + 1) == '_')
            {
                i += 1; // raw identifier r#name: the name lexes next
            } else if !word.starts_with(|d: char| d.is_ascii_digit()) {
                out.push((Tok::Ident(word), line));
            }
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
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
}

fn ident(t: Option<&(Tok, usize)>) -> Option<&str> {
    match t {
        Some((Tok::Ident(s), _)) => Some(s),
        _ => None,
    }
}

fn facts(src: &str) -> FileFacts {
    let toks = tokenize(src);
    let mut f = FileFacts::default();
    let (mut i, mut depth, mut pending_pub) = (0, 0usize, false);
    let mut inline: Vec<(String, usize)> = Vec::new(); // inline module and its brace depth
    let punct = |k: usize, p: char| matches!(toks.get(k), Some((Tok::Punct(q), _)) if *q == p);
    while i < toks.len() {
        let stack: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
        let was_pub = std::mem::take(&mut pending_pub);
        match &toks[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                while inline.last().is_some_and(|(_, d)| *d > depth) {
                    inline.pop();
                }
            }
            Tok::Ident(w) if w == "pub" => {
                pending_pub = true;
                if punct(i + 1, '(') {
                    // pub(crate), pub(in crate::a): the path is visibility, not a use.
                    while i < toks.len() && !punct(i, ')') {
                        i += 1;
                    }
                }
            }
            Tok::Ident(w) if w == "use" => {
                let mut leaves = Vec::new();
                i = parse_use_tree(&toks, i + 1, &mut Vec::new(), &mut leaves);
                while i < toks.len() && !punct(i, ';') {
                    i += 1;
                }
                let top = depth == 0;
                for leaf in leaves {
                    f.uses.push(UseFact {
                        is_pub: was_pub,
                        top,
                        stack: stack.clone(),
                        leaf,
                    });
                }
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some(name), true) = (ident(toks.get(i + 1)), punct(i + 2, '{')) {
                    depth += 1;
                    inline.push((name.to_string(), depth));
                    f.items.insert(name.to_string());
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(w)
                if matches!(
                    w.as_str(),
                    "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union"
                ) =>
            {
                if let Some(name) = ident(toks.get(i + 1)) {
                    f.items.insert(name.to_string());
                }
            }
            Tok::Ident(w) if w == "macro_rules" && punct(i + 1, '!') => {
                if let Some(name) = ident(toks.get(i + 2)) {
                    f.items.insert(name.to_string());
                }
            }
            Tok::Ident(first) => {
                let after_sep = i > 0 && matches!(toks[i - 1].0, Tok::PathSep | Tok::Punct('.'));
                let dollar = i > 0 && toks[i - 1].0 == Tok::Punct('$');
                if !after_sep && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::PathSep) {
                    let line = toks[i].1;
                    let mut segs = vec![if dollar && first == "crate" {
                        "crate".to_string()
                    } else {
                        first.clone()
                    }];
                    let mut k = i + 1;
                    while toks.get(k).map(|t| &t.0) == Some(&Tok::PathSep) {
                        match ident(toks.get(k + 1)) {
                            Some(s) => segs.push(s.to_string()),
                            None => break,
                        }
                        k += 2;
                    }
                    f.paths.push((stack, segs, line));
                    i = k;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    f
}

/// Parses one use tree at `toks[i]` under `prefix`; returns the index after it.
fn parse_use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    prefix: &mut Vec<String>,
    out: &mut Vec<UseLeaf>,
) -> usize {
    let base = prefix.len();
    if toks.get(i).map(|t| &t.0) == Some(&Tok::PathSep) {
        prefix.push("::".into()); // `use ::name`: always another crate
        i += 1;
    }
    loop {
        match toks.get(i) {
            Some((Tok::Ident(s), line)) => {
                prefix.push(s.clone());
                i += 1;
                if toks.get(i).map(|t| &t.0) == Some(&Tok::PathSep) {
                    i += 1;
                    continue;
                }
                let mut path = prefix.clone();
                let mut name = s.clone();
                if s == "self" {
                    path.pop(); // `a::{self}` binds `a`
                    name = path.last().cloned().unwrap_or_default();
                }
                if ident(toks.get(i)) == Some("as") {
                    name = ident(toks.get(i + 1)).unwrap_or("_").to_string();
                    i += 2;
                }
                let name = (name != "_").then_some(name);
                out.push(UseLeaf {
                    path,
                    name,
                    line: *line,
                });
                break;
            }
            Some((Tok::Punct('*'), line)) => {
                out.push(UseLeaf {
                    path: prefix.clone(),
                    name: None,
                    line: *line,
                });
                i += 1;
                break;
            }
            Some((Tok::Punct('{'), _)) => {
                i += 1;
                while i < toks.len() && toks[i].0 != Tok::Punct('}') {
                    i = parse_use_tree(toks, i, prefix, out);
                    if toks.get(i).map(|t| &t.0) == Some(&Tok::Punct(',')) {
                        i += 1;
                    }
                }
                i += 1;
                break;
            }
            _ => break,
        }
    }
    prefix.truncate(base);
    i
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
        let all: Vec<FileFacts> = files.iter().map(|f| facts(&f.text)).collect();
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
                text: text.to_string(),
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
