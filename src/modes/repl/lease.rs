//! The REPL's side of writer leases: when the session to open (at startup, `/resume`, `-r`)
//! is written by another live pi, one prompt line offers the choice — open it read-only,
//! fork it into a new session (as `--fork` does), or take it over (at once when its holder is
//! gone or stale, otherwise after a visible countdown that Ctrl+C stops). A read-only session
//! refuses prompts with a line saying how to go on (`/clone`, `/takeover`).
//!
//! Invariant: nothing here writes the held session; the choice only picks the target and the
//! access the session layer opens it with.

use std::io::{self, Write};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::signal::unix::Signal;

use super::Repl;
use super::editor::{LineEditor, Reply};
use crate::model::ids::SessionId;
use crate::modes::render::Renderer;
use crate::session::agent_session::{describe_read_only, seconds};
use crate::session::{HeldSession, OpenAccess, ReadOnlyReason, SessionError, SessionTarget};
use crate::store::{LeaseHolder, SessionStore};
use crate::support::term;

/// What the user chose for a held session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HeldChoice {
    /// Open it read-only.
    ReadOnly,
    /// Copy it into a new session and continue there.
    Fork,
    /// Take its lease over (now or after the countdown).
    TakeOver,
    /// Do not open it.
    Cancel,
}

/// Reads an answer to the choice: a number or the first letter (Enter cancels).
pub(super) fn parse_choice(answer: &str) -> Option<HeldChoice> {
    match answer.trim().to_lowercase().as_str() {
        "1" | "r" | "read-only" | "readonly" => Some(HeldChoice::ReadOnly),
        "2" | "f" | "fork" => Some(HeldChoice::Fork),
        "3" | "t" | "take over" | "takeover" => Some(HeldChoice::TakeOver),
        "" | "4" | "c" | "cancel" | "q" | "quit" => Some(HeldChoice::Cancel),
        _ => None,
    }
}

/// The choice's question for a holder.
pub(super) fn question(holder: &LeaseHolder) -> String {
    let take_over = if holder.can_take_over_now() {
        "now".to_owned()
    } else if holder.owner_alive_on_this_host == Some(true) {
        // Its heartbeat keeps it fresh: no countdown would ever end.
        format!("waits for pid {} to end", holder.pid)
    } else {
        format!("waits {} s", seconds(holder.take_over_in()))
    };
    format!(
        "[1] read-only  [2] fork into a new session  [3] take over ({take_over})  [Enter] cancel: "
    )
}

/// The line a read-only session answers a prompt with.
pub(super) fn read_only_help(reason: &ReadOnlyReason, holder: Option<&LeaseHolder>) -> String {
    let when = match holder {
        Some(holder) if !holder.can_take_over_now() => format!(
            " (possible in {} s if that process stopped responding, at once once it has ended)",
            seconds(holder.take_over_in())
        ),
        _ => " (possible now)".to_owned(),
    };
    format!(
        "This session is read-only here: {}. /clone continues it in a new session; /takeover takes it over{when}",
        describe_read_only(reason)
    )
}

/// The parts of the REPL the choice uses (it also runs before the `Repl` exists).
pub(super) struct Asker<'a> {
    pub editor: &'a mut LineEditor,
    pub out: &'a mut Renderer<io::Stdout>,
    pub sigint: &'a mut Signal,
}

