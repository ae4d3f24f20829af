//! Extension dialogs and notifications in the REPL (`ExtensionUi`): a request goes over a
//! channel to the REPL loop, which prints it and reads the answer with the line editor —
//! also in the middle of a turn, since the loop serves requests while it waits for a run.
//!
//! A dialog resolves with its default (`false` / `None`) when it times out, when the REPL is
//! gone, or when the user cancels (Enter on nothing, Ctrl+C, Ctrl+D).

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::agent::tool::BoxFuture;
use crate::session::extensions::{ExtensionUi, NotifyKind};

/// One request of an extension to the person at the terminal.
#[derive(Debug)]
pub enum UiRequest {
    /// Show a notification.
    Notify {
        /// The text.
        message: String,
        /// Info, warning or error.
        kind: NotifyKind,
    },
    /// Ask yes or no.
    Confirm {
        /// The dialog's title.
        title: String,
        /// The question.
        message: String,
        /// Where the answer goes.
        reply: oneshot::Sender<bool>,
    },
    /// Ask to pick one option.
    Select {
        /// The dialog's title.
        title: String,
        /// The choices.
        options: Vec<String>,
        /// Where the answer goes.
        reply: oneshot::Sender<Option<String>>,
    },
    /// Ask for a line of text.
    Input {
        /// The dialog's title.
        title: String,
        /// A hint shown with the question.
        placeholder: Option<String>,
        /// Where the answer goes.
        reply: oneshot::Sender<Option<String>>,
    },
}

/// The REPL's `ExtensionUi`: forwards requests to the REPL loop.
#[derive(Debug, Clone)]
pub struct ReplUi {
    requests: mpsc::UnboundedSender<UiRequest>,
}

impl ReplUi {
    /// Returns the UI and the receiver the REPL loop serves.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<UiRequest>) {
        let (requests, receiver) = mpsc::unbounded_channel();
        (Self { requests }, receiver)
    }
}

/// Waits for a dialog's answer, at most `timeout`; `default` when it does not come.
async fn answer<T>(reply: oneshot::Receiver<T>, timeout: Option<Duration>, default: T) -> T {
    match timeout {
        Some(limit) => match tokio::time::timeout(limit, reply).await {
            Ok(Ok(value)) => value,
            Ok(Err(_)) | Err(_) => default,
        },
        None => reply.await.unwrap_or(default),
    }
}

impl ExtensionUi for ReplUi {
    fn has_ui(&self) -> bool {
        true
    }

    fn notify(&self, message: &str, kind: NotifyKind) {
        // A REPL that has ended shows nothing.
        let _ = self.requests.send(UiRequest::Notify {
            message: message.to_owned(),
            kind,
        });
    }

    fn confirm<'a>(
        &'a self,
        title: &'a str,
        message: &'a str,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let (reply, receiver) = oneshot::channel();
            let request = UiRequest::Confirm {
                title: title.to_owned(),
                message: message.to_owned(),
                reply,
            };
            if self.requests.send(request).is_err() {
                return false;
            }
            answer(receiver, timeout, false).await
        })
    }

    fn select<'a>(
        &'a self,
        title: &'a str,
        options: &'a [String],
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let (reply, receiver) = oneshot::channel();
            let request = UiRequest::Select {
                title: title.to_owned(),
                options: options.to_vec(),
                reply,
            };
            if self.requests.send(request).is_err() {
                return None;
            }
            answer(receiver, timeout, None).await
        })
    }

    fn input<'a>(
        &'a self,
        title: &'a str,
        placeholder: Option<&'a str>,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let (reply, receiver) = oneshot::channel();
            let request = UiRequest::Input {
                title: title.to_owned(),
                placeholder: placeholder.map(str::to_owned),
                reply,
            };
            if self.requests.send(request).is_err() {
                return None;
            }
            answer(receiver, timeout, None).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dialogs_get_the_answer_or_their_default() {
        let (ui, mut requests) = ReplUi::channel();
        let server = tokio::spawn(async move {
            while let Some(request) = requests.recv().await {
                match request {
                    UiRequest::Confirm { reply, .. } => {
                        let _ = reply.send(true);
                    }
                    UiRequest::Select { options, reply, .. } => {
                        let _ = reply.send(options.last().cloned());
                    }
                    // Never answered: the caller's timeout decides.
                    UiRequest::Input { reply, .. } => std::mem::forget(reply),
                    UiRequest::Notify { .. } => {}
                }
            }
        });
        assert!(ui.confirm("t", "m", None).await);
        let options = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(ui.select("t", &options, None).await, Some("b".to_owned()));
        assert_eq!(
            ui.input("t", None, Some(Duration::from_millis(20))).await,
            None
        );
        ui.notify("hello", NotifyKind::Info);
        drop(ui);
        server.await.unwrap();
    }
}
