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
        vec!["auth".into(), "login".into(), "no-such-provider".into()],
        vec!["auth".into(), "frobnicate".into()],
        vec!["mcp".into(), "login".into(), "x".into()],
        vec!["help".into(), "no-such-command".into()],
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

// ----- item 4: export --all with odd ids -----------------------------------------------------

/// A session file whose header has this id and cwd, with one user message.
fn session_lines(id: &str, cwd: &str, text: &str) -> Vec<String> {
    let header = serde_json::json!({
        "type": "session", "version": 3, "id": id,
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd,
    });
    let message = serde_json::json!({
        "type": "message", "id": "a1", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1},
    });
    vec![header.to_string(), message.to_string()]
}

/// Every regular file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Sessions whose ids (or cwds) make bad file names — 5,000 characters, `/`, `..`, ids that
/// the old replacement made equal (`a/b` and `a-b`), control characters, a NUL in the cwd —
/// are all exported by `export --jsonl --all`, each to its own bounded name inside DIR; a
/// session whose file cannot be written is reported in one line naming it, the others are
/// still written, and the exit is 1. (A 5,000-character id stopped the export with "File
/// name too long", the rest not written.)
#[test]
fn export_all_writes_every_session_under_a_safe_bounded_name() {
    let env = TestEnv::new();
    let long_id = "x".repeat(5_000);
    let long_cwd = format!("/{}", "deep/".repeat(1_000));
    let sessions: Vec<(String, String)> = vec![
        (
            "0196a3c2-7d1e-7c44-9b0e-2f6a1d3c9e55".into(),
            "/home/u/app".into(),
        ),
        (long_id.clone(), "/w".into()),
        ("a/b".into(), "/w".into()),
        ("a-b".into(), "/w".into()),
        ("..".into(), "/w".into()),
        ("../../escaped".into(), "/w".into()),
        ("tab\tbell\u{7}esc\u{1b}[2J".into(), "/w".into()),
        ("tilde~0123".into(), "/w".into()),
        ("nul-cwd".into(), "/w/\u{0}/x".into()),
        ("long-cwd".into(), long_cwd),
        ("dots".into(), "..".into()),
    ];
    for (idx, (id, cwd)) in sessions.iter().enumerate() {
        let file = env.dir.path().join(format!("in-{idx}.jsonl"));
        write_lines(&file, &session_lines(id, cwd, &format!("message {idx}")));
        succeeded(env.pi().args(["import"]).arg(&file));
    }
    let out = env.dir.path().join("out");
    succeeded(
        env.pi()
            .args(["export", "--jsonl", "--all", "-o"])
            .arg(&out),
    );
    let files = files_under(&out);
    assert_eq!(files.len(), sessions.len(), "{files:#?}");
    let mut ids = Vec::new();
    for file in &files {
        assert!(file.starts_with(&out), "{} escaped DIR", file.display());
        for component in file.strip_prefix(&out).unwrap().components() {
            let name = component.as_os_str().to_str().unwrap();
            assert!(name.len() <= 255, "a {}-byte name", name.len());
            assert!(!name.chars().any(char::is_control), "{name:?}");
        }
        let text = std::fs::read_to_string(file).unwrap();
        let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        ids.push(header["id"].as_str().unwrap().to_owned());
    }
    ids.sort();
    let mut expected: Vec<String> = sessions.iter().map(|(id, _)| id.clone()).collect();
    expected.sort();
    assert_eq!(ids, expected);
    // The reference's own layout where the id and cwd make a good name.
    assert!(
        out.join("--home-u-app--")
            .join("2026-01-01T00-00-00-000Z_0196a3c2-7d1e-7c44-9b0e-2f6a1d3c9e55.jsonl")
            .is_file()
    );
    // Names are the same on every run: a second export without --force keeps them all.
    let again = env
        .pi()
        .args(["export", "--jsonl", "--all", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(files_under(&out), files);

    // One session that cannot be written (a directory where its file goes): reported by id,
    // every other session still written, exit 1.
    let blocked = files
        .iter()
        .find(|file| std::fs::read_to_string(file).unwrap().contains("\"a-b\""))
        .unwrap()
        .clone();
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::create_dir_all(&blocked).unwrap();
    let partial = env
        .pi()
        .args(["export", "--jsonl", "--all", "--force", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(partial.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&partial.stderr);
    let failures: Vec<&str> = stderr.lines().filter(|line| line.contains("a-b")).collect();
    assert_eq!(failures.len(), 1, "{stderr}");
    assert_eq!(
        files_under(&out).len(),
        sessions.len() - 1,
        "the others are written: {stderr}"
    );
}

// ----- item 9: what import reads -------------------------------------------------------------

/// How a measured child ended.
struct Measured {
    output: std::process::Output,
    /// The child's peak resident set (`VmHWM` of `/proc/<pid>/status`), in KiB.
    peak_kib: u64,
    elapsed: std::time::Duration,
}

/// Runs `command`, sampling its peak resident set every millisecond; kills it (and fails)
/// when it takes longer than `timeout` or grows past `limit_kib`.
fn run_measured(
    mut command: std::process::Command,
    timeout: std::time::Duration,
    limit_kib: u64,
) -> Measured {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::Instant;
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file)
            && let Some(line) = text.lines().find(|line| line.starts_with("VmHWM:"))
        {
            let kib: u64 = line
                .split_whitespace()
                .nth(1)
                .and_then(|value| value.parse().ok())
                .unwrap_or(0);
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if peak_kib > limit_kib || started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{command:?}: killed after {:?} at a peak of {} MiB",
                started.elapsed(),
                peak_kib / 1024
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    Measured {
        output: std::process::Output {
            status,
            stdout: out_reader.join().unwrap(),
            stderr: err_reader.join().unwrap(),
        },
        peak_kib,
        elapsed: started.elapsed(),
    }
}

/// `pi import` of a FIFO, a character device (`/dev/zero`, `/dev/null`) and a socket ends at
/// once with one refusal line per file naming it and what it is, without reading (a FIFO
/// blocked forever, `/dev/zero` grew to 8 GB); a FIFO named `*.jsonl` in a directory is
/// refused the same way; a symlink to a regular file imports.
#[test]
fn import_refuses_fifos_devices_and_sockets_at_once() {
    let env = TestEnv::new();
    let dir = env.dir.path().join("in");
    std::fs::create_dir(&dir).unwrap();
    let fifo = dir.join("fifo.jsonl");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let socket = env.dir.path().join("socket.jsonl");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let regular = env.dir.path().join("regular.jsonl");
    write_lines(&regular, &small_session("linked-session"));
    let link = env.dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&regular, &link).unwrap();
    let timeout = std::time::Duration::from_secs(20);
    for target in [
        fifo.as_path(),
        Path::new("/dev/zero"),
        Path::new("/dev/null"),
        socket.as_path(),
        dir.as_path(),
    ] {
        let mut command = env.pi_process();
        command.arg("import").arg(target);
        let run = run_measured(command, timeout, 200 * 1024);
        let stdout = String::from_utf8_lossy(&run.output.stdout);
        let stderr = String::from_utf8_lossy(&run.output.stderr);
        assert_eq!(
            run.output.status.code(),
            Some(1),
            "{target:?}: {stdout}{stderr}"
        );
        // The refusal, then the import's count line.
        let refused: Vec<&str> = stdout
            .lines()
            .filter(|line| !line.ends_with("1 refused"))
            .collect();
        assert!(stdout.trim_end().ends_with("1 file: 1 refused"), "{stdout}");
        let shown = if target == dir {
            fifo.as_path()
        } else {
            target
        };
        assert_eq!(refused.len(), 1, "{target:?}: {stdout}");
        assert!(
            refused[0].starts_with("refused")
                && refused[0].contains(shown.to_str().unwrap())
                && refused[0].contains("not a regular file"),
            "{target:?}: {stdout}"
        );
        assert_eq!(stderr.lines().count(), 1, "{target:?}: {stderr}");
        assert!(
            run.elapsed < std::time::Duration::from_secs(10),
            "{target:?}: {:?}",
            run.elapsed
        );
        assert!(
            run.peak_kib < 100 * 1024,
            "{target:?}: peak resident set {} MiB",
            run.peak_kib / 1024
        );
    }
    let linked = succeeded(env.pi().args(["import"]).arg(&link));
    assert!(String::from_utf8_lossy(&linked.stdout).starts_with("imported"));
}

/// A line longer than the limit (256 MiB) refuses the file with one line naming the file and
/// the line, after reading no more than the limit: the process stays far below the file's size.
#[test]
fn a_line_longer_than_the_limit_refuses_the_file_with_bounded_memory() {
    const LIMIT: u64 = 256 * 1024 * 1024;
    let env = TestEnv::new();
    let huge = env.dir.path().join("huge.jsonl");
    write_lines(&huge, &small_session("huge-line"));
    // One more line of NULs, 1 GiB long (sparse: the disk holds none of it).
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&huge)
        .unwrap();
    let start = file.metadata().unwrap().len();
    file.set_len(start + 4 * LIMIT).unwrap();
    drop(file);
    let mut command = env.pi_process();
    command.args(["import", "--json"]).arg(&huge);
    let run = run_measured(command, std::time::Duration::from_secs(60), 640 * 1024);
    let stdout = String::from_utf8_lossy(&run.output.stdout);
    let stderr = String::from_utf8_lossy(&run.output.stderr);
    assert_eq!(run.output.status.code(), Some(1), "{stdout}{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["status"], "refused", "{report}");
    let error = report["error"].as_str().unwrap();
    assert!(
        error.contains("line 3") && error.contains("256 MiB"),
        "{error}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        run.peak_kib * 1024 < LIMIT * 2,
        "peak resident set {} MiB",
        run.peak_kib / 1024
    );
    eprintln!(
        "a 1 GiB line: refused after {:?} at a peak resident set of {} MiB",
        run.elapsed,
        run.peak_kib / 1024
    );
    // Nothing of it was stored.
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert_eq!(crate::common::stdout_json(&listed), serde_json::json!([]));
}

// ----- item 11: timestamps and header versions ------------------------------------------------

/// `sessions list --json` and `sessions search --json` give every timestamp as ISO-8601 UTC
/// with milliseconds, or null when the file's is not a time (they passed `"yesterday"` and
/// `"2026-13-45"` through).
#[test]
fn json_outputs_give_iso_timestamps_or_null() {
    let env = TestEnv::new();
    let cases = [
        ("bad-times", "yesterday", "2026-13-45T99:00:00Z"),
        (
            "offset-times",
            "2026-01-01T01:00:00+01:00",
            "2026-01-01T00:00:05Z",
        ),
    ];
    for (id, created, entry) in cases {
        let header = serde_json::json!({
            "type": "session", "version": 3, "id": id, "timestamp": created, "cwd": "/w",
        });
        let message = serde_json::json!({
            "type": "message", "id": "a1", "parentId": null, "timestamp": entry,
            "message": {"role": "user", "content": "findable words", "timestamp": 1},
        });
        let file = env.dir.path().join(format!("{id}.jsonl"));
        write_lines(&file, &[header.to_string(), message.to_string()]);
        succeeded(env.pi().args(["import"]).arg(&file));
    }
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    let listed = crate::common::stdout_json(&listed);
    let by_id = |id: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["session"] == id)
            .unwrap()
            .clone()
    };
    let bad = by_id("bad-times");
    assert_eq!(bad["created"], serde_json::Value::Null, "{bad}");
    assert_eq!(bad["lastActivity"], serde_json::Value::Null, "{bad}");
    let offset = by_id("offset-times");
    assert_eq!(offset["created"], "2026-01-01T00:00:00.000Z", "{offset}");
    assert_eq!(
        offset["lastActivity"], "2026-01-01T00:00:05.000Z",
        "{offset}"
    );
    let hits = succeeded(
        env.pi()
            .args(["sessions", "search", "findable", "--all", "--json"]),
    );
    let hits = crate::common::stdout_json(&hits);
    let mut stamps: Vec<serde_json::Value> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["timestamp"].clone())
        .collect();
    stamps.sort_by_key(|stamp| stamp.to_string());
    assert_eq!(
        stamps,
        [
            serde_json::json!("2026-01-01T00:00:05.000Z"),
            serde_json::Value::Null
        ]
    );
}

