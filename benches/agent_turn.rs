//! Our CPU time per agent turn (loop + tools + persistence), excluding the model's time and
//! the fsyncs, on a 100-turn scripted conversation; and the durable commits per turn.
//!
//! ```text
//! cargo bench --bench agent_turn [-- ROUNDS] [chat|small|growing] [tmpfs]
//! ```
//!
//! The provider is this same binary re-executed as a separate process (`--serve`): a minimal
//! HTTP/1.1 server on 127.0.0.1 answering each chat-completions request with the next
//! scripted OpenAI-compatible SSE body, so its CPU is not counted in ours. A real
//! `AgentSession` (real store, real tools in a temporary workspace, the whole system prompt
//! with resources) runs 20 prompts of 5 turns each: the model calls `read`, `edit`, `grep`,
//! `bash`, then answers. CPU = `getrusage(RUSAGE_SELF)` user + system of this process
//! (tokio runtime, HTTP client, SSE decoding, tool execution, SQLite) over the 100 turns, after
//! one untimed warm-up prompt; a `bash` child's own CPU is the child's. The database lives on
//! `/dev/shm` (tmpfs: an fsync costs nothing) for the CPU figure; a second pass puts it on the
//! disk to show the fsyncs' share of the wall time. Commits come from
//! `SessionStore::commit_count`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};
use pi::ai::auth::{AuthFile, Credentials};
use pi::ai::{AiClient, ModelRegistry};
use pi::cli::config::Env;
use pi::cli::keys::ShellKeyResolver;
use pi::model::entry::EntryKind;
use pi::model::message::AgentMessage;
use pi::session::extensions::ExtensionsConfig;
use pi::session::resources::{HarnessDocs, ResourceConfig, Resources};
use pi::session::settings::NoSettingsSink;
use pi::session::tools::read::ReadConfig;
use pi::session::tools::shell::ShellConfig;
use pi::session::tools::workspace::Workspace;
use pi::session::tools::{ToolSelection, ToolSet, ToolsConfig, builtin_tools};
use pi::session::{
    AgentSession, ModelCandidates, ModelChoice, PromptOptions, SessionConfig, SessionSettings,
    SessionTarget,
};
use pi::store::{SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::{Clock, SystemClock};
use pi::support::ids::IdSource;
use serde_json::{Value, json};

const TURNS_PER_PROMPT: usize = 5;

/// What the tools return, so what the context grows by.
#[derive(Clone, Copy)]
enum Scenario {
    /// 100 prompts answered with text at once: one turn each, no tools — the loop and the
    /// persistence alone.
    Chat,
    /// `read` a 1 KB file of its own per prompt, `grep` with 3 matches: the context stays
    /// small (≈ 40 KB at the end), so the figure is the loop and the persistence.
    Small,
    /// `read` the whole 26 KB `src/lib.rs` every prompt and `grep` 168 matching lines: the
    /// context grows by ≈ 38 KB per prompt (≈ 800 KB at the end), and every request
    /// re-serialises all of it — as the reference does.
    Growing,
}

impl Scenario {
    fn label(self) -> &'static str {
        match self {
            Self::Chat => "chat, no tools",
            Self::Small => "small context",
            Self::Growing => "growing context",
        }
    }

    fn prompts(self) -> usize {
        match self {
            Self::Chat => std::env::var("PI_BENCH_CHAT_PROMPTS")
                .ok()
                .and_then(|value| value.parse().ok())
                .unwrap_or(100),
            Self::Small | Self::Growing => PROMPTS,
        }
    }

    fn turns_per_prompt(self) -> usize {
        match self {
            Self::Chat => 1,
            Self::Small | Self::Growing => TURNS_PER_PROMPT,
        }
    }
}
const PROMPTS: usize = 20;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(position) = args.iter().position(|arg| arg == "--serve") {
        serve(Path::new(&args[position + 1]));
        return;
    }
    let rounds: usize = args.iter().find_map(|arg| arg.parse().ok()).unwrap_or(3);
    // As `pi` runs (`cli/startup.rs`): one runtime thread; `PI_BENCH_MULTI_THREAD=1` compares
    // the two workers `pi` had before.
    let runtime = if std::env::var_os("PI_BENCH_MULTI_THREAD").is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .expect("runtime");
    let shm = Path::new("/dev/shm");
    println!(
        "100 turns per row after one warm-up prompt: chat = 100 prompts answered at once; the \
         others {PROMPTS} prompts x {TURNS_PER_PROMPT} turns (read, edit, grep, bash, answer)"
    );
    println!(
        "{:<16} {:<22} {:>12} {:>12} {:>12} {:>22} {:>12}",
        "scenario", "database", "CPU/turn", "user/turn", "sys/turn", "commits/turn", "wall/turn"
    );
    for round in 0..rounds {
        for scenario in [Scenario::Chat, Scenario::Small, Scenario::Growing] {
            let only = ["chat", "small", "growing"]
                .into_iter()
                .find(|name| args.iter().any(|arg| arg == name));
            if only.is_some_and(|name| !scenario.label().starts_with(name)) {
                continue;
            }
            for (label, base) in [
                (
                    "tmpfs (no fsync cost)",
                    shm.is_dir().then(|| shm.to_path_buf()),
                ),
                ("disk (fsync)", Some(std::env::temp_dir())),
            ] {
                let Some(base) = base else { continue };
                if args.iter().any(|arg| arg == "tmpfs") && !label.starts_with("tmpfs") {
                    continue;
                }
                let figures = runtime.block_on(run_once(&base, scenario, round as u64));
                println!(
                    "{:<16} {:<22} {:>9.3} ms {:>9.3} ms {:>9.3} ms {:>5.2} ({} entries) {:>9.3} ms",
                    scenario.label(),
                    label,
                    figures.cpu.as_secs_f64() * 1e3 / figures.turns as f64,
                    figures.user.as_secs_f64() * 1e3 / figures.turns as f64,
                    figures.system.as_secs_f64() * 1e3 / figures.turns as f64,
                    figures.commits as f64 / figures.turns as f64,
                    figures.entries,
                    figures.wall.as_secs_f64() * 1e3 / figures.turns as f64,
                );
            }
        }
    }
}

