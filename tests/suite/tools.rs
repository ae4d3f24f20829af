//! The built-in tools against real files and real processes (`spec/tools.md`): one table of
//! cases per tool, run through the same pipeline as the agent loop (`prepare_call`, then
//! `execute`, failures turned into error results). Expected texts were checked against the
//! reference implementation 0.73.1 (`pi-coding-agent` tools run on the same inputs); the
//! declarations (name, description, schema with its key order, `constrainedSampling`), prompt
//! snippets and guidelines against 1.6.0 (`fixtures/resources/golden16/tools.json`, written by
//! `fixtures/resources/oracle16.mjs` through pi-ai's `toToolDeclaration`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pi::agent::tool::{
    Tool, ToolContext, ToolInput, ToolOutput, UpdateSink, prepare_call, tool_not_found_message,
};
use pi::model::message::ContentBlock;
use pi::session::tools::read::ReadConfig;
use pi::session::tools::shell::ShellConfig;
use pi::session::tools::user_shell::{parse_user_shell_input, run_user_shell};
use pi::session::tools::workspace::Workspace;
use pi::session::tools::{
    BUILTIN_TOOL_NAMES, DEFAULT_ACTIVE_TOOL_NAMES, ToolSelection, ToolSet, ToolsConfig,
    builtin_tools,
};
use pi::support::ids::IdSource;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tempfile::TempDir;

/// A temporary workspace with the built-in tools bound to it.
struct Ws {
    _dir: TempDir,
    root: PathBuf,
    temp: PathBuf,
    tools: Vec<Arc<dyn Tool>>,
    shell: ShellConfig,
}

/// The outcome of one call, as the loop would record it.
#[derive(Debug, Clone)]
struct Outcome {
    content: Vec<ContentBlock>,
    details: Option<Value>,
    is_error: bool,
}

impl Outcome {
    fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn shell_config(temp: &Path, home: &Path) -> ShellConfig {
    ShellConfig {
        shell_path: None,
        command_prefix: None,
        env: vec![
            (
                OsString::from("PATH"),
                OsString::from("/usr/local/bin:/usr/bin:/bin"),
            ),
            (OsString::from("HOME"), home.as_os_str().to_owned()),
        ],
        bin_dir: Some(home.join("agent-bin")),
        temp_dir: temp.to_path_buf(),
        ids: Arc::new(IdSource::seeded(5)),
    }
}

impl Ws {
    fn new(files: &[(&str, &[u8])]) -> Self {
        Self::with_read_config(
            files,
            ReadConfig {
                auto_resize_images: true,
            },
        )
    }

    fn with_read_config(files: &[(&str, &[u8])], read: ReadConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let temp = dir.path().join("tmp");
        let home = dir.path().join("home");
        for path in [&root, &temp, &home] {
            std::fs::create_dir_all(path).unwrap();
        }
        for (name, bytes) in files {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        let shell = shell_config(&temp, &home);
        let tools = builtin_tools(&ToolsConfig {
            workspace: Workspace::new(Some(home)),
            read,
            shell: shell.clone(),
        });
        Self {
            _dir: dir,
            root,
            temp,
            tools,
            shell,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).unwrap()
    }

    fn ctx(&self) -> ToolContext {
        ToolContext::new(&self.root)
    }

    fn tool(&self, name: &str) -> Arc<dyn Tool> {
        self.tools
            .iter()
            .find(|tool| tool.definition().name == name)
            .cloned()
            .unwrap()
    }

    async fn call_with(&self, name: &str, args: Value, ctx: ToolContext) -> Outcome {
        let tool = self.tool(name);
        let output = match prepare_call(tool.as_ref(), &args) {
            Err(text) => ToolOutput::error(text),
            Ok(arguments) => {
                let input = ToolInput {
                    id: "call_1".into(),
                    arguments,
                };
                match tool.execute(input, ctx).await {
                    Ok(output) => {
                        return Outcome {
                            content: output.content,
                            details: output.details,
                            is_error: false,
                        };
                    }
                    Err(error) => error.into_output(),
                }
            }
        };
        Outcome {
            content: output.content,
            details: output.details,
            is_error: true,
        }
    }

    async fn call(&self, name: &str, args: Value) -> Outcome {
        self.call_with(name, args, self.ctx()).await
    }
}

/// What a case expects: success or error with this exact text.
enum Expect<'a> {
    Ok(&'a str),
    Err(&'a str),
}

/// Runs every case and compares the text and error flag (error results carry `details: {}`).
async fn check(ws: &Ws, tool: &str, cases: &[(Value, Expect<'_>)]) {
    for (args, expected) in cases {
        let outcome = ws.call(tool, args.clone()).await;
        let (want_error, want_text) = match expected {
            Expect::Ok(text) => (false, *text),
            Expect::Err(text) => (true, *text),
        };
        assert_eq!(
            (outcome.is_error, outcome.text().as_str()),
            (want_error, want_text),
            "{tool} {args}"
        );
        if outcome.is_error {
            assert_eq!(outcome.details, Some(json!({})), "{tool} {args}");
        }
    }
}

fn numbered_lines(count: usize) -> Vec<u8> {
    (1..=count)
        .map(|n| format!("{n}\n"))
        .collect::<String>()
        .into_bytes()
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let image = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 251) as u8, (y % 241) as u8, ((x * y) % 239) as u8])
    });
    let mut bytes = Vec::new();
    image::DynamicImage::ImageRgb8(image)
        .write_to(
            &mut std::io::Cursor::new(&mut bytes),
            image::ImageFormat::Png,
        )
        .unwrap();
    bytes
}

// ---------------------------------------------------------------------------------------------
// Argument validation and the registry

