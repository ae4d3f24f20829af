//! Unit tests of the pure parts: query rendering, indexing text, snippets, docids, ranking.

use std::borrow::Cow;

use super::docs::joined;
use super::*;

fn fts(input: &str) -> Result<String, QueryError> {
    Query::parse(input).map(|query| query.to_fts())
}

#[test]
fn queries_render_as_quoted_fts5() {
    assert_eq!(fts("SessionManager").unwrap(), "\"SessionManager\"");
    assert_eq!(fts("cargo test").unwrap(), "(\"cargo\" AND \"test\")");
    assert_eq!(fts("\"src/auth.ts\"").unwrap(), "\"src/auth.ts\"");
    assert_eq!(fts("sess*").unwrap(), "\"sess\"*");
    assert_eq!(fts("a OR b NOT c").unwrap(), "(\"a\" OR (\"b\" NOT \"c\"))");
    assert_eq!(fts("(a OR b) c").unwrap(), "((\"a\" OR \"b\") AND \"c\")");
    assert!(fts("NEAR(").unwrap_err().0.contains("parenthesis"));
    assert_eq!(
        fts("NEAR(a b)").unwrap(),
        "(\"NEAR\" AND (\"a\" AND \"b\"))"
    );
    assert!(fts("it's \"x").unwrap_err().0.contains("unclosed"));
    assert!(fts("say \"hi\"\"").unwrap_err().0.contains("unclosed"));
    assert_eq!(
        fts("'; DROP TABLE entries; --").unwrap(),
        "((\"DROP\" AND \"TABLE\") AND \"entries;\")"
    );
    assert_eq!(fts("数据库连接").unwrap(), "\"数据 据库 库连 连接\"");
}

#[test]
fn and_not_is_not() {
    assert_eq!(fts("a AND NOT b").unwrap(), fts("a NOT b").unwrap());
    assert_eq!(
        fts("a b AND NOT c").unwrap(),
        "((\"a\" AND \"b\") NOT \"c\")"
    );
    assert_eq!(
        fts("a AND NOT b AND c").unwrap(),
        "((\"a\" NOT \"b\") AND \"c\")"
    );
    assert!(fts("AND NOT b").unwrap_err().0.contains("needs a term"));
    assert!(
        fts("a AND NOT")
            .unwrap_err()
            .0
            .contains("NOT needs a term after it")
    );
    assert!(
        fts("NOT b")
            .unwrap_err()
            .0
            .contains("NOT needs a term before it")
    );
}

#[test]
fn hostile_queries_get_a_reason() {
    for input in [
        "", "   ", "AND", "NOT x", "x NOT", "OR y", "-", "*", "🎉", "(a", "a)", "\"",
    ] {
        let error = Query::parse(input).unwrap_err();
        assert!(!error.0.is_empty(), "{input}");
    }
    let long = "word ".repeat(2000);
    assert!(Query::parse(&long).unwrap_err().0.contains("at most"));
}

#[test]
fn joined_parts_equal_a_join_and_one_part_is_borrowed() {
    for parts in [
        vec![],
        vec!["one"],
        vec!["one", "two"],
        vec!["", "two", ""],
        vec!["a", "b", "c"],
    ] {
        assert_eq!(joined(parts.iter().copied()), parts.join("\n"), "{parts:?}");
    }
    assert!(matches!(joined(["one"].into_iter()), Cow::Borrowed("one")));
}

#[test]
fn text_without_cjk_is_indexed_as_it_is_without_a_copy() {
    // Non-ASCII below U+3040 (Latin, dashes, euro sign) and above it (emoji) but no CJK.
    for text in ["plain text", "Köln — “quoted” 5 €", "done 🎉 ok", ""] {
        assert!(
            matches!(index_text(text), Cow::Borrowed(same) if same == text),
            "{text}"
        );
    }
    assert!(matches!(index_text("错误"), Cow::Owned(_)));
    assert_eq!(index_text("안녕하세요").split_whitespace().count(), 4);
}