struct Figures {
    turns: usize,
    cpu: Duration,
    user: Duration,
    system: Duration,
    wall: Duration,
    commits: u64,
    entries: usize,
}

fn cpu_now() -> (Duration, Duration) {
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let to =
        |tv: nix::sys::time::TimeVal| Duration::new(tv.tv_sec() as u64, tv.tv_usec() as u32 * 1000);
    (to(usage.user_time()), to(usage.system_time()))
}

async fn run_once(base: &Path, scenario: Scenario, seed: u64) -> Figures {
    let dir = tempfile::Builder::new()
        .prefix("pi-bench-turn-")
        .tempdir_in(base)
        .expect("temp dir");
    let workspace = tempfile::tempdir().expect("workspace");
    let home = tempfile::tempdir().expect("home");
    write_workspace(workspace.path());

    // The scripted answers, written for the server process.
    let script = dir.path().join("script.json");
    let bodies: Vec<String> = (0..=scenario.prompts())
        .flat_map(|index| prompt_bodies(scenario, index))
        .collect();
    std::fs::write(&script, serde_json::to_vec(&bodies).expect("json")).expect("script");
    let mut server = Server::start(&script);

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let ids = Arc::new(IdSource::seeded(seed + 1));
    let store = SessionStore::open(StoreConfig {
        location: StoreLocation::File(dir.path().join("pi.db")),
        clock: clock.clone(),
        ids: ids.clone(),
        busy_timeout: Duration::from_secs(10),
    })
    .expect("store");
    let config = session_config(
        &store,
        &server.url,
        workspace.path(),
        home.path(),
        dir.path(),
    );
    let (session, _) = AgentSession::open(
        config,
        SessionTarget::New {
            parent_session: None,
        },
    )
    .await
    .expect("open");

    session
        .prompt(&user_prompt(0), PromptOptions::default())
        .await
        .expect("warm-up prompt");
    let id = session.session_id().await;
    let entries_before = store.entries(&id).expect("entries").len();
    let commits_before = store.commit_count();
    let (user_before, system_before) = cpu_now();
    let started = Instant::now();
    for prompt in 1..=scenario.prompts() {
        session
            .prompt(&user_prompt(prompt), PromptOptions::default())
            .await
            .expect("prompt");
    }
    let wall = started.elapsed();
    let (user_after, system_after) = cpu_now();
    let commits = store.commit_count() - commits_before;
    let stored = store.entries(&id).expect("entries");
    let entries = stored.len() - entries_before;
    for entry in &stored {
        if let EntryKind::Message(AgentMessage::ToolResult(result)) = &entry.entry.kind {
            assert!(!result.is_error, "a tool failed: {:?}", result.content);
        }
    }
    session.shutdown().await;
    server.stop();
    // Per prompt: the user message, four (assistant, tool result) pairs, the answer.
    let turns = scenario.prompts() * scenario.turns_per_prompt();
    assert_eq!(entries, 2 * turns, "every turn stored");
    let user = user_after - user_before;
    let system = system_after - system_before;
    Figures {
        turns,
        cpu: user + system,
        user,
        system,
        wall,
        commits,
        entries,
    }
}

