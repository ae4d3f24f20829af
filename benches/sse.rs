//! SSE decoding throughput: how fast recorded provider streams turn into events.
//!
//! Run: `cargo bench --bench sse` (release profile; not part of CI). Prints, for a long
//! OpenAI-compatible stream, a long OpenAI Responses stream, a long Anthropic stream, a
//! long Gemini stream (decoded twice: `google (tree)` reads every chunk into a JSON tree, as
//! before the typed view; `google` is what pi runs), a long Mistral stream and a long Codex
//! stream (built
//! from the recorded fixture frames, ~8 MB each, fed in 16 KiB network-sized pieces):
//! - framing only (`SseDecoder`): MB/s and frames/s;
//! - full decoding (framing + JSON + events + message building): MB/s, events/s and heap
//!   allocations per event, counted by `stats_alloc`'s instrumented system allocator — with
//!   `--features system-allocator` only: without it the library's global allocator
//!   (mimalloc, as `pi` runs) stays, the throughput is measured on it and nothing is counted.
//!
//! Figures are recorded in docs/BENCHMARKS.md.

#[cfg(feature = "system-allocator")]
use std::alloc::System;
use std::collections::VecDeque;
use std::time::Instant;

use pi::ai::anthropic::AnthropicDecoder;
use pi::ai::codex::CodexDecoder;
use pi::ai::google::GoogleDecoder;
use pi::ai::mistral::MistralDecoder;
use pi::ai::models::{Model, builtin_models};
use pi::ai::openai::OpenAiDecoder;
use pi::ai::responses::{Flavor, ResponsesDecoder};
use pi::ai::sse::SseDecoder;
use pi::ai::{StreamEvent, new_assistant_message};
#[cfg(feature = "system-allocator")]
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[cfg(feature = "system-allocator")]
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const TARGET_BYTES: usize = 8 * 1024 * 1024;
const PIECE: usize = 16 * 1024;
const ROUNDS: usize = 5;

/// Token-sized pieces of text, as models stream them.
const WORDS: &[&str] = &[
    "The",
    " `src`",
    " directory",
    " holds",
    " main",
    ".rs",
    " and",
    " lib",
    ".rs",
    ";",
    " each",
    " module",
    " owns",
    " one",
    " layer",
    ".\n",
    "```rust",
    "\nfn",
    " main",
    "()",
    " {",
    "}\n",
    " ünï",
    "cödé",
    " 🎉",
    " \"quoted\"",
    " back\\slash",
    ",",
    " tab\t",
];

fn model(provider: &str, id: &str) -> Model {
    builtin_models()
        .iter()
        .find(|model| model.provider == provider && model.id == id)
        .cloned()
        .expect("model in the built-in table")
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn openai_stream() -> Vec<u8> {
    let mut out = String::new();
    let head = r#"{"id":"chatcmpl-9x2Lr7","object":"chat.completion.chunk","created":1767225600,"model":"qwen3-14b","system_fingerprint":"b6002-llama.cpp","choices":[{"index":0,"delta":"#;
    let mut idx = 0;
    while out.len() < TARGET_BYTES / 2 {
        let word = WORDS[idx % WORDS.len()];
        out.push_str(&format!(
            "data: {head}{{\"reasoning_content\":{}}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n",
            json_string(word)
        ));
        idx += 1;
    }
    while out.len() < TARGET_BYTES {
        let word = WORDS[idx % WORDS.len()];
        out.push_str(&format!(
            "data: {head}{{\"content\":{}}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n",
            json_string(word)
        ));
        idx += 1;
    }
    out.push_str(&format!(
        "data: {head}{{}},\"logprobs\":null,\"finish_reason\":\"stop\"}}]}}\n\n"
    ));
    out.push_str("data: {\"id\":\"chatcmpl-9x2Lr7\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":50}}\n\ndata: [DONE]\n\n");
    out.into_bytes()
}

