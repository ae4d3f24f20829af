//! Round-trip overhead of one event to one subscribed out-of-process extension: pi writes the
//! event line, the extension answers, pi parses the answer (goal: median under 1 ms).
//!
//! ```text
//! cargo build --release --example counter_extension
//! cargo bench --bench extensions
//! ```
//!
//! Rows: the Rust example (`counter_extension`, answering `null`), the Python guard
//! (`examples/extensions/guard.py`, a `tool_call` for a harmless command) raw and through the
//! bus (`ExtensionBus::emit_tool_call`: event construction, dispatch and typed result
//! parsing included). Each row: 200 warm-up events, then N timed ones.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi::agent::AgentEvent;
use pi::session::extensions::event::{ExtensionEvent, ToolCallEvent, TurnStamp};
use pi::session::extensions::{
    Extension, ExtensionBus, ExtensionContext, NoUi, ProcessConfig, ProcessExtension,
};
use serde_json::json;

const WARM_UP: usize = 200;
const EVENTS: usize = 5000;

fn env() -> Vec<(OsString, OsString)> {
    std::env::vars_os().collect()
}

fn context() -> ExtensionContext {
    ExtensionContext::detached(
        Arc::new(NoUi),
        std::env::temp_dir(),
        env(),
        Arc::new(|report| eprintln!("extension error: {report:?}")),
    )
}

async fn start(program: &Path) -> ProcessExtension {
    let config = ProcessConfig {
        program: program.to_path_buf(),
        args: Vec::new(),
        display: program.display().to_string(),
        cwd: std::env::temp_dir(),
        env: env(),
        timeout: Duration::from_secs(30),
        version: "bench".to_owned(),
    };
    match ProcessExtension::start(config, context()).await {
        Ok(extension) => extension,
        Err(error) => panic!("{}: {error}", program.display()),
    }
}

fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{label:<44} n={:<5} median {:>7.1} µs  p90 {:>7.1} µs  p99 {:>7.1} µs  mean {:>7.1} µs",
        samples.len(),
        pick(0.5).as_secs_f64() * 1e6,
        pick(0.9).as_secs_f64() * 1e6,
        pick(0.99).as_secs_f64() * 1e6,
        mean.as_secs_f64() * 1e6,
    );
}

async fn raw(label: &str, extension: &ProcessExtension, event: &ExtensionEvent) {
    for _ in 0..WARM_UP {
        let _ = extension.request_event(event).await;
    }
    let mut samples = Vec::with_capacity(EVENTS);
    for _ in 0..EVENTS {
        let started = Instant::now();
        let answer = extension.request_event(event).await;
        samples.push(started.elapsed());
        assert!(answer.is_ok(), "{answer:?}");
    }
    report(label, samples);
}

fn example_binary() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    ["release", "debug"]
        .iter()
        .map(|profile| root.join(profile).join("examples/counter_extension"))
        .find(|path| path.is_file())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let turn_start = ExtensionEvent::Agent {
            event: Box::new(AgentEvent::TurnStart),
            turn: TurnStamp::default(),
        };
        match example_binary() {
            Some(binary) => {
                let counter = start(&binary).await;
                raw(
                    &format!(
                        "rust counter ({}) turn_start",
                        binary
                            .parent()
                            .and_then(Path::parent)
                            .map_or(String::new(), |p| {
                                p.file_name()
                                    .unwrap_or_default()
                                    .to_string_lossy()
                                    .into_owned()
                            })
                    ),
                    &counter,
                    &turn_start,
                )
                .await;
                counter.stop().await;
            }
            None => println!(
                "rust counter: not built (cargo build --release --example counter_extension)"
            ),
        }
        let guard_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/extensions/guard.py");
        let guard = start(&guard_path).await;
        let call = ExtensionEvent::ToolCall(ToolCallEvent {
            tool_call_id: "call_1".to_owned(),
            tool_name: "bash".to_owned(),
            input: json!({"command": "ls -la src"}),
        });
        raw("python guard tool_call (raw)", &guard, &call).await;
        let guard = Arc::new(guard);
        let bus = ExtensionBus::new(
            vec![guard.clone() as Arc<dyn Extension>],
            context(),
            Duration::from_secs(30),
        );
        let input = json!({"command": "ls -la src"});
        let mut samples = Vec::with_capacity(EVENTS);
        for round in 0..WARM_UP + EVENTS {
            let started = Instant::now();
            let decision = bus.emit_tool_call("call_1", "bash", &input).await;
            if round >= WARM_UP {
                samples.push(started.elapsed());
            }
            assert_eq!(decision, pi::agent::ToolCallDecision::Continue);
        }
        assert!(guard.is_running(), "the guard stopped during the run");
        report("python guard tool_call (bus, typed)", samples);
        bus.stop_all().await;
    });
}
