//! Store benchmark (not run in CI): durable append latency, and context rebuild time at the
//! leaf for sessions of 1k, 10k and 100k entries whose rebuilt contexts are the same size.
//!
//! Run: `cargo bench --bench store` (`-- --quick` for 1k and 10k only, `-- --only N` for one size).
//!
//! Each session has realistic entries (200 B – 20 KB: prompts, assistant turns with tool
//! calls, tool results), a few branches, compactions along the way, and the same tail: a
//! final compaction keeping the last 40 entries, then 60 more. So every context holds the
//! same number of messages of the same sizes, and only the history length differs.
//! "Cold" drops the database and WAL files from the page cache (posix_fadvise DONTNEED after
//! a checkpoint) and opens a fresh store, so neither the OS nor SQLite has pages cached.

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi::model::entry::{CompactionEntry, EntryKind};
use pi::model::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, ToolCall, ToolResultMessage, Usage,
    UserContent, UserMessage,
};
use pi::model::{EntryId, SessionHeader, SessionId};
use pi::store::{LeafSelector, RawEntry, SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::{SteppingClock, iso_from_ms};
use pi::support::ids::IdSource;
use serde_json::{Map, json};

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
    "compaction",
    "fn",
    "let",
    "match",
    "src/auth.ts",
    "SessionManager",
    "error:",
    "cannot",
    "find",
    "value",
    "in",
    "scope",
    "cargo",
    "test",
    "build",
    "async",
    "await",
    "tokio",
    "rusqlite",
    "payload",
    "tree",
    "branch",
];

fn text(rng: &mut Rng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        out.push_str(WORDS[rng.range(0, WORDS.len())]);
        out.push(if rng.range(0, 12) == 0 { '\n' } else { ' ' });
    }
    out
}

fn user(rng: &mut Rng, ts: i64) -> AgentMessage {
    let size = rng.range(200, 2000);
    AgentMessage::User(UserMessage {
        content: UserContent::Text(text(rng, size)),
        timestamp: ts,
        extra: Map::new(),
    })
}

