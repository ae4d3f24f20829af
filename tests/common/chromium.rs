//! Real headless Chromium (Debian's `chromium`, installed by `.ci/run`), driven through its
//! DevTools protocol over the WebSocket it opens on loopback: open a page, run script in it,
//! take a screenshot, and see every request, console message and exception it caused.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// A headless Chromium process and one DevTools connection to it.
pub struct Browser {
    child: Child,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Every event received so far (`{method, params, sessionId}`).
    pub events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium with a fresh profile and connects to it.
    pub fn start() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-sync",
                "--metrics-recording-only",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium (installed by .ci/run) starts");
        // Chromium writes the port and the browser target's path once it listens.
        let active = profile.path().join("DevToolsActivePort");
        let started = Instant::now();
        let (port, path) = loop {
            if let Ok(text) = std::fs::read_to_string(&active) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    break (port.to_owned(), path.to_owned());
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "chromium did not open its DevTools port"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let (socket, _) = tungstenite::connect(format!("ws://127.0.0.1:{port}{path}"))
            .expect("the DevTools WebSocket");
        Browser {
            child,
            socket,
            next_id: 1,
            events: Vec::new(),
            _profile: profile,
        }
    }

    fn read(&mut self) -> Value {
        loop {
            match self.socket.read().expect("a DevTools message") {
                Message::Text(text) => return serde_json::from_str(&text).unwrap(),
                Message::Close(_) => panic!("chromium closed the DevTools connection"),
                _ => {}
            }
        }
    }

    /// Sends a command (to a page's session when `session` is given) and returns its result;
    /// events that arrive meanwhile are kept in [`Self::events`].
    pub fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .expect("send a DevTools command");
        loop {
            let reply = self.read();
            if reply["id"] == json!(id) {
                assert!(reply.get("error").is_none(), "{method}: {reply}");
                return reply["result"].clone();
            }
            if reply.get("method").is_some() {
                self.events.push(reply);
            }
        }
    }

    /// Waits for an event named `method` (already received or still to come).
    pub fn wait_for_event(&mut self, method: &str, timeout: Duration) -> Value {
        let started = Instant::now();
        loop {
            if let Some(event) = self.events.iter().find(|event| event["method"] == method) {
                return event.clone();
            }
            assert!(started.elapsed() < timeout, "no {method} event");
            let event = self.read();
            if event.get("method").is_some() {
                self.events.push(event);
            }
        }
    }

    /// Opens a new page with network, console, log and page events on; returns its session.
    pub fn new_page(&mut self) -> String {
        let target = self.call(None, "Target.createTarget", json!({"url": "about:blank"}));
        let attached = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        let session = attached["sessionId"].as_str().unwrap().to_owned();
        for domain in [
            "Page.enable",
            "Runtime.enable",
            "Network.enable",
            "Log.enable",
        ] {
            self.call(Some(&session), domain, json!({}));
        }
        session
    }

    /// Loads `file` in the page and waits for its load event.
    pub fn open_file(&mut self, session: &str, file: &Path) -> String {
        let url = format!("file://{}", file.display());
        self.events.clear();
        self.call(Some(session), "Page.navigate", json!({"url": url}));
        self.wait_for_event("Page.loadEventFired", Duration::from_secs(60));
        url
    }

    /// Evaluates `expression` in the page and returns its value.
    pub fn eval(&mut self, session: &str, expression: &str) -> Value {
        let result = self.call(
            Some(session),
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// A PNG screenshot of the page.
    pub fn screenshot(&mut self, session: &str) -> Vec<u8> {
        use base64::Engine as _;
        let shot = self.call(
            Some(session),
            "Page.captureScreenshot",
            json!({"format": "png"}),
        );
        base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap()
    }

    /// The events of one kind received so far.
    pub fn events_named(&self, method: &str) -> Vec<Value> {
        self.events
            .iter()
            .filter(|event| event["method"] == method)
            .cloned()
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
