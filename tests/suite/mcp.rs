//! MCP servers (issue 25): real servers from the npm registry, pinned in
//! `tests/mcp-servers/package-lock.json` (`@modelcontextprotocol/server-everything`,
//! `@modelcontextprotocol/server-filesystem`), run with the machine's `node` over stdio and
//! over streamable HTTP; `pi mcp add|list|remove|get`, tools called by a scripted model turn
//! and their results stored, a killed server reported and reconnected, project servers only
//! after trust, and the tools pi declares compared with what 1.6.0 declares for the same
//! servers.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pi::model::entry::EntryKind;
use pi::model::message::{AgentMessage, ContentBlock};
use pi::store::ListScope;
use serde_json::{Value, json};

use crate::common::TestEnv;
use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};

fn servers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp-servers/node_modules/@modelcontextprotocol")
}

/// `server-everything`'s entry point.
fn everything() -> PathBuf {
    let path = servers_dir().join("server-everything/dist/index.js");
    assert!(
        path.exists(),
        "the MCP test servers are not installed: run `npm ci` in tests/mcp-servers (.ci/run does)"
    );
    path
}

/// `server-filesystem`'s entry point.
fn filesystem() -> PathBuf {
    let path = servers_dir().join("server-filesystem/dist/index.js");
    assert!(path.exists(), "run `npm ci` in tests/mcp-servers");
    path
}

/// `server-everything` over streamable HTTP on a free port of 127.0.0.1; killed on drop.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("node")
            .arg(everything())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node runs server-everything");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains("listening on port") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("server-everything listens");
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_json(path: &Path, value: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

fn configure_model(env: &TestEnv, server: &ProviderServer) {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"retry": {"baseDelayMs": 10, "maxRetries": 0, "provider": {"maxRetries": 0}}}"#,
    )
    .unwrap();
}

/// The tool results stored in every session, in order.
fn tool_results(env: &TestEnv) -> Vec<pi::model::message::ToolResultMessage> {
    let store = env.store();
    let mut out = Vec::new();
    for session in store.list(&ListScope::All).unwrap() {
        for stored in store.entries(&session.id).unwrap() {
            if let EntryKind::Message(AgentMessage::ToolResult(result)) = stored.entry.kind {
                out.push(result);
            }
        }
    }
    out
}