fn user_prompt(index: usize) -> String {
    format!(
        "Step {index}: read src/lib.rs, mark section {index} as done, find every function and \
         run the build check, then tell me what changed."
    )
}

/// The workspace: a source file with one marker per prompt, and a few more files for grep.
fn write_workspace(root: &Path) {
    let src = root.join("src");
    std::fs::create_dir_all(&src).expect("src");
    let mut lib = String::new();
    for section in 0..=PROMPTS {
        lib.push_str(&format!("// section {section}: todo\n"));
        std::fs::write(
            root.join(format!("notes-{section}.md")),
            format!(
                "# Step {section}\n\nstatus: todo\n\n{}",
                "Notes on this step. ".repeat(48)
            ),
        )
        .expect("notes");
        for function in 0..8 {
            lib.push_str(&format!(
                "pub fn section_{section}_item_{function}(input: &str) -> usize {{\n    input.len() * {function}\n}}\n\n"
            ));
        }
    }
    std::fs::write(src.join("lib.rs"), lib).expect("lib.rs");
    for module in 0..20 {
        let mut text = String::new();
        for line in 0..60 {
            text.push_str(&format!("fn helper_{module}_{line}() {{ /* body */ }}\n"));
        }
        std::fs::write(src.join(format!("mod{module}.rs")), text).expect("module");
    }
}

/// The five answers of prompt `index`: four tool calls, then the text.
fn prompt_bodies(scenario: Scenario, index: usize) -> Vec<String> {
    let prompt_tokens = 2_000 + 600 * index as u64;
    let (read, edit, grep) = match scenario {
        Scenario::Chat => {
            return vec![text_answer(
                &format!(
                    "Step {index}: the function you asked about returns the length of its \
                     input times its index; nothing else needs to change."
                ),
                prompt_tokens,
            )];
        }
        Scenario::Small => (
            json!({"path": format!("notes-{index}.md")}),
            json!({"path": format!("notes-{index}.md"), "edits": [{"oldText": "status: todo", "newText": "status: done"}]}),
            json!({"pattern": format!("section_{index}_item_[0-2]\\b"), "path": "src"}),
        ),
        Scenario::Growing => (
            json!({"path": "src/lib.rs"}),
            json!({"path": "src/lib.rs", "edits": [{"oldText": format!("// section {index}: todo"), "newText": format!("// section {index}: done")}]}),
            json!({"pattern": "pub fn section_", "path": "src"}),
        ),
    };
    vec![
        tool_call(&format!("r{index}"), "read", read, prompt_tokens),
        tool_call(&format!("e{index}"), "edit", edit, prompt_tokens + 100),
        tool_call(&format!("g{index}"), "grep", grep, prompt_tokens + 200),
        tool_call(
            &format!("b{index}"),
            "bash",
            json!({"command": "echo build ok"}),
            prompt_tokens + 300,
        ),
        text_answer(
            &format!(
                "Section {index} is marked done in src/lib.rs. The crate defines {} functions \
                 across its modules and the build check printed `build ok`. Nothing else \
                 changed; the next section is {}.",
                (PROMPTS + 1) * 8,
                index + 1
            ),
            prompt_tokens + 400,
        ),
    ]
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1767225600,
           "model": "bench-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn usage(prompt: u64, completion: u64) -> Value {
    json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1767225600,
           "model": "bench-model", "choices": [],
           "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
}

fn frames(chunks: &[Value]) -> String {
    let mut out = String::new();
    for chunk in chunks {
        out.push_str("data: ");
        out.push_str(&chunk.to_string());
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out
}

fn tool_call(id: &str, name: &str, arguments: Value, prompt_tokens: u64) -> String {
    let arguments = arguments.to_string();
    let mid = arguments.len() / 2;
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": "Working on it. "}),
        None,
    )];
    chunks.push(chunk(
        json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": &arguments[..mid]}}]}),
        None,
    ));
    chunks.push(chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": &arguments[mid..]}}]}),
        None,
    ));
    chunks.push(chunk(json!({}), Some("tool_calls")));
    chunks.push(usage(prompt_tokens, 40));
    frames(&chunks)
}

