//! Compaction planning on a 100k-entry session (not run in CI): how long `find_cut_point` and
//! the whole `prepare_compaction` plan take once the path is in memory, for a session with
//! compactions along the way (the usual case) and for one that was never compacted (the range
//! is then the whole path); and, from a SQLite store, the whole path (for scale) against the
//! compaction window the session actually reads.
//!
//! Run: `cargo bench --bench compaction` (prints one line per figure; median of 21 runs).
//! Goal: planning under 20 ms.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pi::model::entry::{CompactionEntry, EntryKind};
use pi::model::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, ToolCall, ToolResultMessage, Usage,
    UserContent, UserMessage,
};
use pi::model::{Entry, EntryId, SessionHeader, SessionId};
use pi::session::compaction::{CompactionSettings, find_cut_point, prepare_compaction};
use pi::store::{LeafSelector, RawEntry, SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::{SteppingClock, iso_from_ms};
use pi::support::ids::IdSource;
use serde_json::{Map, json};

const ENTRIES: usize = 100_000;
const RUNS: usize = 21;
/// A compaction every this many entries in the compacted session.
const COMPACTION_EVERY: usize = 2_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() as usize) % (high - low)
    }
}

const WORDS: &[&str] = &[
    "the",
    "session",
    "store",
    "entry",
    "parent",
    "leaf",
    "fn",
    "let",
    "match",
    "src/auth.ts",
    "error:",
    "cannot",
    "find",
    "value",
    "in",
    "scope",
    "cargo",
    "test",
    "async",
    "tree",
];

fn text(rng: &mut Rng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        out.push_str(WORDS[rng.range(0, WORDS.len())]);
        out.push(if rng.range(0, 12) == 0 { '\n' } else { ' ' });
    }
    out
}

fn assistant(rng: &mut Rng, ts: i64, call: Option<(&str, &str, String)>) -> AgentMessage {
    let size = rng.range(200, 3000);
    let mut content = vec![ContentBlock::text(text(rng, size))];
    let stop_reason = if call.is_some() {
        StopReason::ToolUse
    } else {
        StopReason::Stop
    };
    if let Some((id, name, path)) = call {
        content.push(ContentBlock::ToolCall(ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: json!({"path": path}),
            arguments_error: None,
            thought_signature: None,
            extra: Map::new(),
        }));
    }
    AgentMessage::Assistant(AssistantMessage {
        content,
        api: "anthropic-messages".into(),
        provider: "anthropic".into(),
        model: "claude-sonnet-4-5".into(),
        usage: Usage {
            input: 30_000,
            output: 500,
            total_tokens: 30_500,
            ..Usage::default()
        },
        stop_reason,
        timestamp: ts,
        response_id: None,
        response_model: None,
        error_message: None,
        diagnostics: None,
        provider_thinking_level: None,
        raw_stop_reason: None,
        duration_ms: None,
        thinking_level: None,
        extra: Map::new(),
        key_order: Default::default(),
    })
}

struct Builder {
    rng: Rng,
    entries: Vec<Entry>,
    ts: i64,
    calls: usize,
}

impl Builder {
    fn push(&mut self, kind: EntryKind) {
        self.ts += 1000;
        let id = EntryId::new(format!("{:08x}", self.entries.len()));
        let parent_id = self.entries.last().and_then(|entry| entry.id.clone());
        self.entries.push(Entry {
            id: Some(id),
            parent_id,
            timestamp: iso_from_ms(self.ts),
            kind,
            extra: Map::new(),
        });
    }

    /// One turn: prompt, a tool call on a file, its result, the answer.
    fn turn(&mut self) {
        self.calls += 1;
        let call = format!("call_{}", self.calls);
        let name = ["read", "edit", "write", "bash"][self.rng.range(0, 4)];
        let path = format!("src/module_{}.rs", self.rng.range(0, 400));
        let size = self.rng.range(100, 1500);
        let prompt = text(&mut self.rng, size);
        let ts = self.ts;
        self.push(EntryKind::Message(AgentMessage::User(UserMessage {
            content: UserContent::Text(prompt),
            timestamp: ts,
            extra: Map::new(),
        })));
        let message = assistant(&mut self.rng, ts, Some((&call, name, path)));
        self.push(EntryKind::Message(message));
        let size = self.rng.range(200, 12_000);
        let output = text(&mut self.rng, size);
        self.push(EntryKind::Message(AgentMessage::ToolResult(
            ToolResultMessage {
                tool_call_id: call,
                tool_name: name.to_owned(),
                content: vec![ContentBlock::text(output)],
                details: None,
                usage: None,
                is_error: false,
                duration_ms: None,
                timestamp: ts,
                nested_calls: None,
                extra: Map::new(),
            },
        )));
        let message = assistant(&mut self.rng, ts, None);
        self.push(EntryKind::Message(message));
    }

    fn compaction(&mut self, keep_back: usize) {
        let first_kept = self.entries[self.entries.len() - keep_back].id.clone();
        let summary = text(&mut self.rng, 3000);
        self.push(EntryKind::Compaction(CompactionEntry {
            summary,
            first_kept_entry_id: first_kept,
            tokens_before: 150_000,
            details: Some(json!({"readFiles": ["src/a.rs"], "modifiedFiles": ["src/b.rs"]})),
            from_hook: Some(false),
            usage: None,
            system_message: None,
        }));
    }
}

