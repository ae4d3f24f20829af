//! Tool throughput: native grep/find over a generated tree (compared with `rg`/`fd` when they
//! are installed), ls of a large directory, read truncation, edit with diff, and bash output
//! accumulation. Prints one line per measurement; figures go to docs/BENCHMARKS.md.
//!
//! Run: `cargo bench --bench tools`

#![allow(clippy::unwrap_used)]

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi::agent::tool::{Tool, ToolContext, ToolInput, prepare_call};
use pi::session::tools::read::ReadConfig;
use pi::session::tools::shell::ShellConfig;
use pi::session::tools::workspace::Workspace;
use pi::session::tools::{ToolsConfig, builtin_tools};
use pi::support::ids::IdSource;
use serde_json::{Value, json};

const FILES: usize = 2000;
const LINES: usize = 200;

fn build_tree(root: &Path) -> u64 {
    let mut bytes = 0u64;
    for n in 0..FILES {
        let dir = root.join(format!("src/mod{:02}/sub{}", n % 40, n % 7));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = String::new();
        for line in 0..LINES {
            text.push_str(&format!(
                "    let value_{line} = compute_{n}({line}, \"some text that fills the line\");\n"
            ));
        }
        if n == FILES / 2 {
            text.push_str("// RAREMARKER here\n");
        }
        bytes += text.len() as u64;
        std::fs::write(dir.join(format!("file{n}.rs")), text).unwrap();
    }
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    bytes
}

fn best_of<T>(runs: usize, mut work: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..runs {
        let started = Instant::now();
        let value = work();
        best = best.min(started.elapsed());
        last = Some(value);
    }
    (best, last.unwrap())
}

fn call(
    runtime: &tokio::runtime::Runtime,
    tool: &Arc<dyn Tool>,
    cwd: &Path,
    args: Value,
) -> String {
    let arguments = prepare_call(tool.as_ref(), &args).unwrap();
    let input = ToolInput {
        id: "bench".into(),
        arguments,
    };
    match runtime.block_on(tool.execute(input, ToolContext::new(cwd))) {
        Ok(output) => output.joined_text(),
        Err(error) => error.message(),
    }
}

fn external(program: &str, args: &[&str], cwd: &Path) -> Option<Duration> {
    Command::new(program).arg("--version").output().ok()?;
    let (elapsed, _) = best_of(3, || {
        Command::new(program)
            .args(args)
            .current_dir(cwd)
            .output()
            .unwrap()
    });
    Some(elapsed)
}