/// Header versions 1, 2 and 3 (and no version, and `"3"`, which the reference reads exactly
/// as 3) import; a version above 3 is refused as newer, and a value that is no version (`-1`,
/// `0`, `2.5`, `"three"`, `true`) is refused too — each naming the file and the version, the
/// file left as it is. (They were all accepted silently.)
#[test]
fn header_versions_pi_would_misread_are_refused_naming_file_and_version() {
    let env = TestEnv::new();
    let header = |id: &str, version: Option<serde_json::Value>| {
        let mut header = serde_json::json!({
            "type": "session", "id": id, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w",
        });
        if let Some(version) = version {
            header["version"] = version;
        }
        header.to_string()
    };
    let user = r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#;
    let accepted = [
        ("v1", None),
        ("v1n", Some(serde_json::json!(1))),
        ("v2", Some(serde_json::json!(2))),
        ("v3", Some(serde_json::json!(3))),
        ("v3s", Some(serde_json::json!("3"))),
    ];
    for (id, version) in accepted {
        let file = env.dir.path().join(format!("{id}.jsonl"));
        write_lines(&file, &[header(id, version), user.to_owned()]);
        let output = succeeded(env.pi().args(["import"]).arg(&file));
        assert!(
            String::from_utf8_lossy(&output.stdout).starts_with("imported"),
            "{id}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
    let refused = [
        ("v999", serde_json::json!(999), "999", "newer"),
        ("v4s", serde_json::json!("4"), "\"4\"", "newer"),
        (
            "vminus",
            serde_json::json!(-1),
            "-1",
            "not a session format version",
        ),
        (
            "vzero",
            serde_json::json!(0),
            "0",
            "not a session format version",
        ),
        (
            "vhalf",
            serde_json::json!(2.5),
            "2.5",
            "not a session format version",
        ),
        (
            "vword",
            serde_json::json!("three"),
            "\"three\"",
            "not a session format version",
        ),
        (
            "vbool",
            serde_json::json!(true),
            "true",
            "not a session format version",
        ),
    ];
    for (id, version, shown, why) in refused {
        let file = env.dir.path().join(format!("{id}.jsonl"));
        write_lines(&file, &[header(id, Some(version)), user.to_owned()]);
        let before = std::fs::read(&file).unwrap();
        let output = env.pi().args(["import"]).arg(&file).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{id}: {stdout}");
        assert!(
            stdout.starts_with("refused")
                && stdout.contains(file.to_str().unwrap())
                && stdout.contains(&format!("version {shown}"))
                && stdout.contains(why),
            "{id}: {stdout}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), before);
        let shown_session = env.pi().args(["sessions", "show", id]).output().unwrap();
        assert_eq!(shown_session.status.code(), Some(1), "{id} was stored");
    }
}

// ----- item 2: escapes from files never reach the terminal ------------------------------------

/// What an attacker puts in every text of a session file: a window title (OSC 0), a clipboard
/// write (OSC 52), clear screen, a full reset, C1 CSI and OSC, bold and reset (colour codes pi
/// writes itself), DEL, backspace, a carriage return, a bell and a bidi override.
const ESCAPES: &str = "\u{1b}]0;PWNED\u{7}\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}[2J\u{1b}c\u{9b}31m\u{9d}0;T\u{9c}\u{1b}[1mB\u{1b}[0m\u{7f}\u{8}\r\u{202e}";

/// `text` with the escapes in the middle.
fn evil(text: &str) -> String {
    format!("{text}{ESCAPES}{text}")
}

/// A session whose every string a person sees is full of escapes: its id, cwd and name,
/// entry ids, labels, model and provider names, thinking level, user and assistant text,
/// thinking, tool calls and their results, a `!cmd` and its output, custom types, summaries.
fn crafted_session(id: &str) -> Vec<String> {
    use serde_json::json;
    let usage = json!({"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120,
        "cost": {"input": 0.001, "output": 0.002, "cacheRead": 0, "cacheWrite": 0, "total": 0.003}});
    let user_id = evil("u1");
    let entries = vec![
        json!({"type": "session", "version": 3, "id": id, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": evil("/w")}),
        json!({"type": "model_change", "id": evil("m1"), "parentId": null, "timestamp": "2026-01-01T00:00:00.100Z",
            "provider": evil("prov"), "modelId": evil("model")}),
        json!({"type": "thinking_level_change", "id": "t1", "parentId": evil("m1"), "timestamp": "2026-01-01T00:00:00.200Z",
            "thinkingLevel": evil("high")}),
        json!({"type": "message", "id": user_id, "parentId": "t1", "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": evil("needle question\nsecond line"), "timestamp": 1}}),
        json!({"type": "message", "id": "a1", "parentId": user_id, "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {"role": "assistant", "content": [
                {"type": "thinking", "thinking": evil("needle thinking")},
                {"type": "text", "text": evil("needle answer")},
                {"type": "toolCall", "id": "c1", "name": evil("bash"), "arguments": {"command": evil("ls")}},
            ], "api": "anthropic-messages", "provider": evil("prov"), "model": evil("model"), "usage": usage,
            "stopReason": "toolUse", "timestamp": 2}}),
        json!({"type": "message", "id": "r1", "parentId": "a1", "timestamp": "2026-01-01T00:00:03.000Z",
            "message": {"role": "toolResult", "toolCallId": "c1", "toolName": evil("bash"),
                "content": [{"type": "text", "text": evil("needle output\nline two")}], "isError": false, "timestamp": 3}}),
        json!({"type": "message", "id": "b1", "parentId": "r1", "timestamp": "2026-01-01T00:00:04.000Z",
            "message": {"role": "bashExecution", "command": evil("cat"), "output": evil("needle bash"),
                "exitCode": 0, "cancelled": false, "truncated": false, "timestamp": 4}}),
        json!({"type": "custom", "customType": evil("ext"), "data": {}, "id": "x1", "parentId": "b1",
            "timestamp": "2026-01-01T00:00:05.000Z"}),
        json!({"type": "custom_message", "customType": evil("note"), "content": evil("needle note"), "display": true,
            "id": "x2", "parentId": "x1", "timestamp": "2026-01-01T00:00:06.000Z"}),
        json!({"type": "label", "id": "l1", "parentId": "x2", "timestamp": "2026-01-01T00:00:07.000Z",
            "targetId": user_id, "label": evil("label")}),
        json!({"type": "session_info", "id": "n1", "parentId": "l1", "timestamp": "2026-01-01T00:00:08.000Z",
            "name": evil("name")}),
        json!({"type": "compaction", "id": "k1", "parentId": "n1", "timestamp": "2026-01-01T00:00:09.000Z",
            "summary": evil("needle summary"), "firstKeptEntryId": "a1", "tokensBefore": 10}),
        json!({"type": "branch_summary", "id": "s1", "parentId": "a1", "timestamp": "2026-01-01T00:00:10.000Z",
            "fromId": "a1", "summary": evil("needle branch")}),
        json!({"type": "message", "id": "a2", "parentId": "k1", "timestamp": "2026-01-01T00:00:11.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": evil("last answer")}],
                "api": "anthropic-messages", "provider": evil("prov"), "model": evil("model"), "usage": usage,
                "stopReason": "error", "errorMessage": evil("error"), "timestamp": 11}}),
    ];
    entries.iter().map(|value| value.to_string()).collect()
}

