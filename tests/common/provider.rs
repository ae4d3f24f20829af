//! A scripted LLM provider on 127.0.0.1: a small HTTP/1.1 server (raw tokio TCP, its own
//! thread and runtime) that answers requests with scripted responses in order and records
//! every request, plus builders for real SSE bodies of both wire formats.
//!
//! ```ignore
//! let server = ProviderServer::start(vec![
//!     MockResponse::sse(sse::openai_tool_call("call_1", "ls", r#"{"path":"src"}"#)),
//!     MockResponse::sse(sse::openai_text("Two files.")).chunked(7, 16),
//! ]);
//! // point a model's baseUrl at server.url() + "/v1" (OpenAI) or server.url() (Anthropic)
//! let sent = server.requests(); // method, path, headers, body
//! server.assert_tool_calls_answered();
//! ```
//!
//! Responses can be cut into pieces at seeded random points (`chunked`), pause (`stall_after`),
//! lose the connection mid-body (`drop_after`: the chunked body is never terminated), or hold
//! back their headers (`delay_headers`), or reset the connection unanswered (`reset`). Bodies of SSE responses use chunked transfer
//! encoding, others `Content-Length`. A request beyond the script gets a 500 with
//! `no scripted response left` (and is recorded, so a test sees it).
//!
//! A server can also answer by content (`start_routed`: a function from the request to the
//! response), and a response can wait until a number of requests have arrived
//! (`after_requests`), which proves that a client sent them concurrently.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// How a body is written.
#[derive(Clone, Debug)]
pub enum Chunking {
    /// In one piece.
    Whole,
    /// In pieces of 1..=max bytes, cut at points drawn from `seed`.
    Random { seed: u64, max: usize },
}

/// One scripted response.
#[derive(Clone, Debug)]
pub struct MockResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub chunking: Chunking,
    /// Pause for the duration once this many body bytes have been written.
    pub stall: Option<(usize, Duration)>,
    /// Close the connection once this many body bytes have been written.
    pub drop_after: Option<usize>,
    /// Wait this long before sending the status line.
    pub delay_headers: Option<Duration>,
    /// Use chunked transfer encoding (SSE responses do).
    pub chunked_encoding: bool,
    /// Hold the response until this many requests have been received (at most the duration).
    pub after_requests: Option<(usize, Duration)>,
    /// Answer nothing: reset the connection (RST) once the request has been read.
    pub reset: bool,
}

impl MockResponse {
    /// A 200 `text/event-stream` response with this body.
    pub fn sse(body: impl Into<String>) -> Self {
        Self {
            status: 200,
            headers: vec![
                (
                    "content-type".into(),
                    "text/event-stream; charset=utf-8".into(),
                ),
                ("cache-control".into(), "no-cache".into()),
            ],
            body: body.into().into_bytes(),
            chunking: Chunking::Whole,
            stall: None,
            drop_after: None,
            delay_headers: None,
            chunked_encoding: true,
            after_requests: None,
            reset: false,
        }
    }

