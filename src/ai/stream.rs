//! The driver of one call: request → transport (with retry) → SSE frames → protocol decoder →
//! [`StreamEvent`]s, with the idle timeout, abort, and the rule that every stream ends in
//! exactly one `done` or `error` event.
//!
//! The stream is pulled: [`AssistantStream::next`] reads from the network only when the
//! caller asks for the next event, decodes one piece of the body and queues the events it
//! produced. The message being built lives in the decoder; [`AssistantStream::partial`]
//! shows it (the reference's `partial`), so events never copy it.
//!
//! How a call ends:
//! - the protocol's terminal (`[DONE]`, `message_stop`) → `done`, or `error` when the stop
//!   reason was an error (content filter, refusal);
//! - the provider reported an error, or sent something unreadable → `error` with its text;
//! - the body ended without the terminal → `error` (`… ended without …` / `… ended before
//!   message_stop`), partial content kept;
//! - the connection broke mid-body → `error`, `Connection lost while streaming the response
//!   (terminated)`; no body byte for `idle_timeout` → `error`, `Request timed out: …`;
//! - the cancel token fired → `error` with `stopReason: "aborted"` (`This operation was
//!   aborted` when it had fired before the call started, `Request was aborted.`
//!   before the response, `Request was aborted` after it; the OpenAI protocol closes its open
//!   blocks first, as the reference does).
//!
//! Invariants: after the terminal event `next` returns `None`; nothing here re-sends a
//! request (the transport retry in `transport` is the only one).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::ai::anthropic::{self, AnthropicDecoder};
use crate::ai::aws_auth::{self, RoleCache};
use crate::ai::bedrock::{self, BedrockDecoder};
use crate::ai::codex::{self, CodexDecoder};
use crate::ai::error::AiError;
use crate::ai::google::{self, GoogleDecoder};
use crate::ai::google_auth::{self, AdcCredentials, TokenCache, TokenFailure};
use crate::ai::mistral::{self, MistralDecoder};
use crate::ai::models::Model;
use crate::ai::openai::{self, OpenAiDecoder};
use crate::ai::proxy::ProxyConfig;
use crate::ai::responses::{self, Flavor, ResponsesDecoder};
use crate::ai::sse::{SseDecoder, SseFrame};
use crate::ai::transport::{self, ErrorBodyStyle, SendContext, WireRequest, set_header_ci};
use crate::ai::vertex;
use crate::ai::{Request, StreamEvent, StreamOptions, TransportConfig, new_assistant_message};
use crate::model::message::{AssistantKey, AssistantKeyOrder, AssistantMessage, StopReason};
use crate::support::clock::Clock;
use crate::support::ids::IdSource;
use crate::support::json::write_value;

/// The HTTP client, built on first use: building it loads the system's root certificates
/// (hundreds of files, several milliseconds), which a session that never calls a model — or
/// a REPL that has not been sent a prompt yet — does not need.
type LazyHttp = Arc<std::sync::OnceLock<Result<reqwest::Client, String>>>;

fn build_http(proxy: &Arc<ProxyConfig>) -> Result<reqwest::Client, String> {
    // Never reqwest's own reading of the environment: this layer reads none; the proxies
    // come in resolved (`ProxyConfig`, the reference's rules).
    let mut builder = reqwest::Client::builder().no_proxy();
    if !proxy.is_empty() {
        let proxy = proxy.clone();
        builder = builder.proxy(reqwest::Proxy::custom(move |url| {
            proxy.proxy_for(url).map(str::to_owned)
        }));
    }
    builder.build().map_err(|err| err.to_string())
}

/// Returns the client of `cell`, building it on the blocking pool the first time.
async fn lazy_http(cell: &LazyHttp, proxy: &Arc<ProxyConfig>) -> Result<reqwest::Client, AiError> {
    let built = match cell.get() {
        Some(built) => built.clone(),
        None => {
            let cell = cell.clone();
            let proxy = proxy.clone();
            tokio::task::spawn_blocking(move || cell.get_or_init(|| build_http(&proxy)).clone())
                .await
                .unwrap_or_else(|join| Err(join.to_string()))
        }
    };
    built.map_err(|message| AiError::Config {
        message: format!("Could not set up the HTTP client: {message}"),
    })
}