/// Asserts that `bytes` (a command's stdout or stderr) holds no control character but
/// newline and tab, no DEL and no C1 control: nothing a terminal would obey.
fn assert_terminal_safe(bytes: &[u8], what: &str) {
    let text = String::from_utf8_lossy(bytes);
    for (idx, ch) in text.char_indices() {
        let bad = (ch.is_control() && ch != '\n' && ch != '\t')
            || matches!(ch, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        assert!(
            !bad,
            "{what}: {ch:?} at byte {idx}: …{}…",
            text.get(idx.saturating_sub(60)..(idx + 20).min(text.len()))
                .unwrap_or("")
                .escape_debug()
        );
    }
}

/// Every human-readable output of a crafted session — `sessions list`, `show` in every form,
/// `search`, `stats` by every key, the import's reports (imported, refused, skipped) and
/// errors (not found, ambiguous, a conflict) — shows the escapes as text (`\x1b]0;PWNED…`)
/// and lets none through; `--json` keeps the exact strings. (They were printed raw: the
/// terminal's title changed, the screen cleared, the clipboard was written.)
#[test]
fn escapes_in_session_files_never_reach_the_terminal_from_the_cli() {
    let env = TestEnv::new();
    let session = evil("sess");
    let other = evil("sess-two");
    let file = env.dir.path().join("crafted.jsonl");
    write_lines(&file, &crafted_session(&session));
    let second = env.dir.path().join("second.jsonl");
    write_lines(&second, &crafted_session(&other));
    // A refused file: the same id as the first, its message entry changed (a conflict), and
    // a line that is skipped.
    let mut conflicting = crafted_session(&session);
    conflicting[3] = conflicting[3].replace("needle question", "changed question");
    conflicting.push(evil("not json"));
    let refused = env.dir.path().join("conflict.jsonl");
    write_lines(&refused, &conflicting);
    let bad_version = env.dir.path().join("version.jsonl");
    write_lines(
        &bad_version,
        &[
            serde_json::json!({"type": "session", "version": evil("v"), "id": "v", "cwd": "/w"})
                .to_string(),
        ],
    );

    let mut runs: Vec<(Vec<String>, std::process::Output)> = Vec::new();
    let mut run = |args: Vec<String>| {
        let output = env.pi().args(&args).output().unwrap();
        runs.push((args, output));
    };
    let s = |text: &str| text.to_owned();
    run(vec![
        s("import"),
        file.to_str().unwrap().to_owned(),
        second.to_str().unwrap().to_owned(),
    ]);
    run(vec![
        s("import"),
        refused.to_str().unwrap().to_owned(),
        bad_version.to_str().unwrap().to_owned(),
    ]);
    run(vec![s("sessions"), s("list"), s("--all")]);
    run(vec![s("sessions"), s("list"), s("--cwd"), evil("/w")]);
    for form in [
        vec![],
        vec![s("--tree")],
        vec![s("--context")],
        vec![s("--entry"), s("a1")],
    ] {
        let mut args = vec![s("sessions"), s("show"), session.clone()];
        args.extend(form);
        run(args);
    }
    run(vec![s("sessions"), s("show"), s("sess")]);
    run(vec![s("sessions"), s("show"), evil("missing")]);
    run(vec![s("sessions"), s("search"), s("needle"), s("--all")]);
    run(vec![
        s("sessions"),
        s("search"),
        s("needle"),
        s("--cwd"),
        evil("/w"),
    ]);
    for by in ["day", "week", "model", "provider", "cwd", "session"] {
        run(vec![
            s("sessions"),
            s("stats"),
            s("--all"),
            s("--by"),
            s(by),
        ]);
    }
    run(vec![
        s("sessions"),
        s("rename"),
        session.clone(),
        evil("renamed"),
    ]);
    let out = env.dir.path().join("out");
    run(vec![
        s("export"),
        s("--jsonl"),
        s("--all"),
        s("-o"),
        out.to_str().unwrap().to_owned(),
    ]);
    run(vec![
        s("export"),
        s("--jsonl"),
        s("--all"),
        s("-o"),
        out.to_str().unwrap().to_owned(),
    ]);

    for (args, output) in &runs {
        assert_terminal_safe(&output.stdout, &format!("stdout of {args:?}"));
        assert_terminal_safe(&output.stderr, &format!("stderr of {args:?}"));
    }
    let all_output: String = runs
        .iter()
        .map(|(_, output)| {
            format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        })
        .collect();
    assert!(
        all_output.contains("\\x1b]0;PWNED\\x07"),
        "escapes shown visibly"
    );
    assert!(all_output.contains("\\u{9b}31m"), "C1 shown visibly");
    // The refused import and the errors did run.
    assert!(
        runs[1].1.status.code() == Some(1),
        "the conflicting import was refused"
    );
    assert_eq!(runs[8].1.status.code(), Some(2), "an ambiguous prefix");

    // JSON keeps the exact strings.
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    let listed = crate::common::stdout_json(&listed);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["session"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&session.as_str()) && ids.contains(&other.as_str()),
        "{ids:?}"
    );
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["session"] == session.as_str())
        .unwrap();
    assert_eq!(row["cwd"], evil("/w"));
    assert_eq!(row["name"], evil("renamed"));
}

