//! The event bus: runs the loaded extensions' hooks in load order and folds their answers
//! with the reference's result semantics (`spec/extensions-and-modes.md` §2, "Dispatch
//! rules"; `core/extensions/runner.ts`):
//!
//! * an event is skipped for an extension that does not handle it;
//! * `input`: transforms chain, `handled` stops at once;
//! * `before_agent_start`: every returned message is collected, `systemPrompt` chains;
//! * `context`, `tool_result`, `message_end`: chained (each handler sees the latest value);
//!   a `message_end` replacement with another role is refused and reported;
//! * `tool_call`: arguments chain, the first `block` stops; an error blocks the call with its
//!   text (a failing guard must not let a call through);
//! * `session_before_*`: the last non-empty result is kept, `cancel` returns at once;
//! * `user_bash`: the first non-empty result wins; `resources_discover`: paths accumulate.
//!
//! Any other error is reported as one `extension_error` and the run goes on. In-process hooks
//! are limited to the configured timeout; out-of-process extensions time themselves.
//!
//! Invariant: the bus holds no lock while a hook runs.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::agent::ToolCallDecision;
use crate::agent::tool::Tool;
use crate::model::message::{AgentMessage, ImageContent};
use crate::session::extensions::api::{CommandInfo, Extension, HookFuture};
use crate::session::extensions::context::ExtensionContext;
use crate::session::extensions::error::ExtensionError;
use crate::session::extensions::event::{
    BeforeAgentStartEvent, ExtensionEvent, InputEvent, InputSource, ToolCallEvent, ToolResultEvent,
    UserBashEvent,
};
use crate::session::extensions::result::{
    CustomMessageSpec, InputAction, ResourcePaths, SessionBeforeResult, ToolResultChange,
    UserBashResult,
};

/// A registered command with the name it is invoked by (`name`, or `name:1`, `name:2`, …
/// when several extensions register the same name).
#[derive(Clone, Debug)]
pub struct RegisteredCommand {
    /// What `/` invokes.
    pub invocation_name: String,
    /// The command as registered.
    pub info: CommandInfo,
    /// The extension that registered it.
    pub extension_path: String,
    extension: usize,
}

/// What the input pipeline should do with a prompt.
#[derive(Clone, Debug, PartialEq)]
pub enum InputOutcome {
    /// Send it (possibly changed).
    Send {
        /// The text.
        text: String,
        /// The images.
        images: Option<Vec<ImageContent>>,
    },
    /// An extension handled it; nothing is sent.
    Handled,
}

/// What `before_agent_start` handlers contributed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentStartChanges {
    /// Custom messages to send after the user message, in handler order.
    pub messages: Vec<CustomMessageSpec>,
    /// The system prompt for this run, when a handler changed it.
    pub system_prompt: Option<String>,
}

/// The loaded extensions of one session runtime.
pub struct ExtensionBus {
    extensions: Vec<Arc<dyn Extension>>,
    ctx: ExtensionContext,
    timeout: Duration,
}