#[test]
fn cjk_runs_become_bigrams() {
    let tokens = |text: &str| {
        index_text(text)
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(tokens("错误: 数据库"), ["错误", ":", "数据", "据库"]);
    assert_eq!(tokens("a字b"), ["a", "字", "b"]);
    assert_eq!(index_text("plain text"), "plain text");
}

#[test]
fn snippets_mark_terms_and_phrases() {
    let text = "first line\nthe connection was refused by the server at port 5432\nlast";
    let terms = Query::parse("\"connection was refused\" port")
        .unwrap()
        .positive_terms();
    let out = snippet(text, &terms, "[", "]", 80);
    assert!(out.contains("[connection was refused]"), "{out}");
    assert!(out.contains("[port]"), "{out}");
    let out = snippet(
        "SessionManager.open(file)",
        &[("sessionman".into(), true)],
        "[",
        "]",
        80,
    );
    assert_eq!(out, "[SessionManager].open(file)");
}

#[test]
fn recency_breaks_ties_but_relevance_decides() {
    assert!(score(-10.0, 0) > score(-10.0, 86_400_000 * 60));
    assert!(score(-10.0, 86_400_000 * 365) > score(-4.0, 0));
}

#[test]
fn a_docid_carries_day_order_and_length() {
    let day = docid::day_of_ms(1_748_077_205_165);
    assert_eq!(day, 20_232);
    let id = docid::make(day, docid::PER_DAY - 1, 1_000);
    assert!(id > 0);
    assert_eq!(docid::day(id), day);
    assert_eq!(docid::time_ms(id), 20_232 * 86_400_000 + 43_200_000);
    assert_eq!(docid::order(id), docid::PER_DAY - 1);
    assert!((docid::length(id) - 1_000.0).abs() <= 45.0);
    assert!(id >= docid::first_of_day(day));
    assert!(id < docid::first_of_day(day + 1));
    // Docids sort by day first, then by order within the day.
    assert!(docid::make(day, 0, 60_000) < docid::make(day, 1, 0));
    assert!(docid::make(day, docid::PER_DAY - 1, 60_000) < docid::make(day + 1, 0, 0));
    // Lengths: exact for the shortest documents, within 4.4 % above, shared past the cap.
    for tokens in [0usize, 1, 2, 3, 7, 20, 99, 1_234, 50_000] {
        let carried = docid::length(docid::make(day, 0, tokens));
        let tolerance = (tokens as f64) * 0.045 + 0.5;
        assert!(
            (carried - tokens as f64).abs() <= tolerance,
            "{tokens}: {carried}"
        );
    }
    assert_eq!(
        docid::length(docid::make(day, 0, 1 << 20)),
        docid::length(docid::make(day, 0, 1 << 30))
    );
    // Times outside the range are clamped; the last day's range ends at i64::MAX.
    assert_eq!(docid::day_of_ms(-5_000), 1);
    assert_eq!(docid::day_of_ms(0), 1);
    assert_eq!(docid::first_of_day((1 << 20) + 7), i64::MAX);
    assert!(docid::make(i64::MAX, 0, 0) > 0);
    assert!(!docid::day_in_range(1 << 20));
}

#[test]
fn tokens_are_counted_and_single_tokens_folded_as_the_tokenizer_does() {
    assert_eq!(token_count("fix the src/auth.ts error, again!"), 7);
    assert_eq!(token_count(""), 0);
    assert_eq!(token_count("  ...  "), 0);
    assert_eq!(token_count(&index_text("日本語の文章 test")), 6);
    assert_eq!(
        single_token("SessionManager").as_deref(),
        Some("sessionmanager")
    );
    assert_eq!(single_token("Café").as_deref(), Some("cafe"));
    assert_eq!(single_token("src/auth.ts"), None);
    assert_eq!(single_token("two words"), None);
    assert_eq!(single_token("日本").as_deref(), Some("日本"));
    assert_eq!(single_token("日本語"), None);
    assert_eq!(single_token("!!"), None);
}

#[test]
fn term_frequencies_count_per_document_across_a_prefix_s_tokens() {
    let mut one = TermFrequencies::default();
    for docid in [3, 3, 5, 9, 9, 9] {
        one.add(docid);
    }
    one.finish();
    assert_eq!(one.docs(), 3);
    assert_eq!(
        (one.get(3), one.get(5), one.get(9), one.get(4)),
        (Some(2), Some(1), Some(3), None)
    );
    // A prefix: each token's documents in order, the tokens one after the other.
    let mut prefix = TermFrequencies::default();
    for docid in [2, 7, 7, 1, 7, 8, 2] {
        prefix.add(docid);
    }
    prefix.finish();
    assert_eq!(prefix.docs(), 4);
    let counts: Vec<Option<u32>> = [1, 2, 7, 8, 3].iter().map(|&doc| prefix.get(doc)).collect();
    assert_eq!(counts, [Some(1), Some(2), Some(3), Some(1), None]);
}

#[test]
fn plain_word_queries_offer_an_exact_phrase() {
    let query = Query::parse("connection refused").unwrap();
    assert_eq!(
        query.as_phrase().unwrap().to_fts(),
        "\"connection refused\""
    );
    assert!(Query::parse("a OR b").unwrap().as_phrase().is_none());
    assert!(Query::parse("single").unwrap().as_phrase().is_none());
}