/// Makes LLM calls; holds the HTTP connection pool. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AiClient {
    http: LazyHttp,
    proxy: Arc<ProxyConfig>,
    clock: Arc<dyn Clock>,
    ids: Arc<IdSource>,
    /// The length of the last request body: the next one is serialised into a buffer of about
    /// that size (a conversation's requests grow by little per turn), instead of doubling its
    /// way up from empty — each doubling a copy of the body into fresh pages.
    body_hint: Arc<AtomicUsize>,
    /// Google access tokens, per key file, until shortly before they expire.
    tokens: Arc<TokenCache>,
    /// AWS SSO role credentials, until shortly before they expire.
    aws_roles: Arc<RoleCache>,
}

impl AiClient {
    /// Builds a client; `clock` stamps messages, `ids` draws the retry jitter. The HTTP
    /// connection pool is set up by the first call.
    pub fn new(clock: Arc<dyn Clock>, ids: Arc<IdSource>) -> Result<Self, AiError> {
        Ok(Self {
            http: Arc::new(std::sync::OnceLock::new()),
            proxy: Arc::new(ProxyConfig::none()),
            clock,
            ids,
            body_hint: Arc::new(AtomicUsize::new(0)),
            tokens: Arc::new(TokenCache::default()),
            aws_roles: Arc::new(RoleCache::default()),
        })
    }

    /// Sends every call through the proxies of `proxy` (before the first call; the
    /// connection pool is built once).
    pub fn with_proxy(mut self, proxy: ProxyConfig) -> Self {
        self.proxy = Arc::new(proxy);
        self.http = Arc::new(std::sync::OnceLock::new());
        self
    }

