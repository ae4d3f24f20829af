//! Keys typed while a turn runs: the REPL queues lines as steering or follow-up messages, as
//! the reference's editor does (Enter steers, Alt+Enter queues a follow-up), Esc aborts the
//! turn, Alt+Up takes the queued messages back into the editor.
//!
//! While a turn runs the line editor is not reading. The terminal is put in non-canonical
//! mode without echo (signals stay on: Ctrl+C is still a SIGINT that aborts the turn), and a
//! thread reads standard input byte by byte with `read(2)` on the descriptor itself (no
//! buffering the line editor would not see), polling a wake-up pipe beside it. It keeps the
//! line being typed itself — backspace, Ctrl+U and Ctrl+W edit it — and echoes nothing, so
//! typed text never lands in the middle of the streamed reply: a finished line is shown when
//! it is queued ("Steering: …"), and the line unfinished when the turn ends becomes the
//! prompt's first text. Keys are told apart as a terminal sends them:
//! - Enter (`\r` or `\n`): the line is a steering message;
//! - ESC then Enter (Alt+Enter): a follow-up;
//! - ESC alone (nothing after it within [`ESC_WAIT`]), or ESC ESC: Esc, the interrupt;
//! - `ESC [ 1 ; 3 A` (Alt+Up): restore the queued messages;
//! - `ESC [ 200 ~` … `ESC [ 201 ~` (a bracketed paste): its line ends are kept in the line;
//! - any other escape sequence (arrows, function keys) is read whole and ignored.
//!
//! Invariant: after [`Typeahead::stop`] returns, the thread has ended, the terminal's settings
//! are back, and nothing reads standard input but the line editor.

use std::os::fd::{AsFd, OwnedFd};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{
    LocalFlags, SetArg, SpecialCharacterIndices, Termios, tcgetattr, tcsetattr,
};
use tokio::sync::mpsc;

/// How long a lone ESC waits for the rest of a key's sequence (a terminal sends a sequence's
/// bytes together; a person does not type ESC and the next key this fast).
pub const ESC_WAIT: Duration = Duration::from_millis(50);

/// The longest escape sequence read (a longer one is cut off and ignored).
const MAX_SEQUENCE: usize = 32;

/// One key or line typed during a turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Typed {
    /// Enter: deliver after the current tool calls.
    Steer(String),
    /// Alt+Enter: deliver when the agent would stop.
    FollowUp(String),
    /// Esc: abort the turn.
    Escape,
    /// Alt+Up: take the queued messages back into the editor.
    Dequeue,
}

/// What the reader ended with, besides the keys it sent.
#[derive(Debug, Default)]
struct Rest {
    /// The line being typed (not yet ended with Enter).
    partial: Vec<u8>,
}

/// Reads typed keys until stopped.
pub struct Typeahead {
    keys: mpsc::UnboundedReceiver<Typed>,
    wake: Option<OwnedFd>,
    thread: Option<JoinHandle<Rest>>,
    /// The terminal's settings before the reader changed them, restored on stop.
    saved: Option<Termios>,
}

/// What [`Typeahead::stop`] hands back.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stopped {
    /// Keys read but not yet taken by [`Typeahead::next`].
    pub keys: Vec<Typed>,
    /// The line being typed when it stopped.
    pub partial: String,
}

impl Typeahead {
    /// Starts reading standard input, with `partial` as the line already typed (what an
    /// earlier reader stopped with); `None` when it cannot (no pipe or thread), in which case
    /// typing during a turn simply waits for the prompt as before.
    pub fn start(partial: &str) -> Option<Self> {
        let (wake_read, wake_write) = nix::unistd::pipe().ok()?;
        let (sender, keys) = mpsc::unbounded_channel();
        let saved = tcgetattr(std::io::stdin()).ok();
        if let Some(mut keys_mode) = saved.clone() {
            keys_mode
                .local_flags
                .remove(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ECHOCTL);
            keys_mode.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
            keys_mode.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, &keys_mode);
        }
        let partial = partial.as_bytes().to_vec();
        let thread = std::thread::Builder::new()
            .name("pi-typeahead".to_owned())
            .spawn(move || {
                let mut source = Terminal { wake: wake_read };
                read_keys(&mut source, partial, &mut |typed| {
                    sender.send(typed).is_ok()
                })
            });
        let thread = match thread {
            Ok(thread) => thread,
            Err(_) => {
                if let Some(saved) = &saved {
                    let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, saved);
                }
                return None;
            }
        };
        Some(Self {
            keys,
            wake: Some(wake_write),
            thread: Some(thread),
            saved,
        })
    }

    /// The next typed key or line (pending forever once the reader has stopped).
    pub async fn next(&mut self) -> Typed {
        match self.keys.recv().await {
            Some(typed) => typed,
            None => std::future::pending().await,
        }
    }

    /// Stops the reader and waits for its thread; what it had read and not handed over is
    /// returned, with the line being typed.
    pub fn stop(mut self) -> Stopped {
        let rest = self.shutdown();
        let mut keys = Vec::new();
        while let Ok(typed) = self.keys.try_recv() {
            keys.push(typed);
        }
        Stopped {
            keys,
            partial: String::from_utf8_lossy(&rest.partial).into_owned(),
        }
    }

    fn shutdown(&mut self) -> Rest {
        if let Some(wake) = self.wake.take() {
            // A byte (or the pipe closing) wakes the poll.
            let _ = nix::unistd::write(&wake, b"x");
        }
        let rest = match self.thread.take() {
            Some(thread) => thread.join().unwrap_or_default(),
            None => Rest::default(),
        };
        if let Some(saved) = self.saved.take() {
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, &saved);
        }
        rest
    }
}