#[tokio::test]
async fn arguments_are_coerced_and_validated_with_the_reference_text() {
    let ws = Ws::new(&[("a.txt", b"hello\nworld\n")]);
    check(
        &ws,
        "read",
        &[
            (json!({"path": "a.txt", "offset": "2"}), Expect::Ok("world\n")),
            (
                json!({}),
                Expect::Err(
                    "Validation failed for tool \"read\":\n  - path: must have required properties path\n\nReceived arguments:\n{}",
                ),
            ),
            (
                json!({"path": "a.txt", "offset": "abc"}),
                Expect::Err(
                    "Validation failed for tool \"read\":\n  - offset: must be number\n\nReceived arguments:\n{\n  \"path\": \"a.txt\",\n  \"offset\": \"abc\"\n}",
                ),
            ),
        ],
    )
    .await;
    check(
        &ws,
        "edit",
        &[
            // 1.6.0's edit schema allows additional properties (the call reaches the file).
            (
                json!({"path": "a", "edits": [{"oldText": "a", "newText": "b", "z": 1}]}),
                Expect::Err("Could not edit file: a. Error code: ENOENT."),
            ),
            (
                json!({"path": "a", "oldText": "x"}),
                Expect::Err(
                    "Validation failed for tool \"edit\":\n  - edits: must have required properties edits\n\nReceived arguments:\n{\n  \"path\": \"a\",\n  \"oldText\": \"x\"\n}",
                ),
            ),
            (
                json!({"path": "a", "edits": "notjson"}),
                Expect::Err(
                    "Validation failed for tool \"edit\":\n  - edits.0: must be object\n\nReceived arguments:\n{\n  \"path\": \"a\",\n  \"edits\": \"notjson\"\n}",
                ),
            ),
            (
                json!({"path": "a.txt", "edits": []}),
                Expect::Err(
                    "Edit tool input is invalid. edits must contain at least one replacement.",
                ),
            ),
        ],
    )
    .await;
    check(
        &ws,
        "grep",
        &[(
            json!({"limit": "x", "ignoreCase": "q"}),
            Expect::Err(
                "Validation failed for tool \"grep\":\n  - pattern: must have required properties pattern\n  - ignoreCase: must be boolean\n  - limit: must be number\n\nReceived arguments:\n{\n  \"limit\": \"x\",\n  \"ignoreCase\": \"q\"\n}",
            ),
        )],
    )
    .await;
}

#[test]
fn declarations_snippets_and_guidelines_match_1_6_0() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/resources/golden16/tools.json");
    let golden: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let ws = Ws::new(&[]);
    let expected = golden["tools"].as_array().unwrap();
    let names: Vec<&str> = ws
        .tools
        .iter()
        .map(|tool| tool.definition().name.as_str())
        .collect();
    assert_eq!(names, BUILTIN_TOOL_NAMES);
    assert_eq!(ws.tools.len(), expected.len());
    for (tool, expected) in ws.tools.iter().zip(expected) {
        let name = &tool.definition().name;
        // Byte for byte, key order included: this is what `toolsAdded` records.
        assert_eq!(
            serde_json::to_string(&tool.declaration()).unwrap(),
            serde_json::to_string(&expected["declaration"]).unwrap(),
            "declaration of {name}"
        );
        assert_eq!(
            json!(tool.definition().prompt_snippet),
            expected["promptSnippet"],
            "snippet of {name}"
        );
        assert_eq!(
            json!(tool.definition().prompt_guidelines),
            expected["promptGuidelines"],
            "guidelines of {name}"
        );
    }
    assert_eq!(
        json!(DEFAULT_ACTIVE_TOOL_NAMES),
        golden["defaultActiveTools"]
    );
    let set = ToolSet::new(ws.tools.clone(), Vec::new(), &ToolSelection::Default);
    let declared: Vec<String> = set
        .active_declarations()
        .into_iter()
        .map(|declaration| declaration.name)
        .collect();
    assert_eq!(declared, DEFAULT_ACTIVE_TOOL_NAMES);
}

/// The built-in tools as `selection` registers and activates them.
fn tool_set(selection: ToolSelection) -> ToolSet {
    let dir = tempfile::tempdir().unwrap();
    let config = ToolsConfig {
        workspace: Workspace::default(),
        read: ReadConfig {
            auto_resize_images: true,
        },
        shell: shell_config(dir.path(), dir.path()),
    };
    ToolSet::new(builtin_tools(&config), Vec::new(), &selection)
}

#[test]
fn activation_follows_the_cli_flags() {
    let cases: Vec<(ToolSelection, Vec<&str>, Vec<&str>)> = vec![
        (
            ToolSelection::from_flags(None, false, false),
            vec!["read", "bash", "edit", "write", "grep", "find", "ls"],
            vec!["read", "bash", "edit", "write"],
        ),
        (
            ToolSelection::from_flags(Some(" ls , read,,nope "), false, false),
            vec!["read", "ls"],
            vec!["ls", "read"],
        ),
        (
            ToolSelection::from_flags(Some(""), false, false),
            vec![],
            vec![],
        ),
        (ToolSelection::from_flags(None, true, true), vec![], vec![]),
        (
            ToolSelection::from_flags(None, false, true),
            vec!["read", "bash", "edit", "write", "grep", "find", "ls"],
            vec![],
        ),
        (
            ToolSelection::from_flags(Some("grep"), true, false),
            vec!["grep"],
            vec!["grep"],
        ),
        // 1.6.0: patterns in an allowlist; only modifiers change the defaults (everything
        // stays registered); with --no-tools the modified (empty) defaults are the allowlist.
        (
            ToolSelection::from_flags(Some("read,*i*"), false, false),
            vec!["read", "edit", "write", "find"],
            vec!["read", "edit", "write", "find"],
        ),
        (
            ToolSelection::from_flags(Some("+ls,-write,+read,-nope"), false, false),
            vec!["read", "bash", "edit", "write", "grep", "find", "ls"],
            vec!["read", "bash", "edit", "ls"],
        ),
        (
            ToolSelection::from_flags(Some("+grep"), true, false),
            vec!["grep"],
            vec!["grep"],
        ),
        (
            ToolSelection::from_flags(Some("+grep"), false, true),
            vec!["read", "bash", "edit", "write", "grep", "find", "ls"],
            vec!["grep"],
        ),
    ];
    for (selection, registry, active) in cases {
        let tools = tool_set(selection.clone());
        assert_eq!(tools.registry_names(), registry, "{selection:?}");
        assert_eq!(tools.active_names(), active, "{selection:?}");
    }
}

#[test]
fn set_active_keeps_known_allowed_tools_once_each() {
    let mut tools = tool_set(ToolSelection::Default);
    assert!(tools.find_active("grep").is_none());
    assert_eq!(tool_not_found_message("grep"), "Tool grep not found");
    tools.set_active(&["grep", "unknown", "grep", "ls"]);
    assert_eq!(tools.active_names(), ["grep", "ls"]);
    assert!(tools.find_active("grep").is_some());
    let mut limited = tool_set(ToolSelection::Allowlist(vec!["read".to_owned()]));
    limited.set_active(&["read", "bash"]);
    assert_eq!(limited.active_names(), ["read"]);
    assert!(!limited.is_allowed("bash"));
}

