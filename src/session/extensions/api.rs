//! The [`Extension`] trait: one method per hook, each with a no-op default, so an in-process
//! extension (a built-in feature written in Rust) implements only what it needs, and an
//! out-of-process extension ([`crate::session::extensions::process`]) implements all of them by
//! forwarding to its process. The bus ([`crate::session::extensions::bus`]) calls them in load
//! order and applies the reference's result semantics.
//!
//! Every hook receives a typed input and returns a typed decision wrapped in
//! `Result<_, ExtensionError>`; an `Err` never aborts the run — the bus reports it as an
//! `extension_error` event (except in `tool_call`, where an error blocks the call, as in the
//! reference).

use std::sync::Arc;

use crate::agent::tool::{BoxFuture, Tool};
use crate::model::message::AgentMessage;
use crate::session::extensions::context::ExtensionContext;
use crate::session::extensions::error::ExtensionError;
use crate::session::extensions::event::{
    BeforeAgentStartEvent, ExtensionEvent, InputEvent, ToolCallEvent, ToolResultEvent,
    UserBashEvent,
};
use crate::session::extensions::result::{
    BeforeAgentStartResult, InputAction, ResourcePaths, SessionBeforeResult, ToolCallResult,
    ToolResultChange, UserBashResult,
};

/// The future every hook returns.
pub type HookFuture<'a, T> = BoxFuture<'a, Result<T, ExtensionError>>;

/// A slash command an extension registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandInfo {
    /// The name, without the slash.
    pub name: String,
    /// Shown in completions and `get_commands`.
    pub description: Option<String>,
}

/// An extension: hooks with no-op defaults, plus what it registered.
pub trait Extension: Send + Sync {
    /// Identifies the extension in `extension_error` events (`extensionPath`): its path, or
    /// `<builtin:name>` for an in-process extension.
    fn path(&self) -> &str;

    /// Whether the extension handles `event` (the reference skips an event nobody
    /// subscribed to). In-process extensions handle everything by default.
    fn handles(&self, _event: &str) -> bool {
        true
    }

    /// Whether the extension applies its own time limit (out-of-process extensions measure
    /// inactivity themselves); otherwise the bus limits every hook call.
    fn manages_timeouts(&self) -> bool {
        false
    }

    /// Tools it registered (they override built-ins of the same name).
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        Vec::new()
    }

    /// Slash commands it registered.
    fn commands(&self) -> Vec<CommandInfo> {
        Vec::new()
    }

    /// Runs one of its commands with the text after the name.
    fn run_command<'a>(
        &'a self,
        _name: &'a str,
        _args: &'a str,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }

    /// An event whose result the reference ignores (agent, turn, message, tool execution and
    /// session lifecycle events, `model_select`, `thinking_level_select`).
    fn on_event<'a>(
        &'a self,
        _event: &'a ExtensionEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }

    /// `input`: continue, transform or handle a prompt.
    fn on_input<'a>(
        &'a self,
        _event: &'a InputEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<InputAction>> {
        Box::pin(async { Ok(None) })
    }

    /// `before_agent_start`: inject a message, replace the system prompt.
    fn on_before_agent_start<'a>(
        &'a self,
        _event: &'a BeforeAgentStartEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<BeforeAgentStartResult>> {
        Box::pin(async { Ok(None) })
    }

    /// `context`: replace the messages of this model call.
    fn on_context<'a>(
        &'a self,
        _messages: &'a [AgentMessage],
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<Vec<AgentMessage>>> {
        Box::pin(async { Ok(None) })
    }

    /// `tool_call`: block a call or change its arguments.
    fn on_tool_call<'a>(
        &'a self,
        _event: &'a ToolCallEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<ToolCallResult>> {
        Box::pin(async { Ok(None) })
    }

    /// `tool_result`: rewrite a result.
    fn on_tool_result<'a>(
        &'a self,
        _event: &'a ToolResultEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<ToolResultChange>> {
        Box::pin(async { Ok(None) })
    }

    /// `message_end`: replace a finished message (same role) before it is stored.
    fn on_message_end<'a>(
        &'a self,
        _message: &'a AgentMessage,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<AgentMessage>> {
        Box::pin(async { Ok(None) })
    }

    /// `session_before_switch`, `session_before_fork`, `session_before_compact`,
    /// `session_before_tree`: cancel, or supply a summary.
    fn on_session_before<'a>(
        &'a self,
        _event: &'a ExtensionEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<SessionBeforeResult>> {
        Box::pin(async { Ok(None) })
    }

    /// `user_bash`: supply the result of a `!command`.
    fn on_user_bash<'a>(
        &'a self,
        _event: &'a UserBashEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<UserBashResult>> {
        Box::pin(async { Ok(None) })
    }

    /// `resources_discover`: contribute skill and prompt paths.
    fn on_resources_discover<'a>(
        &'a self,
        _cwd: &'a str,
        _reason: &'static str,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<ResourcePaths>> {
        Box::pin(async { Ok(None) })
    }

    /// Stops the extension (after `session_shutdown`): a process is asked to exit, then
    /// killed.
    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

impl std::fmt::Debug for dyn Extension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Extension({})", self.path())
    }
}