    /// Starts one call. Nothing is sent until the first [`AssistantStream::next`].
    ///
    /// `openai-completions`, `openai-responses`, `azure-openai-responses`,
    /// `openai-codex-responses`, `anthropic-messages`, `google-generative-ai`, `google-vertex`,
    /// `mistral-conversations` and `bedrock-converse-stream` are spoken; any other API fails
    /// with `No API provider registered for api: <api>`.
    pub fn stream(
        &self,
        model: &Model,
        request: Request,
        options: StreamOptions,
        cancel: CancellationToken,
    ) -> AssistantStream {
        let timestamp = self.clock.now_ms();
        let protocol = match model.api.as_str() {
            "openai-completions" => Some(Protocol::OpenAi),
            "anthropic-messages" => Some(Protocol::Anthropic),
            "google-generative-ai" => Some(Protocol::Google),
            "google-vertex" => Some(Protocol::Vertex),
            "bedrock-converse-stream" => Some(Protocol::Bedrock),
            "mistral-conversations" => Some(Protocol::Mistral),
            "openai-codex-responses" => Some(Protocol::Codex),
            api => Flavor::of_api(api).map(Protocol::Responses),
        };
        let mut effective = model.clone();
        // The request model carries the base URL resolved at request time (the reference's
        // `requestModel`): compat detection reads it too.
        if let Some(base_url) = options.base_url.as_deref().filter(|url| !url.is_empty()) {
            effective.base_url = base_url.to_owned();
        }
        let message = new_assistant_message(&effective, timestamp);
        let mut transport = options.transport;
        if protocol == Some(Protocol::Mistral) {
            // The reference calls Mistral with a bare `fetch`: nothing is re-sent.
            transport.max_retries = 0;
        }
        let base = AssistantStream {
            http: self.http.clone(),
            proxy: self.proxy.clone(),
            clock: self.clock.clone(),
            ids: self.ids.clone(),
            tokens: self.tokens.clone(),
            aws_roles: self.aws_roles.clone(),
            transport,
            cancel,
            phase: Phase::Finished,
            decoder: Decoder::None(message),
            sse: SseDecoder::new(),
            queue: VecDeque::new(),
            final_message: None,
        };
        let Some(protocol) = protocol else {
            return base.setup_failed(AiError::Config {
                message: format!("No API provider registered for api: {}", model.api),
            });
        };
        if base.cancel.is_cancelled() {
            // 1.6.0 resolves the provider's auth first, and that throws at once for a call
            // cancelled before it started (`signal.throwIfAborted()`): a setup error with the
            // text of the platform's `AbortError`.
            return base.setup_failed(AiError::Aborted {
                message: "This operation was aborted".to_owned(),
            });
        }
        let header_auth = match protocol {
            Protocol::OpenAi => openai::has_header_auth(&options.headers),
            Protocol::Anthropic => anthropic::has_header_auth(&options.headers),
            Protocol::Responses(flavor) => responses::has_header_auth(flavor, &options.headers),
            Protocol::Google => google::has_header_auth(&options.headers),
            // An API key or Application Default Credentials (checked when building).
            Protocol::Vertex => true,
            // Keys, a profile or a Bedrock API key (resolved when building).
            Protocol::Bedrock => true,
            // Both read the key (the Codex sign-in token) and nothing else.
            Protocol::Mistral | Protocol::Codex => false,
        };
        if options.api_key.as_deref().is_none_or(str::is_empty) && !header_auth {
            let mut stream = base;
            stream.decoder = stream
                .decoder
                .with_protocol(protocol, &effective, &request, &options);
            return stream.setup_failed(AiError::Config {
                message: format!("No API key for provider: {}", model.provider),
            });
        }
        let mut google_credentials = None;
        let mut aws_signing = None;
        let built = match protocol {
            Protocol::OpenAi => openai::build_request(&effective, &request, &options)
                .map(|wire| (wire, ErrorBodyStyle::ErrorMember)),
            Protocol::Bedrock => bedrock::build_request(&effective, &request, &options, timestamp)
                .map(|built| {
                    aws_signing = Some(Box::new(built.signing));
                    (built.wire, ErrorBodyStyle::Bedrock)
                }),
            Protocol::Vertex => {
                vertex::build_request(&effective, &request, &options).map(|built| {
                    google_credentials = built.credentials.map(Box::new);
                    (built.wire, ErrorBodyStyle::Google)
                })
            }
            Protocol::Anthropic => anthropic::build_request(&effective, &request, &options)
                .map(|wire| (wire, ErrorBodyStyle::WholeBody)),
            Protocol::Google => google::build_request(&effective, &request, &options)
                .map(|wire| (wire, ErrorBodyStyle::Google)),
            Protocol::Mistral => mistral::build_request(&effective, &request, &options)
                .map(|wire| (wire, ErrorBodyStyle::Mistral)),
            Protocol::Codex => codex::build_request(&effective, &request, &options)
                .map(|wire| (wire, ErrorBodyStyle::Codex)),
            Protocol::Responses(flavor) => {
                responses::build_request(&effective, &request, &options, flavor).map(|wire| {
                    let prefix = flavor.error_prefix(&effective.provider);
                    (wire, ErrorBodyStyle::Prefixed(prefix))
                })
            }
        };
        let (wire, style) = match built {
            Ok(built) => built,
            Err(text) => {
                let mut stream = base;
                stream.decoder = stream
                    .decoder
                    .with_protocol(protocol, &effective, &request, &options);
                return stream.failed(AiError::Other { message: text });
            }
        };
        let hint = self.body_hint.load(Ordering::Relaxed);
        let mut body = String::with_capacity(hint + hint / 8 + 1024);
        write_value(&mut body, &wire.body);
        self.body_hint.store(body.len(), Ordering::Relaxed);
        let mut wire = wire;
        // Shared by every attempt of the transport retry without a copy.
        let body = match protocol {
            Protocol::Codex => match codex::compress_body(body.as_bytes()) {
                Some(compressed) => {
                    crate::ai::transport::set_header_ci(
                        &mut wire.headers,
                        "content-encoding",
                        "zstd",
                    );
                    Bytes::from(compressed)
                }
                None => Bytes::from(body),
            },
            _ => Bytes::from(body),
        };
        let mut stream = base;
        stream.decoder = stream
            .decoder
            .with_protocol(protocol, &effective, &request, &options);
        if protocol == Protocol::Anthropic
            && let Some(level) = anthropic::provider_thinking_level(&effective, &options)
        {
            let message = stream.decoder.message_mut();
            message.key_order.touch(AssistantKey::ProviderThinkingLevel);
            message.provider_thinking_level = Some(level);
        }
        let update_effort = match protocol {
            Protocol::Responses(flavor) => {
                responses::configuration_update_effort(&effective, &options, flavor)
            }
            Protocol::Codex => codex::configuration_update_effort(&effective, &options),
            _ => None,
        };
        if let Some(level) = update_effort {
            // The reference's output literal spreads it in after `model`.
            let message = stream.decoder.message_mut();
            message
                .key_order
                .insert_after(AssistantKey::ProviderThinkingLevel, AssistantKey::Model);
            message.provider_thinking_level = Some(match level {
                serde_json::Value::String(text) => text,
                other => crate::support::json::to_js_string(&other),
            });
        }
        stream.phase = Phase::Pending {
            wire,
            body,
            style,
            google_credentials,
            aws_signing,
        };
        stream
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    OpenAi,
    Anthropic,
    Responses(Flavor),
    Google,
    Vertex,
    Bedrock,
    Mistral,
    Codex,
}

enum Decoder {
    None(AssistantMessage),
    OpenAi(OpenAiDecoder),
    Anthropic(AnthropicDecoder),
    Responses(ResponsesDecoder),
    Google(GoogleDecoder),
    Bedrock(BedrockDecoder),
    Mistral(MistralDecoder),
    Codex(CodexDecoder),
}

impl Decoder {
    fn with_protocol(
        self,
        protocol: Protocol,
        model: &Model,
        request: &Request,
        options: &StreamOptions,
    ) -> Self {
        let message = self.into_message();
        match protocol {
            Protocol::OpenAi => Self::OpenAi(OpenAiDecoder::new(message, model)),
            Protocol::Google => Self::Google(GoogleDecoder::new(message, model)),
            Protocol::Vertex => Self::Google(vertex::decoder(message, model)),
            Protocol::Bedrock => Self::Bedrock(BedrockDecoder::new(message, model)),
            Protocol::Mistral => Self::Mistral(MistralDecoder::new(message, model)),
            Protocol::Codex => Self::Codex(CodexDecoder::new(message, model)),
            Protocol::Responses(flavor) => {
                Self::Responses(ResponsesDecoder::new(message, model, flavor))
            }
            Protocol::Anthropic => {
                let oauth = options
                    .api_key
                    .as_deref()
                    .is_some_and(anthropic::is_oauth_token)
                    && model.provider != "github-copilot"
                    && model.provider != "cloudflare-ai-gateway";
                let tools = oauth.then(|| {
                    crate::ai::transcript::get_current_tools(
                        &crate::ai::transcript::normalize_context(request),
                    )
                    .into_iter()
                    .map(|tool| tool.name)
                    .collect()
                });
                Self::Anthropic(AnthropicDecoder::new(message, model, tools))
            }
        }
    }

