//! Which pages one durable append writes (`docs/BENCHMARKS.md`, "Agent turns").
//!
//! Appends a warm-up conversation to a fresh store, then appends a user message and an
//! assistant message (with usage) one at a time, checkpointing the WAL before each, and reads
//! the WAL frames the append produced: how many frames (each a 4 KiB page write, two `pwrite`s)
//! and which table or index each page belongs to (SQLite's `dbstat`).
//!
//! `cargo bench --bench append_pages [-- TURNS]` (default 200 warm-up turns).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pi::model::message::AgentMessage;
use pi::store::{NewSession, SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::SystemClock;
use pi::support::ids::IdSource;
use rusqlite::Connection;
use serde_json::json;

fn user(idx: usize) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "user",
        "content": format!("Please look at src/module_{idx}.rs and explain why the build fails with error E0308 in function handle_{idx}"),
        "timestamp": 1_764_000_000_000i64 + idx as i64,
    }))
    .expect("user message")
}

fn assistant(idx: usize) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "assistant",
        "content": [{"type": "text", "text": format!("The function handle_{idx} returns a String where the caller expects &str; borrow it with .as_str() or change the signature. Nothing else in module_{idx} needs to change.")}],
        "api": "openai-completions",
        "provider": "bench",
        "model": "bench-model",
        "usage": {"input": 1200, "output": 80, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1280,
                  "cost": {"input": 0.001, "output": 0.0005, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0015}},
        "stopReason": "stop",
        "timestamp": 1_764_000_000_500i64 + idx as i64,
    }))
    .expect("assistant message")
}

/// Page numbers of the frames in a WAL file, in order.
fn wal_pages(wal: &Path) -> Vec<u32> {
    let bytes = std::fs::read(wal).unwrap_or_default();
    if bytes.len() < 32 {
        return Vec::new();
    }
    let page_size = u32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let mut pages = Vec::new();
    let mut at = 32;
    while at + 24 + page_size <= bytes.len() {
        pages.push(u32::from_be_bytes(
            bytes[at..at + 4].try_into().expect("4 bytes"),
        ));
        at += 24 + page_size;
    }
    pages
}

fn owner(conn: &Connection, page: u32) -> String {
    conn.query_row("SELECT name FROM dbstat WHERE pageno = ?1", [page], |row| {
        row.get::<_, String>(0)
    })
    .unwrap_or_else(|_| format!("page {page} (free or header)"))
}

fn main() {
    let turns: usize = std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with('-'))
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("pi.db");
    let wal = dir.path().join("pi.db-wal");
    let store = SessionStore::open(StoreConfig {
        location: StoreLocation::File(db.clone()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(IdSource::seeded(1)),
        busy_timeout: Duration::from_secs(10),
    })
    .expect("open the store");
    let session = store
        .create_session(&NewSession {
            cwd: "/bench".into(),
            parent_session: None,
        })
        .expect("session")
        .id;
    for idx in 0..turns {
        store.append_message(&session, user(idx)).expect("append");
        store
            .append_message(&session, assistant(idx))
            .expect("append");
    }
    let raw = Connection::open(&db).expect("raw connection");
    println!("after {turns} warm-up turns (two entries each):");
    for (label, message) in [
        ("user message", user(turns)),
        ("assistant message with usage", assistant(turns)),
    ] {
        raw.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .expect("checkpoint");
        store.append_message(&session, message).expect("append");
        let pages = wal_pages(&wal);
        let mut by_owner: BTreeMap<String, usize> = BTreeMap::new();
        for page in &pages {
            *by_owner.entry(owner(&raw, *page)).or_default() += 1;
        }
        println!(
            "{label}: {} frames ({} distinct pages)",
            pages.len(),
            pages.iter().collect::<std::collections::HashSet<_>>().len()
        );
        for (name, count) in by_owner {
            println!("  {count:>2}  {name}");
        }
    }
}