impl Asker<'_> {
    fn warn(&mut self, text: &str) -> io::Result<()> {
        let painted = self
            .out
            .palette()
            .warning(&crate::support::term::text(text));
        self.out.line(&painted)
    }

    fn info(&mut self, text: &str) -> io::Result<()> {
        let painted = self.out.palette().dim(&crate::support::term::text(text));
        self.out.line(&painted)
    }

    async fn ask(&mut self, question: &str) -> Option<String> {
        match self.editor.read(question, "", false).await {
            Reply::Line(line) => Some(line.trim().to_owned()),
            Reply::Interrupted
            | Reply::Eof
            | Reply::DoubleEscape
            | Reply::Action { .. }
            | Reply::Failed(_) => None,
        }
    }

    /// Asks what to do about `held`; returns the target and access to open instead, or
    /// `None` when the user cancels.
    pub(super) async fn resolve(
        &mut self,
        store: &SessionStore,
        cwd: &str,
        held: &HeldSession,
    ) -> Result<Option<(SessionTarget, OpenAccess)>> {
        let session = held.session.clone();
        let mut holder = held.holder.clone();
        loop {
            self.warn(&format!(
                "Session {session} is being written by another pi ({holder})"
            ))?;
            let Some(answer) = self.ask(&question(&holder)).await else {
                return Ok(None);
            };
            match parse_choice(&answer) {
                None => {
                    self.warn(&format!("No choice {answer:?}: answer 1, 2, 3 or Enter"))?;
                }
                Some(HeldChoice::Cancel) => return Ok(None),
                Some(HeldChoice::ReadOnly) => {
                    return Ok(Some((SessionTarget::Open(session), OpenAccess::ReadOnly)));
                }
                Some(HeldChoice::Fork) => {
                    let store = store.clone();
                    let source = session.clone();
                    let cwd = cwd.to_owned();
                    let copy =
                        tokio::task::spawn_blocking(move || store.copy_session(&source, &cwd))
                            .await
                            .context("the fork task failed")??;
                    self.info(&format!(
                        "Forked session {session} into new session {}",
                        copy.id
                    ))?;
                    return Ok(Some((SessionTarget::Open(copy.id), OpenAccess::Write)));
                }
                Some(HeldChoice::TakeOver) => {
                    match self.wait_to_take_over(store, &session).await? {
                        None => return Ok(Some((SessionTarget::Open(session), OpenAccess::Write))),
                        // Ctrl+C: ask again.
                        Some(now) => holder = now,
                    }
                }
            }
        }
    }

    /// Waits until `session` may be taken over, showing a countdown; returns `None` when it
    /// may be now, or the holder as it is when Ctrl+C stopped the wait.
    pub(super) async fn wait_to_take_over(
        &mut self,
        store: &SessionStore,
        session: &SessionId,
    ) -> Result<Option<LeaseHolder>> {
        while let Some(Some(())) = futures::FutureExt::now_or_never(self.sigint.recv()) {}
        let mut shown = false;
        loop {
            let reader = store.clone();
            let id = session.clone();
            let holder = tokio::task::spawn_blocking(move || reader.lease_holder(&id))
                .await
                .context("a store task failed")??;
            let Some(holder) = holder.filter(|holder| !holder.can_take_over_now()) else {
                if shown {
                    self.out.line("")?;
                }
                return Ok(None);
            };
            let wait = holder.take_over_in();
            {
                let out = self.out.writer();
                if holder.owner_alive_on_this_host == Some(true) {
                    // A live holder renews its heartbeat: it is taken over when it ends, and
                    // saying "in N s" would restart at every heartbeat.
                    write!(
                        out,
                        "\rWaiting for pid {} ({}) to end or stop answering, then taking over (Ctrl+C to choose again)  ",
                        holder.pid,
                        term::line(&holder.owner)
                    )?;
                } else {
                    write!(
                        out,
                        "\rWaiting for pid {} on {}: taking over once its heartbeat is {} s old (now {} s; Ctrl+C to choose again)  ",
                        holder.pid,
                        term::line(&holder.host),
                        seconds(holder.stale_after),
                        seconds(holder.heartbeat_age)
                    )?;
                }
                out.flush()?;
            }
            shown = true;
            let tick = wait.clamp(Duration::from_millis(50), Duration::from_millis(500));
            tokio::select! {
                () = tokio::time::sleep(tick) => {}
                Some(()) = self.sigint.recv() => {
                    self.out.line("")?;
                    return Ok(Some(holder));
                }
            }
        }
    }
}

