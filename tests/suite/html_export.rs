//! Issue 24's HTML export, through the real binary and real headless Chromium: the page of a
//! branchy imported session shows its conversation, a click on another branch shows that
//! branch's messages, and no page — of any reference fixture, or of a crafted session — sends
//! a request, logs an error or runs script from the session.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::chromium::Browser;
use crate::common::{TestEnv, fixtures, stdout_text, succeeded};

/// The text of the messages the page shows.
const VISIBLE: &str = "Array.from(document.querySelectorAll('article.entry'))\
    .filter(a => !a.hidden).map(a => a.innerText).join('\\n')";

/// What went wrong while the page was open: requests other than the page itself and its own
/// `data:` images (which leave nothing), exceptions, console errors, log errors, dialogs.
fn problems(browser: &Browser, url: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for event in browser.events_named("Network.requestWillBeSent") {
        let requested = event["params"]["request"]["url"].as_str().unwrap_or("");
        if requested != url && !requested.starts_with("data:image/") {
            out.push(event);
        }
    }
    out.extend(browser.events_named("Runtime.exceptionThrown"));
    out.extend(browser.events_named("Page.javascriptDialogOpening"));
    for event in browser.events_named("Runtime.consoleAPICalled") {
        if matches!(event["params"]["type"].as_str(), Some("error" | "warning")) {
            out.push(event);
        }
    }
    for event in browser.events_named("Log.entryAdded") {
        if event["params"]["entry"]["level"] == "error" {
            out.push(event);
        }
    }
    out
}

fn export_page(env: &TestEnv, session: &str, page: &Path) {
    succeeded(
        env.pi()
            .args(["export", "--html", session, "-o", page.to_str().unwrap()]),
    );
}