/// --exclude-tools: names and patterns never registered, active or allowed later.
#[test]
fn excluded_tools_are_never_registered_activated_or_allowed() {
    let mut excluded =
        tool_set(ToolSelection::Default).excluding(&["b*".to_owned(), "ls".to_owned()]);
    assert_eq!(
        excluded.registry_names(),
        ["read", "edit", "write", "grep", "find"]
    );
    assert_eq!(excluded.active_names(), ["read", "edit", "write"]);
    excluded.set_active(&["bash", "grep"]);
    assert_eq!(excluded.active_names(), ["grep"]);
    assert!(!excluded.is_allowed("bash") && !excluded.is_allowed("ls"));
}

#[test]
fn only_modifier_flags_restore_the_transcripts_tools() {
    assert!(
        ToolSelection::from_flags(Some("+ls"), false, false).restores_transcript_tools()
            && !ToolSelection::from_flags(Some("ls"), false, false).restores_transcript_tools()
            && !ToolSelection::from_flags(None, false, true).restores_transcript_tools()
    );
}

// ---------------------------------------------------------------------------------------------
// read

#[tokio::test]
async fn read_text_offsets_limits_and_errors() {
    let big = numbered_lines(2500);
    let wide: Vec<u8> = (0..1000)
        .flat_map(|_| {
            let mut line = vec![b'x'; 99];
            line.push(b'\n');
            line
        })
        .collect();
    let mut huge = vec![b'y'; 60000];
    huge.push(b'\n');
    let ws = Ws::new(&[
        ("a.txt", b"hello\nworld\n"),
        ("crlf.txt", b"a\r\nb\r\nc\n"),
        ("bom.txt", b"\xef\xbb\xbfbom\r\nline2\r\n"),
        ("bin.dat", b"bin\x00needle\n"),
        ("bad.txt", b"a\xffb\n"),
        ("big.txt", &big),
        ("wide.txt", &wide),
        ("hugeline.txt", &huge),
        ("sub/x.txt", b"x"),
    ]);
    let missing = format!(
        "ENOENT: no such file or directory, access '{}'",
        ws.path("missing.txt").display()
    );
    let big_head: String = (1..=2000).map(|n| format!("{n}\n")).collect();
    let big_expected = format!(
        "{}\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]",
        big_head.trim_end_matches('\n')
    );
    let wide_head = vec!["x".repeat(99); 512].join("\n");
    let wide_expected = format!(
        "{wide_head}\n\n[Showing lines 1-512 of 1001 (50.0KB limit). Use offset=513 to continue.]"
    );
    let window: String = (2400..=2449).map(|n| format!("{n}\n")).collect();
    let window_expected = format!(
        "{}\n\n[52 more lines in file. Use offset=2450 to continue.]",
        window.trim_end_matches('\n')
    );
    check(
        &ws,
        "read",
        &[
            (json!({"path": "a.txt"}), Expect::Ok("hello\nworld\n")),
            (json!({"path": "@a.txt"}), Expect::Ok("hello\nworld\n")),
            (json!({"path": "crlf.txt"}), Expect::Ok("a\r\nb\r\nc\n")),
            (json!({"path": "bom.txt"}), Expect::Ok("\u{feff}bom\r\nline2\r\n")),
            // Binary content passes through untouched (no binary detection).
            (json!({"path": "bin.dat"}), Expect::Ok("bin\u{0}needle\n")),
            (json!({"path": "bad.txt"}), Expect::Ok("a\u{fffd}b\n")),
            (json!({"path": "a.txt", "offset": 3}), Expect::Ok("")),
            (json!({"path": "a.txt", "offset": -3}), Expect::Ok("hello\nworld\n")),
            (
                json!({"path": "a.txt", "offset": 5}),
                Expect::Err("Offset 5 is beyond end of file (3 lines total)"),
            ),
            (
                json!({"path": "a.txt", "limit": 1}),
                Expect::Ok("hello\n\n[2 more lines in file. Use offset=2 to continue.]"),
            ),
            (
                json!({"path": "a.txt", "offset": 0, "limit": -1}),
                Expect::Ok("hello\nworld\n\n[4 more lines in file. Use offset=0 to continue.]"),
            ),
            (
                json!({"path": "big.txt", "limit": 0}),
                Expect::Ok("\n\n[2501 more lines in file. Use offset=1 to continue.]"),
            ),
            (json!({"path": "big.txt"}), Expect::Ok(&big_expected)),
            (json!({"path": "wide.txt"}), Expect::Ok(&wide_expected)),
            (
                json!({"path": "big.txt", "offset": 2400, "limit": 50}),
                Expect::Ok(&window_expected),
            ),
            (
                json!({"path": "hugeline.txt"}),
                Expect::Ok(
                    "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' hugeline.txt | head -c 51200]",
                ),
            ),
            (json!({"path": "missing.txt"}), Expect::Err(&missing)),
            (
                json!({"path": "sub"}),
                Expect::Err("EISDIR: illegal operation on a directory, read"),
            ),
        ],
    )
    .await;
    let outcome = ws.call("read", json!({"path": "big.txt"})).await;
    let truncation = &outcome.details.unwrap()["truncation"];
    assert_eq!(truncation["truncatedBy"], "lines");
    assert_eq!(truncation["totalLines"], 2501);
    assert_eq!(truncation["outputLines"], 2000);
    assert_eq!(truncation["maxBytes"], 51200);
    let outcome = ws.call("read", json!({"path": "a.txt", "limit": 1})).await;
    assert_eq!(outcome.details, None);
}