    fn into_message(self) -> AssistantMessage {
        match self {
            Self::None(message) => message,
            Self::OpenAi(decoder) => decoder.into_message(),
            Self::Anthropic(decoder) => decoder.into_message(),
            Self::Responses(decoder) => decoder.into_message(),
            Self::Google(decoder) => decoder.into_message(),
            Self::Bedrock(decoder) => decoder.into_message(),
            Self::Mistral(decoder) => decoder.into_message(),
            Self::Codex(decoder) => decoder.into_message(),
        }
    }

    fn message(&self) -> &AssistantMessage {
        match self {
            Self::None(message) => message,
            Self::OpenAi(decoder) => decoder.message(),
            Self::Anthropic(decoder) => decoder.message(),
            Self::Responses(decoder) => decoder.message(),
            Self::Google(decoder) => decoder.message(),
            Self::Bedrock(decoder) => decoder.message(),
            Self::Mistral(decoder) => decoder.message(),
            Self::Codex(decoder) => decoder.message(),
        }
    }

    fn message_mut(&mut self) -> &mut AssistantMessage {
        match self {
            Self::None(message) => message,
            Self::OpenAi(decoder) => decoder.message_mut(),
            Self::Anthropic(decoder) => decoder.message_mut(),
            Self::Responses(decoder) => decoder.message_mut(),
            Self::Google(decoder) => decoder.message_mut(),
            Self::Bedrock(decoder) => decoder.message_mut(),
            Self::Mistral(decoder) => decoder.message_mut(),
            Self::Codex(decoder) => decoder.message_mut(),
        }
    }