/// Whether `haystack` contains `needle`.
fn contains_bytes(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// The REPL, in a real terminal, resuming the crafted session (its missing cwd asked about,
/// the history, `/tree`, `/session`, the `/resume` picker), then a turn whose streamed answer
/// and tool output (a bash command printing an OSC title) hold escapes, and a `!cmd` doing
/// the same: the escapes are shown as text (dropped from the `!cmd` output), and of every byte pi wrote to the terminal
/// (captured with `pipe-pane`) none is an OSC, a reset, a clear screen, a C1 control, a BEL,
/// a bidi override, or the session's own colour codes; tmux's title stays and no clipboard
/// buffer appears.
#[test]
fn escapes_in_sessions_answers_and_tool_output_never_reach_the_terminal_in_the_repl() {
    use crate::common::agent::models_json;
    use crate::common::provider::{MockResponse, ProviderServer, sse};
    use crate::common::tmux::Tmux;
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            &serde_json::json!({"command": "printf 'tool \\033]0;PWNED\\007 \\033]52;c;cHduZWQ=\\007 out\\n'"})
                .to_string(),
        )),
        MockResponse::sse(sse::openai_text(&evil("streamed answer"))),
    ]);
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    let file = env.dir.path().join("crafted.jsonl");
    write_lines(&file, &crafted_session(&evil("sess")));
    succeeded(env.pi().args(["import"]).arg(&file));

    let raw = env.dir.path().join("raw-terminal-output");
    let tmux = Tmux::start_capturing(&env, "escapes", &["--session", "sess"], &[], &raw);
    let title_before = tmux.format("#{pane_title}");
    tmux.wait_for("Continue in the current directory?");
    tmux.line("y");
    tmux.wait_for("last answer");
    tmux.wait_for_prompt();
    tmux.line("/tree");
    tmux.wait_for("Go to entry");
    tmux.keys(&["Enter"]);
    tmux.wait_for_prompt();
    tmux.line("/session");
    tmux.wait_for("Session Info");
    tmux.wait_for_prompt();
    tmux.line("/resume");
    tmux.wait_for("Resume (number");
    tmux.line("all");
    tmux.wait_for_count("Resume (number", 2);
    tmux.keys(&["Enter"]);
    tmux.wait_for_prompt();
    tmux.line("run the command");
    tmux.wait_for("streamed answer");
    tmux.wait_for_count("mock/mock-model • ctx", 1);
    tmux.wait_for_prompt();
    tmux.line("!printf 'shell \\033]0;PWNED\\007 \\033c\\033[2J done\\n'");
    tmux.wait_for("done");
    tmux.wait_for_prompt();
    let screen = tmux.screen();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    // Shown as text, everywhere.
    for shown in [
        "\\x1b]0;PWNED\\x07",           // the session's texts
        "label\\x1b]0;PWNED",           // a label
        "tool \\x1b]0;PWNED\\x07",      // the tool's output
        "streamed answer\\x1b]0;PWNED", // the streamed answer
        "\\u{9b}31m",                   // C1
    ] {
        assert!(screen.contains(shown), "{shown:?} not shown:\n{screen}");
    }
    // The `!cmd` output (its escape sequences are dropped by the shell runner, as the
    // reference's are).
    assert!(
        screen.contains("shell") && screen.contains("done"),
        "{screen}"
    );
    // Nothing obeyed: every byte pi wrote.
    let bytes = std::fs::read(&raw).unwrap();
    assert!(bytes.len() > 1_000, "{} bytes captured", bytes.len());
    for (needle, what) in [
        (&b"\x1b]"[..], "an OSC (title, clipboard)"),
        (b"\x1bc", "a terminal reset"),
        (b"\x1b[2J", "a clear screen"),
        (b"\x07", "a BEL"),
        (b"\xe2\x80\xae", "a bidi override"),
        (b"\x1b[1mB\x1b[0m", "the session's own colour codes"),
        (b"\x7f", "a DEL"),
    ] {
        assert!(
            !contains_bytes(&bytes, needle),
            "{what} reached the terminal"
        );
    }
    for second in 0x80..=0x9f_u8 {
        assert!(
            !contains_bytes(&bytes, &[0xc2, second]),
            "C1 control U+00{second:02X} reached the terminal"
        );
    }
    assert_eq!(tmux.format("#{pane_title}"), title_before);
    assert!(!tmux.format("#{pane_title}").contains("PWNED"));
    assert_eq!(tmux.buffers(), "", "a clipboard write reached tmux");
}