#[tokio::test]
async fn read_images_are_sniffed_resized_and_noted() {
    let small = png(10, 5);
    let wide = png(3000, 1000);
    let ws = Ws::new(&[
        ("small.png", &small),
        ("png_as.txt", &small),
        ("wide.png", &wide),
        ("fake.txt", b"GIF89a not really an image\n"),
    ]);
    let outcome = ws.call("read", json!({"path": "small.png"})).await;
    assert_eq!(outcome.text(), "Read image file [image/png]");
    assert_eq!(outcome.details, None);
    let ContentBlock::Image(image) = &outcome.content[1] else {
        panic!("no image block: {outcome:?}")
    };
    assert_eq!(image.mime_type, "image/png");
    use base64::Engine as _;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&image.data)
            .unwrap(),
        small
    );
    // Content decides, not the extension.
    let outcome = ws.call("read", json!({"path": "png_as.txt"})).await;
    assert_eq!(outcome.text(), "Read image file [image/png]");
    assert_eq!(outcome.content.len(), 2);
    let outcome = ws.call("read", json!({"path": "wide.png"})).await;
    assert_eq!(
        outcome.text(),
        "Read image file [image/png]\n[Image: original 3000x1000, displayed at 2000x667. Multiply coordinates by 1.50 to map to original image.]"
    );
    let ContentBlock::Image(image) = &outcome.content[1] else {
        panic!("no image block")
    };
    let decoded = image::load_from_memory(
        &base64::engine::general_purpose::STANDARD
            .decode(&image.data)
            .unwrap(),
    )
    .unwrap();
    assert_eq!((decoded.width(), decoded.height()), (2000, 667));
    let outcome = ws.call("read", json!({"path": "fake.txt"})).await;
    assert_eq!(
        outcome.text(),
        "Read image file [image/gif]\n[Image omitted: could not be resized below the inline image size limit.]"
    );
    assert_eq!(outcome.content.len(), 1);
    let mut ctx = ws.ctx();
    ctx.model_accepts_images = Some(false);
    let outcome = ws
        .call_with("read", json!({"path": "small.png"}), ctx)
        .await;
    assert_eq!(
        outcome.text(),
        "Read image file [image/png]\n[Current model does not support images. The image will be omitted from this request.]"
    );
    assert_eq!(outcome.content.len(), 2);

    let ws = Ws::with_read_config(
        &[("wide.png", &wide)],
        ReadConfig {
            auto_resize_images: false,
        },
    );
    let outcome = ws.call("read", json!({"path": "wide.png"})).await;
    assert_eq!(outcome.text(), "Read image file [image/png]");
    let ContentBlock::Image(image) = &outcome.content[1] else {
        panic!("no image block")
    };
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&image.data)
            .unwrap(),
        wide
    );
}

// ---------------------------------------------------------------------------------------------
// write

