//! The layering table of STYLE.md, enforced: a module may import only the modules its row
//! lists. Reads `src/<module>/**` and fails on any `crate::…` path the table does not allow.
//! Inside `session` the modules' imports form no cycle either (`session_modules_import_no_cycle`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LAYERS: &[(&str, &[&str])] = &[
    ("support", &[]),
    ("model", &["support"]),
    ("jsonl", &["model", "support"]),
    ("store", &["jsonl", "model", "support"]),
    ("remote", &["store", "jsonl", "model", "support"]),
    ("ai", &["model", "support"]),
    ("agent", &["ai", "model", "support"]),
    (
        "session",
        &["agent", "ai", "store", "jsonl", "model", "support"],
    ),
    (
        "modes",
        &[
            "session", "agent", "ai", "store", "jsonl", "model", "support",
        ],
    ),
    (
        "cli",
        &[
            "modes", "session", "agent", "ai", "remote", "store", "jsonl", "model", "support",
        ],
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// Returns the top-level crate modules a source text refers to through `crate::`.
fn crate_references(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(pos) = rest.find("crate::") {
            rest = &rest[pos + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or("");
                for item in inner.split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        out.insert(name);
                    }
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
    out
}

fn violations(module: &str, allowed: &[&str], files: &[(PathBuf, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, source) in files {
        for referenced in crate_references(source) {
            if referenced != module && !allowed.contains(&referenced.as_str()) {
                out.push(format!("{} imports crate::{referenced}", path.display()));
            }
        }
    }
    out
}

#[test]
fn the_checker_sees_plain_and_grouped_imports() {
    let refs =
        crate_references("use crate::store::X;\nuse crate::{ai::Y, model};\n// crate::cli\n");
    assert_eq!(
        refs.into_iter().collect::<Vec<_>>(),
        ["ai", "model", "store"]
    );
    let files = vec![(
        PathBuf::from("src/model/x.rs"),
        "use crate::store::Y;".to_owned(),
    )];
    assert_eq!(violations("model", &["support"], &files).len(), 1);
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for (module, allowed) in LAYERS {
        let mut paths = Vec::new();
        rust_files(&src.join(module), &mut paths);
        let single = src.join(format!("{module}.rs"));
        if single.exists() {
            paths.push(single);
        }
        let files: Vec<(PathBuf, String)> = paths
            .into_iter()
            .map(|path| {
                let text = std::fs::read_to_string(&path).unwrap();
                (path, text)
            })
            .collect();
        problems.extend(violations(module, allowed, &files));
    }
    let main = std::fs::read_to_string(src.join("main.rs")).unwrap();
    for line in main.lines() {
        if let Some(pos) = line.find("pi::") {
            let name: String = line[pos + 4..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name != "cli" {
                problems.push(format!("main.rs uses pi::{name}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layering violations:\n{}",
        problems.join("\n")
    );
}

// ----- import cycles inside a layer ----------------------------------------------------------

/// A module path inside the crate, such as `["session", "agent_session", "lease"]`.
type ModPath = Vec<String>;

/// Returns the module path of a source file (`rel` is relative to `src/`): `x/mod.rs` and
/// `x.rs` are both `x`.
fn module_path(rel: &Path) -> ModPath {
    let mut out: ModPath = rel
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = out.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" {
            out.push(stem.to_owned());
        }
    }
    out
}

/// Returns the source with comments and the contents of string literals blanked out (line
/// breaks kept, so byte offsets still give line numbers).
fn code_only(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    for line in source.lines() {
        let mut in_string = false;
        let mut escaped = false;
        let mut previous = '\0';
        for ch in line.chars() {
            if in_string {
                if escaped {
                    escaped = false;
                } else if ch == '\\' {
                    escaped = true;
                } else if ch == '"' {
                    in_string = false;
                    out.push('"');
                    previous = ch;
                    continue;
                }
                out.push(' ');
                continue;
            }
            if ch == '/' && previous == '/' {
                out.pop();
                break;
            }
            if ch == '"' && previous != '\'' {
                in_string = true;
            }
            out.push(ch);
            previous = ch;
        }
        out.push('\n');
    }
    out
}

fn is_ident(ch: char) -> bool {
    ch.is_ascii_alphanumeric() || ch == '_'
}

/// Parses a use tree (`a::b`, `a::{b, c::d as e, self}`) at the start of `text`; returns its
/// leaf paths with the name each binds.
fn use_tree(text: &str) -> Vec<(Vec<String>, String)> {
    fn skip_ws(text: &str, pos: &mut usize) {
        while text[*pos..].starts_with(char::is_whitespace) {
            *pos += text[*pos..].chars().next().map_or(1, char::len_utf8);
        }
    }
    fn ident(text: &str, pos: &mut usize) -> String {
        let start = *pos;
        while text[*pos..].starts_with(is_ident) {
            *pos += 1;
        }
        text[start..*pos].to_owned()
    }
    fn tree(text: &str, pos: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
        skip_ws(text, pos);
        if text[*pos..].starts_with('{') {
            *pos += 1;
            loop {
                skip_ws(text, pos);
                if text[*pos..].starts_with('}') || *pos >= text.len() {
                    *pos += 1;
                    return;
                }
                tree(text, pos, prefix, out);
                skip_ws(text, pos);
                if text[*pos..].starts_with(',') {
                    *pos += 1;
                }
            }
        }
        if text[*pos..].starts_with('*') {
            *pos += 1;
            out.push((prefix.to_vec(), "*".to_owned()));
            return;
        }
        let name = ident(text, pos);
        if name.is_empty() {
            if !prefix.is_empty() {
                let last = prefix.last().cloned().unwrap_or_default();
                out.push((prefix.to_vec(), last));
            }
            return;
        }
        let mut path = prefix.to_vec();
        if name != "self" {
            path.push(name);
        }
        let mut after = *pos;
        skip_ws(text, &mut after);
        if text[after..].starts_with("::") {
            *pos = after + 2;
            skip_ws(text, pos);
            if text[*pos..].starts_with(|ch: char| is_ident(ch) || ch == '{' || ch == '*') {
                return tree(text, pos, &path, out);
            }
            // `Type::<T>` and the like: the path ends here.
        }
        let mut alias = path.last().cloned().unwrap_or_default();
        let mut rest = *pos;
        skip_ws(text, &mut rest);
        if text[rest..].starts_with("as ") {
            rest += 3;
            skip_ws(text, &mut rest);
            alias = ident(text, &mut rest);
            *pos = rest;
        }
        out.push((path, alias));
    }
    let mut pos = 0;
    let mut out = Vec::new();
    tree(text, &mut pos, &[], &mut out);
    out
}

/// One source file of a layer, as the cycle check sees it.
struct ModFile {
    rel: PathBuf,
    module: ModPath,
    code: String,
}

impl ModFile {
    fn new(rel: PathBuf, source: &str) -> Self {
        Self {
            module: module_path(&rel),
            code: code_only(source),
            rel,
        }
    }

    /// The child modules declared in the file (`mod x;`, `pub mod x;`).
    fn children(&self) -> BTreeSet<String> {
        self.code
            .lines()
            .filter_map(|line| {
                let line = line.trim();
                let rest = line
                    .strip_prefix("pub mod ")
                    .or_else(|| line.strip_prefix("pub(crate) mod "))
                    .or_else(|| line.strip_prefix("mod "))?;
                let name = rest.strip_suffix(';')?;
                name.chars().all(is_ident).then(|| name.to_owned())
            })
            .collect()
    }

    /// Every path the file names through `crate::`, `super::`, `self::` or one of its child
    /// modules, made absolute (`["session", "persist", "blocking"]`), with its line number.
    fn references(&self) -> Vec<(ModPath, usize)> {
        let children = self.children();
        // Inline modules (`mod tests {`) move `super::` one level down for the rest of the file.
        let inline_starts: Vec<usize> = self
            .code
            .match_indices("mod ")
            .filter(|(pos, _)| {
                let rest = &self.code[pos + 4..];
                let name_len = rest.chars().take_while(|ch| is_ident(*ch)).count();
                rest[name_len..].trim_start().starts_with('{')
            })
            .map(|(pos, _)| pos)
            .collect();
        let bytes = self.code.as_bytes();
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < self.code.len() {
            let starts_path = (pos == 0 || {
                let before = bytes[pos - 1] as char;
                !is_ident(before) && before != ':'
            }) && self.code[pos..].starts_with(is_ident);
            if !starts_path {
                pos += self.code[pos..].chars().next().map_or(1, char::len_utf8);
                continue;
            }
            let name_len = self.code[pos..]
                .chars()
                .take_while(|ch| is_ident(*ch))
                .count();
            let name = &self.code[pos..pos + name_len];
            let after = &self.code[pos + name_len..];
            if !after.starts_with("::") {
                pos += name_len;
                continue;
            }
            let depth = inline_starts.iter().filter(|start| **start < pos).count();
            let mut base: ModPath = self.module.clone();
            base.extend((0..depth).map(|_| "<inline>".to_owned()));
            let root: Option<ModPath> = match name {
                "crate" => Some(Vec::new()),
                "self" => Some(base.clone()),
                "super" => {
                    let mut parent = base.clone();
                    let mut rest = after;
                    parent.pop();
                    while let Some(next) = rest.strip_prefix("::super") {
                        parent.pop();
                        rest = next;
                    }
                    Some(parent)
                }
                child if depth == 0 && children.contains(child) => {
                    let mut path = self.module.clone();
                    path.push(child.to_owned());
                    Some(path)
                }
                _ => None,
            };
            let Some(mut root) = root else {
                pos += name_len;
                continue;
            };
            let mut tail = &after[2..];
            while let Some(next) = tail.strip_prefix("super::") {
                tail = next;
            }
            root.retain(|part| part != "<inline>");
            let line = self.code[..pos].matches('\n').count() + 1;
            for (path, _) in use_tree(tail) {
                let mut full = root.clone();
                full.extend(path);
                out.push((full, line));
            }
            pos += name_len;
        }
        out
    }

    /// The names the file re-exports (`pub use …`): name → the absolute path it stands for.
    fn reexports(&self) -> BTreeMap<String, ModPath> {
        let mut out = BTreeMap::new();
        let children = self.children();
        for (offset, _) in self.code.match_indices("use ") {
            let line_start = self.code[..offset].rfind('\n').map_or(0, |pos| pos + 1);
            let head = self.code[line_start..offset].trim();
            if !(head == "pub" || head.starts_with("pub(")) {
                continue;
            }
            let tree_text = &self.code[offset + 4..];
            for (path, alias) in use_tree(tree_text) {
                let Some(first) = path.first() else {
                    continue;
                };
                let mut full: ModPath = match first.as_str() {
                    "crate" => Vec::new(),
                    "super" => {
                        let mut parent = self.module.clone();
                        parent.pop();
                        parent
                    }
                    child if children.contains(child) => self.module.clone(),
                    _ => continue,
                };
                let skip = usize::from(first == "crate" || first == "super");
                full.extend(path.into_iter().skip(skip));
                out.insert(alias, full);
            }
        }
        out
    }
}

/// The import cycles between the modules of `layer` (a directory under `src/`): a module is
/// each file or directory directly under it, and each file under one of `split` (directories
/// whose files are modules of their own; their `mod.rs` or `<name>.rs` is the parent). A
/// name a module re-exports counts as the module that defines it, so a parent's façade is no
/// cycle. Returns one line per cycle, with a witness line for each of its imports.
fn import_cycles(layer: &str, split: &[&str], files: &[ModFile]) -> Vec<String> {
    let modules: BTreeSet<ModPath> = files.iter().map(|file| file.module.clone()).collect();
    let reexports: BTreeMap<ModPath, BTreeMap<String, ModPath>> = files
        .iter()
        .map(|file| (file.module.clone(), file.reexports()))
        .collect();
    let node_of = |module: &[String]| -> String {
        match module {
            [] | [_] => layer.to_owned(),
            [_, dir, file, ..] if split.contains(&dir.as_str()) => format!("{dir}::{file}"),
            [_, top, ..] => top.clone(),
        }
    };
    // Resolves a path to the module that defines what it names, through re-exports.
    let resolve = |path: &ModPath| -> Option<ModPath> {
        let mut path = path.clone();
        for _ in 0..16 {
            if path.first().map(String::as_str) != Some(layer) {
                return None;
            }
            let len = (1..=path.len())
                .rev()
                .find(|len| modules.contains(&path[..*len]))?;
            let module = path[..len].to_vec();
            let target = path
                .get(len)
                .and_then(|name| reexports.get(&module).and_then(|map| map.get(name)));
            match target {
                Some(target) if *target != path[..=len] => {
                    let mut next = target.clone();
                    next.extend(path[len + 1..].iter().cloned());
                    path = next;
                }
                _ => return Some(module),
            }
        }
        None
    };
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in files {
        let from = node_of(&file.module);
        edges.entry(from.clone()).or_default();
        for (path, line) in file.references() {
            let Some(target) = resolve(&path) else {
                continue;
            };
            let to = node_of(&target);
            if to != from {
                edges
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("{}:{line}", file.rel.display()));
            }
        }
    }
    // Tarjan's strongly connected components; every component of two or more is a cycle.
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            let edges = self.edges;
            for next in edges.get(node).into_iter().flat_map(BTreeMap::keys) {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top);
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort_unstable();
                    self.components.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges: &edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.components
        .iter()
        .map(|component| {
            let inside: BTreeSet<&str> = component.iter().copied().collect();
            let witnesses: Vec<String> = component
                .iter()
                .flat_map(|from| {
                    edges[*from]
                        .iter()
                        .filter(|(to, _)| inside.contains(to.as_str()))
                        .map(move |(to, at)| format!("  {from} → {to} ({at})"))
                })
                .collect();
            format!(
                "{layer}: {} import each other in a cycle:\n{}",
                component.join(", "),
                witnesses.join("\n")
            )
        })
        .collect()
}

/// Reads every `.rs` file under `src/<layer>/` (and `src/<layer>.rs`).
fn layer_files(layer: &str) -> Vec<ModFile> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src.join(layer), &mut paths);
    let single = src.join(format!("{layer}.rs"));
    if single.exists() {
        paths.push(single);
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let source = std::fs::read_to_string(&path).unwrap();
            let rel = path.strip_prefix(&src).unwrap().to_path_buf();
            ModFile::new(rel, &source)
        })
        .collect()
}

fn synthetic(files: &[(&str, &str)]) -> Vec<ModFile> {
    files
        .iter()
        .map(|(rel, source)| ModFile::new(PathBuf::from(rel), source))
        .collect()
}

#[test]
fn the_cycle_check_sees_cycles_through_grouped_super_and_child_paths() {
    let cyclic = synthetic(&[
        ("session/mod.rs", "pub mod a;\npub mod b;\n"),
        (
            "session/a.rs",
            "use crate::session::{b::{X, Y as Z}, c};\n// use crate::session::d::W;\n",
        ),
        ("session/b.rs", "fn f() { super::a::g(); }\n"),
    ]);
    let cycles = import_cycles("session", &[], &cyclic);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(cycles[0].contains("a → b (session/a.rs:1)"), "{cycles:?}");
    assert!(cycles[0].contains("b → a (session/b.rs:1)"), "{cycles:?}");

    // Files of a split directory are modules of their own; the parent's re-exports resolve to
    // the file that defines the name, and `super::` inside `mod tests` is the file itself.
    let split = synthetic(&[
        (
            "session/x/mod.rs",
            "mod core;\nmod extra;\npub use core::Handle;\npub use extra::Extra;\n",
        ),
        ("session/x/core.rs", "pub struct Handle;\n"),
        (
            "session/x/extra.rs",
            "use crate::session::x::Handle;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
    ]);
    assert!(import_cycles("session", &["x"], &split).is_empty());
    let back_edge = synthetic(&[
        ("session/x/mod.rs", "mod core;\npub use core::Handle;\n"),
        ("session/x/core.rs", "use crate::session::x::Extra;\n"),
        (
            "session/x/extra.rs",
            "use super::Handle;\npub struct Extra;\n",
        ),
    ]);
    assert_eq!(
        import_cycles("session", &["x"], &back_edge).len(),
        1,
        "x::core names x::Extra, which x does not re-export: x itself, which re-exports x::core"
    );
}

#[test]
fn store_modules_import_no_cycle() {
    let cycles = import_cycles("store", &["search"], &layer_files("store"));
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

#[test]
fn session_modules_import_no_cycle() {
    let cycles = import_cycles(
        "session",
        &["agent_session", "extensions"],
        &layer_files("session"),
    );
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

/// The `pi` executable is position-independent (ELF type `ET_DYN`, with an interpreter or as
/// a static PIE), so the kernel randomises where its code and data are loaded; an `ET_EXEC`
/// image (linked with `-no-pie`) always loads at the same address.
#[test]
fn the_pi_executable_is_position_independent() {
    let binary = assert_cmd::cargo::cargo_bin("pi");
    let bytes = std::fs::read(&binary).unwrap();
    assert_eq!(
        &bytes[..4],
        b"\x7fELF",
        "{} is not an ELF file",
        binary.display()
    );
    // e_type: 2 bytes at offset 16, little-endian on x86-64 (EI_DATA = 1 is checked).
    assert_eq!(bytes[5], 1, "a little-endian ELF file");
    let e_type = u16::from_le_bytes([bytes[16], bytes[17]]);
    const ET_EXEC: u16 = 2;
    const ET_DYN: u16 = 3;
    assert_ne!(
        e_type,
        ET_EXEC,
        "{} was linked without PIE",
        binary.display()
    );
    assert_eq!(e_type, ET_DYN, "ELF type of {}", binary.display());
}