    fn refresh(&mut self) {
        match self {
            Self::None(_) => {}
            Self::OpenAi(decoder) => decoder.refresh(),
            Self::Anthropic(decoder) => decoder.refresh(),
            Self::Responses(decoder) => decoder.refresh(),
            Self::Bedrock(decoder) => decoder.refresh(),
            Self::Mistral(decoder) => decoder.refresh(),
            Self::Codex(decoder) => decoder.refresh(),
            Self::Google(_) => {}
        }
    }

    fn on_frame(
        &mut self,
        frame: SseFrame<'_>,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, String> {
        match self {
            Self::None(_) => Ok(true),
            Self::OpenAi(decoder) => decoder.on_frame(frame.event, frame.data, out),
            Self::Anthropic(decoder) => decoder.on_frame(frame.event, frame.data, out),
            Self::Responses(decoder) => decoder.on_frame(frame.event, frame.data, out),
            Self::Google(decoder) => decoder.on_frame(frame.data, out),
            // Bedrock's body is not SSE (`read_some` feeds it to the decoder directly).
            Self::Bedrock(_) => Ok(false),
            Self::Mistral(decoder) => decoder.on_frame(frame.data, out),
            Self::Codex(decoder) => decoder.on_frame(frame.data, out),
        }
    }

    fn complete(
        &mut self,
        out: &mut VecDeque<StreamEvent>,
        now_ms: i64,
    ) -> Result<StopReason, String> {
        match self {
            Self::None(message) => Ok(message.stop_reason),
            Self::OpenAi(decoder) => decoder.complete(out),
            Self::Anthropic(decoder) => decoder.complete(now_ms),
            Self::Responses(decoder) => decoder.complete(),
            Self::Google(decoder) => decoder.complete(out),
            Self::Bedrock(decoder) => decoder.complete(),
            Self::Mistral(decoder) => decoder.complete(out),
            Self::Codex(decoder) => decoder.complete(),
        }
    }

    fn on_eof(
        &mut self,
        out: &mut VecDeque<StreamEvent>,
        now_ms: i64,
    ) -> Result<StopReason, String> {
        match self {
            Self::None(message) => Ok(message.stop_reason),
            Self::OpenAi(decoder) => decoder.on_eof(out),
            Self::Anthropic(decoder) => decoder.on_eof(now_ms),
            Self::Responses(decoder) => decoder.complete(),
            Self::Google(decoder) => decoder.complete(out),
            Self::Bedrock(decoder) => decoder.complete(),
            Self::Mistral(decoder) => decoder.complete(out),
            Self::Codex(decoder) => decoder.complete(),
        }
    }

    /// What the reference does with the message when a call fails.
    fn on_failure(&mut self) {
        if let Self::OpenAi(decoder) = self {
            decoder.on_failure();
        }
    }