    /// A JSON response with this status and body text.
    pub fn json(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into().into_bytes(),
            chunking: Chunking::Whole,
            stall: None,
            drop_after: None,
            delay_headers: None,
            chunked_encoding: false,
            after_requests: None,
            reset: false,
        }
    }

    /// A response with this status and no body.
    pub fn status(status: u16) -> Self {
        Self {
            headers: Vec::new(),
            ..Self::json(status, "")
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Writes the body in pieces of 1..=max bytes cut at seeded random points.
    pub fn chunked(mut self, seed: u64, max: usize) -> Self {
        self.chunking = Chunking::Random {
            seed,
            max: max.max(1),
        };
        self
    }

    /// Pauses for `pause` after `after_bytes` body bytes.
    pub fn stall_after(mut self, after_bytes: usize, pause: Duration) -> Self {
        self.stall = Some((after_bytes, pause));
        self.chunked_encoding = true;
        self
    }

    /// Drops the connection after `after_bytes` body bytes.
    pub fn drop_after(mut self, after_bytes: usize) -> Self {
        self.drop_after = Some(after_bytes);
        self.chunked_encoding = true;
        self
    }

    /// Holds back the response headers for `delay`.
    pub fn delay_headers(mut self, delay: Duration) -> Self {
        self.delay_headers = Some(delay);
        self
    }

    /// No response: the connection is reset (TCP RST) right after the request was read,
    /// before any byte of a response (`ECONNRESET` for the client).
    pub fn reset() -> Self {
        Self {
            reset: true,
            ..Self::status(500)
        }
    }

    /// Holds the response until `count` requests have arrived in total (or `timeout` passed).
    pub fn after_requests(mut self, count: usize, timeout: Duration) -> Self {
        self.after_requests = Some((count, timeout));
        self
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// Returns a header's value (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Returns the body parsed as JSON (`Null` when it is not JSON), decompressed first when
    /// it came with `content-encoding: zstd` (Codex).
    pub fn json(&self) -> Value {
        if self.header("content-encoding") == Some("zstd") {
            let plain = zstd::decode_all(self.body.as_slice()).unwrap_or_default();
            return serde_json::from_slice(&plain).unwrap_or(Value::Null);
        }
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// Returns the tool calls of this request's conversation that do not have exactly one
    /// tool result (both wire formats); empty when every call is answered once.
    pub fn unpaired_tool_calls(&self) -> Vec<String> {
        let body = self.json();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let mut calls: Vec<String> = Vec::new();
        let mut results: Vec<String> = Vec::new();
        for message in &messages {
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                if let Some(id) = call["id"].as_str() {
                    calls.push(id.to_owned());
                }
            }
            if message["role"] == "tool"
                && let Some(id) = message["tool_call_id"].as_str()
            {
                results.push(id.to_owned());
            }
            for block in message["content"].as_array().into_iter().flatten() {
                match block["type"].as_str() {
                    Some("tool_use") => calls.extend(block["id"].as_str().map(str::to_owned)),
                    Some("tool_result") => {
                        results.extend(block["tool_use_id"].as_str().map(str::to_owned))
                    }
                    _ => {}
                }
            }
        }
        let mut bad: Vec<String> = calls
            .iter()
            .filter(|id| results.iter().filter(|result| result == id).count() != 1)
            .cloned()
            .collect();
        bad.extend(
            results
                .iter()
                .filter(|id| !calls.contains(id))
                .map(|id| format!("result without call: {id}")),
        );
        bad
    }
}

/// Chooses the response to a request by its content.
pub type Router = Arc<dyn Fn(&RecordedRequest) -> MockResponse + Send + Sync>;

#[derive(Default)]
struct State {
    script: VecDeque<MockResponse>,
    requests: Vec<RecordedRequest>,
    router: Option<Router>,
}

/// The running server; stops when dropped.
pub struct ProviderServer {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProviderServer {
    /// Starts a server that answers with `responses` in order.
    pub fn start(responses: Vec<MockResponse>) -> Self {
        Self::start_with(State {
            script: responses.into(),
            requests: Vec::new(),
            router: None,
        })
    }

    /// Starts a server that answers every request with `router(request)`.
    pub fn start_routed(router: Router) -> Self {
        Self::start_with(State {
            script: VecDeque::new(),
            requests: Vec::new(),
            router: Some(router),
        })
    }

    fn start_with(state: State) -> Self {
        let state = Arc::new(Mutex::new(state));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let (shutdown_tx, shutdown_rx) = oneshot::channel();
        let thread_state = state.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("server runtime");
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("tokio listener");
                let mut shutdown_rx = shutdown_rx;
                loop {
                    tokio::select! {
                        _ = &mut shutdown_rx => break,
                        accepted = listener.accept() => {
                            if let Ok((socket, _)) = accepted {
                                let state = thread_state.clone();
                                tokio::spawn(serve_connection(socket, state));
                            }
                        }
                    }
                }
            });
        });
        Self {
            addr,
            state,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        }
    }

    /// Appends a response to the script.
    pub fn push(&self, response: MockResponse) {
        self.state.lock().unwrap().script.push_back(response);
    }

    /// Returns `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Returns the requests received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Waits (up to `timeout`) until `count` requests have arrived; returns them.
    pub fn wait_for_requests(&self, count: usize, timeout: Duration) -> Vec<RecordedRequest> {
        let start = Instant::now();
        loop {
            let requests = self.requests();
            if requests.len() >= count || start.elapsed() > timeout {
                return requests;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Returns how many scripted responses are still unused.
    pub fn remaining(&self) -> usize {
        self.state.lock().unwrap().script.len()
    }

    /// Panics unless every tool call in every request has exactly one tool result.
    pub fn assert_tool_calls_answered(&self) {
        for (idx, request) in self.requests().iter().enumerate() {
            let unpaired = request.unpaired_tool_calls();
            assert!(
                unpaired.is_empty(),
                "request {idx}: tool calls without exactly one result: {unpaired:?}"
            );
        }
    }
}

impl Drop for ProviderServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn read_request(socket: &mut TcpStream, buf: &mut Vec<u8>) -> Option<RecordedRequest> {
    let header_end = loop {
        if let Some(pos) = buf.windows(4).position(|window| window == b"\r\n\r\n") {
            break pos;
        }
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next()?;
    let mut parts = request_line.split(' ');
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let body_start = header_end + 4;
    while buf.len() < body_start + length {
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[body_start..body_start + length].to_vec();
    buf.drain(..body_start + length);
    Some(RecordedRequest {
        method,
        path,
        headers,
        body,
    })
}

/// SplitMix64, for reproducible cut points.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Cuts `len` bytes into piece lengths.
pub fn cut_points(len: usize, chunking: &Chunking) -> Vec<usize> {
    match chunking {
        Chunking::Whole => vec![len],
        Chunking::Random { seed, max } => {
            let mut state = *seed;
            let mut pieces = Vec::new();
            let mut left = len;
            while left > 0 {
                let size = 1 + (next_random(&mut state) as usize) % *max;
                let size = size.min(left);
                pieces.push(size);
                left -= size;
            }
            pieces
        }
    }
}

async fn serve_connection(mut socket: TcpStream, state: Arc<Mutex<State>>) {
    let _ = socket.set_nodelay(true);
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut socket, &mut buf).await {
        let response = {
            let mut state = state.lock().unwrap();
            let routed = state.router.as_ref().map(|router| router(&request));
            state.requests.push(request);
            routed.or_else(|| state.script.pop_front())
        };
        let response = response.unwrap_or_else(|| {
            MockResponse::json(500, r#"{"error":{"message":"no scripted response left"}}"#)
        });
        if let Some((count, timeout)) = response.after_requests {
            let start = Instant::now();
            while state.lock().unwrap().requests.len() < count && start.elapsed() < timeout {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        if !write_response(&mut socket, &response).await {
            return;
        }
    }
}

/// Writes one response; false when the connection must close.
async fn write_response(socket: &mut TcpStream, response: &MockResponse) -> bool {
    if response.reset {
        // Closing with a zero linger time sends RST instead of FIN.
        let _ = socket.set_zero_linger();
        return false;
    }
    if let Some(delay) = response.delay_headers {
        tokio::time::sleep(delay).await;
    }
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        response.status,
        reason(response.status)
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if response.chunked_encoding {
        head.push_str("transfer-encoding: chunked\r\n");
    } else {
        head.push_str(&format!("content-length: {}\r\n", response.body.len()));
    }
    head.push_str("\r\n");
    if socket.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    if !response.chunked_encoding {
        return socket.write_all(&response.body).await.is_ok() && socket.flush().await.is_ok();
    }
    let mut written = 0usize;
    let mut stalled = false;
    for size in cut_points(response.body.len(), &response.chunking) {
        let mut piece = &response.body[written..written + size];
        // Cut the piece where the stall or the drop happens, so they happen exactly there.
        if let Some((after, _)) = response.stall
            && !stalled
            && written < after
            && written + piece.len() > after
        {
            let (head, tail) = piece.split_at(after - written);
            if !write_piece(socket, response, head, &mut written, &mut stalled).await {
                return false;
            }
            piece = tail;
        }
        if !write_piece(socket, response, piece, &mut written, &mut stalled).await {
            return false;
        }
        tokio::task::yield_now().await;
    }
    if let Some(limit) = response.drop_after
        && written >= limit
    {
        return false;
    }
    socket.write_all(b"0\r\n\r\n").await.is_ok() && socket.flush().await.is_ok()
}

/// Writes one piece honouring the drop and stall points; false when the connection closes.
async fn write_piece(
    socket: &mut TcpStream,
    response: &MockResponse,
    piece: &[u8],
    written: &mut usize,
    stalled: &mut bool,
) -> bool {
    let mut piece = piece;
    if let Some(limit) = response.drop_after
        && *written + piece.len() >= limit
    {
        piece = &piece[..limit.saturating_sub(*written).min(piece.len())];
        if !piece.is_empty() {
            let _ = write_chunk(socket, piece).await;
        }
        let _ = socket.flush().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        return false;
    }
    if write_chunk(socket, piece).await.is_err() {
        return false;
    }
    *written += piece.len();
    if let Some((after, pause)) = response.stall
        && !*stalled
        && *written >= after
    {
        *stalled = true;
        tokio::time::sleep(pause).await;
    }
    true
}

async fn write_chunk(socket: &mut TcpStream, piece: &[u8]) -> std::io::Result<()> {
    socket
        .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
        .await?;
    socket.write_all(piece).await?;
    socket.write_all(b"\r\n").await?;
    socket.flush().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// Builders for SSE bodies in each wire format.
pub mod sse {
    use serde_json::{Value, json};

    /// `data: <json>` frames followed by `data: [DONE]`.
    pub fn openai_chunks(chunks: &[Value]) -> String {
        let mut out = String::new();
        for chunk in chunks {
            out.push_str("data: ");
            out.push_str(&chunk.to_string());
            out.push_str("\n\n");
        }
        out.push_str("data: [DONE]\n\n");
        out
    }

    pub fn openai_chunk(delta: Value, finish: Option<&str>) -> Value {
        json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1767225600,
               "model": "test-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    }

    pub fn openai_usage(prompt: u64, completion: u64) -> Value {
        json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1767225600,
               "model": "test-model", "choices": [],
               "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
    }

    /// OpenAI Responses events, each as `event: <type>` + `data: <json>` (numbered by
    /// `sequence_number`), as the Responses API streams them.
    pub fn responses_events(events: &[Value]) -> String {
        let mut out = String::new();
        for (index, event) in events.iter().enumerate() {
            let mut event = event.clone();
            event["sequence_number"] = json!(index);
            out.push_str("event: ");
            out.push_str(event["type"].as_str().unwrap_or(""));
            out.push_str("\ndata: ");
            out.push_str(&event.to_string());
            out.push_str("\n\n");
        }
        out
    }

    fn responses_completed(
        output: Vec<Value>,
        input: u64,
        cached: u64,
        output_tokens: u64,
    ) -> Value {
        json!({"type": "response.completed", "response": {"id": "resp_test", "object": "response",
               "status": "completed", "model": "gpt-test", "output": output,
               "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
                         "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                         "total_tokens": input + output_tokens}}})
    }

    /// A Responses answer streaming `text` word by word in one message item, then
    /// `response.completed` with usage (100 input tokens of which 40 cached, 20 output).
    pub fn responses_text(text: &str) -> String {
        let mut events = vec![
            json!({"type": "response.created", "response": {"id": "resp_test", "status": "in_progress", "output": []}}),
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"id": "msg_test", "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
        ];
        for piece in text.split_inclusive(' ') {
            events.push(json!({"type": "response.output_text.delta", "item_id": "msg_test", "output_index": 0,
                               "content_index": 0, "delta": piece}));
        }
        let item = json!({"id": "msg_test", "type": "message", "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "annotations": [], "text": text}]});
        events.push(
            json!({"type": "response.output_item.done", "output_index": 0, "item": item.clone()}),
        );
        events.push(responses_completed(vec![item], 100, 40, 20));
        responses_events(&events)
    }

    /// A Responses answer calling tools in parallel: `(call_id, name, arguments)` each in its
    /// own `function_call` item, the argument deltas of all calls interleaved.
    pub fn responses_tool_calls(calls: &[(&str, &str, &str)]) -> String {
        let mut events = vec![
            json!({"type": "response.created", "response": {"id": "resp_test", "status": "in_progress", "output": []}}),
        ];
        for (index, (call_id, name, _)) in calls.iter().enumerate() {
            events.push(json!({"type": "response.output_item.added", "output_index": index,
                               "item": {"id": format!("fc_{index}"), "type": "function_call", "status": "in_progress",
                                        "arguments": "", "call_id": call_id, "name": name}}));
        }
        for half in 0..2 {
            for (index, (_, _, arguments)) in calls.iter().enumerate() {
                let cut = arguments.len() / 2;
                let piece = if half == 0 {
                    &arguments[..cut]
                } else {
                    &arguments[cut..]
                };
                events.push(json!({"type": "response.function_call_arguments.delta", "item_id": format!("fc_{index}"),
                                   "output_index": index, "delta": piece}));
            }
        }
        let mut output = Vec::new();
        for (index, (call_id, name, arguments)) in calls.iter().enumerate() {
            let item = json!({"id": format!("fc_{index}"), "type": "function_call", "status": "completed",
                              "arguments": arguments, "call_id": call_id, "name": name});
            events.push(json!({"type": "response.output_item.done", "output_index": index, "item": item.clone()}));
            output.push(item);
        }
        events.push(responses_completed(output, 100, 0, 20));
        responses_events(&events)
    }

    /// A chat-completions answer streaming `text` word by word, then `stop` and usage.
    pub fn openai_text(text: &str) -> String {
        openai_text_with_usage(text, 100, 20)
    }

    /// [`openai_text`] reporting `prompt` input and `completion` output tokens.
    pub fn openai_text_with_usage(text: &str, prompt: u64, completion: u64) -> String {
        let mut chunks = vec![openai_chunk(
            json!({"role": "assistant", "content": ""}),
            None,
        )];
        for piece in split_words(text) {
            chunks.push(openai_chunk(json!({"content": piece}), None));
        }
        chunks.push(openai_chunk(json!({}), Some("stop")));
        chunks.push(openai_usage(prompt, completion));
        openai_chunks(&chunks)
    }

    /// A chat-completions answer with one tool call whose arguments arrive in two pieces.
    pub fn openai_tool_call(id: &str, name: &str, arguments: &str) -> String {
        openai_tool_calls(&[(id, name, arguments)])
    }

    /// A chat-completions answer with several tool calls (index order).
    pub fn openai_tool_calls(calls: &[(&str, &str, &str)]) -> String {
        let mut chunks = vec![openai_chunk(
            json!({"role": "assistant", "content": null}),
            None,
        )];
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            let mid = arguments.len() / 2;
            let mid = (0..=mid)
                .rev()
                .find(|i| arguments.is_char_boundary(*i))
                .unwrap_or(0);
            chunks.push(openai_chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                    "function": {"name": name, "arguments": &arguments[..mid]}}]}),
                None,
            ));
            chunks.push(openai_chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": &arguments[mid..]}}]}),
                None,
            ));
        }
        chunks.push(openai_chunk(json!({}), Some("tool_calls")));
        chunks.push(openai_usage(100, 20));
        openai_chunks(&chunks)
    }

    /// `event: <name>` + `data: <json>` frames.
    pub fn anthropic_events(events: &[(&str, Value)]) -> String {
        let mut out = String::new();
        for (name, data) in events {
            out.push_str("event: ");
            out.push_str(name);
            out.push_str("\ndata: ");
            out.push_str(&data.to_string());
            out.push_str("\n\n");
        }
        out
    }

    fn anthropic_start() -> (&'static str, Value) {
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_test", "type": "message", "role": "assistant",
                "model": "test-model", "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 1}}}),
        )
    }

    fn anthropic_end(reason: &str) -> Vec<(&'static str, Value)> {
        vec![
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": {"output_tokens": 20}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ]
    }

    fn anthropic_text_block(index: usize, text: &str) -> Vec<(&'static str, Value)> {
        let mut events = vec![(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        )];
        for piece in split_words(text) {
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        events
    }

    /// A Messages API answer streaming `text`, stop reason `end_turn`.
    pub fn anthropic_text(text: &str) -> String {
        let mut events = vec![anthropic_start()];
        events.extend(anthropic_text_block(0, text));
        events.extend(anthropic_end("end_turn"));
        anthropic_events(&events)
    }

    /// A Messages API answer with one `tool_use` block (input JSON in two pieces).
    pub fn anthropic_tool_use(id: &str, name: &str, input: &str) -> String {
        let mid = input.len() / 2;
        let mid = (0..=mid)
            .rev()
            .find(|i| input.is_char_boundary(*i))
            .unwrap_or(0);
        let mut events = vec![anthropic_start()];
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        for piece in [&input[..mid], &input[mid..]] {
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        events.extend(anthropic_end("tool_use"));
        anthropic_events(&events)
    }

    /// A Messages API answer with a signed thinking block, then text.
    pub fn anthropic_thinking(thinking: &str, signature: &str, text: &str) -> String {
        let mut events = vec![
            anthropic_start(),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": thinking}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": signature}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
        ];
        events.extend(anthropic_text_block(1, text));
        events.extend(anthropic_end("end_turn"));
        anthropic_events(&events)
    }

    /// One Gemini API `GenerateContentResponse` per `data:` line (no `[DONE]`).
    pub fn google_chunks(chunks: &[Value]) -> String {
        let mut out = String::new();
        for chunk in chunks {
            out.push_str("data: ");
            out.push_str(&chunk.to_string());
            out.push_str("\n\n");
        }
        out
    }

    fn google_chunk(parts: Value, finish: Option<&str>, output_tokens: u64) -> Value {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(reason) = finish {
            candidate["finishReason"] = json!(reason);
        }
        json!({"candidates": [candidate],
               "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": output_tokens,
                                 "totalTokenCount": 100 + output_tokens,
                                 "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 100}]},
               "modelVersion": "gemini-test", "responseId": "resp-g-test"})
    }

    /// A Gemini API answer streaming `text` word by word, the last chunk with `STOP`.
    pub fn google_text(text: &str) -> String {
        let pieces = split_words(text);
        let mut chunks = Vec::new();
        for (idx, piece) in pieces.iter().enumerate() {
            let finish = (idx + 1 == pieces.len()).then_some("STOP");
            chunks.push(google_chunk(
                json!([{"text": piece}]),
                finish,
                idx as u64 + 1,
            ));
        }
        google_chunks(&chunks)
    }

    /// A Gemini API answer with one `functionCall` part (with the provider's call id).
    pub fn google_tool_call(id: &str, name: &str, args: Value) -> String {
        google_chunks(&[google_chunk(
            json!([{"functionCall": {"id": id, "name": name, "args": args}}]),
            Some("STOP"),
            20,
        )])
    }

    /// Splits text after each space (keeping the spaces), so deltas concatenate back.
    fn split_words(text: &str) -> Vec<&str> {
        let mut pieces = Vec::new();
        let mut start = 0;
        for (idx, c) in text.char_indices() {
            if c == ' ' {
                pieces.push(&text[start..=idx]);
                start = idx + 1;
            }
        }
        if start < text.len() {
            pieces.push(&text[start..]);
        }
        pieces
    }
}
