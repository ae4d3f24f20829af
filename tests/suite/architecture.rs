//! The layering table of STYLE.md, enforced: a module may import only the modules its row
//! lists. Reads `src/<module>/**` and fails on any `crate::…` path the table does not allow.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const LAYERS: &[(&str, &[&str])] = &[
    ("support", &[]),
    ("model", &["support"]),
    ("jsonl", &["model", "support"]),
    ("store", &["jsonl", "model", "support"]),
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
            "modes", "session", "agent", "ai", "store", "jsonl", "model", "support",
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