    /// What the reference does with open blocks when the caller aborts mid-stream.
    fn on_abort(&mut self, out: &mut VecDeque<StreamEvent>) {
        if let Self::OpenAi(decoder) = self {
            decoder.finish_blocks(out);
        }
    }
}

enum Phase {
    Pending {
        wire: WireRequest,
        body: Bytes,
        style: ErrorBodyStyle,
        /// A Google key file whose access token goes in `Authorization` (Vertex ADC).
        google_credentials: Option<Box<AdcCredentials>>,
        /// How a Bedrock request is signed (just before it is sent, over the final body).
        aws_signing: Option<Box<bedrock::Signing>>,
    },
    Streaming(reqwest::Response),
    Failed(AiError),
    Finished,
}

/// One streaming LLM call. Pull events with [`Self::next`]; see the module docs for how it
/// ends.
pub struct AssistantStream {
    http: LazyHttp,
    proxy: Arc<ProxyConfig>,
    clock: Arc<dyn Clock>,
    ids: Arc<IdSource>,
    tokens: Arc<TokenCache>,
    aws_roles: Arc<RoleCache>,
    transport: TransportConfig,
    cancel: CancellationToken,
    phase: Phase,
    decoder: Decoder,
    sse: SseDecoder,
    queue: VecDeque<StreamEvent>,
    final_message: Option<AssistantMessage>,
}

impl std::fmt::Debug for AssistantStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssistantStream")
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

/// How a call ended badly.
enum Failure {
    Message {
        text: String,
        status: Option<u16>,
        retry_after: Option<std::time::Duration>,
    },
    Aborted(&'static str),
    Classified(AiError),
}

impl AssistantStream {
    fn failed(mut self, error: AiError) -> Self {
        self.phase = Phase::Failed(error);
        self
    }

    /// A failure before the protocol ran (the reference's `lazyStream` setup error): the
    /// message is built as `createSetupErrorMessage` builds it, `errorMessage` before
    /// `timestamp`.
    fn setup_failed(mut self, error: AiError) -> Self {
        // `content, api, provider, model, usage, stopReason, errorMessage, timestamp` (a
        // `touch` on an empty order would put the first key last).
        let mut order = AssistantKeyOrder::created();
        order.insert_after(AssistantKey::ErrorMessage, AssistantKey::StopReason);
        self.decoder.message_mut().key_order = order;
        self.phase = Phase::Failed(error);
        self
    }

    /// Stamps the final message with its duration (`durationMs`, appended last).
    fn stamp_duration(&mut self) {
        let now = self.clock.now_ms();
        let message = self.decoder.message_mut();
        if message.duration_ms.is_none() {
            message.key_order.touch(AssistantKey::DurationMs);
            message.duration_ms = Some(u64::try_from(now - message.timestamp).unwrap_or(0));
        }
    }

    /// Returns the assistant message as built so far (the reference's `partial`): content
    /// blocks with tool arguments parsed from what has arrived, usage, ids.
    pub fn partial(&mut self) -> &AssistantMessage {
        self.decoder.refresh();
        self.decoder.message()
    }

    /// Puts an event taken with [`Self::next`] back, to be returned next.
    pub fn push_front(&mut self, event: StreamEvent) {
        self.queue.push_front(event);
    }