impl std::fmt::Debug for ExtensionBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionBus")
            .field("extensions", &self.extensions)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ExtensionBus {
    /// A bus over `extensions` (load order); in-process hooks are limited to `timeout`.
    pub fn new(
        extensions: Vec<Arc<dyn Extension>>,
        ctx: ExtensionContext,
        timeout: Duration,
    ) -> Self {
        Self {
            extensions,
            ctx,
            timeout,
        }
    }

    /// The extensions in load order.
    pub fn extensions(&self) -> &[Arc<dyn Extension>] {
        &self.extensions
    }

    /// The context hooks receive.
    pub fn context(&self) -> &ExtensionContext {
        &self.ctx
    }

    /// Whether any extension handles `event`.
    pub fn has_handlers(&self, event: &str) -> bool {
        self.extensions.iter().any(|ext| ext.handles(event))
    }

    fn handlers<'a>(&'a self, event: &'a str) -> impl Iterator<Item = &'a Arc<dyn Extension>> {
        self.extensions.iter().filter(move |ext| ext.handles(event))
    }

    /// The tools extensions registered: the first registration of a name wins, a later one
    /// is reported and ignored.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut seen: HashMap<String, String> = HashMap::new();
        let mut tools = Vec::new();
        for ext in &self.extensions {
            for tool in ext.tools() {
                let name = tool.definition().name.clone();
                if let Some(owner) = seen.get(&name) {
                    self.ctx.report_error(
                        ext.path(),
                        "register_tool",
                        &format!("tool `{name}` is already registered by {owner}; ignored"),
                    );
                    continue;
                }
                seen.insert(name, ext.path().to_owned());
                tools.push(tool);
            }
        }
        tools
    }

    /// The registered commands with their invocation names (the reference's
    /// `resolveRegisteredCommands`).
    pub fn commands(&self) -> Vec<RegisteredCommand> {
        let mut all = Vec::new();
        let mut counts: HashMap<String, usize> = HashMap::new();
        for (idx, ext) in self.extensions.iter().enumerate() {
            for info in ext.commands() {
                *counts.entry(info.name.clone()).or_default() += 1;
                all.push((idx, ext.path().to_owned(), info));
            }
        }
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut taken: HashSet<String> = HashSet::new();
        all.into_iter()
            .map(|(extension, extension_path, info)| {
                let occurrence = {
                    let count = seen.entry(info.name.clone()).or_default();
                    *count += 1;
                    *count
                };
                let mut invocation_name = if counts.get(&info.name).copied().unwrap_or(0) > 1 {
                    format!("{}:{occurrence}", info.name)
                } else {
                    info.name.clone()
                };
                let mut suffix = occurrence;
                while taken.contains(&invocation_name) {
                    suffix += 1;
                    invocation_name = format!("{}:{suffix}", info.name);
                }
                taken.insert(invocation_name.clone());
                RegisteredCommand {
                    invocation_name,
                    info,
                    extension_path,
                    extension,
                }
            })
            .collect()
    }

    /// The command invoked as `name`, if any.
    pub fn command(&self, name: &str) -> Option<RegisteredCommand> {
        self.commands()
            .into_iter()
            .find(|command| command.invocation_name == name)
    }

    /// Runs a command; an error is reported from `command:<name>` (the reference's path for
    /// command errors).
    pub async fn run_command(&self, command: &RegisteredCommand, args: &str) {
        let Some(ext) = self.extensions.get(command.extension) else {
            return;
        };
        let future = ext.run_command(&command.info.name, args, &self.ctx);
        if let Err(error) = self.guarded(ext, "command", future).await
            && !error.already_reported()
        {
            self.ctx.report_error(
                &format!("command:{}", command.invocation_name),
                "command",
                &error.to_string(),
            );
        }
    }

    async fn guarded<'a, T>(
        &self,
        ext: &Arc<dyn Extension>,
        event: &str,
        future: HookFuture<'a, T>,
    ) -> Result<T, ExtensionError> {
        if ext.manages_timeouts() {
            return future.await;
        }
        match tokio::time::timeout(self.timeout, future).await {
            Ok(result) => result,
            Err(_) => Err(ExtensionError::Timeout {
                event: event.to_owned(),
                ms: self.timeout.as_millis(),
            }),
        }
    }

    fn report(&self, ext: &Arc<dyn Extension>, event: &str, error: &ExtensionError) {
        if !error.already_reported() {
            self.ctx.report_error(ext.path(), event, &error.to_string());
        }
    }

    /// Delivers an event whose results are ignored.
    pub async fn emit(&self, event: &ExtensionEvent) {
        let name = event.name();
        for ext in self.handlers(name) {
            let future = ext.on_event(event, &self.ctx);
            if let Err(error) = self.guarded(ext, name, future).await {
                self.report(ext, name, &error);
            }
        }
    }

    /// `session_before_*`: the last non-empty result; `cancel` returns at once.
    pub async fn emit_session_before(&self, event: &ExtensionEvent) -> Option<SessionBeforeResult> {
        let name = event.name();
        let mut result = None;
        for ext in self.handlers(name) {
            let future = ext.on_session_before(event, &self.ctx);
            match self.guarded(ext, name, future).await {
                Ok(Some(answer)) => {
                    let cancel = answer.cancel;
                    result = Some(answer);
                    if cancel {
                        return result;
                    }
                }
                Ok(None) => {}
                Err(error) => self.report(ext, name, &error),
            }
        }
        result
    }

    /// `input`: transforms chain, `handled` stops.
    pub async fn emit_input(
        &self,
        text: &str,
        images: Option<Vec<ImageContent>>,
        source: InputSource,
    ) -> InputOutcome {
        let mut event = InputEvent {
            text: text.to_owned(),
            images,
            source,
        };
        for ext in self.handlers("input") {
            let future = ext.on_input(&event, &self.ctx);
            match self.guarded(ext, "input", future).await {
                Ok(Some(InputAction::Handled)) => return InputOutcome::Handled,
                Ok(Some(InputAction::Transform { text, images })) => {
                    event.text = text;
                    if images.is_some() {
                        event.images = images;
                    }
                }
                Ok(Some(InputAction::Continue) | None) => {}
                Err(error) => self.report(ext, "input", &error),
            }
        }
        InputOutcome::Send {
            text: event.text,
            images: event.images,
        }
    }

    /// `before_agent_start`: collects messages, chains the system prompt.
    pub async fn emit_before_agent_start(
        &self,
        prompt: &str,
        images: Option<Vec<ImageContent>>,
        system_prompt: &str,
    ) -> AgentStartChanges {
        let mut event = BeforeAgentStartEvent {
            prompt: prompt.to_owned(),
            images,
            system_prompt: system_prompt.to_owned(),
        };
        let mut changes = AgentStartChanges::default();
        for ext in self.handlers("before_agent_start") {
            let future = ext.on_before_agent_start(&event, &self.ctx);
            match self.guarded(ext, "before_agent_start", future).await {
                Ok(Some(result)) => {
                    if let Some(message) = result.message {
                        changes.messages.push(message);
                    }
                    if let Some(prompt) = result.system_prompt {
                        event.system_prompt = prompt.clone();
                        changes.system_prompt = Some(prompt);
                    }
                }
                Ok(None) => {}
                Err(error) => self.report(ext, "before_agent_start", &error),
            }
        }
        changes
    }

    /// `context`: the messages for this model call, chained across handlers.
    pub async fn emit_context(&self, messages: Vec<AgentMessage>) -> Vec<AgentMessage> {
        let mut current = messages;
        for ext in self.handlers("context") {
            let future = ext.on_context(&current, &self.ctx);
            match self.guarded(ext, "context", future).await {
                Ok(Some(replacement)) => current = replacement,
                Ok(None) => {}
                Err(error) => self.report(ext, "context", &error),
            }
        }
        current
    }

    /// `tool_call`: the decision for one prepared call.
    pub async fn emit_tool_call(
        &self,
        tool_call_id: &str,
        tool_name: &str,
        input: &Value,
    ) -> ToolCallDecision {
        let mut event = ToolCallEvent {
            tool_call_id: tool_call_id.to_owned(),
            tool_name: tool_name.to_owned(),
            input: input.clone(),
        };
        let mut changed = false;
        for ext in self.handlers("tool_call") {
            let future = ext.on_tool_call(&event, &self.ctx);
            match self.guarded(ext, "tool_call", future).await {
                Ok(Some(result)) => {
                    if let Some(new_input) = result.input {
                        event.input = new_input;
                        changed = true;
                    }
                    if result.block {
                        return ToolCallDecision::Block {
                            reason: result.reason.unwrap_or_default(),
                        };
                    }
                }
                Ok(None) => {}
                // The reference lets a throwing `tool_call` handler block the call with the
                // error's message; a stopped or timed-out guard blocks too.
                Err(error) => {
                    let reason = match &error {
                        ExtensionError::Handler(message) => message.clone(),
                        other => {
                            self.report(ext, "tool_call", other);
                            format!(
                                "Extension {} failed, blocking execution: {other}",
                                ext.path()
                            )
                        }
                    };
                    return ToolCallDecision::Block { reason };
                }
            }
        }
        if changed {
            ToolCallDecision::Rewrite(event.input)
        } else {
            ToolCallDecision::Continue
        }
    }

    /// `tool_result`: the chained change, or `None` when no handler changed anything.
    pub async fn emit_tool_result(&self, event: ToolResultEvent) -> Option<ToolResultChange> {
        let mut event = event;
        let mut modified = false;
        for ext in self.handlers("tool_result") {
            let future = ext.on_tool_result(&event, &self.ctx);
            match self.guarded(ext, "tool_result", future).await {
                Ok(Some(change)) => {
                    if let Some(content) = change.content {
                        event.content = content;
                        modified = true;
                    }
                    if let Some(details) = change.details {
                        event.details = Some(details);
                        modified = true;
                    }
                    if let Some(flag) = change.is_error {
                        event.is_error = flag;
                        modified = true;
                    }
                }
                Ok(None) => {}
                Err(error) => self.report(ext, "tool_result", &error),
            }
        }
        modified.then_some(ToolResultChange {
            content: Some(event.content),
            details: event.details,
            is_error: Some(event.is_error),
        })
    }

    /// `message_end`: a replacement for the finished message (same role), or `None`.
    pub async fn emit_message_end(&self, message: &AgentMessage) -> Option<AgentMessage> {
        let mut current = message.clone();
        let mut modified = false;
        for ext in self.handlers("message_end") {
            let future = ext.on_message_end(&current, &self.ctx);
            match self.guarded(ext, "message_end", future).await {
                Ok(Some(replacement)) => {
                    if replacement.role() != current.role() {
                        self.ctx.report_error(
                            ext.path(),
                            "message_end",
                            "message_end handlers must return a message with the same role",
                        );
                        continue;
                    }
                    current = replacement;
                    modified = true;
                }
                Ok(None) => {}
                Err(error) => self.report(ext, "message_end", &error),
            }
        }
        modified.then_some(current)
    }

    /// `user_bash`: the first supplied result.
    pub async fn emit_user_bash(&self, event: &UserBashEvent) -> Option<UserBashResult> {
        for ext in self.handlers("user_bash") {
            let future = ext.on_user_bash(event, &self.ctx);
            match self.guarded(ext, "user_bash", future).await {
                Ok(Some(result)) => return Some(result),
                Ok(None) => {}
                Err(error) => self.report(ext, "user_bash", &error),
            }
        }
        None
    }

    /// `resources_discover`: every handler's paths, in order.
    pub async fn emit_resources_discover(&self, cwd: &str, reason: &'static str) -> ResourcePaths {
        let mut all = ResourcePaths::default();
        for ext in self.handlers("resources_discover") {
            let future = ext.on_resources_discover(cwd, reason, &self.ctx);
            match self.guarded(ext, "resources_discover", future).await {
                Ok(Some(paths)) => {
                    all.skill_paths.extend(paths.skill_paths);
                    all.prompt_paths.extend(paths.prompt_paths);
                    all.theme_paths.extend(paths.theme_paths);
                }
                Ok(None) => {}
                Err(error) => self.report(ext, "resources_discover", &error),
            }
        }
        all
    }

    /// Stops every extension (processes are asked to exit, then killed).
    pub async fn stop_all(&self) {
        futures::future::join_all(self.extensions.iter().map(|ext| ext.stop())).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::agent::tool::BoxFuture;
    use crate::session::extensions::error::ExtensionErrorReport;
    use crate::session::extensions::result::ToolCallResult;
    use crate::session::extensions::ui::NoUi;

    struct Scripted {
        path: &'static str,
        block: Option<&'static str>,
        rename_input: bool,
        fail: bool,
        sleep: Option<Duration>,
        commands: Vec<&'static str>,
    }

    impl Scripted {
        fn new(path: &'static str) -> Self {
            Self {
                path,
                block: None,
                rename_input: false,
                fail: false,
                sleep: None,
                commands: Vec::new(),
            }
        }
    }

    impl Extension for Scripted {
        fn path(&self) -> &str {
            self.path
        }

        fn commands(&self) -> Vec<CommandInfo> {
            self.commands
                .iter()
                .map(|name| CommandInfo {
                    name: (*name).to_owned(),
                    description: None,
                })
                .collect()
        }

        fn on_input<'a>(
            &'a self,
            event: &'a InputEvent,
            _ctx: &'a ExtensionContext,
        ) -> HookFuture<'a, Option<InputAction>> {
            Box::pin(async move {
                if let Some(pause) = self.sleep {
                    tokio::time::sleep(pause).await;
                }
                if self.fail {
                    return Err(ExtensionError::Handler("boom".into()));
                }
                Ok(Some(InputAction::Transform {
                    text: format!("{}+{}", event.text, self.path),
                    images: None,
                }))
            })
        }

        fn on_tool_call<'a>(
            &'a self,
            event: &'a ToolCallEvent,
            _ctx: &'a ExtensionContext,
        ) -> HookFuture<'a, Option<ToolCallResult>> {
            Box::pin(async move {
                if self.fail {
                    return Err(ExtensionError::Handler("guard crashed".into()));
                }
                let mut result = ToolCallResult::default();
                if self.rename_input {
                    result.input = Some(serde_json::json!({"seen": event.input.clone()}));
                }
                if let Some(reason) = self.block {
                    result.block = true;
                    result.reason = Some(reason.into());
                }
                Ok(Some(result))
            })
        }

        fn stop(&self) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    fn make_bus(
        extensions: Vec<Scripted>,
    ) -> (ExtensionBus, Arc<Mutex<Vec<ExtensionErrorReport>>>) {
        let errors = Arc::new(Mutex::new(Vec::new()));
        let sink = errors.clone();
        let ctx = ExtensionContext::detached(
            Arc::new(NoUi),
            std::path::PathBuf::from("/tmp"),
            Vec::new(),
            Arc::new(move |report| sink.lock().unwrap().push(report)),
        );
        let extensions = extensions
            .into_iter()
            .map(|ext| Arc::new(ext) as Arc<dyn Extension>)
            .collect();
        (
            ExtensionBus::new(extensions, ctx, Duration::from_millis(200)),
            errors,
        )
    }

    #[tokio::test]
    async fn input_transforms_chain_in_load_order_and_errors_are_reported_not_fatal() {
        let mut failing = Scripted::new("b");
        failing.fail = true;
        let (bus, errors) = make_bus(vec![Scripted::new("a"), failing, Scripted::new("c")]);
        let outcome = bus.emit_input("x", None, InputSource::Interactive).await;
        assert_eq!(
            outcome,
            InputOutcome::Send {
                text: "x+a+c".into(),
                images: None
            }
        );
        let errors = errors.lock().unwrap();
        assert_eq!(errors.len(), 1);
        assert_eq!(
            (
                errors[0].extension_path.as_str(),
                errors[0].event.as_str(),
                errors[0].error.as_str()
            ),
            ("b", "input", "boom")
        );
    }

    #[tokio::test]
    async fn a_slow_in_process_handler_times_out_and_the_rest_still_run() {
        let mut slow = Scripted::new("slow");
        slow.sleep = Some(Duration::from_secs(30));
        let (bus, errors) = make_bus(vec![slow, Scripted::new("fast")]);
        let outcome = bus.emit_input("x", None, InputSource::Rpc).await;
        assert_eq!(
            outcome,
            InputOutcome::Send {
                text: "x+fast".into(),
                images: None
            }
        );
        assert_eq!(
            errors.lock().unwrap()[0].error,
            "did not answer `input` within 200 ms"
        );
    }

    #[tokio::test]
    async fn tool_call_arguments_chain_the_first_block_wins_and_an_error_blocks() {
        let mut rewrite = Scripted::new("rewrite");
        rewrite.rename_input = true;
        let mut guard = Scripted::new("guard");
        guard.block = Some("no");
        let mut never = Scripted::new("never");
        never.block = Some("unreached");
        let (bus, _) = make_bus(vec![rewrite, guard, never]);
        assert_eq!(
            bus.emit_tool_call("c1", "bash", &serde_json::json!(1))
                .await,
            ToolCallDecision::Block {
                reason: "no".into()
            }
        );
        let mut rewrite = Scripted::new("rewrite");
        rewrite.rename_input = true;
        let (bus, _) = make_bus(vec![rewrite]);
        assert_eq!(
            bus.emit_tool_call("c1", "bash", &serde_json::json!(1))
                .await,
            ToolCallDecision::Rewrite(serde_json::json!({"seen": 1}))
        );
        let mut crashing = Scripted::new("crashing");
        crashing.fail = true;
        let (bus, errors) = make_bus(vec![crashing]);
        assert_eq!(
            bus.emit_tool_call("c1", "bash", &serde_json::json!(1))
                .await,
            ToolCallDecision::Block {
                reason: "guard crashed".into()
            }
        );
        assert!(errors.lock().unwrap().is_empty());
    }

    #[test]
    fn duplicate_command_names_get_numbered_invocation_names() {
        let mut first = Scripted::new("first");
        first.commands = vec!["count", "only"];
        let mut second = Scripted::new("second");
        second.commands = vec!["count"];
        let (bus, _) = make_bus(vec![first, second]);
        let names: Vec<String> = bus
            .commands()
            .into_iter()
            .map(|command| command.invocation_name)
            .collect();
        assert_eq!(names, ["count:1", "only", "count:2"]);
        assert_eq!(bus.command("count:2").unwrap().extension_path, "second");
        assert!(bus.command("count").is_none());
    }
}
