//! A generated corpus of coding sessions (prose, code, compiler and test output over a skewed
//! vocabulary of 30,000 words), seeded, shared by the search benchmark (`benches/search.rs`,
//! through `#[path]`) and the test that pins search results (`tests/suite/search_golden.rs`).
#![allow(dead_code)]

use pi::model::entry::EntryKind;
use pi::model::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, ToolCall, ToolResultMessage, Usage,
    UserContent, UserMessage,
};
use pi::model::{Entry, EntryId, SessionHeader, SessionId};
use pi::store::RawEntry;
use pi::support::clock::iso_from_ms;
use pi::support::ids::IdSource;
use serde_json::{Map, json};

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A skewed index: small indexes are much more likely (roughly Zipf-like).
    pub fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((n as f64) * u.powi(4)) as usize
    }
}

pub const COMMON: &[&str] = &[
    "the", "a", "to", "of", "and", "in", "is", "it", "for", "that", "this", "with", "on", "we",
    "be", "as", "not", "are", "from", "file", "test", "function", "error", "value", "return",
    "should", "can", "use", "need", "now", "then", "if", "when", "but", "add", "fix", "check",
    "run", "build", "change", "update", "code", "line", "type", "data", "new", "call", "read",
];

pub struct Vocabulary {
    pub words: Vec<String>,
}

impl Vocabulary {
    pub fn new(rng: &mut Rng) -> Self {
        const SYLLABLES: &[&str] = &[
            "ka", "lo", "mi", "ser", "vent", "dra", "pol", "tix", "nor", "bel", "cra", "fen", "gu",
            "hal", "jor", "kim", "lux", "mar", "nek", "ost", "pra", "quen", "rid", "sol",
        ];
        let mut words: Vec<String> = COMMON.iter().map(|word| (*word).to_owned()).collect();
        while words.len() < 30_000 {
            let parts = 2 + rng.below(3);
            let mut word = String::new();
            for _ in 0..parts {
                word.push_str(SYLLABLES[rng.below(SYLLABLES.len())]);
            }
            if rng.below(6) == 0 {
                // An identifier: camelCase with a second word.
                let second = SYLLABLES[rng.below(SYLLABLES.len())];
                word = format!("{word}{}{}", second[..1].to_uppercase(), &second[1..]);
            }
            words.push(word);
        }
        Self { words }
    }

    pub fn word(&self, rng: &mut Rng) -> &str {
        &self.words[rng.skewed(self.words.len())]
    }

    pub fn prose(&self, rng: &mut Rng, bytes: usize) -> String {
        let mut out = String::with_capacity(bytes + 16);
        while out.len() < bytes {
            out.push_str(self.word(rng));
            out.push(match rng.below(14) {
                0 => '.',
                1 => ',',
                _ => ' ',
            });
            if rng.below(40) == 0 {
                out.push('\n');
            }
        }
        out
    }

    pub fn code(&self, rng: &mut Rng, lines: usize) -> String {
        let mut out = String::new();
        for idx in 0..lines {
            let a = self.word(rng).to_owned();
            let b = self.word(rng).to_owned();
            match idx % 4 {
                0 => out.push_str(&format!(
                    "fn {a}_{b}(value: &str) -> Result<(), Error> {{\n"
                )),
                1 => out.push_str(&format!("    let {a} = {b}.get(\"{a}\")?;\n")),
                2 => out.push_str(&format!("    // {}\n", self.prose(rng, 40).trim())),
                _ => out.push_str("}\n"),
            }
        }
        out
    }