impl Repl {
    fn asker(&mut self) -> Asker<'_> {
        Asker {
            editor: &mut self.editor,
            out: &mut self.out,
            sigint: &mut self.sigint,
        }
    }

    /// Switches to a stored session, offering the choice when another pi writes it.
    pub(super) async fn switch_with_choice(&mut self, id: SessionId) -> Result<bool> {
        let missing = {
            let (store, id, cwd) = (self.session.store().clone(), id.clone(), self.session.cwd());
            super::blocking(move || super::MissingCwd::check(&store, &id, &cwd)).await?
        };
        if let Some(missing) = missing
            && !super::ask_missing_cwd(&mut self.editor, &mut self.out, &missing).await?
        {
            self.info("Resume cancelled")?;
            return Ok(false);
        }
        let mut target = id;
        let mut access = OpenAccess::Ask;
        loop {
            let session = self.session.clone();
            let result = self
                .with_events(session.switch_session_with(target.clone(), access), || {})
                .await?;
            match result {
                Ok(report) => {
                    for notice in &report.notices {
                        self.warn(notice)?;
                    }
                    return Ok(true);
                }
                Err(SessionError::Held(held)) => {
                    let store = self.session.store().clone();
                    let cwd = self.session.cwd().to_string_lossy().into_owned();
                    match self.asker().resolve(&store, &cwd, &held).await? {
                        Some((SessionTarget::Open(next), next_access)) => {
                            target = next;
                            access = next_access;
                        }
                        _ => return Ok(false),
                    }
                }
                Err(error) => {
                    self.error(&error.to_string())?;
                    return Ok(false);
                }
            }
        }
    }

    /// Says that the session is read-only here and how to go on.
    pub(super) async fn explain_read_only(&mut self) -> Result<()> {
        let Some(reason) = self.session.read_only() else {
            return Ok(());
        };
        let id = self.session.session_id().await;
        let holder = self.session.lease_holder_of(&id).await.ok().flatten();
        let help = read_only_help(&reason, holder.as_ref());
        self.warn(&help)?;
        Ok(())
    }

    /// `/takeover`: takes the lease of the read-only session over (after a countdown while
    /// its holder is alive and fresh) and writes the entries kept unsaved.
    pub(super) async fn take_over(&mut self) -> Result<()> {
        if self.session.read_only().is_none() {
            self.info("This session is not read-only here")?;
            return Ok(());
        }
        let id = self.session.session_id().await;
        loop {
            let session = self.session.clone();
            match self.with_events(session.take_over(), || {}).await? {
                Ok(written) => {
                    let mut text = format!("Took over session {id}");
                    if written > 0 {
                        text.push_str(&format!(
                            "; saved {written} entr{} kept in memory",
                            if written == 1 { "y" } else { "ies" }
                        ));
                    }
                    self.info(&text)?;
                    return Ok(());
                }
                Err(SessionError::Held(held)) => {
                    self.warn(&format!(
                        "Session {id} is being written by another pi ({})",
                        held.holder
                    ))?;
                    let store = self.session.store().clone();
                    if self.asker().wait_to_take_over(&store, &id).await?.is_some() {
                        return Ok(());
                    }
                }
                Err(error) => {
                    self.error(&error.to_string())?;
                    return Ok(());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(alive: bool, age_ms: u64) -> LeaseHolder {
        LeaseHolder {
            owner: "pi (interactive)".into(),
            pid: 42,
            host: "h".into(),
            acquired_at_ms: 0,
            heartbeat_age: Duration::from_millis(age_ms),
            stale_after: Duration::from_secs(30),
            owner_alive_on_this_host: Some(alive),
        }
    }

    #[test]
    fn choices_read_as_numbers_or_letters() {
        assert_eq!(parse_choice("1"), Some(HeldChoice::ReadOnly));
        assert_eq!(parse_choice(" R "), Some(HeldChoice::ReadOnly));
        assert_eq!(parse_choice("f"), Some(HeldChoice::Fork));
        assert_eq!(parse_choice("3"), Some(HeldChoice::TakeOver));
        assert_eq!(parse_choice("t"), Some(HeldChoice::TakeOver));
        assert_eq!(parse_choice(""), Some(HeldChoice::Cancel));
        assert_eq!(parse_choice("x"), None);
    }

    #[test]
    fn the_question_says_when_take_over_works() {
        // A live holder here renews its heartbeat: waited for by pid, no countdown.
        assert!(question(&holder(true, 2_000)).contains("take over (waits for pid 42 to end)"));
        assert!(question(&holder(false, 2_000)).contains("take over (now)"));
        let mut elsewhere = holder(true, 2_000);
        elsewhere.owner_alive_on_this_host = None;
        assert!(question(&elsewhere).contains("take over (waits 28 s)"));
        assert!(question(&holder(true, 31_000)).contains("take over (now)"));
    }

    #[test]
    fn read_only_help_names_the_ways_on() {
        let reason = ReadOnlyReason::Opened {
            holder: Some(holder(true, 1_000)),
        };
        let help = read_only_help(&reason, Some(&holder(true, 1_000)));
        assert!(help.contains("/clone"), "{help}");
        assert!(help.contains("/takeover"), "{help}");
        assert!(help.contains("possible in 29 s"), "{help}");
        let lost = ReadOnlyReason::Lost {
            message: "x".into(),
        };
        assert!(read_only_help(&lost, None).contains("took its writer lease over"));
    }
}