fn assistant(rng: &mut Rng, ts: i64, call: Option<&str>) -> AgentMessage {
    let size = rng.range(200, 4000);
    let mut content = vec![ContentBlock::text(text(rng, size))];
    if let Some(id) = call {
        content.push(ContentBlock::ToolCall(ToolCall {
            id: id.to_owned(),
            name: "bash".to_owned(),
            arguments: json!({"command": "cargo test --all"}),
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
            input: 1000,
            output: 200,
            total_tokens: 1200,
            ..Usage::default()
        },
        stop_reason: if call.is_some() {
            StopReason::ToolUse
        } else {
            StopReason::Stop
        },
        timestamp: ts,
        response_model: None,
        response_id: None,
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

fn tool_result(rng: &mut Rng, ts: i64, id: &str) -> AgentMessage {
    let size = rng.range(200, 20_000);
    AgentMessage::ToolResult(ToolResultMessage {
        tool_call_id: id.to_owned(),
        tool_name: "bash".to_owned(),
        content: vec![ContentBlock::text(text(rng, size))],
        details: None,
        usage: None,
        is_error: false,
        duration_ms: None,
        timestamp: ts,
        nested_calls: None,
        extra: Map::new(),
    })
}

/// Builds a session's lines: the reference shape, each entry a child of the previous leaf.
struct Builder {
    ids: IdSource,
    taken: std::collections::HashSet<String>,
    lines: Vec<RawEntry>,
    ts: i64,
    leaf: Option<EntryId>,
    path: Vec<EntryId>,
    calls: usize,
}

impl Builder {
    fn push(&mut self, kind: EntryKind) {
        self.ts += 1000;
        // Ids are unique within the session, as the reference draws them.
        let taken = &mut self.taken;
        let id = EntryId::generate(&self.ids, |candidate| taken.contains(candidate));
        self.taken.insert(id.to_string());
        let entry = pi::model::Entry {
            id: Some(id),
            parent_id: self.leaf.clone(),
            timestamp: iso_from_ms(self.ts),
            kind,
            extra: Map::new(),
        };
        let id = entry.id.clone();
        self.lines.push(RawEntry {
            payload: entry.to_line().into_bytes(),
            entry,
        });
        self.leaf = id.clone();
        self.path.extend(id);
    }

    /// One turn: prompt, assistant with a tool call, tool result, answer (4 entries).
    fn turn(&mut self, rng: &mut Rng) {
        self.calls += 1;
        let call = format!("call_{}", self.calls);
        self.push(EntryKind::Message(user(rng, self.ts)));
        self.push(EntryKind::Message(assistant(rng, self.ts, Some(&call))));
        self.push(EntryKind::Message(tool_result(rng, self.ts, &call)));
        self.push(EntryKind::Message(assistant(rng, self.ts, None)));
    }

    fn compaction(&mut self, rng: &mut Rng, first_kept: EntryId) {
        self.push(EntryKind::Compaction(CompactionEntry {
            summary: text(rng, 3000),
            first_kept_entry_id: Some(first_kept),
            tokens_before: 100_000,
            details: Some(json!({"readFiles": [], "modifiedFiles": []})),
            from_hook: Some(false),
            usage: None,
            system_message: None,
        }));
    }
}

/// Builds the lines of a session with `history` entries before the common tail.
fn build_lines(history: usize, seed: u64) -> Vec<RawEntry> {
    let mut rng = Rng(seed);
    let mut builder = Builder {
        ids: IdSource::seeded(seed),
        taken: std::collections::HashSet::new(),
        lines: Vec::new(),
        ts: 1_767_225_600_000,
        leaf: None,
        path: Vec::new(),
        calls: 0,
    };
    let mut next_compaction = 2000;
    while builder.lines.len() < history {
        builder.turn(&mut rng);
        // Now and then a branch: go back a few entries and continue from there.
        if rng.range(0, 50) == 0 && builder.path.len() > 8 {
            let back = builder.path.len() - rng.range(2, 8);
            builder.leaf = Some(builder.path[back].clone());
            builder.path.truncate(back + 1);
        }
        // Compactions along the way.
        if builder.lines.len() >= next_compaction && builder.path.len() > 50 {
            let first_kept = builder.path[builder.path.len() - 20].clone();
            builder.compaction(&mut rng, first_kept);
            next_compaction += 2000;
        }
    }
    // The common tail: 40 kept entries, the compaction, 60 more.
    let mut tail_rng = Rng(4242);
    let kept_start = builder.path.len();
    for _ in 0..10 {
        builder.turn(&mut tail_rng);
    }
    let first_kept = builder.path[kept_start].clone();
    builder.compaction(&mut tail_rng, first_kept);
    for _ in 0..15 {
        builder.turn(&mut tail_rng);
    }
    builder.lines
}

fn open(db: &Path) -> SessionStore {
    SessionStore::open(StoreConfig {
        location: StoreLocation::File(db.to_path_buf()),
        clock: Arc::new(SteppingClock::new(1_800_000_000_000, 1000)),
        ids: Arc::new(IdSource::seeded(5)),
        busy_timeout: Duration::from_secs(10),
    })
    .expect("open store")
}

fn drop_page_cache(db: &Path) {
    let conn = rusqlite::Connection::open(db).expect("checkpoint connection");
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .expect("checkpoint");
    drop(conn);
    for suffix in ["", "-wal", "-shm"] {
        let path = format!("{}{suffix}", db.display());
        if let Ok(file) = std::fs::File::open(&path) {
            let _ = file.sync_all();
            let _ = nix::fcntl::posix_fadvise(
                file.as_fd(),
                0,
                0,
                nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
            );
        }
    }
}

fn percentile(sorted: &[Duration], pct: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * pct).round() as usize;
    sorted[idx]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let only: Option<usize> = args
        .iter()
        .position(|arg| arg == "--only")
        .and_then(|idx| args.get(idx + 1))
        .and_then(|value| value.parse().ok());
    let sizes: Vec<usize> = match only {
        Some(size) => vec![size],
        None if args.iter().any(|arg| arg == "--quick") => vec![1_000, 10_000],
        None => vec![1_000, 10_000, 100_000],
    };
    let dir = tempfile::tempdir().expect("temp dir");
    // PI_BENCH_DIR keeps the databases for inspection.
    let kept = std::env::var_os("PI_BENCH_DIR").map(std::path::PathBuf::from);
    let base = kept.clone().unwrap_or_else(|| dir.path().to_path_buf());
    println!(
        "store benchmark ({} build)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );

    // Phase 1: build each session and measure durable appends.
    struct Built {
        size: usize,
        db: std::path::PathBuf,
        session: SessionId,
        appends: Vec<Duration>,
        messages: usize,
        bytes: usize,
    }
    let mut built = Vec::new();
    for size in sizes {
        let db = base.join(format!("bench-{size}.db"));
        let _ = std::fs::remove_file(&db);
        let store = open(&db);
        let lines = build_lines(size, size as u64);
        let header = SessionHeader::new(
            SessionId::new(format!("bench-{size}")),
            iso_from_ms(1_767_225_600_000),
            "/bench".into(),
            None,
        );
        let session = store
            .insert_raw_session(&header, header.to_line().as_bytes(), &lines)
            .expect("insert");
        // Durable appends (each one transaction with synchronous=FULL), onto a side branch
        // so that the measured context stays the common tail.
        let leaf = store.leaf(&session.id).expect("leaf").expect("a leaf");
        let leaf_id = leaf.entry.id.expect("leaf id");
        let mut rng = Rng(99);
        let mut appends = Vec::with_capacity(300);
        for idx in 0..300 {
            let message = if idx % 2 == 0 {
                user(&mut rng, idx)
            } else {
                assistant(&mut rng, idx, None)
            };
            let start = Instant::now();
            store.append_message(&session.id, message).expect("append");
            appends.push(start.elapsed());
        }
        store.branch(&session.id, &leaf_id).expect("branch back");
        appends.sort();
        let context = store
            .context(&session.id, &LeafSelector::Current)
            .expect("context");
        built.push(Built {
            size,
            db,
            session: session.id,
            appends,
            messages: context.messages.len(),
            bytes: context.messages.iter().map(String::len).sum(),
        });
    }

    // Phase 2: interleaved rounds, so that every size sees the same machine noise.
    // Warm: a long-lived store (checkpointed, as a running pi is), caches hot.
    // Cold: a fresh store, then the db/WAL files dropped from the OS page cache; the
    // measured time is the rebuild alone.
    let mut warm: Vec<Vec<Duration>> = vec![Vec::new(); built.len()];
    let mut cold: Vec<Vec<Duration>> = vec![Vec::new(); built.len()];
    let mut live = Vec::new();
    for item in &built {
        drop_page_cache(&item.db);
        let store = open(&item.db);
        store
            .context(&item.session, &LeafSelector::Current)
            .expect("warm up");
        live.push(store);
    }
    for _round in 0..11 {
        for (idx, item) in built.iter().enumerate() {
            for _ in 0..3 {
                let start = Instant::now();
                let context = live[idx]
                    .context(&item.session, &LeafSelector::Current)
                    .expect("context");
                warm[idx].push(start.elapsed());
                assert_eq!(context.messages.len(), item.messages);
            }
            let fresh = open(&item.db);
            drop_page_cache(&item.db);
            let start = Instant::now();
            let context = fresh
                .context(&item.session, &LeafSelector::Current)
                .expect("context");
            cold[idx].push(start.elapsed());
            assert_eq!(context.messages.len(), item.messages);
        }
    }
    println!(
        "{:>8} {:>9} {:>9} {:>8} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10}",
        "entries",
        "db MB",
        "ctx msgs",
        "ctx KB",
        "append p50",
        "append p99",
        "warm p50",
        "warm p99",
        "cold p50",
        "cold p99"
    );
    for (idx, item) in built.iter().enumerate() {
        warm[idx].sort();
        cold[idx].sort();
        let db_mb = std::fs::metadata(&item.db)
            .map(|meta| meta.len())
            .unwrap_or(0) as f64
            / 1e6;
        println!(
            "{:>8} {:>9.1} {:>9} {:>8.0} {:>9.2}ms {:>9.2}ms {:>8.2}ms {:>8.2}ms {:>8.2}ms {:>8.2}ms",
            item.size,
            db_mb,
            item.messages,
            item.bytes as f64 / 1024.0,
            ms(percentile(&item.appends, 0.5)),
            ms(percentile(&item.appends, 0.99)),
            ms(percentile(&warm[idx], 0.5)),
            ms(percentile(&warm[idx], 0.99)),
            ms(percentile(&cold[idx], 0.5)),
            ms(percentile(&cold[idx], 0.99)),
        );
    }
    if built.len() > 1 {
        let first = 0;
        let last = built.len() - 1;
        println!(
            "ratio {}k/{}k entries: warm p50 {:.2}x, cold p50 {:.2}x",
            built[last].size / 1000,
            built[first].size / 1000,
            ms(percentile(&warm[last], 0.5)) / ms(percentile(&warm[first], 0.5)),
            ms(percentile(&cold[last], 0.5)) / ms(percentile(&cold[first], 0.5)),
        );
    }
}
