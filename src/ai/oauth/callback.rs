//! The loopback server a browser sign-in redirects to (1.6.0's `callback-server.js`):
//! `GET <path>?code=…&state=…` on `host:port`; a wrong path is 404, a wrong state 400, a
//! second sign-in 409, `error=` ends the wait with the provider's refusal. The page shown never
//! repeats the code.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::ai::oauth::OAuthError;

/// A running callback server; stops when dropped.
#[derive(Debug)]
pub struct CallbackServer {
    redirect_uri: String,
    codes: mpsc::Receiver<Result<String, OAuthError>>,
    task: tokio::task::JoinHandle<()>,
    state: Arc<Mutex<Expect>>,
}

/// The state a redirect must carry.
#[derive(Clone, Debug)]
enum Expect {
    /// Not known yet: every redirect is refused.
    Unset,
    /// This one.
    State(String),
    /// None (OpenRouter sends no state; the random path stands in for it).
    Any,
}

impl Drop for CallbackServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const PAGE_OK: &str =
    "<!doctype html><html><body><p>Signed in. You may now close this page.</p></body></html>";

fn page(status: u16, text: &str) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Conflict",
    };
    let body = if status == 200 {
        PAGE_OK.to_owned()
    } else {
        format!("<!doctype html><html><body><p>{text}</p></body></html>")
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-store\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Whether a redirect carrying `given` is refused for its state.
fn state_refused(state: &Mutex<Expect>, given: Option<String>) -> bool {
    let expected = match state.lock() {
        Ok(guard) => guard.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    match expected {
        Expect::Unset => true,
        Expect::Any => false,
        Expect::State(expected) => given.is_none_or(|given| given != expected),
    }
}

impl CallbackServer {
    /// Binds `host:port` (port 0: any free one) and serves `path`; `redirect_host` is the
    /// host the redirect URI names (`localhost` for Anthropic and Codex). Every redirect is
    /// refused until [`Self::expect_state`] names the sign-in's state.
    pub async fn start(
        host: &str,
        port: u16,
        path: &str,
        redirect_host: &str,
        provider_name: &str,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind((host, port)).await?;
        let port = listener.local_addr()?.port();
        let redirect_uri = format!("http://{redirect_host}:{port}{path}");
        let (sender, codes) = mpsc::channel(1);
        let path = path.to_owned();
        let expected = Arc::new(Mutex::new(Expect::Unset));
        let state = expected.clone();
        let provider = provider_name.to_owned();
        let task = tokio::spawn(async move {
            let mut claimed = false;
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 2048];
                let read = tokio::time::timeout(Duration::from_secs(10), async {
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") && buffer.len() < 16_384 {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                })
                .await;
                if read.is_err() {
                    continue;
                }
                let head = String::from_utf8_lossy(&buffer);
                let target = head
                    .lines()
                    .next()
                    .and_then(|line| line.strip_prefix("GET "))
                    .and_then(|rest| rest.split(' ').next())
                    .unwrap_or("");
                let url = reqwest::Url::parse(&format!("http://localhost{target}")).ok();
                let param = |name: &str| {
                    url.as_ref().and_then(|url| {
                        url.query_pairs()
                            .find(|(key, _)| key == name)
                            .map(|(_, value)| value.into_owned())
                    })
                };
                let (status, text, outcome) = if url.as_ref().is_none_or(|url| url.path() != path) {
                    (404, "Callback route not found.".to_owned(), None)
                } else if state_refused(&state, param("state")) {
                    (400, "State mismatch.".to_owned(), None)
                } else if claimed {
                    (
                        409,
                        "This sign-in has already been handled.".to_owned(),
                        None,
                    )
                } else if let Some(error) = param("error") {
                    claimed = true;
                    let code = crate::support::term::line(&error);
                    (
                        400,
                        format!("{provider} authorization failed."),
                        Some(Err(OAuthError::Invalid(format!(
                            "{provider} authorization failed: {code}"
                        )))),
                    )
                } else if let Some(code) = param("code").filter(|code| !code.is_empty()) {
                    claimed = true;
                    (200, String::new(), Some(Ok(code)))
                } else {
                    (400, "Missing authorization code.".to_owned(), None)
                };
                // The outcome is delivered before the page: once the browser shows it, the
                // sign-in has its code.
                if let Some(outcome) = outcome {
                    let _ = sender.send(outcome).await;
                }
                let _ = socket.write_all(&page(status, &text)).await;
                let _ = socket.shutdown().await;
            }
        });
        Ok(Self {
            redirect_uri,
            codes,
            task,
            state: expected,
        })
    }

    /// The state a redirect must carry.
    pub fn expect_state(&self, state: &str) {
        self.set(Expect::State(state.to_owned()));
    }

    /// Takes a redirect without a state (OpenRouter's; the path is the sign-in's secret).
    pub fn accept_without_state(&self) {
        self.set(Expect::Any);
    }

    fn set(&self, expect: Expect) {
        match self.state.lock() {
            Ok(mut guard) => *guard = expect,
            Err(poisoned) => *poisoned.into_inner() = expect,
        }
    }

    /// The redirect URI to send with the authorization URL.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// The browser's redirect if it already came.
    pub fn try_take(&mut self) -> Option<Result<String, OAuthError>> {
        self.codes.try_recv().ok()
    }

    /// Waits for the browser's redirect and returns its code.
    pub async fn wait(&mut self) -> Result<String, OAuthError> {
        self.codes
            .recv()
            .await
            .unwrap_or(Err(OAuthError::Cancelled))
    }
}