    /// Returns the next event, or `None` after the terminal `done`/`error` event.
    pub async fn next(&mut self) -> Option<StreamEvent> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            match std::mem::replace(&mut self.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Failed(error) => self.finish_failed(Failure::Classified(error)),
                Phase::Pending {
                    mut wire,
                    body,
                    style,
                    google_credentials,
                    aws_signing,
                } => {
                    let http = match lazy_http(&self.http, &self.proxy).await {
                        Ok(http) => http,
                        Err(error) => {
                            self.finish_failed(Failure::Classified(error));
                            continue;
                        }
                    };
                    if let Some(credentials) = google_credentials {
                        let token = google_auth::access_token(
                            &http,
                            &self.tokens,
                            &credentials,
                            self.clock.now_ms(),
                            self.transport.request_timeout,
                            &self.cancel,
                        )
                        .await;
                        match token {
                            Ok(token) => {
                                let bearer = format!("Bearer {token}");
                                set_header_ci(&mut wire.headers, "Authorization", &bearer);
                                if let Some(project) = credentials.quota_project_id() {
                                    set_header_ci(
                                        &mut wire.headers,
                                        "x-goog-user-project",
                                        project,
                                    );
                                }
                            }
                            Err(TokenFailure::Aborted) => {
                                self.finish_failed(Failure::Aborted("Request was aborted."));
                                continue;
                            }
                            Err(TokenFailure::Failed { message, status }) => {
                                // The token endpoint refusing the key file is an auth
                                // failure, whatever status it uses (`invalid_grant` is 400).
                                let refused =
                                    status.is_some_and(|s| (400..500).contains(&s) && s != 429);
                                self.finish_failed(if refused {
                                    Failure::Classified(AiError::Auth { message })
                                } else {
                                    Failure::Message {
                                        text: message,
                                        status,
                                        retry_after: None,
                                    }
                                });
                                continue;
                            }
                        }
                    }
                    if let Some(signing) = aws_signing {
                        let mut sso_keys = None;
                        if let Some(remote) = signing.remote() {
                            let fetched = aws_auth::role_keys(
                                &http,
                                &self.aws_roles,
                                remote,
                                self.clock.now_ms(),
                                self.transport.request_timeout,
                                &self.cancel,
                            )
                            .await;
                            match fetched {
                                Ok(keys) => sso_keys = Some(keys),
                                Err(aws_auth::RoleFailure::Aborted) => {
                                    self.finish_failed(Failure::Aborted("Request was aborted."));
                                    continue;
                                }
                                Err(aws_auth::RoleFailure::Failed(message)) => {
                                    self.finish_failed(Failure::Classified(AiError::Auth {
                                        message,
                                    }));
                                    continue;
                                }
                            }
                        }
                        if let Err(message) =
                            signing.apply(&mut wire, &body, self.clock.now_ms(), sso_keys.as_ref())
                        {
                            self.finish_failed(Failure::Classified(AiError::Config { message }));
                            continue;
                        }
                    }
                    let ctx = SendContext {
                        http: &http,
                        config: &self.transport,
                        cancel: &self.cancel,
                        clock: self.clock.as_ref(),
                        ids: self.ids.as_ref(),
                        error_style: style,
                    };
                    match transport::send(&wire, &body, &ctx).await {
                        Ok(response) => {
                            if let Decoder::Bedrock(decoder) = &mut self.decoder {
                                decoder.set_request_id(
                                    response
                                        .headers()
                                        .get("x-amzn-requestid")
                                        .and_then(|value| value.to_str().ok()),
                                );
                            }
                            self.queue.push_back(StreamEvent::Start);
                            self.phase = Phase::Streaming(response);
                        }
                        Err(failure) if failure.aborted => {
                            self.finish_failed(Failure::Aborted("Request was aborted."));
                        }
                        Err(failure) => {
                            if let (Decoder::Bedrock(decoder), Some((kind, request_id))) =
                                (&mut self.decoder, &failure.aws_error)
                            {
                                decoder.set_http_failure(
                                    failure.status,
                                    bedrock::error_code(kind.as_deref()),
                                    request_id.as_deref(),
                                );
                            }
                            self.finish_failed(Failure::Message {
                                text: failure.message,
                                status: failure.status,
                                retry_after: failure.retry_after,
                            });
                        }
                    }
                }
                Phase::Streaming(response) => self.read_some(response).await,
            }
        }
    }

    /// Drains the stream and returns the final message.
    pub async fn result(mut self) -> AssistantMessage {
        while self.next().await.is_some() {}
        match self.final_message.take() {
            Some(message) => message,
            None => self.decoder.into_message(),
        }
    }