/// The `tools` of a recorded OpenAI-compatible request: name → function object.
fn declared(request: &Value) -> Vec<Value> {
    request["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|tool| tool["function"].clone())
        .collect()
}

fn declared_names(request: &Value) -> Vec<String> {
    declared(request)
        .iter()
        .map(|function| function["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn pi_mcp_add_list_get_remove_over_stdio_and_http_and_list_fails_on_a_broken_server() {
    let env = TestEnv::new();
    let http = HttpServer::start();
    let everything = everything();
    let added = env
        .pi()
        .args([
            "mcp",
            "add",
            "everything",
            "--env",
            "GREETING=${HELLO}",
            "--",
        ])
        .arg("node")
        .arg(&everything)
        .arg("stdio")
        .output()
        .unwrap();
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
    let global = env.agent_dir.join("mcp.json");
    assert_eq!(
        stdout(&added),
        format!(
            "Added global MCP server \"everything\" in {}.\nCheck it with: pi mcp list\n",
            global.display()
        )
    );
    let added = env
        .pi()
        .args([
            "mcp",
            "add",
            "web",
            "--url",
            &http.url,
            "--bearer-token-env-var",
            "WEB_TOKEN",
        ])
        .output()
        .unwrap();
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
    let file: Value = serde_json::from_slice(&std::fs::read(&global).unwrap()).unwrap();
    assert_eq!(
        file,
        json!({"mcpServers": {
            "everything": {"command": "node", "args": [everything.display().to_string(), "stdio"], "env": {"GREETING": "${HELLO}"}},
            "web": {"url": http.url, "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}}
        }})
    );

    let listed = env
        .pi()
        .args(["mcp", "list"])
        .env("HELLO", "hi")
        .env("WEB_TOKEN", "t0k")
        .output()
        .unwrap();
    let text = stdout(&listed);
    assert_eq!(listed.status.code(), Some(0), "{text}{}", stderr(&listed));
    assert!(
        text.starts_with("everything: connected, 14 tools (codemode, global)\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "web: connected, 14 tools (codemode, global)\n  {}\n",
            http.url
        )),
        "{text}"
    );
    assert!(
        text.contains("  tools: echo, get-annotated-message, get-env,"),
        "{text}"
    );
    assert!(text.contains("  offers resources\n"), "{text}");

    // An unset variable is reported, and the run fails.
    let listed = env.pi().args(["mcp", "list", "--json"]).output().unwrap();
    assert_eq!(listed.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(report["servers"][0]["state"], "failed");
    assert_eq!(
        report["servers"][0]["error"],
        "Failed to resolve MCP server \"everything\" env \"GREETING\" from environment variable: HELLO"
    );

    let got = env.pi().args(["mcp", "get", "web"]).output().unwrap();
    let got: Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(got["scope"], "global");
    assert_eq!(got["config"]["url"], http.url.as_str());

    // A server that cannot start, and an invalid entry: listed, exit 1, the others still up.
    let broken = env
        .pi()
        .args(["mcp", "add", "broken", "--", "/nonexistent/server"])
        .output()
        .unwrap();
    assert_eq!(broken.status.code(), Some(0));
    let mut file: Value = serde_json::from_slice(&std::fs::read(&global).unwrap()).unwrap();
    file["mcpServers"]["bad name"] = json!({"command": "x"});
    write_json(&global, &file);
    let listed = env
        .pi()
        .args(["mcp", "list"])
        .env("HELLO", "hi")
        .output()
        .unwrap();
    let text = stdout(&listed);
    assert_eq!(listed.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("everything: connected, 14 tools"),
        "{text}"
    );
    assert!(
        text.contains("broken: failed (codemode, global)\n  /nonexistent/server\n  spawn /nonexistent/server: No such file or directory"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "config error: {}: invalid server name \"bad name\" (use letters, digits, \"_\" and \"-\")",
            global.display()
        )),
        "{text}"
    );

    let removed = env.pi().args(["mcp", "remove", "broken"]).output().unwrap();
    assert_eq!(removed.status.code(), Some(0));
    let again = env.pi().args(["mcp", "remove", "broken"]).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(
        stderr(&again),
        format!(
            "No global MCP server named \"broken\" in {}.\n",
            global.display()
        )
    );
}

#[test]
fn a_scripted_turn_calls_stdio_and_http_tools_and_their_results_are_stored_and_shown() {
    let env = TestEnv::new();
    let http = HttpServer::start();
    write_json(
        &env.agent_dir.join("mcp.json"),
        &json!({"mcpServers": {
            "every-thing": {"command": "node", "args": [everything().display().to_string(), "stdio"], "exposure": "direct"},
            "web": {"url": http.url, "toolExposure": {"trigger-*": "hidden"}}
        }}),
    );
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_calls(&[
            (
                "call_1",
                "mcp__every_thing__echo",
                r#"{"message":"over stdio"}"#,
            ),
            ("call_2", "mcp__web__get-sum", r#"{"a":2,"b":3}"#),
            ("call_3", "mcp__every_thing__get_tiny_image", "{}"),
            ("call_4", "mcp__web__get-sum", r#"{"a":"two"}"#),
        ])),
        MockResponse::sse(sse::openai_text("Done.")),
    ]);
    configure_model(&env, &server);
    let output = env
        .pi()
        .args(["-p", "--model", "mock/mock-model", "Use the MCP tools."])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Done.\n");

    let requests = server.requests();
    let first = requests[0].json();
    let names = declared_names(&first);
    // The server name's `-` is a `_` and so is the tool's; hidden tools are not declared.
    assert!(
        names.contains(&"mcp__every_thing__echo".to_owned()),
        "{names:?}"
    );
    assert!(names.contains(&"mcp__web__get_sum".to_owned()), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|name| name.starts_with("mcp__web__trigger")),
        "{names:?}"
    );
    assert!(names.contains(&"read_mcp_resource".to_owned()), "{names:?}");
    let echo = declared(&first)
        .into_iter()
        .find(|function| function["name"] == "mcp__every_thing__echo")
        .unwrap();
    assert_eq!(echo["description"], "Echoes back the input string");
    assert_eq!(
        echo["parameters"]["properties"]["message"]["type"],
        "string"
    );
    server.assert_tool_calls_answered();

    let results = tool_results(&env);
    assert_eq!(results.len(), 4, "{results:?}");
    assert_eq!(results[0].tool_name, "mcp__every_thing__echo");
    assert!(!results[0].is_error);
    assert_eq!(
        results[0].content,
        vec![ContentBlock::text("Echo: over stdio")]
    );
    assert_eq!(
        results[0].details,
        Some(json!({"server": "every-thing", "tool": "echo"}))
    );
    // The names the model used were sanitised: `get-sum` is declared as `get_sum`.
    assert!(results[1].is_error);
    assert_eq!(
        results[1].content,
        vec![ContentBlock::text("Tool mcp__web__get-sum not found")]
    );
    assert!(
        results[2].content.iter().any(
            |block| matches!(block, ContentBlock::Image(image) if image.mime_type == "image/png")
        ),
        "{:?}",
        results[2].content
    );
    assert!(results[3].is_error);
}

#[test]
fn tool_errors_of_the_server_are_error_results_and_http_tools_answer() {
    let env = TestEnv::new();
    let http = HttpServer::start();
    let allowed = env.workspace.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    write_json(
        &env.agent_dir.join("mcp.json"),
        &json!({"mcpServers": {
            "web": {"url": http.url},
            "fs": {"command": "node", "args": [filesystem().display().to_string(), allowed.display().to_string()]}
        }}),
    );
    // Outside the workspace, which pi offers the server as its root (the server then serves
    // the roots instead of its command-line directory, as with 1.6.0).
    let outside = env.dir.path().join("secret.txt");
    std::fs::write(&outside, "not for the server").unwrap();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_calls(&[
            ("call_1", "mcp__web__get_sum", r#"{"a":2,"b":3}"#),
            (
                "call_2",
                "mcp__fs__read_text_file",
                &json!({"path": outside.display().to_string()}).to_string(),
            ),
        ])),
        MockResponse::sse(sse::openai_text("Five.")),
    ]);
    configure_model(&env, &server);
    let output = env
        .pi()
        .args(["-p", "--model", "mock/mock-model", "Add."])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let results = tool_results(&env);
    assert_eq!(results.len(), 2);
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert_eq!(
        results[0].content,
        vec![ContentBlock::text("The sum of 2 and 3 is 5.")]
    );
    assert_eq!(
        results[0].details,
        Some(json!({"server": "web", "tool": "get-sum"}))
    );
    // The server refuses a path outside its directory with an `isError` result: an error
    // result that keeps the server's text and the MCP details.
    assert!(results[1].is_error, "{:?}", results[1]);
    let text: String = results[1]
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect();
    assert!(text.contains("Access denied"), "{text}");
    assert_eq!(
        results[1].details,
        Some(json!({"server": "fs", "tool": "read_text_file"}))
    );
    let sent = server.requests()[1].json().to_string();
    assert!(sent.contains("The sum of 2 and 3 is 5."), "{sent}");
}