impl Drop for Typeahead {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Where the reader's bytes come from.
trait Source {
    /// The next byte: `Ok(Some(byte))`; `Ok(None)` when `wait` passed with none (`None`
    /// waits as long as it takes); `Err(())` when the reader must end (stopped, or the end of
    /// input, which the line editor then reports).
    fn next(&mut self, wait: Option<Duration>) -> Result<Option<u8>, ()>;
}

/// Standard input, with the wake-up pipe that stops the reader.
struct Terminal {
    wake: OwnedFd,
}

impl Source for Terminal {
    fn next(&mut self, wait: Option<Duration>) -> Result<Option<u8>, ()> {
        let stdin = std::io::stdin();
        let timeout = match wait {
            None => PollTimeout::NONE,
            Some(wait) => PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX),
        };
        loop {
            let mut fds = [
                PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, timeout) {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return Err(()),
            }
            let ready = |fd: &PollFd<'_>| {
                fd.revents().is_some_and(|flags| {
                    flags.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
                })
            };
            if ready(&fds[1]) {
                return Err(());
            }
            if !ready(&fds[0]) {
                continue;
            }
            let mut byte = [0u8; 1];
            return match nix::unistd::read(stdin.as_fd(), &mut byte) {
                Ok(1) => Ok(Some(byte[0])),
                Err(nix::errno::Errno::EINTR) => continue,
                _ => Err(()),
            };
        }
    }
}

/// The reader: turns bytes into keys and lines, handing each to `send` (which says whether to
/// go on). Returns the line being typed when it ends.
fn read_keys(
    source: &mut dyn Source,
    partial: Vec<u8>,
    send: &mut dyn FnMut(Typed) -> bool,
) -> Rest {
    let mut line = partial;
    let mut paste = false;
    loop {
        let Ok(Some(byte)) = source.next(None) else {
            return Rest { partial: line };
        };
        let typed = match byte {
            b'\r' | b'\n' if paste => {
                line.push(b'\n');
                None
            }
            b'\r' | b'\n' => line_typed(&mut line, false),
            0x1b => match source.next(Some(ESC_WAIT)) {
                Err(()) => return Rest { partial: line },
                Ok(None | Some(0x1b)) => Some(Typed::Escape),
                Ok(Some(b'\r' | b'\n')) => line_typed(&mut line, true),
                Ok(Some(b'[')) => match csi(source) {
                    Err(()) => return Rest { partial: line },
                    Ok(sequence) => match sequence.as_slice() {
                        b"1;3A" => Some(Typed::Dequeue),
                        b"200~" => {
                            paste = true;
                            None
                        }
                        b"201~" => {
                            paste = false;
                            None
                        }
                        _ => None,
                    },
                },
                Ok(Some(b'O')) => match source.next(Some(ESC_WAIT)) {
                    Err(()) => return Rest { partial: line },
                    Ok(_) => None,
                },
                // Alt with a key: nothing here.
                Ok(Some(_)) => None,
            },
            0x7f | 0x08 => {
                pop_char(&mut line);
                None
            }
            // Ctrl+U: the whole line.
            0x15 => {
                line.clear();
                None
            }
            // Ctrl+W: the word before the end.
            0x17 => {
                while line.last().is_some_and(|byte| byte.is_ascii_whitespace()) {
                    line.pop();
                }
                while line.last().is_some_and(|byte| !byte.is_ascii_whitespace()) {
                    line.pop();
                }
                None
            }
            b'\t' => {
                line.push(b' ');
                None
            }
            byte if byte < 0x20 => None,
            byte => {
                line.push(byte);
                None
            }
        };
        if let Some(typed) = typed
            && !send(typed)
        {
            return Rest { partial: line };
        }
    }
}

/// Reads the rest of a CSI sequence (after `ESC [`): parameter and intermediate bytes up to
/// the final byte (0x40–0x7E), which is included.
fn csi(source: &mut dyn Source) -> Result<Vec<u8>, ()> {
    let mut sequence = Vec::new();
    while sequence.len() < MAX_SEQUENCE {
        match source.next(Some(ESC_WAIT))? {
            None => break,
            Some(byte) => {
                sequence.push(byte);
                if (0x40..=0x7e).contains(&byte) {
                    break;
                }
            }
        }
    }
    Ok(sequence)
}