#[test]
fn a_branchy_session_s_page_shows_the_conversation_and_a_click_shows_another_branch() {
    let env = TestEnv::new();
    let fixture = fixtures::dir().join("branches.jsonl");
    succeeded(env.pi().args(["import", fixture.to_str().unwrap()]));
    let page = env.dir.path().join("branches.html");
    export_page(&env, "0196dd78", &page);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(
        html.matches("<script").count(),
        1,
        "the page's own script only"
    );

    let mut browser = Browser::start();
    let tab = browser.new_page();
    let url = browser.open_file(&tab, &page);
    let shot = browser.screenshot(&tab);
    assert!(shot.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(
        shot.len() > 20_000,
        "an almost empty screenshot: {} bytes",
        shot.len()
    );
    std::fs::write(env.dir.path().join("branches.png"), &shot).unwrap();

    // The active path: the branch that ends with the Oregon test.
    let visible = browser.eval(&tab, VISIBLE);
    let visible = visible.as_str().unwrap();
    assert!(
        visible.contains("Should discounts apply before or after tax?"),
        "{visible}"
    );
    assert!(
        visible.contains("Add a test for Oregon (no sales tax)."),
        "{visible}"
    );
    assert!(visible.contains("Added tests/tax-or.test.ts."), "{visible}");
    assert!(!visible.contains("Hardcoded 7.25% for CA."), "{visible}");
    assert!(!visible.contains("Implement that."), "{visible}");
    let title = browser.eval(&tab, "document.title");
    assert_eq!(title, "Should discounts apply before or after tax?");

    // A click on the other branch's last node shows that branch.
    let clicked = browser.eval(
        &tab,
        "(() => { const row = Array.from(document.querySelectorAll('nav#tree li.node'))\
           .find(li => li.innerText.includes('Hardcoded 7.25% for CA.'));\
           row.querySelector('button.goto').click(); return row.classList.contains('selected'); })()",
    );
    assert_eq!(clicked, json!(true));
    let visible = browser.eval(&tab, VISIBLE);
    let visible = visible.as_str().unwrap();
    assert!(
        visible.contains("Skip the table; hardcode California"),
        "{visible}"
    );
    assert!(visible.contains("Hardcoded 7.25% for CA."), "{visible}");
    assert!(
        visible.contains("Should discounts apply before or after tax?"),
        "{visible}"
    );
    assert!(!visible.contains("Add a test for Oregon"), "{visible}");
    // And the first branch's tool call and its result, collapsible, after a click there.
    browser.eval(
        &tab,
        "Array.from(document.querySelectorAll('nav#tree li.node'))\
           .find(li => li.innerText.includes('Done: discounts are applied'))\
           .querySelector('button.goto').click()",
    );
    let visible = browser.eval(&tab, VISIBLE);
    let visible = visible.as_str().unwrap();
    assert!(visible.contains("Implement that."), "{visible}");
    assert!(visible.contains("Tool call read"), "{visible}");
    assert!(visible.contains("Result of read"), "{visible}");
    // Folding the branch point hides the rows below it.
    let hidden = browser.eval(
        &tab,
        "(() => { document.querySelector('nav#tree li.node button.fold').click();\
           return document.querySelectorAll('nav#tree li.folded-away').length; })()",
    );
    assert!(hidden.as_u64().unwrap() > 0, "{hidden}");
    assert_eq!(problems(&browser, &url), Vec::<Value>::new());
}

#[test]
fn every_fixture_s_page_loads_without_a_request_or_an_error() {
    let env = TestEnv::new();
    let mut browser = Browser::start();
    let tab = browser.new_page();
    for name in fixtures::names() {
        let page = env.dir.path().join(format!("{name}.html"));
        let fixture = fixtures::dir().join(format!("{name}.jsonl"));
        let output = env
            .pi()
            .args([
                "--export",
                fixture.to_str().unwrap(),
                page.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        if !output.status.success() {
            // Only a file without a session header has no page (the reference refuses it too).
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                stderr.contains("is not a session file: no valid session header"),
                "{name}: {stderr}"
            );
            continue;
        }
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            format!("Exported to: {}\n", page.display()),
            "{name}"
        );
        let url = browser.open_file(&tab, &page);
        assert_eq!(problems(&browser, &url), Vec::<Value>::new(), "{name}");
        // Every tree row has its entry's article (a row may repeat where ids do).
        let orphans = browser.eval(
            &tab,
            "Array.from(document.querySelectorAll('nav#tree li.node'))\
               .filter(li => !document.getElementById('e' + li.dataset.seq)).length",
        );
        assert_eq!(orphans, json!(0), "{name}: a tree row without its entry");
        if name == "images" {
            let images = browser.eval(&tab, "document.images.length");
            assert!(images.as_u64().unwrap() > 0, "{name}: no inline image");
        }
    }
}

#[test]
fn text_from_a_crafted_session_is_shown_never_run_and_loads_nothing() {
    let env = TestEnv::new();
    let file = env.dir.path().join("crafted.jsonl");
    let header = json!({"type": "session", "version": 3, "id": "crafted", "timestamp": "2026-01-01T00:00:00.000Z",
                        "cwd": "/x\"><script>alert('cwd')</script>"});
    let evil = "<script>alert(1)</script> <img src=x onerror=alert(2)> [run](javascript:alert(3)) \
                ![pixel](http://127.0.0.1:9/pixel.png) \u{1b}]52;c;Zm9v\u{7} </article></main><script>alert(4)</script>";
    let lines = [
        header,
        json!({"type": "message", "id": "a1", "parentId": null, "timestamp": "2026-01-01T00:00:01.000Z",
               "message": {"role": "user", "content": evil, "timestamp": 1}}),
        json!({"type": "message", "id": "a2", "parentId": "a1", "timestamp": "2026-01-01T00:00:02.000Z",
               "message": {"role": "assistant", "content": [
                   {"type": "text", "text": format!("```html\n{evil}\n```")},
                   {"type": "toolCall", "id": "c1", "name": "<b>bash</b>", "arguments": {"command": evil}},
                   {"type": "image", "data": "\"><script>alert(5)</script>", "mimeType": "image/png"}],
                   "api": "openai-completions", "provider": "<i>p</i>", "model": "m", "usage": {"input": 1, "output": 1,
                   "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                   "cacheWrite": 0, "total": 0}}, "stopReason": "stop", "timestamp": 2}}),
        json!({"type": "label", "id": "a3", "parentId": "a2", "timestamp": "2026-01-01T00:00:03.000Z",
               "targetId": "a1", "label": "<script>alert(6)</script>"}),
        json!({"type": "session_info", "id": "a4", "parentId": "a3", "timestamp": "2026-01-01T00:00:04.000Z",
               "name": "</title><script>alert(7)</script>"}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let page = env.dir.path().join("crafted.html");
    let out =
        stdout_text(
            env.pi()
                .args(["--export", file.to_str().unwrap(), page.to_str().unwrap()]),
        );
    assert!(out.starts_with("Exported to: "), "{out}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("<script").count(),
        1,
        "the page's own script only"
    );
    assert!(
        !html.contains("href=\"javascript"),
        "an unsafe link survived"
    );
    assert!(!html.contains("http://127.0.0.1:9/pixel.png\""), "{html}");
    assert!(
        !html.contains('\u{1b}'),
        "a control character reached the page"
    );

    let mut browser = Browser::start();
    let tab = browser.new_page();
    let url = browser.open_file(&tab, &page);
    // Everything was shown as text, nothing ran, nothing was fetched.
    let visible = browser.eval(&tab, VISIBLE);
    let visible = visible.as_str().unwrap();
    assert!(visible.contains("<script>alert(1)</script>"), "{visible}");
    assert!(
        visible.contains("<img src=x onerror=alert(2)>"),
        "{visible}"
    );
    let images = browser.eval(&tab, "document.images.length");
    assert_eq!(images, json!(0), "an image element came from the session");
    let title = browser.eval(&tab, "document.title");
    assert_eq!(title, "</title><script>alert(7)</script>");
    // Clicking every row runs the page's script over every entry: still nothing.
    browser.eval(
        &tab,
        "document.querySelectorAll('nav#tree button.goto').forEach(b => b.click())",
    );
    std::thread::sleep(Duration::from_millis(200));
    browser.eval(&tab, "1");
    assert_eq!(problems(&browser, &url), Vec::<Value>::new());
}

#[test]
fn the_reference_s_export_flag_names_the_page_after_the_file_and_refuses_what_is_no_session() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.workspace).unwrap();
    let fixture = fixtures::dir().join("basic-chat.jsonl");
    let out = stdout_text(env.pi().args(["--export", fixture.to_str().unwrap()]));
    let expected = env.workspace.join("pi-session-basic-chat.html");
    assert_eq!(out, format!("Exported to: {}\n", expected.display()));
    assert!(
        std::fs::read_to_string(&expected)
            .unwrap()
            .contains("<!DOCTYPE html>")
    );

    let not_a_session = env.dir.path().join("notes.jsonl");
    std::fs::write(&not_a_session, "hello\n").unwrap();
    let output = env
        .pi()
        .args(["--export", not_a_session.to_str().unwrap(), "x.html"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is not a session file"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!env.workspace.join("x.html").exists());
    // A FIFO is refused, never read.
    let fifo = env.dir.path().join("fifo.jsonl");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let output = env
        .pi()
        .args(["--export", fifo.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not a regular file"),
        "{output:?}"
    );
}
