//! The hardening issue ("tried as an attacker would"): what broke, each kept fixed here through
//! the real binary and real files — escapes from session files reaching the terminal
//! (item 2), errors printed twice or on several lines (items 3 and 11), odd session ids in
//! `export --all` (item 4), reading `/dev/zero`, FIFOs and huge lines (item 9), invalid
//! timestamps and header versions (item 11). The kill test of `pi db backup` (item 3) and the
//! read-only database (item 7) are in `durability.rs`.

use std::path::Path;

use crate::common::{TestEnv, succeeded};

/// Writes a reference session file of `lines` (each plus LF).
fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

/// A small valid session: a header and one user message.
fn small_session(id: &str) -> Vec<String> {
    vec![
        format!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}}"#
        ),
        r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hello","timestamp":1}}"#.to_owned(),
    ]
}

/// Asserts that a failed command printed its error as one line, and no text twice.
fn assert_one_line_error(args: &[&str], output: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "{args:?} succeeded: {stderr}{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: not one line:\n{stderr}");
    let line = lines[0];
    assert!(line.starts_with("pi: "), "{args:?}: {line}");
    // No part of the message repeated: `a: b: b`, or a cause printed after a message that
    // already includes it.
    let parts: Vec<&str> = line.split(": ").map(str::trim).collect();
    for (idx, part) in parts.iter().enumerate() {
        if part.len() < 8 {
            continue;
        }
        assert!(
            !parts[idx + 1..].iter().any(|later| later.contains(part)),
            "{args:?}: {part:?} repeated in {line}"
        );
    }
}

/// Every failing command prints one line naming what failed, never a text twice (a backup
/// onto an existing file printed "File exists (os error 17)" twice; an unusable `--db` path
/// "No such file or directory" twice; a missing `-o DIR` or `--cwd DIR` took clap's three to
/// five lines).
#[test]
fn failing_commands_print_one_line_without_repeating_themselves() {
    let env = TestEnv::new();
    let dir = env.dir.path();
    let existing = dir.join("existing.db");
    std::fs::write(&existing, b"").unwrap();
    let not_a_db = dir.join("not-a-db.db");
    std::fs::write(&not_a_db, vec![b'x'; 8192]).unwrap();
    let headerless = dir.join("headerless.jsonl");
    std::fs::write(&headerless, b"{\"type\":\"message\"}\n").unwrap();
    let good = dir.join("good.jsonl");
    write_lines(&good, &small_session("sess-1"));
    succeeded(env.pi().args(["import"]).arg(&good));
    let path = |path: &Path| path.to_str().unwrap().to_owned();
    let cases: Vec<Vec<String>> = vec![
        vec!["db".into(), "backup".into(), path(&existing)],
        vec![
            "db".into(),
            "backup".into(),
            path(&dir.join("missing/b.db")),
        ],
        vec![
            "--db".into(),
            "/proc/pi-missing/x.db".into(),
            "sessions".into(),
            "list".into(),
        ],
        vec![
            "--db".into(),
            path(&not_a_db),
            "sessions".into(),
            "list".into(),
        ],
        vec!["--db".into(), path(&not_a_db), "db".into(), "check".into()],
        vec!["sessions".into(), "show".into(), "no-such-session".into()],
        vec![
            "sessions".into(),
            "show".into(),
            "sess-1".into(),
            "--entry".into(),
            "zz".into(),
        ],
        vec!["sessions".into(), "search".into(), "AND".into()],
        vec![
            "sessions".into(),
            "rename".into(),
            "sess-1".into(),
            " ".into(),
        ],
        vec!["sessions".into(), "list".into(), "--cwd".into()],
        vec!["sessions".into(), "list".into(), "--bogus".into()],
        vec!["export".into(), "--jsonl".into(), "--all".into()],
        vec!["export".into(), "--jsonl".into(), "no-such-session".into()],
        vec![
            "export".into(),
            "--jsonl".into(),
            "sess-1".into(),
            "-o".into(),
            "/proc/pi-missing/x.jsonl".into(),
        ],
        vec!["import".into(), path(&headerless)],
        vec!["import".into(), path(&dir.join("missing.jsonl"))],
        vec!["install".into(), "x".into()],
        vec![
            "--session".into(),
            path(&dir.join("missing.jsonl")),
            "-p".into(),
            "hi".into(),
        ],
        vec!["--bogus-flag".into()],
    ];
    for args in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = env.pi().args(&args).output().unwrap();
        assert_one_line_error(&args, &output);
    }
    // A backup onto the file a failed backup was refused for: still refused, still one line.
    let args = ["db", "backup", existing.to_str().unwrap()];
    let output = env.pi().args(args).output().unwrap();
    assert_one_line_error(&args, &output);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("exists"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