fn report(name: &str, elapsed: Duration, note: &str) {
    println!(
        "{name:<44} {:>9.2} ms  {note}",
        elapsed.as_secs_f64() * 1000.0
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    std::fs::create_dir_all(&root).unwrap();
    let bytes = build_tree(&root);
    let shell = ShellConfig {
        shell_path: None,
        command_prefix: None,
        env: vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))],
        bin_dir: None,
        temp_dir: dir.path().to_path_buf(),
        ids: Arc::new(IdSource::seeded(1)),
    };
    let tools = builtin_tools(&ToolsConfig {
        workspace: Workspace::default(),
        read: ReadConfig {
            auto_resize_images: true,
        },
        shell,
    });
    let tool = |name: &str| {
        tools
            .iter()
            .find(|tool| tool.definition().name == name)
            .unwrap()
            .clone()
    };
    let grep = tool("grep");
    let find = tool("find");
    println!(
        "tree: {FILES} files, {:.1} MB, {} lines",
        bytes as f64 / 1e6,
        FILES * LINES
    );

    let (elapsed, out) = best_of(5, || {
        call(&runtime, &grep, &root, json!({"pattern": "RAREMARKER"}))
    });
    report(
        "grep rare pattern (full scan)",
        elapsed,
        out.lines().next().unwrap_or(""),
    );
    if let Some(rg) = external(
        "rg",
        &[
            "--json",
            "--line-number",
            "--color=never",
            "--hidden",
            "--",
            "RAREMARKER",
            ".",
        ],
        &root,
    ) {
        report("  rg --json, same search (reference)", rg, "");
    }
    let (elapsed, _) = best_of(5, || {
        call(&runtime, &grep, &root, json!({"pattern": "value_1\\d+ ="}))
    });
    report("grep common pattern (stops at 100 matches)", elapsed, "");
    let (elapsed, _) = best_of(5, || {
        call(
            &runtime,
            &grep,
            &root,
            json!({"pattern": "value_199 =", "limit": 5000}),
        )
    });
    report("grep 2000 matches, limit 5000", elapsed, "");
    let (elapsed, out) = best_of(5, || {
        call(
            &runtime,
            &find,
            &root,
            json!({"pattern": "*.rs", "limit": 5000}),
        )
    });
    report(
        "find *.rs (2000 results)",
        elapsed,
        &format!("{} lines", out.lines().count()),
    );
    if let Some(fd) = external(
        "fd",
        &[
            "--glob",
            "--color=never",
            "--hidden",
            "--no-require-git",
            "--max-results",
            "5000",
            "--",
            "*.rs",
            ".",
        ],
        &root,
    ) {
        report("  fd, same search (reference)", fd, "");
    }
    let (elapsed, _) = best_of(5, || {
        call(
            &runtime,
            &find,
            &root,
            json!({"pattern": "src/**/sub3/*.rs", "limit": 5000}),
        )
    });
    report("find src/**/sub3/*.rs (full-path glob)", elapsed, "");

    let ls_dir = dir.path().join("flat");
    std::fs::create_dir_all(&ls_dir).unwrap();
    for n in 0..5000 {
        std::fs::write(ls_dir.join(format!("Entry_{n}.txt")), "").unwrap();
    }
    let ls = tool("ls");
    let (elapsed, _) = best_of(5, || call(&runtime, &ls, &ls_dir, json!({"limit": 10000})));
    report("ls 5000 entries (ICU collation)", elapsed, "");

    let big = dir.path().join("big.txt");
    let big_text: String = (0..200_000)
        .map(|n| format!("line number {n} with some padding text\n"))
        .collect();
    std::fs::write(&big, &big_text).unwrap();
    let read = tool("read");
    let (elapsed, _) = best_of(5, || {
        call(
            &runtime,
            &read,
            dir.path(),
            json!({"path": "big.txt", "offset": 100000}),
        )
    });
    report(
        &format!(
            "read {:.1} MB file from line 100000",
            big_text.len() as f64 / 1e6
        ),
        elapsed,
        "",
    );

    let edit = tool("edit");
    let (elapsed, out) = best_of(3, || {
        std::fs::write(&big, &big_text).unwrap();
        call(
            &runtime,
            &edit,
            dir.path(),
            json!({"path": "big.txt", "edits": [
                {"oldText": "line number 100000 with", "newText": "LINE 100000 with"},
                {"oldText": "line number 150000 with", "newText": "LINE 150000 with"}
            ]}),
        )
    });
    report("edit 2 exact replacements + diff (8 MB)", elapsed, &out);
    let (elapsed, _) = best_of(3, || {
        std::fs::write(&big, &big_text).unwrap();
        call(
            &runtime,
            &edit,
            dir.path(),
            json!({"path": "big.txt", "edits": [
                {"oldText": "line number 100000 with   ", "newText": "LINE 100000 with"}
            ]}),
        )
    });
    report("edit fuzzy replacement + diff (8 MB)", elapsed, "");

    let bash = tool("bash");
    let (elapsed, out) = best_of(3, || {
        call(
            &runtime,
            &bash,
            dir.path(),
            json!({"command": "seq 1 2000000"}),
        )
    });
    report(
        "bash seq 1 2000000 (15.9 MB output)",
        elapsed,
        out.lines().last().unwrap_or(""),
    );
}