/// Reads a pid file a wrapper script wrote, waiting for it to change from `previous`.
fn read_pid(path: &Path, previous: Option<i32>) -> i32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse::<i32>()
            && Some(pid) != previous
        {
            return pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no new pid in {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_stdio_server_is_reported_and_reconnected_on_the_next_call() {
    let env = TestEnv::new();
    let pid_file = env.dir.path().join("server.pid");
    let wrapper = env.dir.path().join("everything.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho $$ > '{}'\nexec node '{}' stdio\n",
            pid_file.display(),
            everything().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    write_json(
        &env.agent_dir.join("mcp.json"),
        &json!({"mcpServers": {"everything": {"command": wrapper.display().to_string()}}}),
    );
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "mcp__everything__echo",
            r#"{"message":"one"}"#,
        )),
        // Held back while the test kills the server.
        MockResponse::sse(sse::openai_tool_call(
            "call_2",
            "mcp__everything__echo",
            r#"{"message":"two"}"#,
        ))
        .delay_headers(Duration::from_millis(1500)),
        MockResponse::sse(sse::openai_text("Both echoed.")),
    ]);
    configure_model(&env, &server);
    let child = env
        .pi_process()
        .args(["-p", "--model", "mock/mock-model", "Echo twice."])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let first_pid = read_pid(&pid_file, None);
    server.wait_for_requests(2, Duration::from_secs(60));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&output), "Both echoed.\n");
    assert!(
        err.contains(
            "Warning: MCP server \"everything\" disconnected (Connection closed); reconnecting"
        ),
        "{err}"
    );
    let second_pid = read_pid(&pid_file, Some(first_pid));
    assert_ne!(first_pid, second_pid);
    let results = tool_results(&env);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].content, vec![ContentBlock::text("Echo: one")]);
    assert_eq!(results[1].content, vec![ContentBlock::text("Echo: two")]);
    assert!(!results[1].is_error, "{:?}", results[1]);
}

