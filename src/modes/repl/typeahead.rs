//! Lines typed while a turn runs: the REPL queues them as steering or follow-up messages,
//! as the reference's editor does (Enter steers, Alt+Enter queues a follow-up).
//!
//! While a turn runs the line editor is not reading and the terminal is in its normal,
//! canonical mode: the kernel echoes what is typed and hands a line over when Enter is
//! pressed, and Ctrl+C stays a SIGINT that aborts the turn. A thread polls standard input and
//! a wake-up pipe, and reads only when a whole line is ready, with `read(2)` on the descriptor
//! itself (no buffering that the line editor would not see). Alt+Enter arrives as ESC before
//! the line end, which marks a follow-up. A line still being typed when the turn ends stays in
//! the terminal's buffer, and the line editor reads it as its first input.
//!
//! Invariant: after [`Typeahead::stop`] returns, the thread has ended and nothing reads
//! standard input but the line editor.

use std::os::fd::{AsFd, OwnedFd};
use std::thread::JoinHandle;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{LocalFlags, SetArg, Termios, tcgetattr, tcsetattr};
use tokio::sync::mpsc;

/// One line typed during a turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Typed {
    /// Enter: deliver after the current tool calls.
    Steer(String),
    /// Alt+Enter: deliver when the agent would stop.
    FollowUp(String),
}

/// Reads typed lines until stopped.
pub struct Typeahead {
    lines: mpsc::UnboundedReceiver<Typed>,
    wake: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
    /// The terminal's settings before `ECHOCTL` was switched off, restored on stop.
    saved: Option<Termios>,
}

impl Typeahead {
    /// Starts reading standard input; `None` when it cannot (no pipe or thread), in which case
    /// typing during a turn simply waits for the prompt as before.
    pub fn start() -> Option<Self> {
        let (wake_read, wake_write) = nix::unistd::pipe().ok()?;
        let (sender, lines) = mpsc::unbounded_channel();
        let thread = std::thread::Builder::new()
            .name("pi-typeahead".to_owned())
            .spawn(move || read_lines(&wake_read, &sender))
            .ok()?;
        // Alt+Enter echoes as `^[` unless control characters are echoed as themselves.
        let saved = tcgetattr(std::io::stdin()).ok();
        if let Some(mut quiet) = saved.clone() {
            quiet.local_flags.remove(LocalFlags::ECHOCTL);
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, &quiet);
        }
        Some(Self {
            lines,
            wake: Some(wake_write),
            thread: Some(thread),
            saved,
        })
    }

    /// The next typed line (pending forever once the reader has stopped).
    pub async fn next(&mut self) -> Typed {
        match self.lines.recv().await {
            Some(typed) => typed,
            None => std::future::pending().await,
        }
    }

    /// Stops the reader and waits for its thread; lines it had already read are returned.
    pub fn stop(mut self) -> Vec<Typed> {
        self.shutdown();
        let mut rest = Vec::new();
        while let Ok(typed) = self.lines.try_recv() {
            rest.push(typed);
        }
        rest
    }

    fn shutdown(&mut self) {
        if let Some(wake) = self.wake.take() {
            // A byte (or the pipe closing) wakes the poll.
            let _ = nix::unistd::write(&wake, b"x");
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Some(saved) = self.saved.take() {
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, &saved);
        }
    }
}

impl Drop for Typeahead {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The thread: waits for a line or the wake-up, sends what it reads.
fn read_lines(wake: &OwnedFd, sender: &mpsc::UnboundedSender<Typed>) {
    let stdin = std::io::stdin();
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let mut fds = [
            PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
            PollFd::new(wake.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        let ready = |fd: &PollFd<'_>| {
            fd.revents().is_some_and(|flags| {
                flags.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
            })
        };
        if ready(&fds[1]) {
            return;
        }
        if !ready(&fds[0]) {
            continue;
        }
        match nix::unistd::read(stdin.as_fd(), &mut buf) {
            // The end of input: leave it to the line editor, which reports it.
            Ok(0) | Err(_) => return,
            Ok(count) => pending.extend_from_slice(&buf[..count]),
        }
        while let Some(end) = pending.iter().position(|byte| *byte == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if let Some(typed) = parse_line(&line)
                && sender.send(typed).is_err()
            {
                return;
            }
        }
    }
}

/// Turns one line (with its `\n`) into a steer or follow-up; blank lines are dropped.
pub fn parse_line(line: &[u8]) -> Option<Typed> {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches(['\n', '\r']);
    let (text, follow_up) = match text.strip_suffix('\x1b') {
        Some(rest) => (rest.trim_end_matches(['\n', '\r']), true),
        None => (text, false),
    };
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(if follow_up {
        Typed::FollowUp(text.to_owned())
    } else {
        Typed::Steer(text.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enter_steers_alt_enter_follows_up_and_blank_lines_are_dropped() {
        assert_eq!(
            parse_line(b"look at the tests first\n"),
            Some(Typed::Steer("look at the tests first".to_owned()))
        );
        assert_eq!(
            parse_line(b"then commit\x1b\n"),
            Some(Typed::FollowUp("then commit".to_owned()))
        );
        assert_eq!(
            parse_line(b"  spaced  \r\n"),
            Some(Typed::Steer("spaced".to_owned()))
        );
        assert_eq!(parse_line(b"\n"), None);
        assert_eq!(parse_line(b"   \x1b\n"), None);
    }
}
