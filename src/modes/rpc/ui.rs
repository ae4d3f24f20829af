//! The extension UI sub-protocol of RPC mode (spec extensions-and-modes §8.4): dialogs an
//! extension opens are sent to the client as `extension_ui_request` records and answered by
//! `extension_ui_response` lines; fire-and-forget requests (notifications, status, widgets,
//! title, editor text) need no answer.
//!
//! ```text
//! → {"type":"extension_ui_request","id":"5b0c…","method":"confirm","title":"Delete?","message":"rm -rf build"}
//! ← {"type":"extension_ui_response","id":"5b0c…","confirmed":true}
//! ```
//!
//! A dialog resolves with the client's answer, or with its default (`None` / `false`) on
//! `{"cancelled":true}`, on its timeout, or when its cancellation token fires. Responses with
//! an unknown id are ignored. [`RpcUi`] is the session's [`ExtensionUi`] in RPC mode (`hasUI`
//! is true: the client answers), so extensions' `ui.confirm/select/input/notify` go here.
//!
//! Invariant: a request id is answered at most once; a pending dialog that resolves by timeout
//! or cancellation is forgotten, so a late answer is ignored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::agent::tool::BoxFuture;
use crate::session::extensions::{ExtensionUi, NotifyKind, WidgetPlacement};
use crate::support::ids::IdSource;

/// How a dialog may end early.
#[derive(Clone, Debug, Default)]
pub struct DialogOptions {
    /// Resolve with the default after this long (also sent to the client as `timeout` ms).
    pub timeout: Option<Duration>,
    /// Resolve with the default when this fires (the extension's abort signal).
    pub cancel: Option<CancellationToken>,
}

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

/// The extension UI of an RPC session (cheap to clone).
#[derive(Clone, Debug)]
pub struct RpcUi {
    records: mpsc::UnboundedSender<Value>,
    pending: Pending,
    ids: Arc<IdSource>,
}

fn lock(pending: &Pending) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Value>>> {
    match pending.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// What an `extension_ui_request` asks (`method` and its fields, in the reference's order;
/// absent options are left out).
#[derive(Serialize)]
#[serde(
    tag = "method",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
enum UiRequest<'a> {
    Select {
        title: &'a str,
        options: &'a [String],
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout: Option<u64>,
    },
    Confirm {
        title: &'a str,
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout: Option<u64>,
    },
    Input {
        title: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        placeholder: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout: Option<u64>,
    },
    Editor {
        title: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        prefill: Option<&'a str>,
    },
    Notify {
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        notify_type: Option<&'static str>,
    },
    SetStatus {
        status_key: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        status_text: Option<&'a str>,
    },
    SetWidget {
        widget_key: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        widget_lines: Option<&'a [String]>,
        #[serde(skip_serializing_if = "Option::is_none")]
        widget_placement: Option<&'static str>,
    },
    SetTitle {
        title: &'a str,
    },
    #[serde(rename = "set_editor_text")]
    SetEditorText {
        text: &'a str,
    },
}

/// An `extension_ui_request` record.
#[derive(Serialize)]
struct UiRecord<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    #[serde(flatten)]
    request: UiRequest<'a>,
}