    pub fn tool_output(&self, rng: &mut Rng, lines: usize) -> String {
        let mut out = String::new();
        for idx in 0..lines {
            let file = format!("src/{}/{}.rs", self.word(rng), self.word(rng));
            match rng.below(5) {
                0 => out.push_str(&format!(
                    "error[E0{:03}]: cannot find value `{}` in this scope\n  --> {file}:{}:{}\n",
                    rng.below(999),
                    self.word(rng),
                    idx + 1,
                    rng.below(80)
                )),
                1 => out.push_str(&format!(
                    "test {}::{} ... ok\n",
                    self.word(rng),
                    self.word(rng)
                )),
                2 => out.push_str(&format!(
                    "{file}:{}: {}\n",
                    idx + 1,
                    self.prose(rng, 50).trim()
                )),
                _ => out.push_str(&format!("{}\n", self.prose(rng, 70).trim())),
            }
        }
        out
    }
}

pub fn session_lines(
    vocab: &Vocabulary,
    rng: &mut Rng,
    session_idx: usize,
    messages: usize,
) -> (SessionHeader, Vec<RawEntry>) {
    let ids = IdSource::seeded(session_idx as u64 + 1);
    let start_ms = 1_735_689_600_000 + session_idx as i64 * 3_600_000 * 7;
    let header = SessionHeader::new(
        SessionId::new(format!("bench-{session_idx:05}")),
        iso_from_ms(start_ms),
        format!("/home/dev/project-{}", session_idx % 50),
        None,
    );
    let mut lines = Vec::with_capacity(messages);
    let mut parent: Option<EntryId> = None;
    let mut taken = std::collections::HashSet::new();
    let mut ts = start_ms;
    let mut call = 0;
    while lines.len() < messages {
        let kind = match lines.len() % 4 {
            0 => {
                let size = 80 + rng.below(400);
                AgentMessage::User(UserMessage {
                    content: UserContent::Text(vocab.prose(rng, size)),
                    timestamp: ts,
                    extra: Map::new(),
                })
            }
            1 => {
                call += 1;
                let size = 100 + rng.below(600);
                AgentMessage::Assistant(AssistantMessage {
                    content: vec![
                        ContentBlock::text(vocab.prose(rng, size)),
                        ContentBlock::ToolCall(ToolCall {
                            id: format!("call_{call}"),
                            name: "bash".into(),
                            arguments: json!({"command": format!("cargo test {}", vocab.word(rng))}),
                            arguments_error: None,
                            thought_signature: None,
                            extra: Map::new(),
                        }),
                    ],
                    api: "anthropic-messages".into(),
                    provider: "anthropic".into(),
                    model: "claude-sonnet-4-5".into(),
                    usage: Usage::default(),
                    stop_reason: StopReason::ToolUse,
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
            2 => {
                let lines_out = 5 + rng.below(40);
                let text = if rng.below(3) == 0 {
                    vocab.code(rng, lines_out)
                } else {
                    vocab.tool_output(rng, lines_out)
                };
                AgentMessage::ToolResult(ToolResultMessage {
                    tool_call_id: format!("call_{call}"),
                    tool_name: "bash".into(),
                    content: vec![ContentBlock::text(text)],
                    details: None,
                    usage: None,
                    is_error: false,
                    duration_ms: None,
                    timestamp: ts,
                    nested_calls: None,
                    extra: Map::new(),
                })
            }
            _ => {
                let size = 80 + rng.below(500);
                AgentMessage::Assistant(AssistantMessage {
                    content: vec![ContentBlock::text(vocab.prose(rng, size))],
                    api: "anthropic-messages".into(),
                    provider: "anthropic".into(),
                    model: "claude-sonnet-4-5".into(),
                    usage: Usage::default(),
                    stop_reason: StopReason::Stop,
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
        };
        ts += 1000 + rng.below(20_000) as i64;
        let id = EntryId::generate(&ids, |candidate| taken.contains(candidate));
        taken.insert(id.to_string());
        let entry = Entry {
            id: Some(id.clone()),
            parent_id: parent.replace(id),
            timestamp: iso_from_ms(ts),
            kind: EntryKind::Message(kind),
            extra: Map::new(),
        };
        lines.push(RawEntry {
            payload: entry.to_line().into_bytes(),
            entry,
        });
    }
    (header, lines)
}