fn anthropic_stream() -> Vec<u8> {
    let mut out = String::new();
    out.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5-20250929\",\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":259,\"output_tokens\":1}}}\n\n");
    out.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n");
    let mut idx = 0;
    while out.len() < TARGET_BYTES / 2 {
        out.push_str(&format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"thinking_delta\",\"thinking\":{}}}}}\n\n",
            json_string(WORDS[idx % WORDS.len()])
        ));
        idx += 1;
    }
    out.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    );
    out.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    while out.len() < TARGET_BYTES {
        out.push_str(&format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{{\"type\":\"text_delta\",\"text\":{}}}}}\n\n",
            json_string(WORDS[idx % WORDS.len()])
        ));
        idx += 1;
        if idx % 64 == 0 {
            out.push_str("event: ping\ndata: {\"type\": \"ping\"}\n\n");
        }
    }
    out.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    );
    out.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    out.into_bytes()
}

/// A Responses stream as the API sends it (`fixtures/providers/responses-*.sse`): a reasoning
/// item with summary deltas, then a message item with text deltas, every event named and
/// numbered.
fn responses_stream() -> Vec<u8> {
    let mut out = String::new();
    let mut seq = 0usize;
    let mut event = |out: &mut String, kind: &str, body: String| {
        out.push_str(&format!(
            "event: {kind}\ndata: {{\"type\":\"{kind}\",{body},\"sequence_number\":{seq}}}\n\n"
        ));
        seq += 1;
    };
    event(&mut out, "response.created", r#""response":{"id":"resp_0a1b2c","object":"response","created_at":1767225600,"status":"in_progress","model":"gpt-5.4-2026-03-05","output":[],"usage":null}"#.to_owned());
    event(
        &mut out,
        "response.output_item.added",
        r#""output_index":0,"item":{"id":"rs_0a1b2c02","type":"reasoning","summary":[]}"#
            .to_owned(),
    );
    let mut idx = 0;
    while out.len() < TARGET_BYTES / 2 {
        event(
            &mut out,
            "response.reasoning_summary_text.delta",
            format!(
                r#""item_id":"rs_0a1b2c02","output_index":0,"summary_index":0,"delta":{}"#,
                json_string(WORDS[idx % WORDS.len()])
            ),
        );
        idx += 1;
    }
    event(&mut out, "response.output_item.done", r#""output_index":0,"item":{"id":"rs_0a1b2c02","type":"reasoning","encrypted_content":"gAAAAABpZ2Vu","summary":[{"type":"summary_text","text":"short"}]}"#.to_owned());
    event(&mut out, "response.output_item.added", r#""output_index":1,"item":{"id":"msg_0a1b2c01","type":"message","status":"in_progress","content":[],"role":"assistant"}"#.to_owned());
    while out.len() < TARGET_BYTES {
        event(
            &mut out,
            "response.output_text.delta",
            format!(
                r#""item_id":"msg_0a1b2c01","output_index":1,"content_index":0,"delta":{},"logprobs":[]"#,
                json_string(WORDS[idx % WORDS.len()])
            ),
        );
        idx += 1;
    }
    event(&mut out, "response.output_item.done", r#""output_index":1,"item":{"id":"msg_0a1b2c01","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"short"}],"role":"assistant"}"#.to_owned());
    event(&mut out, "response.completed", r#""response":{"id":"resp_0a1b2c","status":"completed","output":[],"usage":{"input_tokens":1480,"input_tokens_details":{"cached_tokens":1280},"output_tokens":12,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1492}}"#.to_owned());
    out.into_bytes()
}

/// A Gemini API stream as `streamGenerateContent?alt=sse` sends it
/// (`fixtures/providers/google-*.sse`): one whole `GenerateContentResponse` per `data:` line,
/// thought parts, then text parts, usage in the last chunk.
fn google_stream() -> Vec<u8> {
    let mut out = String::new();
    let mut idx = 0;
    while out.len() < TARGET_BYTES {
        let thought = if out.len() < TARGET_BYTES / 2 {
            ",\"thought\":true"
        } else {
            ""
        };
        out.push_str(&format!(
            "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":{}{thought}}}],\"role\":\"model\"}},\"index\":0}}],\"modelVersion\":\"gemini-3-flash-preview\",\"responseId\":\"resp-g-bench\"}}\r\n\r\n",
            json_string(WORDS[idx % WORDS.len()])
        ));
        idx += 1;
    }
    out.push_str("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":1480,\"candidatesTokenCount\":12,\"totalTokenCount\":1492,\"cachedContentTokenCount\":1280,\"thoughtsTokenCount\":40},\"responseId\":\"resp-g-bench\"}\r\n\r\n");
    out.into_bytes()
}

/// A Mistral stream as `/v1/chat/completions` sends it (`fixtures/providers/mistral-*.sse`):
/// one `chat.completion.chunk` per `data:` line, thinking chunks then string content, usage
/// with the finish reason, `[DONE]`.
fn mistral_stream() -> Vec<u8> {
    let mut out = String::new();
    let mut idx = 0;
    while out.len() < TARGET_BYTES {
        let word = json_string(WORDS[idx % WORDS.len()]);
        let content = if out.len() < TARGET_BYTES / 2 {
            format!(
                "[{{\"type\":\"thinking\",\"thinking\":[{{\"type\":\"text\",\"text\":{word}}}]}}]"
            )
        } else {
            word
        };
        out.push_str(&format!(
            "data: {{\"id\":\"cmpl-6d2f0c1e9a8b4c7d\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"magistral-medium-latest\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{content}}},\"finish_reason\":null}}]}}\n\n"
        ));
        idx += 1;
    }
    out.push_str("data: {\"id\":\"cmpl-6d2f0c1e9a8b4c7d\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"magistral-medium-latest\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1480,\"total_tokens\":1492,\"completion_tokens\":12}}\n\ndata: [DONE]\n\n");
    out.into_bytes()
}

