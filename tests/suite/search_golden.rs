//! Pins what search answers — the hits, their order, snippets, flags and scores — for the
//! search benchmark's query shapes over a generated corpus (`tests/common/corpus.rs`, the
//! benchmark's generator at a smaller size), against `fixtures/search/golden.json`.
//!
//! The file was written by the search of stop 29 (which read FTS5's index pages itself); the
//! search through FTS5's supported interfaces only must answer the same. To rewrite it after
//! a deliberate change of ranking: `PI_BLESS=1 cargo test --test all search_golden`, and say
//! why in the commit.

use std::path::Path;

use serde_json::Value;

use crate::common::search_corpus::{answers, build};

fn golden_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/search/golden.json")
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