#[test]
fn long_phrases_are_refused_at_once_and_the_longest_allowed_one_answers_quickly() {
    let env = TestEnv::new();
    // A session whose messages hold the words of the phrases many times over.
    let words: Vec<String> = (0..200).map(|idx| format!("word{}", idx % 50)).collect();
    let text = words.join(" ");
    let file = env.workspace.join("words.jsonl");
    write_lines(&file, &session_lines("phrase-1", "/w", &text));
    succeeded(env.pi().arg("import").arg(&file));
    let phrase = |count: usize| {
        let words: Vec<String> = (0..count).map(|idx| format!("word{}", idx % 50)).collect();
        format!("\"{}\"", words.join(" "))
    };
    // 8,000 words (42 s before): refused in one line, at once.
    let started = std::time::Instant::now();
    let output = env
        .pi()
        .args(["sessions", "search", "--all", "--json", "--"])
        .arg(phrase(8000))
        .output()
        .unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("at most 8192 are allowed"), "{stderr}");
    // A phrase longer than 64 words, under the byte bound: refused for its length.
    let output = env
        .pi()
        .args(["sessions", "search", "--all", "--json", "--"])
        .arg(phrase(100))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("a phrase of 100 words; at most 64"),
        "{stderr}"
    );
    // The longest allowed phrase answers, and finds the session.
    let started = std::time::Instant::now();
    let output = succeeded(
        env.pi()
            .args(["sessions", "search", "--all", "--json", "--"])
            .arg(phrase(64)),
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    let hits: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(hits[0]["session"], "phrase-1");
}
