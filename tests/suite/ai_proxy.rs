//! Proxies as 1.6.0 uses them (`HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY`, lowercase forms first,
//! the global `httpProxy` setting where the variables are unset): `pi -p` against a scripted
//! provider through a real, small HTTP proxy on 127.0.0.1 that records the hosts it is asked
//! for. It forwards absolute-form requests (plain-HTTP origins) only to 127.0.0.1 and answers
//! every `CONNECT` with 502 after recording it, so nothing leaves the machine.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::TestEnv;
use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};

/// A recording HTTP proxy.
struct RecordingProxy {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl RecordingProxy {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let recorded = recorded.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &recorded);
                });
            }
        });
        Self { port, seen }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// Reads one request head (request line and headers) and its `Content-Length` body.
fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
        let end = line == "\r\n";
        head.push_str(&line);
        if end {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Some((head, body)))
}

fn serve(client: TcpStream, seen: &Mutex<Vec<String>>) -> std::io::Result<()> {
    client.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut upstream: Option<TcpStream> = None;
    while let Some((head, body)) = read_request(&mut reader)? {
        let request_line = head.lines().next().unwrap_or("").to_owned();
        let mut parts = request_line.split(' ');
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if method == "CONNECT" {
            seen.lock().unwrap().push(format!("CONNECT {target}"));
            let mut client = client.try_clone()?;
            client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")?;
            return Ok(());
        }
        let Some(rest) = target.strip_prefix("http://") else {
            return Ok(());
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        seen.lock().unwrap().push(format!("{method} {authority}"));
        assert!(
            authority.starts_with("127.0.0.1:"),
            "the test proxy forwards to 127.0.0.1 only: {authority}"
        );
        if upstream.is_none() {
            let stream = TcpStream::connect(authority)?;
            let mut back = stream.try_clone()?;
            let mut to_client = client.try_clone()?;
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut back, &mut to_client);
                let _ = to_client.shutdown(std::net::Shutdown::Both);
            });
            upstream = Some(stream);
        }
        let Some(stream) = upstream.as_mut() else {
            return Ok(());
        };
        let path = if path.is_empty() { "/" } else { path };
        let rewritten = head.replacen(target, path, 1);
        stream.write_all(rewritten.as_bytes())?;
        stream.write_all(&body)?;
    }
    Ok(())
}

fn setup(script: Vec<MockResponse>) -> (TestEnv, ProviderServer) {
    let env = TestEnv::new();
    let server = ProviderServer::start(script);
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    (env, server)
}

fn answer(env: &TestEnv, vars: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = env.pi();
    cmd.args(["--offline", "--model", "mock/mock-model", "-p", "hi"]);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    cmd.output().unwrap()
}

#[test]
fn http_proxy_carries_the_provider_traffic() {
    let proxy = RecordingProxy::start();
    let (env, server) = setup(vec![MockResponse::sse(sse::openai_text("via proxy"))]);
    let host = server.url().trim_start_matches("http://").to_owned();
    let output = answer(&env, &[("http_proxy", &proxy.url())]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "via proxy\n",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(proxy.seen(), [format!("POST {host}")]);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn no_proxy_hosts_connect_directly() {
    let proxy = RecordingProxy::start();
    let (env, server) = setup(vec![MockResponse::sse(sse::openai_text("direct"))]);
    let output = answer(
        &env,
        &[
            ("HTTP_PROXY", &proxy.url()),
            ("HTTPS_PROXY", &proxy.url()),
            ("NO_PROXY", "localhost, 127.0.0.1"),
        ],
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "direct\n");
    assert!(proxy.seen().is_empty(), "{:?}", proxy.seen());
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn the_http_proxy_setting_applies_where_the_variables_are_unset() {
    let proxy = RecordingProxy::start();
    let (env, server) = setup(vec![MockResponse::sse(sse::openai_text("by setting"))]);
    std::fs::write(
        env.agent_dir.join("settings.json"),
        format!(r#"{{"httpProxy":"{}"}}"#, proxy.url()),
    )
    .unwrap();
    let output = answer(&env, &[]);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "by setting\n");
    assert_eq!(proxy.seen().len(), 1);
    assert_eq!(server.requests().len(), 1);
    // A set variable wins over the setting, even an empty one.
    let (env, server) = setup(vec![MockResponse::sse(sse::openai_text("no proxy"))]);
    std::fs::write(
        env.agent_dir.join("settings.json"),
        format!(r#"{{"httpProxy":"{}"}}"#, proxy.url()),
    )
    .unwrap();
    let output = answer(&env, &[("HTTP_PROXY", "")]);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "no proxy\n");
    assert_eq!(proxy.seen().len(), 1);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn https_proxy_tunnels_https_providers_with_connect() {
    let proxy = RecordingProxy::start();
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    // A host that never resolves: through the proxy, pi does not look it up itself.
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json("https://api.proxy-test.invalid", 128_000),
    )
    .unwrap();
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"retry":{"enabled":false}}"#,
    )
    .unwrap();
    let output = answer(
        &env,
        &[("HTTPS_PROXY", &proxy.url()), ("NO_PROXY", "127.0.0.1")],
    );
    assert_ne!(output.status.code(), Some(0));
    assert_eq!(proxy.seen()[0], "CONNECT api.proxy-test.invalid:443");
}
