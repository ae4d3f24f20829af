//! Extension dialogs and notifications in the REPL (`ExtensionUi`): a request goes over a
//! channel to the REPL loop, which prints it and reads the answer with the line editor —
//! also in the middle of a turn, since the loop serves requests while it waits for a run.
//!
//! A dialog resolves with its default (`false` / `None`) when it times out, when the REPL is
//! gone, or when the user cancels (Enter on nothing, Ctrl+C, Ctrl+D).

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::agent::tool::BoxFuture;
use crate::session::extensions::{ExtensionUi, NotifyKind, WidgetPlacement};

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
    /// Set or clear a status text (shown after the status line).
    Status {
        /// Which status.
        key: String,
        /// The text; `None` clears it.
        text: Option<String>,
    },
    /// Set or clear a widget (its lines are shown when set).
    Widget {
        /// Which widget.
        key: String,
        /// The lines; `None` clears it.
        lines: Option<Vec<String>>,
    },
    /// Set the terminal's title.
    Title {
        /// The title.
        title: String,
    },
    /// Pre-fill the next prompt.
    EditorText {
        /// The text.
        text: String,
    },
    /// Ask for a text, pre-filled.
    Editor {
        /// The dialog's title.
        title: String,
        /// The text the editor starts with.
        prefill: Option<String>,
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

impl UiRequest {
    /// Whether serving it reads the terminal (a dialog) rather than only writing to it.
    pub fn reads_terminal(&self) -> bool {
        matches!(
            self,
            Self::Confirm { .. } | Self::Select { .. } | Self::Input { .. } | Self::Editor { .. }
        )
    }

    /// Whether serving it prints lines (so a streamed line is finished first).
    pub fn prints(&self) -> bool {
        !matches!(
            self,
            Self::Status { .. } | Self::Title { .. } | Self::EditorText { .. }
        )
    }
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

impl ReplUi {
    /// Sends a request that needs no answer (a REPL that has ended shows nothing).
    fn post(&self, request: UiRequest) {
        let _ = self.requests.send(request);
    }

    /// Sends a dialog built around its reply channel and waits for the answer, at most
    /// `timeout`; `default` when the REPL is gone or the answer does not come.
    async fn dialog<T>(
        &self,
        build: impl FnOnce(oneshot::Sender<T>) -> UiRequest,
        timeout: Option<Duration>,
        default: T,
    ) -> T {
        let (reply, receiver) = oneshot::channel();
        if self.requests.send(build(reply)).is_err() {
            return default;
        }
        answer(receiver, timeout, default).await
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

    fn set_status(&self, key: &str, text: Option<&str>) {
        self.post(UiRequest::Status {
            key: key.to_owned(),
            text: text.map(str::to_owned),
        });
    }

    fn set_widget(&self, key: &str, lines: Option<&[String]>, _placement: WidgetPlacement) {
        // A line REPL has no editor box to place it around: its lines are printed in turn.
        self.post(UiRequest::Widget {
            key: key.to_owned(),
            lines: lines.map(<[String]>::to_vec),
        });
    }

    fn set_title(&self, title: &str) {
        self.post(UiRequest::Title {
            title: title.to_owned(),
        });
    }

    fn set_editor_text(&self, text: &str) {
        self.post(UiRequest::EditorText {
            text: text.to_owned(),
        });
    }

    fn editor<'a>(
        &'a self,
        title: &'a str,
        prefill: Option<&'a str>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.dialog(
            move |reply| UiRequest::Editor {
                title: title.to_owned(),
                prefill: prefill.map(str::to_owned),
                reply,
            },
            None,
            None,
        ))
    }

    fn notify(&self, message: &str, kind: NotifyKind) {
        self.post(UiRequest::Notify {
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
        Box::pin(self.dialog(
            move |reply| UiRequest::Confirm {
                title: title.to_owned(),
                message: message.to_owned(),
                reply,
            },
            timeout,
            false,
        ))
    }

    fn select<'a>(
        &'a self,
        title: &'a str,
        options: &'a [String],
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.dialog(
            move |reply| UiRequest::Select {
                title: title.to_owned(),
                options: options.to_vec(),
                reply,
            },
            timeout,
            None,
        ))
    }

    fn input<'a>(
        &'a self,
        title: &'a str,
        placeholder: Option<&'a str>,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.dialog(
            move |reply| UiRequest::Input {
                title: title.to_owned(),
                placeholder: placeholder.map(str::to_owned),
                reply,
            },
            timeout,
            None,
        ))
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
                    UiRequest::Editor { prefill, reply, .. } => {
                        let _ = reply.send(prefill.map(|text| text + " edited"));
                    }
                    UiRequest::Notify { .. }
                    | UiRequest::Status { .. }
                    | UiRequest::Widget { .. }
                    | UiRequest::Title { .. }
                    | UiRequest::EditorText { .. } => {}
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
        assert_eq!(
            ui.editor("t", Some("draft")).await,
            Some("draft edited".to_owned())
        );
        ui.notify("hello", NotifyKind::Info);
        drop(ui);
        server.await.unwrap();
    }
}