/// Removes the last character (all the bytes of a UTF-8 one).
fn pop_char(line: &mut Vec<u8>) {
    while let Some(byte) = line.pop() {
        // A continuation byte is part of a character still being removed.
        if byte & 0xc0 != 0x80 {
            break;
        }
    }
}

/// Ends the line: a steering message or (`follow_up`) a follow-up; a blank line is dropped.
fn line_typed(line: &mut Vec<u8>, follow_up: bool) -> Option<Typed> {
    let bytes = std::mem::take(line);
    let text = String::from_utf8_lossy(&bytes);
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
    use std::collections::VecDeque;

    use super::*;

    /// Bytes as a terminal sends them; `None` stands for a pause longer than [`ESC_WAIT`].
    struct Script(VecDeque<Option<u8>>);

    impl Script {
        fn new(parts: &[Option<&[u8]>]) -> Self {
            let mut bytes = VecDeque::new();
            for part in parts {
                match part {
                    Some(part) => bytes.extend(part.iter().map(|byte| Some(*byte))),
                    None => bytes.push_back(None),
                }
            }
            Self(bytes)
        }
    }

    impl Source for Script {
        fn next(&mut self, wait: Option<Duration>) -> Result<Option<u8>, ()> {
            loop {
                match self.0.pop_front() {
                    None => return Err(()),
                    Some(Some(byte)) => return Ok(Some(byte)),
                    // A pause: a wait for the next byte times out; a reader waiting for
                    // the next key at all goes on past it.
                    Some(None) if wait.is_some() => return Ok(None),
                    Some(None) => continue,
                }
            }
        }
    }

    fn keys(parts: &[Option<&[u8]>]) -> (Vec<Typed>, String) {
        let mut sent = Vec::new();
        let rest = read_keys(&mut Script::new(parts), Vec::new(), &mut |typed| {
            sent.push(typed);
            true
        });
        (sent, String::from_utf8_lossy(&rest.partial).into_owned())
    }

    fn steer(text: &str) -> Typed {
        Typed::Steer(text.to_owned())
    }

    #[test]
    fn enter_steers_alt_enter_follows_up_and_blank_lines_are_dropped() {
        let (sent, partial) = keys(&[Some(
            b"look at the tests first\rthen commit\x1b\r  spaced  \r\n\r   \x1b\rhalf",
        )]);
        assert_eq!(
            sent,
            [
                steer("look at the tests first"),
                Typed::FollowUp("then commit".to_owned()),
                steer("spaced"),
            ]
        );
        assert_eq!(partial, "half");
    }

    #[test]
    fn a_lone_esc_is_the_interrupt_and_never_eats_the_next_key() {
        // Esc, a pause, then a command typed: the Esc and every byte of the line arrive.
        let (sent, _) = keys(&[Some(b"\x1b"), None, Some(b"/session\r")]);
        assert_eq!(sent, [Typed::Escape, steer("/session")]);
        // Esc Esc (a double press typed quickly) is still the interrupt.
        let (sent, _) = keys(&[Some(b"\x1b\x1b"), None, Some(b"x\r")]);
        assert_eq!(sent, [Typed::Escape, steer("x")]);
        // Esc at the very end of input.
        let (sent, _) = keys(&[Some(b"\x1b"), None]);
        assert_eq!(sent, [Typed::Escape]);
    }

    #[test]
    fn escape_sequences_are_keys_not_text() {
        // Arrows and function keys are read whole and ignored; Alt+Up restores the queue.
        let (sent, partial) = keys(&[Some(b"ab\x1b[D\x1bOPc\x1b[1;3A\x1b[15~d")]);
        assert_eq!(sent, [Typed::Dequeue]);
        assert_eq!(partial, "abcd");
    }

    #[test]
    fn a_bracketed_paste_keeps_its_lines_in_one_message() {
        let (sent, _) = keys(&[Some(b"\x1b[200~first line\nsecond line\x1b[201~\r")]);
        assert_eq!(sent, [steer("first line\nsecond line")]);
    }

    #[test]
    fn backspace_ctrl_u_and_ctrl_w_edit_the_line() {
        let (sent, _) = keys(&[Some(
            "caf\u{e9}\x7f\x7fe! \x17word two\x17three\r".as_bytes(),
        )]);
        assert_eq!(sent, [steer("word three")]);
        let (sent, partial) = keys(&[Some(b"gone\x15kept\x01\x02")]);
        assert_eq!(sent, []);
        assert_eq!(partial, "kept");
    }

    #[test]
    fn a_partial_line_carries_over_into_the_next_reader() {
        let mut sent = Vec::new();
        let rest = read_keys(
            &mut Script::new(&[Some(b" more\r")]),
            b"typed".to_vec(),
            &mut |typed| {
                sent.push(typed);
                true
            },
        );
        assert_eq!(sent, [steer("typed more")]);
        assert!(rest.partial.is_empty());
    }
}