#[test]
fn a_hanging_server_costs_its_timeout_and_pi_answers_without_it() {
    let env = TestEnv::new();
    // Reads stdin and never answers the initialize request.
    write_json(
        &env.agent_dir.join("mcp.json"),
        &json!({"mcpServers": {
            "silent": {"command": "sleep", "args": ["30"], "timeout": 0.5},
            "garbage": {"command": "sh", "args": ["-c", "echo 'not json'; echo '{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":7}'; sleep 30"], "timeout": 1},
            "fs": {"command": "node", "args": [filesystem().display().to_string(), env.workspace.display().to_string()], "exposure": "direct"}
        }}),
    );
    std::fs::write(
        env.workspace.join("note.txt"),
        "from the file system server",
    )
    .unwrap();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "mcp__fs__read_text_file",
            &json!({"path": env.workspace.join("note.txt").display().to_string()}).to_string(),
        )),
        MockResponse::sse(sse::openai_text("Read.")),
    ]);
    configure_model(&env, &server);
    let start = Instant::now();
    let output = env
        .pi()
        .args(["-p", "--model", "mock/mock-model", "Read the note."])
        .output()
        .unwrap();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    assert!(
        err.contains(
            "Warning: MCP server \"silent\" failed to connect: Request timed out after 500 ms"
        ),
        "{err}"
    );
    assert!(
        err.contains("Warning: MCP server \"garbage\" failed to connect:"),
        "{err}"
    );
    let results = tool_results(&env);
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0].content,
        vec![ContentBlock::text("from the file system server")]
    );
}

#[test]
fn project_servers_are_used_only_in_a_trusted_project_and_replace_global_ones() {
    let env = TestEnv::new();
    write_json(
        &env.agent_dir.join("mcp.json"),
        &json!({"mcpServers": {"shared": {"command": "/nonexistent/global"}}}),
    );
    write_json(
        &env.workspace.join(".pi/mcp.json"),
        &json!({"mcpServers": {"shared": {"command": "node", "args": [everything().display().to_string(), "stdio"]}}}),
    );
    let listed = env.pi().args(["mcp", "list"]).output().unwrap();
    let text = stdout(&listed);
    assert_eq!(listed.status.code(), Some(1));
    assert!(
        text.starts_with("shared: failed (codemode, global)\n  /nonexistent/global\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{} is ignored because the project is not trusted. Start pi in the project to trust it.",
            env.workspace.join(".pi/mcp.json").display()
        )),
        "{text}"
    );
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("Untrusted.")),
        MockResponse::sse(sse::openai_text("Trusted.")),
    ]);
    configure_model(&env, &server);
    let untrusted = env
        .pi()
        .args(["--no-session", "-p", "--model", "mock/mock-model", "hi"])
        .output()
        .unwrap();
    assert_eq!(untrusted.status.code(), Some(0), "{}", stderr(&untrusted));
    assert!(stderr(&untrusted).contains("MCP server \"shared\" failed to connect"));
    // `-a` trusts the project for this run: the project's entry replaces the global one.
    let trusted = env
        .pi()
        .args([
            "--no-session",
            "-a",
            "-p",
            "--model",
            "mock/mock-model",
            "hi",
        ])
        .output()
        .unwrap();
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    assert!(
        !stderr(&trusted).contains("failed to connect"),
        "{}",
        stderr(&trusted)
    );
    let requests = server.requests();
    assert!(
        !declared_names(&requests[0].json())
            .iter()
            .any(|name| name.starts_with("mcp__"))
    );
    assert!(declared_names(&requests[1].json()).contains(&"mcp__shared__echo".to_owned()));
    // --no-mcp: nothing connects.
    let server2 = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("None."))]);
    configure_model(&env, &server2);
    let none = env
        .pi()
        .args([
            "--no-session",
            "-a",
            "--no-mcp",
            "-p",
            "--model",
            "mock/mock-model",
            "hi",
        ])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(0));
    assert!(
        !declared_names(&server2.requests()[0].json())
            .iter()
            .any(|name| name.starts_with("mcp__"))
    );
}

