//! Print mode (`pi -p`, or piped stdin) and JSON mode (`--mode json`): send the prompts one
//! after the other, wait for each run to finish (retries and overflow recovery included),
//! then print the final answer — or, in JSON mode, the session header line followed by every
//! event as one JSON line (spec extensions-and-modes §7).
//!
//! Extension errors go to stderr as `Extension error (<path>): <error>` (both modes, as in the
//! reference); before exiting the extensions get `session_shutdown`.
//!
//! What goes to stderr (notices, errors) is shown with its control characters escaped
//! (`support::term`); so is the answer on stdout when stdout is a terminal. Redirected, the
//! answer is written exactly (it is the command's data, as `--json` output is; `docs/SECURITY.md`).
//!
//! Exit codes (CONTRACT.md): 0 on success; 1 when the last answer is an error or the run
//! failed; 130 after Ctrl+C (143 after SIGTERM, 129 after SIGHUP, as the reference); a
//! closed stdout ends quietly with 0.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use anyhow::Result;
use tokio::signal::unix::{SignalKind, signal};

use crate::model::message::{AgentMessage, ContentBlock, StopReason};
use crate::modes::{Prepared, setup_help};
use crate::session::{AgentSession, PromptOptions, SessionError, SessionEvent};
use crate::support::json::to_js_string;
use crate::support::term;

fn is_broken_pipe(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::BrokenPipe
}

/// Runs print (`json == false`) or JSON mode.
pub async fn run(prepared: Prepared, json: bool) -> Result<ExitCode> {
    let Prepared {
        config,
        target,
        prompts,
        terminal,
        ..
    } = prepared;
    let (session, report) = AgentSession::open(config, target).await?;
    for notice in &report.notices {
        eprintln!("Warning: {}", term::line(notice));
    }
    let mut events = session.subscribe();
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel::<()>();
    if json {
        let header = session.header_line().await?;
        let mut stdout = std::io::stdout().lock();
        if let Err(error) = writeln!(stdout, "{header}").and_then(|()| stdout.flush()) {
            if is_broken_pipe(&error) {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(error.into());
        }
    }
    let writer = tokio::spawn(async move {
        let mut broken = false;
        let write = |event: SessionEvent, broken: &mut bool| match event.to_json() {
            // The reference prints extension errors to stderr in print and JSON mode.
            _ if matches!(event, SessionEvent::ExtensionError { .. }) => {
                if let SessionEvent::ExtensionError {
                    extension_path,
                    error,
                    ..
                } = &event
                {
                    eprintln!(
                        "Extension error ({}): {}",
                        term::line(extension_path),
                        term::text(error)
                    );
                }
            }
            Some(value) if json && !*broken => {
                let mut stdout = std::io::stdout().lock();
                let line = to_js_string(&value);
                if writeln!(stdout, "{line}")
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    *broken = true;
                }
            }
            Some(_) => {}
            None => {
                if let SessionEvent::Notice { message, .. } = &event {
                    eprintln!("{}", term::text(message));
                }
            }
        };
        loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Some(event) => write(event, &mut broken),
                    None => break,
                },
                _ = &mut done_rx => {
                    while let Ok(event) = events.try_recv() {
                        write(event, &mut broken);
                    }
                    break;
                }
            }
        }
        broken
    });

    // The handlers are installed before the first prompt is sent, so a signal that arrives
    // while the request is on its way is not lost: SIGINT → 130, SIGTERM → 143, SIGHUP → 129.
    let signal_code = Arc::new(AtomicU8::new(0));
    {
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let session = session.clone();
        let signal_code = signal_code.clone();
        tokio::spawn(async move {
            let code = tokio::select! {
                _ = interrupt.recv() => 130,
                _ = terminate.recv() => 143,
                _ = hangup.recv() => 129,
            };
            signal_code.store(code, Ordering::SeqCst);
            session.abort();
        });
    }

    let mut failure = None;
    for (text, images) in prompts {
        let options = PromptOptions {
            images,
            ..PromptOptions::default()
        };
        if let Err(error) = session.prompt(&text, options).await {
            failure = Some(match error {
                SessionError::NoModel => setup_help(&terminal.agent_dir),
                other => other.to_string(),
            });
            break;
        }
        if signal_code.load(Ordering::SeqCst) != 0 {
            break;
        }
    }
    // Work an extension started (a message it sent) finishes before the answer is read;
    // then the extensions get `session_shutdown` (reason `quit`).
    session.wait_for_idle().await;
    session.shutdown().await;
    // Entries that could not be stored (rescued to `unsaved/`, or dropped) fail the run,
    // whatever else happened.
    let done = if session.entries_not_stored() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    };
    let transcript = session.messages();
    let _ = done_tx.send(());
    if writer.await.unwrap_or(false) {
        return Ok(done);
    }
    let code = signal_code.load(Ordering::SeqCst);
    if code != 0 {
        return Ok(ExitCode::from(code));
    }
    if let Some(message) = failure {
        eprintln!("{}", term::text(&message));
        return Ok(ExitCode::from(1));
    }
    let Some(AgentMessage::Assistant(last)) = transcript.last() else {
        return Ok(done);
    };
    if matches!(last.stop_reason, StopReason::Error | StopReason::Aborted) {
        let reason = if last.stop_reason == StopReason::Error {
            "error"
        } else {
            "aborted"
        };
        let message = last
            .error_message
            .clone()
            .unwrap_or_else(|| format!("request {reason}"));
        eprintln!("{}", term::text(&message));
        return Ok(ExitCode::from(1));
    }
    if json {
        return Ok(done);
    }
    let to_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut stdout = std::io::stdout().lock();
    for block in &last.content {
        let shown = match block {
            ContentBlock::Text(text) if to_terminal => term::text(&text.text),
            ContentBlock::Text(text) => std::borrow::Cow::Borrowed(text.text.as_str()),
            _ => continue,
        };
        if let Err(error) = writeln!(stdout, "{shown}") {
            if is_broken_pipe(&error) {
                return Ok(done);
            }
            return Err(error.into());
        }
    }
    if let Err(error) = stdout.flush()
        && !is_broken_pipe(&error)
    {
        return Err(error.into());
    }
    Ok(done)
}