fn string_answer(response: &Value) -> Option<String> {
    if response.get("cancelled").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    response
        .get("value")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

impl RpcUi {
    /// Returns a UI that writes its requests to `records` (the RPC output stream).
    pub fn new(records: mpsc::UnboundedSender<Value>, ids: Arc<IdSource>) -> Self {
        Self {
            records,
            pending: Arc::default(),
            ids,
        }
    }

    /// Routes an `extension_ui_response` to the dialog waiting for it; returns false when no
    /// dialog has that id (the response is then ignored).
    pub fn resolve(&self, response: &Value) -> bool {
        let Some(id) = response.get("id").and_then(Value::as_str) else {
            return false;
        };
        let Some(sender) = lock(&self.pending).remove(id) else {
            return false;
        };
        sender.send(response.clone()).is_ok()
    }

    /// Returns how many dialogs wait for an answer.
    pub fn pending_dialogs(&self) -> usize {
        lock(&self.pending).len()
    }

    fn request(&self, id: &str, request: UiRequest<'_>) {
        let record = UiRecord {
            kind: "extension_ui_request",
            id,
            request,
        };
        // Every map key is a string, so this cannot fail.
        let record = serde_json::to_value(&record).unwrap_or(Value::Null);
        // A closed output means the client is gone; the dialog then ends by timeout or
        // cancellation like an unanswered one.
        let _ = self.records.send(record);
    }

    /// Sends a dialog request and waits for its answer; `None` when it ended without one.
    async fn dialog(&self, request: UiRequest<'_>, options: &DialogOptions) -> Option<Value> {
        if options
            .cancel
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
        {
            return None;
        }
        let id = self.ids.uuid_v4();
        let (sender, receiver) = oneshot::channel();
        lock(&self.pending).insert(id.clone(), sender);
        self.request(&id, request);
        let cancelled = async {
            match &options.cancel {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let timed_out = async {
            match options.timeout {
                Some(timeout) => tokio::time::sleep(timeout).await,
                None => std::future::pending().await,
            }
        };
        let answer = tokio::select! {
            answer = receiver => answer.ok(),
            () = cancelled => None,
            () = timed_out => None,
        };
        lock(&self.pending).remove(&id);
        answer
    }

    fn timeout_field(options: &DialogOptions) -> Option<u64> {
        options
            .timeout
            .map(|timeout| u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
    }

    /// Asks the client to pick one of `options`; `None` when cancelled or unanswered.
    pub async fn select(
        &self,
        title: &str,
        choices: &[String],
        options: &DialogOptions,
    ) -> Option<String> {
        let request = UiRequest::Select {
            title,
            options: choices,
            timeout: Self::timeout_field(options),
        };
        let answer = self.dialog(request, options).await?;
        string_answer(&answer)
    }

    /// Asks the client to confirm; `false` when declined, cancelled or unanswered.
    pub async fn confirm(&self, title: &str, message: &str, options: &DialogOptions) -> bool {
        let request = UiRequest::Confirm {
            title,
            message,
            timeout: Self::timeout_field(options),
        };
        let Some(answer) = self.dialog(request, options).await else {
            return false;
        };
        if answer.get("cancelled").and_then(Value::as_bool) == Some(true) {
            return false;
        }
        answer
            .get("confirmed")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Asks the client for a line of text; `None` when cancelled or unanswered.
    pub async fn input(
        &self,
        title: &str,
        placeholder: Option<&str>,
        options: &DialogOptions,
    ) -> Option<String> {
        let request = UiRequest::Input {
            title,
            placeholder,
            timeout: Self::timeout_field(options),
        };
        let answer = self.dialog(request, options).await?;
        string_answer(&answer)
    }

    /// Asks the client to edit a text (no timeout, as in the reference); `None` when
    /// cancelled.
    pub async fn editor(&self, title: &str, prefill: Option<&str>) -> Option<String> {
        let request = UiRequest::Editor { title, prefill };
        let answer = self.dialog(request, &DialogOptions::default()).await?;
        string_answer(&answer)
    }

    /// Shows a notification.
    pub fn notify(&self, message: &str, kind: Option<NotifyKind>) {
        let id = self.ids.uuid_v4();
        let notify_type = kind.map(NotifyKind::as_str);
        self.request(
            &id,
            UiRequest::Notify {
                message,
                notify_type,
            },
        );
    }

    /// Sets (or clears, with `None`) a status line.
    pub fn set_status(&self, key: &str, text: Option<&str>) {
        let id = self.ids.uuid_v4();
        let request = UiRequest::SetStatus {
            status_key: key,
            status_text: text,
        };
        self.request(&id, request);
    }

    /// Sets (or clears, with `None`) a widget of text lines.
    pub fn set_widget(
        &self,
        key: &str,
        lines: Option<&[String]>,
        placement: Option<WidgetPlacement>,
    ) {
        let id = self.ids.uuid_v4();
        let request = UiRequest::SetWidget {
            widget_key: key,
            widget_lines: lines,
            widget_placement: placement.map(WidgetPlacement::as_str),
        };
        self.request(&id, request);
    }

    /// Sets the terminal title.
    pub fn set_title(&self, title: &str) {
        let id = self.ids.uuid_v4();
        self.request(&id, UiRequest::SetTitle { title });
    }

    /// Replaces the client's editor text (also used for paste).
    pub fn set_editor_text(&self, text: &str) {
        let id = self.ids.uuid_v4();
        self.request(&id, UiRequest::SetEditorText { text });
    }
}

impl ExtensionUi for RpcUi {
    fn has_ui(&self) -> bool {
        true
    }

    fn set_status(&self, key: &str, text: Option<&str>) {
        RpcUi::set_status(self, key, text);
    }

    fn set_widget(&self, key: &str, lines: Option<&[String]>, placement: WidgetPlacement) {
        RpcUi::set_widget(self, key, lines, Some(placement));
    }

    fn set_title(&self, title: &str) {
        RpcUi::set_title(self, title);
    }

    fn set_editor_text(&self, text: &str) {
        RpcUi::set_editor_text(self, text);
    }

    fn editor<'a>(
        &'a self,
        title: &'a str,
        prefill: Option<&'a str>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(RpcUi::editor(self, title, prefill))
    }

    fn notify(&self, message: &str, kind: NotifyKind) {
        RpcUi::notify(self, message, Some(kind));
    }

    fn confirm<'a>(
        &'a self,
        title: &'a str,
        message: &'a str,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let options = DialogOptions {
                timeout,
                cancel: None,
            };
            RpcUi::confirm(self, title, message, &options).await
        })
    }

    fn select<'a>(
        &'a self,
        title: &'a str,
        options: &'a [String],
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let dialog = DialogOptions {
                timeout,
                cancel: None,
            };
            RpcUi::select(self, title, options, &dialog).await
        })
    }

    fn input<'a>(
        &'a self,
        title: &'a str,
        placeholder: Option<&'a str>,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let options = DialogOptions {
                timeout,
                cancel: None,
            };
            RpcUi::input(self, title, placeholder, &options).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ui() -> (RpcUi, mpsc::UnboundedReceiver<Value>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (RpcUi::new(sender, Arc::new(IdSource::seeded(1))), receiver)
    }

    /// Answers the next request with `answer` (its `id` filled in) and returns the request.
    async fn answer_next(
        ui: &RpcUi,
        records: &mut mpsc::UnboundedReceiver<Value>,
        answer: Value,
    ) -> Value {
        let request = records.recv().await.unwrap();
        let mut answer = answer;
        answer["type"] = json!("extension_ui_response");
        answer["id"] = request["id"].clone();
        assert!(ui.resolve(&answer));
        request
    }

    #[tokio::test]
    async fn confirm_sends_the_request_and_returns_the_answer() {
        let (ui, mut records) = ui();
        let asking = ui.clone();
        let dialog = tokio::spawn(async move {
            asking
                .confirm("Delete?", "rm -rf build", &DialogOptions::default())
                .await
        });
        let request = answer_next(&ui, &mut records, json!({"confirmed": true})).await;
        assert!(dialog.await.unwrap());
        let id = request["id"].as_str().unwrap().to_owned();
        assert_eq!(
            request,
            json!({"type": "extension_ui_request", "id": id, "method": "confirm",
                   "title": "Delete?", "message": "rm -rf build"})
        );
        assert_eq!(ui.pending_dialogs(), 0);
    }

    #[tokio::test]
    async fn select_and_input_return_the_value_and_none_when_cancelled() {
        let (ui, mut records) = ui();
        let asking = ui.clone();
        let dialog = tokio::spawn(async move {
            let options = DialogOptions {
                timeout: Some(Duration::from_secs(60)),
                cancel: None,
            };
            let picked = asking
                .select("Pick", &["a".to_owned(), "b".to_owned()], &options)
                .await;
            let typed = asking.input("Name", Some("your name"), &options).await;
            (picked, typed)
        });
        let select = answer_next(&ui, &mut records, json!({"value": "b"})).await;
        assert_eq!(select["options"], json!(["a", "b"]));
        assert_eq!(select["timeout"], json!(60000));
        let input = answer_next(&ui, &mut records, json!({"cancelled": true})).await;
        assert_eq!(input["placeholder"], "your name");
        assert_eq!(dialog.await.unwrap(), (Some("b".to_owned()), None));
    }

    #[tokio::test]
    async fn an_unanswered_dialog_resolves_with_its_default_and_a_late_answer_is_ignored() {
        let (ui, mut records) = ui();
        let options = DialogOptions {
            timeout: Some(Duration::from_millis(20)),
            cancel: None,
        };
        assert!(!ui.confirm("Sure?", "really", &options).await);
        let request = records.recv().await.unwrap();
        let late = json!({"type": "extension_ui_response", "id": request["id"], "confirmed": true});
        assert!(!ui.resolve(&late));
        assert!(!ui.resolve(&json!({"type": "extension_ui_response", "id": "unknown"})));
    }

    #[tokio::test]
    async fn a_cancelled_dialog_resolves_with_its_default() {
        let (ui, _records) = ui();
        let token = CancellationToken::new();
        let options = DialogOptions {
            timeout: None,
            cancel: Some(token.clone()),
        };
        let asking = ui.clone();
        let dialog = tokio::spawn(async move { asking.input("Name", None, &options).await });
        while ui.pending_dialogs() == 0 {
            tokio::task::yield_now().await;
        }
        token.cancel();
        assert_eq!(dialog.await.unwrap(), None);
        assert_eq!(ui.pending_dialogs(), 0);
    }

    #[test]
    fn fire_and_forget_requests_omit_absent_fields() {
        let (ui, mut records) = ui();
        ui.notify("hello", None);
        ui.notify("careful", Some(NotifyKind::Warning));
        ui.set_status("build", None);
        ui.set_widget(
            "w",
            Some(&["one".to_owned()]),
            Some(WidgetPlacement::BelowEditor),
        );
        ui.set_title("pi");
        ui.set_editor_text("draft");
        let mut seen = Vec::new();
        while let Ok(mut record) = records.try_recv() {
            assert_eq!(record["type"], "extension_ui_request");
            assert!(record["id"].as_str().is_some_and(|id| id.len() == 36));
            record.as_object_mut().unwrap().remove("id");
            record.as_object_mut().unwrap().remove("type");
            seen.push(record);
        }
        assert_eq!(
            seen,
            vec![
                json!({"method": "notify", "message": "hello"}),
                json!({"method": "notify", "message": "careful", "notifyType": "warning"}),
                json!({"method": "setStatus", "statusKey": "build"}),
                json!({"method": "setWidget", "widgetKey": "w", "widgetLines": ["one"], "widgetPlacement": "belowEditor"}),
                json!({"method": "setTitle", "title": "pi"}),
                json!({"method": "set_editor_text", "text": "draft"}),
            ]
        );
    }
}
