//! Pins what search answers — the hits, their order, snippets, flags and scores — for the
//! search benchmark's query shapes over a generated corpus (`tests/common/corpus.rs`, the
//! benchmark's generator at a smaller size), against `fixtures/search/golden.json`.
//!
//! The file was written by the search of stop 29 (which read FTS5's index pages itself); the
//! search through FTS5's supported interfaces only must answer the same. To rewrite it after
//! a deliberate change of ranking: `PI_BLESS=1 cargo test --test all search_golden`, and say
//! why in the commit.

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

fn golden_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/search/golden.json")
}

/// The corpus of the search benchmark in a new database file (also the reindex tests').
pub(super) fn build(db: &Path) -> (SessionStore, Vocabulary) {
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
pub(super) fn answers(store: &SessionStore, vocab: &Vocabulary) -> Value {
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

#[test]
fn search_answers_the_benchmark_queries_as_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let (store, vocab) = build(&dir.path().join("golden.db"));
    let got = answers(&store, &vocab);
    if std::env::var_os("PI_BLESS").is_some() {
        std::fs::write(
            golden_path(),
            serde_json::to_string_pretty(&got).unwrap() + "\n",
        )
        .unwrap();
        return;
    }
    let want: Value = serde_json::from_str(&std::fs::read_to_string(golden_path()).unwrap())
        .expect("fixtures/search/golden.json");
    let (got, want) = (got.as_array().unwrap(), want.as_array().unwrap());
    assert_eq!(got.len(), want.len(), "number of queries");
    let mut hits = 0;
    for (got, want) in got.iter().zip(want) {
        let label = format!("{} in {}", want["query"], want["scope"]);
        assert_eq!(got["query"], want["query"]);
        let (got_hits, want_hits) = (
            got["hits"].as_array().unwrap(),
            want["hits"].as_array().unwrap(),
        );
        let key = |hit: &Value| -> Value {
            let mut hit = hit.clone();
            hit.as_object_mut().unwrap().remove("score");
            hit
        };
        assert_eq!(
            got_hits.iter().map(key).collect::<Vec<_>>(),
            want_hits.iter().map(key).collect::<Vec<_>>(),
            "{label}: hits, order, snippets and flags"
        );
        for (got, want) in got_hits.iter().zip(want_hits) {
            let (got, want) = (
                got["score"].as_f64().unwrap(),
                want["score"].as_f64().unwrap(),
            );
            assert!(
                (got - want).abs() <= want.abs() * 1e-9,
                "{label}: score {got}, was {want}"
            );
        }
        hits += want_hits.len();
    }
    // The corpus and queries exercise something: most queries have hits.
    assert!(hits > 300, "{hits} hits in all");
}