/// The 1.6.0 CLI bundle, run with the Node 22 of `tests/interop16`.
fn reference_command(env: &TestEnv) -> Command {
    let interop16 = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop16");
    let mut command = Command::new(crate::suite::interop16::node22());
    command
        .arg(interop16.join("node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &env.home)
        .env("PI_CODING_AGENT_DIR", &env.agent_dir)
        .env("PI_TELEMETRY", "0")
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .current_dir(&env.workspace);
    command
}

#[test]
fn pi_declares_the_mcp_tools_1_6_declares_and_stores_the_same_results() {
    let mut sent = Vec::new();
    let mut stored = Vec::new();
    for reference in [false, true] {
        let env = TestEnv::new();
        write_json(
            &env.agent_dir.join("mcp.json"),
            &json!({"mcpServers": {
                "every-thing": {"command": "node", "args": [everything().display().to_string(), "stdio"], "exposure": "direct",
                    "toolExposure": {"trigger-*": "hidden", "toggle-*": "hidden"}}
            }}),
        );
        let server = ProviderServer::start(vec![
            MockResponse::sse(sse::openai_tool_calls(&[
                ("call_1", "mcp__every_thing__echo", r#"{"message":"hi"}"#),
                ("call_2", "mcp__every_thing__get_sum", r#"{"a":1,"b":2}"#),
                (
                    "call_3",
                    "mcp__every_thing__get_structured_content",
                    r#"{"location":"New York"}"#,
                ),
            ])),
            MockResponse::sse(sse::openai_text("Done.")),
        ]);
        configure_model(&env, &server);
        let args = ["--offline", "-p", "--model", "mock/mock-model", "Go."];
        let output = if reference {
            reference_command(&env).args(args).output().unwrap()
        } else {
            let args = &args[1..];
            env.pi().args(args).output().unwrap()
        };
        assert_eq!(
            output.status.code(),
            Some(0),
            "reference={reference}: {}",
            stderr(&output)
        );
        assert_eq!(stdout(&output), "Done.\n", "reference={reference}");
        let request = server.requests()[0].json();
        let mcp: Vec<Value> = declared(&request)
            .into_iter()
            .filter(|function| {
                let name = function["name"].as_str().unwrap_or_default();
                name.starts_with("mcp__") || name.contains("mcp_resource")
            })
            .collect();
        sent.push(mcp);
        // The tool results of the second request, as the provider received them.
        let second = server.requests()[1].json();
        let results: Vec<Value> = second["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|message| message["role"] == "tool")
            .cloned()
            .collect();
        stored.push(results);
    }
    let names = |tools: &[Value]| -> Vec<String> {
        tools
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(names(&sent[1]).contains(&"mcp__every_thing__get_structured_content".to_owned()));
    assert!(!names(&sent[1]).iter().any(|name| name.contains("trigger")));
    assert_eq!(names(&sent[0]), names(&sent[1]));
    assert_eq!(stored[1].len(), 3, "{:?}", stored[1]);
    for (ours, theirs) in sent[0].iter().zip(&sent[1]) {
        assert_eq!(ours, theirs, "{}", ours["name"]);
    }
    assert_eq!(stored[0], stored[1]);
}

#[test]
fn repl_mcp_shows_status_disables_enables_and_reconnects_a_server() {
    use crate::common::tmux::Tmux;
    let env = TestEnv::new();
    let mcp_json = env.agent_dir.join("mcp.json");
    write_json(
        &mcp_json,
        &json!({"mcpServers": {"everything": {"command": "node", "args": [everything().display().to_string(), "stdio"]}}}),
    );
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "mcp__everything__echo",
            r#"{"message":"after"}"#,
        )),
        MockResponse::sse(sse::openai_text("Echoed.")),
    ]);
    configure_model(&env, &server);
    let tmux = Tmux::start(&env, "mcp", &["--model", "mock/mock-model"], &[]);
    tmux.wait_for_prompt();
    tmux.line("/mcp");
    tmux.wait_for("everything: connected, 14 tools (codemode, global)");
    tmux.line("/mcp disable everything");
    tmux.wait_for("everything: disabled (codemode, global)");
    let saved: Value = serde_json::from_slice(&std::fs::read(&mcp_json).unwrap()).unwrap();
    assert_eq!(saved["mcpServers"]["everything"]["enabled"], false);
    tmux.line("/mcp enable everything");
    tmux.wait_for_count("everything: connected, 14 tools (codemode, global)", 2);
    let saved: Value = serde_json::from_slice(&std::fs::read(&mcp_json).unwrap()).unwrap();
    assert!(saved["mcpServers"]["everything"].get("enabled").is_none());
    tmux.line("/mcp reconnect everything");
    tmux.wait_for_count("everything: connected, 14 tools (codemode, global)", 3);
    tmux.line("/mcp reconnect nobody");
    tmux.wait_for("No MCP server named \"nobody\"");
    tmux.line("Echo something.");
    tmux.wait_for("Echoed.");
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    let results = tool_results(&env);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].content, vec![ContentBlock::text("Echo: after")]);
}