#[tokio::test]
async fn write_creates_parents_and_counts_utf16_units() {
    let ws = Ws::new(&[("f.txt", b"x"), ("d/keep", b"")]);
    check(
        &ws,
        "write",
        &[
            (
                json!({"path": "new/deep/file.txt", "content": "héllo 😀\n"}),
                Expect::Ok("Successfully wrote 9 bytes to new/deep/file.txt"),
            ),
            (
                json!({"path": "@w.txt", "content": ""}),
                Expect::Ok("Successfully wrote 0 bytes to @w.txt"),
            ),
            (
                json!({"path": "f.txt", "content": "a\r\nb"}),
                Expect::Ok("Successfully wrote 4 bytes to f.txt"),
            ),
        ],
    )
    .await;
    assert_eq!(ws.read("new/deep/file.txt"), "héllo 😀\n".as_bytes());
    assert_eq!(ws.read("w.txt"), b"");
    assert_eq!(ws.read("f.txt"), b"a\r\nb");
    let dir_error = format!(
        "EISDIR: illegal operation on a directory, open '{}'",
        ws.path("d").display()
    );
    let parent_error = format!(
        "EEXIST: file already exists, mkdir '{}'",
        ws.path("f.txt").display()
    );
    check(
        &ws,
        "write",
        &[
            (
                json!({"path": "d", "content": "x"}),
                Expect::Err(&dir_error),
            ),
            (
                json!({"path": "f.txt/x", "content": "x"}),
                Expect::Err(&parent_error),
            ),
        ],
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// edit

#[tokio::test]
async fn edit_replaces_matches_and_reports_a_numbered_diff() {
    let ws = Ws::new(&[
        ("thirty.txt", &numbered_lines(30)),
        ("bomcrlf.txt", b"\xef\xbb\xbfa\r\nb\r\nc\r\n"),
        ("fuzzy.txt", "say “hi”   \nkeep ‘x’  \n".as_bytes()),
        ("nonl.txt", b"a\nb"),
        ("mixed.txt", b"x\r\ny\nz\rw\n"),
        ("legacy.txt", b"old\n"),
        ("str.txt", b"x"),
    ]);
    let outcome = ws
        .call(
            "edit",
            json!({"path": "thirty.txt", "edits": [
                {"oldText": "10\n", "newText": "ten\n"},
                {"oldText": "25\n", "newText": "25a\n25b\n"}
            ]}),
        )
        .await;
    assert_eq!(
        outcome.text(),
        "Successfully replaced 2 block(s) in thirty.txt."
    );
    assert_eq!(
        outcome.details,
        Some(json!({
            "diff": "    ...\n  6 6\n  7 7\n  8 8\n  9 9\n-10 10\n+10 ten\n 11 11\n 12 12\n 13 13\n 14 14\n    ...\n 21 21\n 22 22\n 23 23\n 24 24\n-25 25\n+25 25a\n+26 25b\n 26 26\n 27 27\n 28 28\n 29 29\n    ...",
            "firstChangedLine": 10
        }))
    );
    // BOM and CRLF survive; the legacy single-edit form is folded into edits[].
    let outcome = ws
        .call(
            "edit",
            json!({"path": "bomcrlf.txt", "oldText": "b\n", "newText": "B\nB2\n"}),
        )
        .await;
    assert_eq!(
        outcome.text(),
        "Successfully replaced 1 block(s) in bomcrlf.txt."
    );
    assert_eq!(ws.read("bomcrlf.txt"), b"\xef\xbb\xbfa\r\nB\r\nB2\r\nc\r\n");
    // Fuzzy matching rewrites the whole file in its normalised form.
    let outcome = ws
        .call(
            "edit",
            json!({"path": "fuzzy.txt", "edits": [{"oldText": "say \"hi\"", "newText": "said \"hi\""}]}),
        )
        .await;
    assert!(!outcome.is_error, "{outcome:?}");
    assert_eq!(ws.read("fuzzy.txt"), b"said \"hi\"\nkeep 'x'\n");
    let outcome = ws
        .call(
            "edit",
            json!({"path": "nonl.txt", "edits": [{"oldText": "b", "newText": "b\nc"}]}),
        )
        .await;
    assert_eq!(outcome.details.unwrap()["diff"], " 1 a\n-2 b\n+2 b\n+3 c");
    // Mixed endings become uniform (the first newline decides).
    ws.call(
        "edit",
        json!({"path": "mixed.txt", "edits": [{"oldText": "z", "newText": "Z"}]}),
    )
    .await;
    assert_eq!(ws.read("mixed.txt"), b"x\r\ny\r\nZ\r\nw\r\n");
    // A stringified edits array is accepted.
    let outcome = ws
        .call(
            "edit",
            json!({"path": "str.txt", "edits": "[{\"oldText\":\"x\",\"newText\":\"y\"}]"}),
        )
        .await;
    assert!(!outcome.is_error, "{outcome:?}");
    assert_eq!(ws.read("str.txt"), b"y");
}

#[tokio::test]
async fn edit_failures_leave_the_file_untouched() {
    let ws = Ws::new(&[
        ("dup.txt", b"a\nb\na\n"),
        ("pair.txt", b"x\ny\n"),
        ("d/keep", b""),
    ]);
    check(
        &ws,
        "edit",
        &[
            (
                json!({"path": "dup.txt", "edits": [{"oldText": "a", "newText": "x"}]}),
                Expect::Err("Found 2 occurrences of the text in dup.txt. The text must be unique. Please provide more context to make it unique."),
            ),
            (
                json!({"path": "dup.txt", "edits": [{"oldText": "b", "newText": "y"}, {"oldText": "a\n", "newText": "x"}]}),
                Expect::Err("Found 2 occurrences of edits[1] in dup.txt. Each oldText must be unique. Please provide more context to make it unique."),
            ),
            (
                json!({"path": "dup.txt", "edits": [{"oldText": "zz", "newText": "x"}]}),
                Expect::Err("Could not find the exact text in dup.txt. The old text must match exactly including all whitespace and newlines."),
            ),
            (
                json!({"path": "dup.txt", "edits": [{"oldText": "b", "newText": "y"}, {"oldText": "zz", "newText": "x"}]}),
                Expect::Err("Could not find edits[1] in dup.txt. The oldText must match exactly including all whitespace and newlines."),
            ),
            (
                json!({"path": "dup.txt", "edits": [{"oldText": "", "newText": "x"}]}),
                Expect::Err("oldText must not be empty in dup.txt."),
            ),
            (
                json!({"path": "dup.txt", "edits": [{"oldText": "b", "newText": "b"}]}),
                Expect::Err("No changes made to dup.txt. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."),
            ),
            (
                json!({"path": "pair.txt", "edits": [{"oldText": "x", "newText": "x"}, {"oldText": "y", "newText": "y"}]}),
                Expect::Err("No changes made to pair.txt. The replacements produced identical content."),
            ),
            (
                json!({"path": "dup.txt", "edits": [{"oldText": "a\nb", "newText": "q"}, {"oldText": "b\na", "newText": "x"}]}),
                Expect::Err("edits[0] and edits[1] overlap in dup.txt. Merge them into one edit or target disjoint regions."),
            ),
            (
                json!({"path": "missing.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
                Expect::Err("Could not edit file: missing.txt. Error code: ENOENT."),
            ),
            (
                json!({"path": "d", "edits": [{"oldText": "a", "newText": "b"}]}),
                Expect::Err("EISDIR: illegal operation on a directory, read"),
            ),
        ],
    )
    .await;
    assert_eq!(ws.read("dup.txt"), b"a\nb\na\n");
}

#[tokio::test]
async fn parallel_edits_of_one_file_are_serialised() {
    let content: String = (0..40).map(|n| format!("line {n}\n")).collect();
    let ws = Arc::new(Ws::new(&[("shared.txt", content.as_bytes())]));
    let mut handles = Vec::new();
    for n in 0..40 {
        let ws = ws.clone();
        handles.push(tokio::spawn(async move {
            ws.call(
                "edit",
                json!({"path": "shared.txt", "edits": [{"oldText": format!("line {n}\n"), "newText": format!("edited {n}\n")}]}),
            )
            .await
        }));
    }
    for handle in handles {
        let outcome = handle.await.unwrap();
        assert!(!outcome.is_error, "{outcome:?}");
    }
    let expected: String = (0..40).map(|n| format!("edited {n}\n")).collect();
    assert_eq!(String::from_utf8(ws.read("shared.txt")).unwrap(), expected);
}

#[tokio::test]
async fn mutations_after_an_abort_write_nothing() {
    let ws = Ws::new(&[("a.txt", b"a\n")]);
    let ctx = ws.ctx();
    ctx.cancel.cancel();
    let outcome = ws
        .call_with(
            "write",
            json!({"path": "a.txt", "content": "changed"}),
            ctx.clone(),
        )
        .await;
    assert_eq!(
        (outcome.is_error, outcome.text().as_str()),
        (true, "Operation aborted")
    );
    let outcome = ws
        .call_with(
            "edit",
            json!({"path": "a.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
            ctx.clone(),
        )
        .await;
    assert_eq!(outcome.text(), "Operation aborted");
    for tool in ["read", "ls", "grep", "find"] {
        let outcome = ws
            .call_with(tool, json!({"path": "a.txt", "pattern": "a"}), ctx.clone())
            .await;
        assert_eq!(outcome.text(), "Operation aborted", "{tool}");
    }
    assert_eq!(ws.read("a.txt"), b"a\n");
}

// ---------------------------------------------------------------------------------------------
// ls

#[tokio::test]
async fn ls_sorts_like_locale_compare_and_marks_directories() {
    let ws = Ws::new(&[
        ("_under", b""),
        (".dot", b""),
        (".gitignore", b"*.log\n"),
        (".hidden/h.txt", b""),
        ("a.txt", b""),
        ("Zeta.txt", b""),
        ("sub/deep/x.txt", b""),
        ("10.txt", b""),
        ("9.txt", b""),
        ("empty/.keep", b""),
    ]);
    std::os::unix::fs::symlink("nowhere", ws.path("broken")).unwrap();
    std::fs::remove_file(ws.path("empty/.keep")).unwrap();
    let not_dir = format!("Not a directory: {}", ws.path("a.txt").display());
    let missing = format!("Path not found: {}", ws.path("nope").display());
    check(
        &ws,
        "ls",
        &[
            (
                json!({}),
                Expect::Ok("_under\n.dot\n.gitignore\n.hidden/\n10.txt\n9.txt\na.txt\nempty/\nsub/\nZeta.txt"),
            ),
            (json!({"path": "sub"}), Expect::Ok("deep/")),
            (json!({"path": "empty"}), Expect::Ok("(empty directory)")),
            (json!({"limit": 0}), Expect::Ok("(empty directory)")),
            (
                json!({"limit": 3}),
                Expect::Ok("_under\n.dot\n.gitignore\n\n[3 entries limit reached. Use limit=6 for more]"),
            ),
            // The limit is reported only when another entry exists.
            (json!({"path": "sub/deep", "limit": 1}), Expect::Ok("x.txt")),
            (json!({"path": "a.txt"}), Expect::Err(&not_dir)),
            (json!({"path": "nope"}), Expect::Err(&missing)),
        ],
    )
    .await;
    let outcome = ws.call("ls", json!({"limit": 3})).await;
    assert_eq!(outcome.details, Some(json!({"entryLimitReached": 3})));
}

// ---------------------------------------------------------------------------------------------
// grep

fn git_repo(ws: &Ws) {
    std::fs::create_dir_all(ws.path(".git/info")).unwrap();
    std::fs::write(ws.path(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
}

#[tokio::test]
async fn grep_formats_matches_context_and_limits() {
    let long = format!("needle{}\n", "x".repeat(600));
    let ws = Ws::new(&[
        (
            "sub/deep/x.txt",
            b"one\nneedle two\nthree\nfour\nneedle five\n",
        ),
        ("sub/long.txt", long.as_bytes()),
        (".hidden/h.txt", b"h needle\n"),
        ("crlf.txt", b"needle a\r\nb\r\n"),
        ("bin.dat", b"bin\x00needle\n"),
        ("ign.log", b"ignored needle\n"),
        (".gitignore", b"*.log\n"),
    ]);
    git_repo(&ws);
    let cut = format!("sub/long.txt:1: needle{}... [truncated]", "x".repeat(494));
    let all = format!(
        ".hidden/h.txt:1: h needle\ncrlf.txt:1: needle a\nsub/deep/x.txt:2: needle two\nsub/deep/x.txt:5: needle five\n{cut}\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]"
    );
    let not_found = format!("Path not found: {}", ws.path("nope").display());
    check(
        &ws,
        "grep",
        &[
            (json!({"pattern": "needle"}), Expect::Ok(&all)),
            (
                json!({"pattern": "needle", "path": "sub", "context": 1, "glob": "x.txt"}),
                Expect::Ok("deep/x.txt-1- one\ndeep/x.txt:2: needle two\ndeep/x.txt-3- three\ndeep/x.txt-4- four\ndeep/x.txt:5: needle five\ndeep/x.txt-6- "),
            ),
            (
                json!({"pattern": "needle", "path": "sub/deep/x.txt"}),
                Expect::Ok("x.txt:2: needle two\nx.txt:5: needle five"),
            ),
            (
                json!({"pattern": "needle", "path": "sub/deep", "limit": 2}),
                Expect::Ok("x.txt:2: needle two\nx.txt:5: needle five\n\n[2 matches limit reached. Use limit=4 for more, or refine pattern]"),
            ),
            (
                json!({"pattern": "NEEDLE T", "ignoreCase": true, "path": "sub"}),
                Expect::Ok("deep/x.txt:2: needle two"),
            ),
            (json!({"pattern": "NEEDLE", "path": "sub"}), Expect::Ok("No matches found")),
            (
                json!({"pattern": "n..dle f", "literal": true}),
                Expect::Ok("No matches found"),
            ),
            (
                json!({"pattern": "needle", "glob": "!*.txt"}),
                Expect::Ok("No matches found"),
            ),
            (
                json!({"pattern": "("}),
                Expect::Err("regex parse error:\n    (\n    ^\nerror: unclosed group"),
            ),
            (
                json!({"pattern": "a\\nb"}),
                Expect::Err("the literal '\"\\n\"' is not allowed in a regex\n\nConsider enabling multiline mode with the --multiline flag (or -U for short).\nWhen multiline mode is enabled, new line characters can be matched."),
            ),
            // A pattern that looks like a flag is still a pattern.
            (json!({"pattern": "-e", "path": "sub"}), Expect::Ok("No matches found")),
            (json!({"pattern": "refs/heads"}), Expect::Ok(".git/HEAD:1: ref: refs/heads/main")),
            (json!({"pattern": "x", "path": "nope"}), Expect::Err(&not_found)),
        ],
    )
    .await;
    let outcome = ws
        .call(
            "grep",
            json!({"pattern": "needle", "path": "sub/deep", "limit": 2}),
        )
        .await;
    assert_eq!(outcome.details, Some(json!({"matchLimitReached": 2})));
    let outcome = ws.call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(outcome.details, Some(json!({"linesTruncated": true})));
}

#[tokio::test]
async fn grep_applies_gitignore_only_inside_a_repository() {
    let files: &[(&str, &[u8])] = &[
        ("a.txt", b"needle\n"),
        ("ign.log", b"needle\n"),
        (".gitignore", b"*.log\n"),
        ("sub/.ignore", b"skip.txt\n"),
        ("sub/skip.txt", b"needle\n"),
    ];
    let ws = Ws::new(files);
    check(
        &ws,
        "grep",
        &[(
            json!({"pattern": "needle"}),
            Expect::Ok("a.txt:1: needle\nign.log:1: needle"),
        )],
    )
    .await;
    let ws = Ws::new(files);
    git_repo(&ws);
    check(
        &ws,
        "grep",
        &[(json!({"pattern": "needle"}), Expect::Ok("a.txt:1: needle"))],
    )
    .await;
}

#[tokio::test]
async fn grep_output_is_cut_at_50kb() {
    let line = format!("needle {}\n", "z".repeat(200));
    let content = line.repeat(400);
    let ws = Ws::new(&[("many.txt", content.as_bytes())]);
    let outcome = ws
        .call("grep", json!({"pattern": "needle", "limit": 1000}))
        .await;
    let text = outcome.text();
    assert!(
        text.ends_with("\n\n[50.0KB limit reached]"),
        "{}",
        &text[text.len() - 80..]
    );
    let details = outcome.details.unwrap();
    assert_eq!(details["truncation"]["maxLines"], 9_007_199_254_740_991u64);
    assert_eq!(details["truncation"]["truncatedBy"], "bytes");
    assert!(details["truncation"]["outputBytes"].as_u64().unwrap() <= 51200);
}

// ---------------------------------------------------------------------------------------------
// find

#[tokio::test]
async fn find_matches_globs_like_fd() {
    let ws = Ws::new(&[
        ("a.txt", b""),
        ("UPPER.TXT", b""),
        (".hidden/h.txt", b""),
        ("sub/deep/x.txt", b""),
        ("sub/longline.txt", b""),
        ("ign.log", b""),
        ("sub/.gitignore", b"skipped.txt\n"),
        ("sub/skipped.txt", b""),
        ("skipped.txt", b""),
        (".gitignore", b"*.log\n"),
    ]);
    let not_dir = format!(
        "[fd error]: Search path '{}' is not a directory.\n[fd error]: No valid search paths given.",
        ws.path("a.txt").display()
    );
    check(
        &ws,
        "find",
        &[
            // Smart case, hidden entries, hierarchical .gitignore without a repository.
            (
                json!({"pattern": "*.txt"}),
                Expect::Ok(".hidden/h.txt\nUPPER.TXT\na.txt\nskipped.txt\nsub/deep/x.txt\nsub/longline.txt"),
            ),
            (json!({"pattern": "*.TXT"}), Expect::Ok("UPPER.TXT")),
            (
                json!({"pattern": "sub/**/*.txt"}),
                Expect::Ok("sub/deep/x.txt\nsub/longline.txt"),
            ),
            (json!({"pattern": "deep"}), Expect::Ok("sub/deep/")),
            (
                json!({"pattern": "*", "path": "sub"}),
                Expect::Ok(".gitignore\ndeep/\ndeep/x.txt\nlongline.txt"),
            ),
            (
                json!({"pattern": "*.txt", "limit": 2}),
                Expect::Ok(".hidden/h.txt\nUPPER.TXT\n\n[2 results limit reached. Use limit=4 for more, or refine pattern]"),
            ),
            (json!({"pattern": "*.rs"}), Expect::Ok("No files found matching pattern")),
            (json!({"pattern": "*", "path": "a.txt"}), Expect::Err(&not_dir)),
        ],
    )
    .await;
    let outcome = ws
        .call("find", json!({"pattern": "*.txt", "limit": 2}))
        .await;
    assert_eq!(outcome.details, Some(json!({"resultLimitReached": 2})));
}

// ---------------------------------------------------------------------------------------------
// bash

#[tokio::test]
async fn bash_results_and_errors() {
    let ws = Ws::new(&[]);
    check(
        &ws,
        "bash",
        &[
            (
                json!({"command": "printf 'out\\n'; printf 'err\\n' >&2; exit 3"}),
                Expect::Err("out\nerr\n\n\nCommand exited with code 3"),
            ),
            (json!({"command": "true"}), Expect::Ok("(no output)")),
            (
                json!({"command": "exit 3"}),
                Expect::Err("(no output)\n\nCommand exited with code 3"),
            ),
            (
                json!({"command": "printf '\\033[31mred\\033[0m\\r\\n'"}),
                Expect::Ok("\u{1b}[31mred\u{1b}[0m\r\n"),
            ),
            (
                json!({"command": "printf 'a\\377b'"}),
                Expect::Ok("a\u{fffd}b"),
            ),
            (
                json!({"command": "pwd"}),
                Expect::Ok(&format!("{}\n", ws.root.display())),
            ),
            (
                json!({"command": "echo $PATH | cut -d: -f1"}),
                Expect::Ok(&format!(
                    "{}\n",
                    ws.shell.bin_dir.as_ref().unwrap().display()
                )),
            ),
            // A signal we did not send is not an error.
            (json!({"command": "kill -9 $$"}), Expect::Ok("(no output)")),
        ],
    )
    .await;
}

#[tokio::test]
async fn bash_truncation_keeps_the_tail_and_saves_the_raw_output() {
    let ws = Ws::new(&[]);
    let outcome = ws.call("bash", json!({"command": "seq 1 3000"})).await;
    let details = outcome.details.clone().unwrap();
    let path = PathBuf::from(details["fullOutputPath"].as_str().unwrap());
    assert!(path.starts_with(&ws.temp));
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("pi-bash-") && name.ends_with(".log") && name.len() == 8 + 16 + 4);
    let tail: String = (1002..=3000).map(|n| format!("{n}\n")).collect();
    assert_eq!(
        outcome.text(),
        format!(
            "{tail}\n\n[Showing lines 1002-3001 of 3001. Full output: {}]",
            path.display()
        )
    );
    let full: String = (1..=3000).map(|n| format!("{n}\n")).collect();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), full);
    assert_eq!(details["truncation"]["truncatedBy"], "lines");
    assert_eq!(details["truncation"]["totalLines"], 3001);

    let outcome = ws
        .call(
            "bash",
            json!({"command": "head -c 70000 /dev/zero | tr '\\0' x"}),
        )
        .await;
    let path = outcome.details.as_ref().unwrap()["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        outcome.text(),
        format!(
            "{}\n\n[Showing last 50.0KB of line 1 (line is 68.4KB). Full output: {path}]",
            "x".repeat(51200)
        )
    );
    assert_eq!(std::fs::read(&path).unwrap().len(), 70000);

    let outcome = ws
        .call(
            "bash",
            json!({"command": "for i in $(seq 1 700); do printf '%0100d\\n' $i; done"}),
        )
        .await;
    assert!(
        outcome
            .text()
            .contains("\n\n[Showing lines 195-701 of 701 (50.0KB limit). Full output: "),
        "{}",
        &outcome.text()[outcome.text().len() - 120..]
    );
}

#[tokio::test]
async fn bash_timeout_kills_the_command_and_keeps_prior_output() {
    let ws = Ws::new(&[]);
    let started = Instant::now();
    check(
        &ws,
        "bash",
        &[
            (
                json!({"command": "echo before; sleep 30", "timeout": 1}),
                Expect::Err("before\n\n\nCommand timed out after 1 seconds"),
            ),
            (
                json!({"command": "sleep 30", "timeout": "0.5"}),
                Expect::Err("Command timed out after 0.5 seconds"),
            ),
            (
                json!({"command": "exit 0", "timeout": -1}),
                Expect::Ok("(no output)"),
            ),
        ],
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(20));
}

fn pid_alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

#[tokio::test]
async fn bash_abort_kills_the_whole_process_tree() {
    let ws = Ws::new(&[]);
    let mut ctx = ws.ctx();
    let cancel = ctx.cancel.clone();
    // Abort as soon as the command has printed, so the output so far is known.
    let sink: UpdateSink = {
        let cancel = cancel.clone();
        Arc::new(move |partial: ToolOutput| {
            if partial.joined_text().contains("started") {
                cancel.cancel();
            }
        })
    };
    ctx.on_update = Some(sink);
    let pid_file = ws.path("child.pid");
    let command = format!(
        "sleep 60 & echo $! > '{}'; echo started; wait",
        pid_file.display()
    );
    let tool = ws.tool("bash");
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        tool.execute(
            ToolInput {
                id: "c".into(),
                arguments: json!({"command": command}),
            },
            ctx,
        ),
    )
    .await
    .expect("abort finishes the call");
    assert_eq!(
        result.unwrap_err().message(),
        "started\n\n\nCommand aborted"
    );
    let child: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_alive(child) {
        // A killed child may linger as a zombie until its reaper notices; /proc shows it.
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        if stat.split_whitespace().nth(2) == Some("Z") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "background child survived the abort"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn bash_background_process_does_not_hold_the_result() {
    let ws = Ws::new(&[]);
    let started = Instant::now();
    check(
        &ws,
        "bash",
        &[(
            json!({"command": "(sleep 20; echo late) & echo early"}),
            Expect::Ok("early\n"),
        )],
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test]
async fn bash_streams_throttled_updates() {
    let ws = Ws::new(&[]);
    let updates: Arc<Mutex<Vec<ToolOutput>>> = Arc::new(Mutex::new(Vec::new()));
    let sink: UpdateSink = {
        let updates = updates.clone();
        Arc::new(move |partial| updates.lock().unwrap().push(partial))
    };
    let mut ctx = ws.ctx();
    ctx.on_update = Some(sink);
    let outcome = ws
        .call_with(
            "bash",
            json!({"command": "for i in 1 2 3 4 5; do echo $i; sleep 0.1; done"}),
            ctx,
        )
        .await;
    assert_eq!(outcome.text(), "1\n2\n3\n4\n5\n");
    let updates = updates.lock().unwrap();
    assert_eq!(updates[0].content, Vec::<ContentBlock>::new());
    assert_eq!(updates[0].details, None);
    let last = updates.last().unwrap();
    assert_eq!(last.joined_text(), "1\n2\n3\n4\n5\n");
    assert_eq!(last.details, Some(json!({})));
    // Throttled, but each echo is 100 ms apart, so several updates arrive.
    assert!(
        updates.len() >= 3 && updates.len() <= 7,
        "{}",
        updates.len()
    );
}

#[tokio::test]
async fn bash_setup_failures_are_errors_for_the_model() {
    let ws = Ws::new(&[]);
    let mut ctx = ws.ctx();
    ctx.cwd = ws.path("gone");
    let outcome = ws.call_with("bash", json!({"command": "true"}), ctx).await;
    assert_eq!(
        outcome.text(),
        format!(
            "Working directory does not exist: {}\nCannot execute bash commands.",
            ws.path("gone").display()
        )
    );
    let mut shell = ws.shell.clone();
    shell.shell_path = Some("/nonexistent/shell".to_owned());
    shell.command_prefix = Some("X=1".to_owned());
    let tool = pi::session::tools::bash::BashTool::new(shell.clone());
    let error = tool
        .execute(
            ToolInput {
                id: "c".into(),
                arguments: json!({"command": "true"}),
            },
            ws.ctx(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.message(),
        "Custom shell path not found: /nonexistent/shell"
    );
    shell.shell_path = None;
    let tool = pi::session::tools::bash::BashTool::new(shell);
    let output = tool
        .execute(
            ToolInput {
                id: "c".into(),
                arguments: json!({"command": "echo $X"}),
            },
            ws.ctx(),
        )
        .await
        .unwrap();
    assert_eq!(output.joined_text(), "1\n");
}

// ---------------------------------------------------------------------------------------------
// user shell commands

#[tokio::test]
async fn user_shell_commands_become_bash_execution_messages() {
    let ws = Ws::new(&[]);
    let command = parse_user_shell_input("!! printf '\\033[1mbold\\033[0m\\r\\n'; exit 2").unwrap();
    assert!(command.exclude_from_context);
    let mut chunks = Vec::new();
    let result = run_user_shell(
        &ws.shell,
        &command.command,
        &ws.root,
        tokio_util::sync::CancellationToken::new(),
        |chunk| chunks.push(chunk.to_owned()),
    )
    .await
    .unwrap();
    assert_eq!(result.output, "bold\n");
    assert_eq!(chunks.concat(), "bold\n");
    let message = result.to_message(&command, 1_767_225_600_000);
    assert_eq!(
        pi::support::json::to_js_string(&serde_json::to_value(&message).unwrap()),
        r#"{"command":"printf '\\033[1mbold\\033[0m\\r\\n'; exit 2","output":"bold\n","exitCode":2,"cancelled":false,"truncated":false,"timestamp":1767225600000,"excludeFromContext":true}"#
    );

    let result = run_user_shell(
        &ws.shell,
        "seq 1 30000",
        &ws.root,
        tokio_util::sync::CancellationToken::new(),
        |_| {},
    )
    .await
    .unwrap();
    assert!(result.truncated);
    assert!(result.output.ends_with("29999\n30000\n"));
    let path = result.full_output_path.unwrap();
    assert!(path.starts_with(&ws.temp));
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.ends_with("30000\n") && saved.contains("\n15000\n"));

    let cancel = tokio_util::sync::CancellationToken::new();
    let trigger = cancel.clone();
    let started = Instant::now();
    let result = run_user_shell(&ws.shell, "echo go; sleep 30", &ws.root, cancel, |_| {
        trigger.cancel()
    })
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!((result.cancelled, result.exit_code), (true, None));
    assert_eq!(result.output, "go\n");

    let error = run_user_shell(
        &ws.shell,
        "true",
        &ws.path("gone"),
        tokio_util::sync::CancellationToken::new(),
        |_| {},
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("Working directory does not exist")
    );
}