fn text_answer(text: &str, prompt_tokens: u64) -> String {
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    // Token-sized pieces, as a provider streams them.
    let mut piece = String::new();
    for word in text.split_inclusive(' ') {
        piece.push_str(word);
        if piece.len() >= 4 {
            chunks.push(chunk(json!({"content": piece}), None));
            piece.clear();
        }
    }
    if !piece.is_empty() {
        chunks.push(chunk(json!({"content": piece}), None));
    }
    chunks.push(chunk(json!({}), Some("stop")));
    chunks.push(usage(prompt_tokens, 60));
    frames(&chunks)
}

fn session_config(
    store: &SessionStore,
    url: &str,
    workspace: &Path,
    home: &Path,
    scratch: &Path,
) -> SessionConfig {
    let env = Env::from_parts(
        Default::default(),
        workspace.to_path_buf(),
        Some(home.into()),
    );
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let ids = store.ids().clone();
    let models = format!(
        r#"{{"providers":{{"bench":{{"baseUrl":"{url}/v1","api":"openai-completions","apiKey":"bench-key","models":[{{"id":"bench-model","name":"Bench","reasoning":false,"input":["text"],"contextWindow":200000,"maxTokens":8192,"cost":{{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75}}}}]}}}}}}"#
    );
    let registry = Arc::new(ModelRegistry::load(Some(&models), "models.json"));
    let credentials = Arc::new(Credentials::new(
        AuthFile::parse(None),
        Arc::new(ShellKeyResolver::new(&env)),
        clock.clone(),
    ));
    let shell = ShellConfig {
        shell_path: None,
        command_prefix: None,
        env: vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())],
        bin_dir: None,
        temp_dir: scratch.to_path_buf(),
        ids: ids.clone(),
    };
    let tools_config = ToolsConfig {
        workspace: Workspace::new(Some(home.to_path_buf())),
        read: ReadConfig {
            auto_resize_images: true,
        },
        shell: shell.clone(),
    };
    let tools = ToolSet::new(
        builtin_tools(&tools_config),
        Vec::new(),
        &ToolSelection::from_flags(Some("read,edit,write,bash,grep,find,ls"), false, false),
    );
    let agent_dir = home.join(".pi/agent");
    let resources = Resources::load(ResourceConfig::new(workspace, &agent_dir, Some(home)));
    let model = registry
        .find("bench", "bench-model")
        .cloned()
        .expect("bench model");
    SessionConfig {
        store: store.clone(),
        client: AiClient::new(clock.clone(), ids.clone()).expect("client"),
        registry,
        credentials,
        resources: Arc::new(Mutex::new(resources)),
        tools,
        tools_from_transcript: false,
        tool_modifiers: Vec::new(),
        startup_name: None,
        shell,
        cwd: workspace.to_path_buf(),
        settings: SessionSettings::default(),
        settings_sink: Arc::new(NoSettingsSink),
        settings_reload: None,
        clock,
        ids,
        models: ModelCandidates {
            explicit: None,
            scoped: None,
            fallback: Some(model.clone()),
            explicit_thinking: None,
            scope: vec![ModelChoice {
                model,
                thinking: None,
            }],
        },
        local_date: chrono::NaiveDate::from_ymd_opt(2026, 11, 30).expect("date"),
        harness_docs: HarnessDocs::in_dir(&scratch.join("docs")),
        emit_partials: false,
        extensions: ExtensionsConfig::default(),
        trust: None,
    }
}

/// The provider process.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(script: &Path) -> Self {
        let exe = std::env::current_exe().expect("current exe");
        let mut child = Command::new(exe)
            .arg("--serve")
            .arg(script)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("server address");
        Self {
            child,
            url: format!("http://{}", line.trim()),
        }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Serves the scripted bodies in order, one per request, over keep-alive connections.
fn serve(script: &Path) {
    let bodies: Vec<String> =
        serde_json::from_slice(&std::fs::read(script).expect("script")).expect("script json");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    println!("{}", listener.local_addr().expect("addr"));
    std::io::stdout().flush().expect("flush");
    let next = Arc::new(Mutex::new(bodies.into_iter()));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let next = next.clone();
        std::thread::spawn(move || {
            let _ = connection(stream, &next);
        });
    }
}

fn connection(stream: TcpStream, next: &Mutex<std::vec::IntoIter<String>>) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut length = 0usize;
        let mut first = true;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if line == "\r\n" && !first {
                break;
            }
            first = false;
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let answer = next.lock().expect("lock").next().unwrap_or_default();
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        )?;
        writer.write_all(answer.as_bytes())?;
        writer.flush()?;
    }
}
