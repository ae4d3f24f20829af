//! The user interface extensions may use: dialogs (`confirm`, `select`, `input`, `editor`),
//! notifications, status texts, widgets, the terminal title and the editor's text. Each run mode supplies its own [`ExtensionUi`] through
//! `SessionConfig::extensions.ui`: the REPL answers dialogs on the terminal, RPC mode forwards
//! them as the reference's `extension_ui_request` sub-protocol (spec extensions-and-modes
//! §8.4), and print/JSON mode uses [`NoUi`].
//!
//! Contract for implementations: a dialog resolves with its default (`false` / `None`) when
//! it times out, is cancelled or cannot be shown; `has_ui()` is what extensions see as
//! `hasUI` — a guard that needs a human answer refuses when it is false.
//!
//! Invariant: nothing here prints; a UI lives in `modes/`.

use std::time::Duration;

use crate::agent::tool::BoxFuture;

/// The kind of a notification (`notifyType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NotifyKind {
    /// Informational (the default).
    #[default]
    Info,
    /// A warning.
    Warning,
    /// An error.
    Error,
}

impl NotifyKind {
    /// Parses the reference's string (anything else is `info`).
    pub fn parse(text: Option<&str>) -> Self {
        match text {
            Some("warning") => Self::Warning,
            Some("error") => Self::Error,
            _ => Self::Info,
        }
    }

    /// The reference's string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// Where a widget goes (`widgetPlacement`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WidgetPlacement {
    /// `aboveEditor` (the default).
    #[default]
    AboveEditor,
    /// `belowEditor`.
    BelowEditor,
}

impl WidgetPlacement {
    /// Parses the reference's string (anything else is `aboveEditor`).
    pub fn parse(text: Option<&str>) -> Self {
        match text {
            Some("belowEditor") => Self::BelowEditor,
            _ => Self::AboveEditor,
        }
    }

    /// The reference's string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AboveEditor => "aboveEditor",
            Self::BelowEditor => "belowEditor",
        }
    }
}

/// Dialogs and notifications for extensions.
pub trait ExtensionUi: Send + Sync {
    /// Whether a person can answer dialogs (`ctx.hasUI`).
    fn has_ui(&self) -> bool;

    /// Shows a notification (fire and forget).
    fn notify(&self, message: &str, kind: NotifyKind);

    /// Asks a yes/no question; `false` on timeout or cancel.
    fn confirm<'a>(
        &'a self,
        title: &'a str,
        message: &'a str,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, bool>;

    /// Asks to pick one of `options`; `None` on timeout or cancel.
    fn select<'a>(
        &'a self,
        title: &'a str,
        options: &'a [String],
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>>;

    /// Asks for a line of text; `None` on timeout or cancel.
    fn input<'a>(
        &'a self,
        title: &'a str,
        placeholder: Option<&'a str>,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>>;

    /// Sets (`Some`) or clears (`None`) the status text under `key` (`setStatus`); a UI
    /// without a status line ignores it.
    fn set_status(&self, _key: &str, _text: Option<&str>) {}

    /// Sets (`Some`) or clears (`None`) the widget under `key`: lines shown with the editor
    /// (`setWidget`).
    fn set_widget(&self, _key: &str, _lines: Option<&[String]>, _placement: WidgetPlacement) {}

    /// Sets the terminal's title (`setTitle`).
    fn set_title(&self, _title: &str) {}

    /// Replaces the text of the input editor (`setEditorText`).
    fn set_editor_text(&self, _text: &str) {}

    /// Asks for a text, the editor pre-filled (`editor`); `None` on cancel or without a UI.
    fn editor<'a>(
        &'a self,
        _title: &'a str,
        _prefill: Option<&'a str>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }
}

/// The UI of the non-interactive modes (print, JSON): no dialogs can be answered, so
/// `confirm` is `false`, `select` and `input` are `None`, notifications go nowhere — the
/// reference's no-op UI context.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoUi;

impl ExtensionUi for NoUi {
    fn has_ui(&self) -> bool {
        false
    }

    fn notify(&self, _message: &str, _kind: NotifyKind) {}

    fn confirm<'a>(
        &'a self,
        _title: &'a str,
        _message: &'a str,
        _timeout: Option<Duration>,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }

    fn select<'a>(
        &'a self,
        _title: &'a str,
        _options: &'a [String],
        _timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }

    fn input<'a>(
        &'a self,
        _title: &'a str,
        _placeholder: Option<&'a str>,
        _timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }
}