fn frames_only(bytes: &[u8]) -> usize {
    let mut decoder = SseDecoder::new();
    let mut frames = 0;
    for piece in bytes.chunks(PIECE) {
        decoder.feed(piece);
        while decoder.next_frame().is_some() {
            frames += 1;
        }
    }
    decoder.finish();
    while decoder.next_frame().is_some() {
        frames += 1;
    }
    frames
}

enum Wire {
    OpenAi(Model),
    Responses(Model),
    Anthropic(Model),
    Google(Model),
    /// The Gemini stream with every chunk read into a JSON tree (the path before the typed view).
    GoogleTree(Model),
    Mistral(Model),
    Codex(Model),
}

/// Decodes the whole stream; returns the number of events.
fn decode(bytes: &[u8], wire: &Wire) -> usize {
    let mut sse = SseDecoder::new();
    let mut out: VecDeque<StreamEvent> = VecDeque::with_capacity(16);
    let mut events = 0;
    match wire {
        Wire::OpenAi(model) => {
            let mut decoder = OpenAiDecoder::new(new_assistant_message(model, 0), model);
            'outer: for piece in bytes.chunks(PIECE) {
                sse.feed(piece);
                while let Some(frame) = sse.next_frame() {
                    let done = decoder.on_data(frame.data, &mut out).unwrap_or(true);
                    events += out.drain(..).count();
                    if done {
                        break 'outer;
                    }
                }
            }
            let _ = decoder.complete(&mut out);
            events += out.drain(..).count();
            std::hint::black_box(decoder.message().content.len());
        }
        Wire::Responses(model) => {
            let mut decoder =
                ResponsesDecoder::new(new_assistant_message(model, 0), model, Flavor::OpenAi);
            'outer: for piece in bytes.chunks(PIECE) {
                sse.feed(piece);
                while let Some(frame) = sse.next_frame() {
                    let done = decoder
                        .on_frame(frame.event, frame.data, &mut out)
                        .unwrap_or(true);
                    events += out.drain(..).count();
                    if done {
                        break 'outer;
                    }
                }
            }
            let _ = decoder.complete();
            std::hint::black_box(decoder.message().content.len());
        }
        Wire::Anthropic(model) => {
            let mut decoder = AnthropicDecoder::new(new_assistant_message(model, 0), model, None);
            'outer: for piece in bytes.chunks(PIECE) {
                sse.feed(piece);
                while let Some(frame) = sse.next_frame() {
                    let done = decoder
                        .on_frame(frame.event, frame.data, &mut out)
                        .unwrap_or(true);
                    events += out.drain(..).count();
                    if done {
                        break 'outer;
                    }
                }
            }
            let _ = decoder.complete(0);
            std::hint::black_box(decoder.message().content.len());
        }
        Wire::Google(model) | Wire::GoogleTree(model) => {
            let tree = matches!(wire, Wire::GoogleTree(_));
            let mut decoder = GoogleDecoder::new(new_assistant_message(model, 0), model);
            'outer: for piece in bytes.chunks(PIECE) {
                sse.feed(piece);
                while let Some(frame) = sse.next_frame() {
                    let done = if tree {
                        decoder.on_frame_tree(frame.data, &mut out)
                    } else {
                        decoder.on_frame(frame.data, &mut out)
                    }
                    .unwrap_or(true);
                    events += out.drain(..).count();
                    if done {
                        break 'outer;
                    }
                }
            }
            let _ = decoder.complete(&mut out);
            events += out.drain(..).count();
            std::hint::black_box(decoder.message().content.len());
        }
        Wire::Mistral(model) => {
            let mut decoder = MistralDecoder::new(new_assistant_message(model, 0), model);
            'outer: for piece in bytes.chunks(PIECE) {
                sse.feed(piece);
                while let Some(frame) = sse.next_frame() {
                    let done = decoder.on_frame(frame.data, &mut out).unwrap_or(true);
                    events += out.drain(..).count();
                    if done {
                        break 'outer;
                    }
                }
            }
            let _ = decoder.complete(&mut out);
            events += out.drain(..).count();
            std::hint::black_box(decoder.message().content.len());
        }
        Wire::Codex(model) => {
            let mut decoder = CodexDecoder::new(new_assistant_message(model, 0), model);
            'outer: for piece in bytes.chunks(PIECE) {
                sse.feed(piece);
                while let Some(frame) = sse.next_frame() {
                    let done = decoder.on_frame(frame.data, &mut out).unwrap_or(true);
                    events += out.drain(..).count();
                    if done {
                        break 'outer;
                    }
                }
            }
            let _ = decoder.complete();
            std::hint::black_box(decoder.message().content.len());
        }
    }
    events
}

