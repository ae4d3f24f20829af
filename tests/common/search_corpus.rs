//! The search benchmark's corpus at the size the tests use (40 sessions of 300 messages,
//! `corpus.rs`'s generator) in a database file, its query shapes, and what search answers
//! for them — shared by `suite::search_golden` (which pins the answers) and
//! `suite::reindex` (which holds a stepped reindex to them).
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pi::store::search::{Query, SearchRequest};
use pi::store::{ListScope, SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::SteppingClock;
use pi::support::ids::IdSource;
use serde_json::{Value, json};

use crate::common::corpus::{Rng, Vocabulary, session_lines};

const SESSIONS: usize = 40;
const MESSAGES: usize = 300;
/// "Now" for the recency boost: a day after the last session starts.
const NOW_MS: i64 = 1_735_689_600_000 + 30 * 3_600_000 * 7;

/// The corpus of the search benchmark in a new database file (also the reindex tests').
pub fn build(db: &Path) -> (SessionStore, Vocabulary) {
    let store = SessionStore::open(StoreConfig {
        location: StoreLocation::File(db.to_path_buf()),
        clock: Arc::new(SteppingClock::new(NOW_MS, 1)),
        ids: Arc::new(IdSource::seeded(1)),
        busy_timeout: Duration::from_secs(30),
    })
    .unwrap();
    let mut rng = Rng(2026);
    let vocab = Vocabulary::new(&mut rng);
    for session_idx in 0..SESSIONS {
        let (header, lines) = session_lines(&vocab, &mut rng, session_idx, MESSAGES);
        store
            .insert_raw_session(&header, header.to_line().as_bytes(), &lines)
            .unwrap();
    }
    store.optimize_search_index_after_load(0).unwrap();
    (store, vocab)
}

/// The benchmark's query shapes over words of this corpus's frequencies, in both scopes, and
/// the other shapes a search takes (prefix, OR, NOT, filters).
fn queries(vocab: &Vocabulary) -> Vec<(String, ListScope, Vec<String>)> {
    let rare = &vocab.words[9_000];
    let medium = &vocab.words[300];
    let medium2 = &vocab.words[200];
    let texts = vec![
        rare.clone(),
        medium.clone(),
        format!("{medium} {medium2}"),
        "\"cannot find value\"".to_owned(),
        "the".to_owned(),
        "the error".to_owned(),
        format!("{} {}", vocab.words[60], vocab.words[61]),
        format!("{}*", &medium[..3]),
        format!("{rare} OR {medium2}"),
        format!("{medium} NOT {medium2}"),
        "\"test\" ok".to_owned(),
        format!("the {rare}"),
    ];
    let mut out = Vec::new();
    for text in &texts {
        out.push((text.clone(), ListScope::All, Vec::new()));
        out.push((
            text.clone(),
            ListScope::Cwd("/home/dev/project-3".to_owned()),
            Vec::new(),
        ));
    }
    out.push(("the".to_owned(), ListScope::All, vec!["user".to_owned()]));
    out.push((medium.clone(), ListScope::All, vec!["tool".to_owned()]));
    out
}

/// Every query's hits, in order, with snippets, flags and scores.
pub fn answers(store: &SessionStore, vocab: &Vocabulary) -> Value {
    let mut out = Vec::new();
    for (text, scope, roles) in queries(vocab) {
        let request = SearchRequest {
            query: Query::parse(&text).unwrap(),
            scope: scope.clone(),
            session: None,
            roles: roles.clone(),
            kinds: Vec::new(),
            since_ms: None,
            until_ms: None,
            model: None,
            active_only: false,
            limit: 20,
            now_ms: NOW_MS,
            highlight: ("[".to_owned(), "]".to_owned()),
            snippet_width: 80,
        };
        let hits: Vec<Value> = store
            .search(&request)
            .unwrap()
            .into_iter()
            .map(|hit| {
                json!({
                    "session": hit.session.as_str(),
                    "seq": hit.seq,
                    "role": hit.role,
                    "kind": hit.kind,
                    "snippet": hit.snippet,
                    "score": hit.score,
                    "on_active_path": hit.on_active_path,
                })
            })
            .collect();
        out.push(json!({
            "query": text,
            "scope": match &scope {
                ListScope::All => "all".to_owned(),
                ListScope::Cwd(cwd) => cwd.clone(),
            },
            "roles": roles,
            "hits": hits,
        }));
    }
    Value::Array(out)
}