    async fn read_some(&mut self, mut response: reqwest::Response) {
        let chunk = tokio::select! {
            biased;
            () = self.cancel.cancelled() => {
                self.decoder.on_abort(&mut self.queue);
                self.finish_failed(Failure::Aborted("Request was aborted"));
                return;
            }
            chunk = tokio::time::timeout(self.transport.idle_timeout, response.chunk()) => chunk,
        };
        match chunk {
            Ok(Ok(Some(bytes))) => {
                if let Decoder::Responses(decoder) = &mut self.decoder {
                    // Diagnostics of the terminal response are stamped with the time it came.
                    decoder.set_now(self.clock.now_ms());
                }
                if let Decoder::Codex(decoder) = &mut self.decoder {
                    decoder.set_now(self.clock.now_ms());
                }
                if let Decoder::Google(decoder) = &mut self.decoder {
                    // Made-up tool-call ids carry the time (`Date.now()`).
                    decoder.set_now(self.clock.now_ms());
                }
                if let Decoder::Bedrock(decoder) = &mut self.decoder {
                    match decoder.on_bytes(&bytes, &mut self.queue) {
                        Ok(_) => self.phase = Phase::Streaming(response),
                        Err(text) => self.finish_failed(Failure::Message {
                            text,
                            status: None,
                            retry_after: None,
                        }),
                    }
                    return;
                }
                self.sse.feed(&bytes);
                if !self.drain_frames() {
                    self.phase = Phase::Streaming(response);
                }
            }
            Ok(Ok(None)) if matches!(self.decoder, Decoder::Bedrock(_)) => {
                let result = self.decoder.on_eof(&mut self.queue, self.clock.now_ms());
                self.finish(result);
            }
            Ok(Ok(None)) => {
                self.sse.finish();
                if !self.drain_frames() {
                    let result = self.decoder.on_eof(&mut self.queue, self.clock.now_ms());
                    self.finish(result);
                }
            }
            Ok(Err(err)) => {
                tracing::info!(error = %err, "provider stream broke");
                self.finish_failed(Failure::Message {
                    text: "Connection lost while streaming the response (terminated)".to_owned(),
                    status: None,
                    retry_after: None,
                });
            }
            Err(_elapsed) => self.finish_failed(Failure::Message {
                text: format!(
                    "Request timed out: no data received for {} ms",
                    self.transport.idle_timeout.as_millis()
                ),
                status: None,
                retry_after: None,
            }),
        }
    }

    /// Decodes every complete frame; true when the call has ended.
    fn drain_frames(&mut self) -> bool {
        loop {
            let outcome = {
                let Some(frame) = self.sse.next_frame() else {
                    return false;
                };
                self.decoder.on_frame(frame, &mut self.queue)
            };
            match outcome {
                Ok(false) => {}
                Ok(true) => {
                    let result = self.decoder.complete(&mut self.queue, self.clock.now_ms());
                    self.finish(result);
                    return true;
                }
                Err(text) => {
                    self.finish_failed(Failure::Message {
                        text,
                        status: None,
                        retry_after: None,
                    });
                    return true;
                }
            }
        }
    }

    fn finish(&mut self, result: Result<StopReason, String>) {
        match result {
            Ok(reason) => {
                self.decoder.refresh();
                self.stamp_duration();
                let message = self.decoder.message().clone();
                self.final_message = Some(message.clone());
                self.queue.push_back(StreamEvent::Done {
                    reason,
                    message: Box::new(message),
                });
                self.phase = Phase::Finished;
            }
            Err(text) => self.finish_failed(Failure::Message {
                text,
                status: None,
                retry_after: None,
            }),
        }
    }

    fn finish_failed(&mut self, failure: Failure) {
        self.decoder.refresh();
        let (reason, error) = match failure {
            Failure::Aborted(text) => (
                StopReason::Aborted,
                AiError::Aborted {
                    message: text.to_owned(),
                },
            ),
            Failure::Classified(error @ AiError::Aborted { .. }) => (StopReason::Aborted, error),
            Failure::Classified(error) => (StopReason::Error, error),
            Failure::Message {
                text,
                status,
                retry_after,
            } => (
                StopReason::Error,
                AiError::classify_for(&self.decoder.message().provider, &text, status, retry_after),
            ),
        };
        self.decoder.on_failure();
        let message = self.decoder.message_mut();
        message.stop_reason = reason;
        message.key_order.touch(AssistantKey::ErrorMessage);
        message.error_message = Some(error.message().to_owned());
        if let Decoder::Bedrock(decoder) = &mut self.decoder {
            decoder.set_now(self.clock.now_ms());
            decoder.on_failed();
        }
        self.stamp_duration();
        let message = self.decoder.message().clone();
        self.final_message = Some(message.clone());
        self.queue.push_back(StreamEvent::Error {
            reason,
            message: Box::new(message),
            error,
        });
        self.phase = Phase::Finished;
    }
}