fn best_of<F: FnMut() -> usize>(mut run: F) -> (f64, usize) {
    let mut best = f64::MAX;
    let mut count = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        count = run();
        best = best.min(started.elapsed().as_secs_f64());
    }
    (best, count)
}

fn report(name: &str, bytes: &[u8], wire: &Wire) {
    let mb = bytes.len() as f64 / 1_000_000.0;
    let (secs, frames) = best_of(|| frames_only(bytes));
    println!(
        "{name:<13} framing   {:>8.1} MB/s  {:>10.0} frames/s  ({frames} frames, {mb:.1} MB)",
        mb / secs,
        frames as f64 / secs
    );
    let (secs, events) = best_of(|| decode(bytes, wire));
    println!(
        "{name:<13} decoding  {:>8.1} MB/s  {:>10.0} events/s  ({events} events{})",
        mb / secs,
        events as f64 / secs,
        allocations(bytes, wire),
    );
}

/// Allocations per event of one more decoding, counted by the instrumented allocator.
#[cfg(feature = "system-allocator")]
fn allocations(bytes: &[u8], wire: &Wire) -> String {
    let region = Region::new(GLOBAL);
    let counted = decode(bytes, wire);
    let stats = region.change();
    format!(
        ", {:.2} allocations/event, {:.1} bytes allocated/event",
        stats.allocations as f64 / counted as f64,
        stats.bytes_allocated as f64 / counted as f64,
    )
}

/// Without the instrumented allocator nothing is counted.
#[cfg(not(feature = "system-allocator"))]
fn allocations(_bytes: &[u8], _wire: &Wire) -> String {
    "; allocations: run with --features system-allocator".to_owned()
}

fn main() {
    let openai = openai_stream();
    let anthropic = anthropic_stream();
    report(
        "openai",
        &openai,
        &Wire::OpenAi(model("openrouter", "moonshotai/kimi-k2.6")),
    );
    let responses = responses_stream();
    report(
        "responses",
        &responses,
        &Wire::Responses(model("openai", "gpt-5.4")),
    );
    report(
        "anthropic",
        &anthropic,
        &Wire::Anthropic(model("anthropic", "claude-sonnet-4-5")),
    );
    let google = google_stream();
    report(
        "google (tree)",
        &google,
        &Wire::GoogleTree(model("google", "gemini-3-flash-preview")),
    );
    report(
        "google",
        &google,
        &Wire::Google(model("google", "gemini-3-flash-preview")),
    );
    report(
        "mistral",
        &mistral_stream(),
        &Wire::Mistral(model("mistral", "magistral-medium-latest")),
    );
    // The Codex backend streams the Responses events (its terminal is read the Codex way).
    report(
        "codex",
        &responses,
        &Wire::Codex(model("openai-codex", "gpt-6-luna")),
    );
}