/// A linear session of exactly `ENTRIES` entries; with `compacted`, a compaction every
/// [`COMPACTION_EVERY`] entries that keeps the last 40.
fn session(compacted: bool, seed: u64) -> Vec<Entry> {
    let mut builder = Builder {
        rng: Rng(seed),
        entries: Vec::with_capacity(ENTRIES + 8),
        ts: 1_767_225_600_000,
        calls: 0,
    };
    let mut next_compaction = COMPACTION_EVERY;
    while builder.entries.len() < ENTRIES {
        if compacted && builder.entries.len() >= next_compaction {
            builder.compaction(40);
            next_compaction += COMPACTION_EVERY;
        }
        builder.turn();
    }
    builder.entries.truncate(ENTRIES);
    // Never end on a compaction: there would be nothing to plan.
    if matches!(
        builder.entries.last().map(|entry| &entry.kind),
        Some(EntryKind::Compaction(_))
    ) {
        builder.entries.pop();
        builder.turn();
        builder.entries.truncate(ENTRIES);
    }
    builder.entries
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut samples = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        let value = std::hint::black_box(f());
        samples.push(start.elapsed());
        last = Some(value);
    }
    (median(samples), last.expect("at least one run"))
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

fn plan(label: &str, path: &[Entry], settings: &CompactionSettings) {
    let start_idx = path
        .iter()
        .rposition(|entry| matches!(entry.kind, EntryKind::Compaction(_)))
        .map_or(0, |idx| idx.saturating_sub(40));
    let (cut_time, cut) = time(RUNS, || {
        find_cut_point(path, start_idx, path.len(), settings.keep_recent_tokens)
    });
    let (prep_time, summary) = time(RUNS, || {
        let prep = prepare_compaction(path, settings).expect("a plan");
        (
            prep.first_kept_entry_index,
            prep.messages_to_summarize.len(),
            prep.turn_prefix_messages.len(),
            prep.tokens_before,
        )
    });
    let prep = prepare_compaction(path, settings).expect("a plan");
    let (files_time, lists) = time(RUNS, || prep.file_ops().lists());
    println!(
        "{label}: find_cut_point {} · prepare_compaction {} · file lists for the summary {} (cut at {} of {}, {} messages to summarise, {} in the turn prefix, tokensBefore {}, {} files)",
        ms(cut_time),
        ms(prep_time),
        ms(files_time),
        cut.first_kept_entry_index,
        path.len(),
        summary.1,
        summary.2,
        summary.3,
        lists.read_files.len() + lists.modified_files.len(),
    );
}

fn main() {
    let settings = CompactionSettings::default();
    let compacted = session(true, 7);
    let never = session(false, 8);
    plan("100k entries, compactions every 2k", &compacted, &settings);
    plan("100k entries, never compacted", &never, &settings);

    // For scale: the same compacted session read back from a SQLite file.
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SessionStore::open(StoreConfig {
        location: StoreLocation::File(dir.path().join("bench.db")),
        clock: Arc::new(SteppingClock::new(1_767_225_600_000, 1)),
        ids: Arc::new(IdSource::seeded(1)),
        busy_timeout: Duration::from_secs(10),
    })
    .expect("open store");
    let header = SessionHeader::new(
        SessionId::new("bench"),
        iso_from_ms(1_767_225_600_000),
        "/bench".to_owned(),
        None,
    );
    let raw: Vec<RawEntry> = compacted
        .iter()
        .map(|entry| RawEntry {
            payload: entry.to_line().into_bytes(),
            entry: entry.clone(),
        })
        .collect();
    store
        .insert_raw_session(&header, header.to_line().as_bytes(), &raw)
        .expect("insert");
    let (read_time, path) = time(5, || {
        store
            .branch_path(&SessionId::new("bench"), &LeafSelector::Current)
            .expect("path")
    });
    let (prep_time, _) = time(RUNS, || {
        prepare_compaction(&path, &settings).map(|prep| prep.first_kept_entry_index)
    });
    println!(
        "store: branch_path of {} entries {} (median of 5) · prepare_compaction on it {}",
        path.len(),
        ms(read_time),
        ms(prep_time)
    );

    // What the session does: read only the window from the last kept boundary, plan on it.
    let whole_plan = prepare_compaction(&path, &settings)
        .map(|prep| prep.first_kept_entry_id.clone())
        .expect("plan on the whole path");
    let (window_time, window) = time(RUNS, || {
        store
            .compaction_window(&SessionId::new("bench"))
            .expect("window")
    });
    let (window_plan_time, window_plan) = time(RUNS, || {
        prepare_compaction(&window, &settings).map(|prep| prep.first_kept_entry_id.clone())
    });
    assert_eq!(
        window_plan.as_ref(),
        Some(&whole_plan),
        "the window plans the same"
    );
    println!(
        "store: compaction_window ({} entries) {} · prepare_compaction on it {} · total {}",
        window.len(),
        ms(window_time),
        ms(window_plan_time),
        ms(window_time + window_plan_time)
    );
}
