//! The calls an out-of-process extension makes into pi (`{"type":"call","method":…}`),
//! mapped onto [`ExtensionContext`]. Method names and parameters follow the reference's
//! `pi.*` / `ctx.*` API (`docs/extensions.md` lists them).
//!
//! Invariant: a call never panics and never fails the extension — bad parameters or a failed
//! action become the call's `error` text.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::ai::ThinkingLevel;
use crate::model::message::UserContent;
use crate::session::extensions::context::{
    DeliverAs, ExtensionContext, SendMessageOptions, ToolInfo,
};
use crate::session::extensions::error::ExtensionError;
use crate::session::extensions::result::CustomMessageSpec;
use crate::session::extensions::ui::{NotifyKind, WidgetPlacement};

/// Every method an extension may call.
pub const METHODS: [&str; 30] = [
    "appendEntry",
    "sendMessage",
    "sendUserMessage",
    "setSessionName",
    "getSessionName",
    "setLabel",
    "exec",
    "getActiveTools",
    "getAllTools",
    "setActiveTools",
    "setModel",
    "getModel",
    "getThinkingLevel",
    "setThinkingLevel",
    "notify",
    "confirm",
    "select",
    "input",
    "editor",
    "setStatus",
    "setWidget",
    "setTitle",
    "setEditorText",
    "getEntries",
    "getBranch",
    "getLeafId",
    "getSessionId",
    "isIdle",
    "abort",
    "getSystemPrompt",
];

fn text<'a>(params: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    params.get(key).and_then(Value::as_str)
}

fn required<'a>(
    params: &'a Map<String, Value>,
    method: &str,
    key: &str,
) -> Result<&'a str, String> {
    text(params, key).ok_or_else(|| format!("`{method}` needs a string `{key}`"))
}

fn timeout(params: &Map<String, Value>) -> Option<Duration> {
    params
        .get("timeout")
        .and_then(Value::as_u64)
        .map(Duration::from_millis)
}

fn deliver_as(options: Option<&Value>) -> Result<Option<DeliverAs>, String> {
    match options.and_then(|options| options.get("deliverAs")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(mode)) => match mode.as_str() {
            "steer" => Ok(Some(DeliverAs::Steer)),
            "followUp" => Ok(Some(DeliverAs::FollowUp)),
            "nextTurn" => Ok(Some(DeliverAs::NextTurn)),
            other => Err(format!("unknown deliverAs `{other}`")),
        },
        Some(_) => Err("`deliverAs` must be text".to_owned()),
    }
}

fn tool_json(tool: ToolInfo) -> Value {
    json!({"name": tool.name, "description": tool.description, "parameters": tool.parameters})
}

/// `getState`: what the other getters return, in one round trip — for hosts that answer the
/// reference's synchronous getters (`ctx.sessionManager.getBranch()`, `pi.getActiveTools()`,
/// `ctx.model`, …) from a snapshot taken before each request.
async fn get_state(ctx: &ExtensionContext) -> Result<Value, ExtensionError> {
    let (entries, branch, leaf, session_id) =
        futures::join!(ctx.entries(), ctx.branch(), ctx.leaf_id(), ctx.session_id());
    Ok(json!({
        "sessionId": session_id?,
        "sessionName": ctx.session_name()?,
        "leafId": leaf?,
        "entries": entries?,
        "branch": branch?,
        "model": ctx.model()?,
        "thinkingLevel": ctx.thinking_level()?.as_str(),
        "activeTools": ctx.active_tools()?,
        "allTools": ctx.all_tools()?.into_iter().map(tool_json).collect::<Vec<_>>(),
        "isIdle": ctx.is_idle()?,
        "systemPrompt": ctx.system_prompt()?,
    }))
}

/// Serves one call; the `Ok` value is the call's `value`, the `Err` text its `error`.
pub async fn handle_call(
    ctx: &ExtensionContext,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let params = match params {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let failed = |error: ExtensionError| error.to_string();
    match method {
        "appendEntry" => {
            let custom_type = required(&params, method, "customType")?;
            let data = params.get("data").filter(|value| !value.is_null()).cloned();
            ctx.append_entry(custom_type, data).await.map_err(failed)?;
            Ok(Value::Null)
        }
        "sendMessage" => {
            let message = params
                .get("message")
                .ok_or_else(|| "`sendMessage` needs a `message`".to_owned())?;
            let spec = CustomMessageSpec::from_json("sendMessage", message)
                .map_err(|error| error.to_string())?;
            let options = params.get("options");
            let send = SendMessageOptions {
                trigger_turn: options
                    .and_then(|options| options.get("triggerTurn"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                deliver_as: deliver_as(options)?,
            };
            ctx.send_message(spec, send).map_err(failed)?;
            Ok(Value::Null)
        }
        "sendUserMessage" => {
            let content = match params.get("content") {
                Some(value @ (Value::String(_) | Value::Array(_))) => {
                    serde_json::from_value::<UserContent>(value.clone())
                        .map_err(|error| format!("`content`: {error}"))?
                }
                _ => return Err("`sendUserMessage` needs `content` (text or blocks)".to_owned()),
            };
            ctx.send_user_message(content, deliver_as(params.get("options"))?)
                .map_err(failed)?;
            Ok(Value::Null)
        }
        "setSessionName" => {
            ctx.set_session_name(required(&params, method, "name")?)
                .await
                .map_err(failed)?;
            Ok(Value::Null)
        }
        "getSessionName" => Ok(ctx
            .session_name()
            .map_err(failed)?
            .map_or(Value::Null, Value::from)),
        "setLabel" => {
            let entry_id = required(&params, method, "entryId")?;
            ctx.set_label(entry_id, text(&params, "label"))
                .await
                .map_err(failed)?;
            Ok(Value::Null)
        }
        "exec" => {
            let command = required(&params, method, "command")?;
            let args: Vec<String> = match params.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| "`args` must hold strings".to_owned())
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err("`args` must be an array".to_owned()),
            };
            let options = match params.get("options") {
                Some(Value::Object(options)) => options.clone(),
                _ => Map::new(),
            };
            let cwd = text(&options, "cwd").map(|dir| ctx.cwd().join(Path::new(dir)));
            let result = ctx
                .exec(command, &args, cwd.as_deref(), timeout(&options), None)
                .await;
            Ok(json!({
                "stdout": result.stdout,
                "stderr": result.stderr,
                "code": result.code,
                "killed": result.killed,
            }))
        }
        "getActiveTools" => Ok(json!(ctx.active_tools().map_err(failed)?)),
        "getAllTools" => Ok(Value::Array(
            ctx.all_tools()
                .map_err(failed)?
                .into_iter()
                .map(tool_json)
                .collect(),
        )),
        "setActiveTools" => {
            let names = params
                .get("toolNames")
                .and_then(Value::as_array)
                .ok_or_else(|| "`setActiveTools` needs `toolNames` (an array)".to_owned())?
                .iter()
                .filter_map(|name| name.as_str().map(str::to_owned))
                .collect::<Vec<_>>();
            ctx.set_active_tools(&names).map_err(failed)?;
            Ok(Value::Null)
        }
        "setModel" => {
            let provider = required(&params, method, "provider")?;
            let id = text(&params, "modelId")
                .or_else(|| text(&params, "id"))
                .ok_or_else(|| "`setModel` needs a string `modelId`".to_owned())?;
            Ok(Value::from(
                ctx.set_model(provider, id).await.map_err(failed)?,
            ))
        }
        "getModel" => Ok(ctx.model().map_err(failed)?.unwrap_or(Value::Null)),
        "getThinkingLevel" => Ok(Value::from(ctx.thinking_level().map_err(failed)?.as_str())),
        "setThinkingLevel" => {
            let level = required(&params, method, "level")?;
            let level = ThinkingLevel::parse(level)
                .ok_or_else(|| format!("unknown thinking level `{level}`"))?;
            ctx.set_thinking_level(level).await.map_err(failed)?;
            Ok(Value::Null)
        }
        "notify" => {
            ctx.notify(
                required(&params, method, "message")?,
                NotifyKind::parse(text(&params, "type")),
            );
            Ok(Value::Null)
        }
        "confirm" => {
            let title = required(&params, method, "title")?;
            let message = text(&params, "message").unwrap_or_default();
            Ok(Value::from(
                ctx.ui().confirm(title, message, timeout(&params)).await,
            ))
        }
        "select" => {
            let title = required(&params, method, "title")?;
            let options: Vec<String> = params
                .get("options")
                .and_then(Value::as_array)
                .ok_or_else(|| "`select` needs `options` (an array)".to_owned())?
                .iter()
                .filter_map(|option| option.as_str().map(str::to_owned))
                .collect();
            Ok(ctx
                .ui()
                .select(title, &options, timeout(&params))
                .await
                .map_or(Value::Null, Value::from))
        }
        "input" => {
            let title = required(&params, method, "title")?;
            Ok(ctx
                .ui()
                .input(title, text(&params, "placeholder"), timeout(&params))
                .await
                .map_or(Value::Null, Value::from))
        }
        "editor" => {
            let title = required(&params, method, "title")?;
            Ok(ctx
                .ui()
                .editor(title, text(&params, "prefill"))
                .await
                .map_or(Value::Null, Value::from))
        }
        "setStatus" => {
            ctx.ui()
                .set_status(required(&params, method, "key")?, text(&params, "text"));
            Ok(Value::Null)
        }
        "setWidget" => {
            let key = required(&params, method, "key")?;
            let lines: Option<Vec<String>> = match params.get("lines") {
                None | Some(Value::Null) => None,
                Some(Value::Array(lines)) => Some(
                    lines
                        .iter()
                        .map(|line| line.as_str().map(str::to_owned))
                        .collect::<Option<_>>()
                        .ok_or_else(|| "`setWidget` needs `lines` of strings".to_owned())?,
                ),
                Some(_) => return Err("`setWidget` needs `lines` (an array or null)".to_owned()),
            };
            let placement = WidgetPlacement::parse(text(&params, "placement"));
            ctx.ui().set_widget(key, lines.as_deref(), placement);
            Ok(Value::Null)
        }
        "setTitle" => {
            ctx.ui().set_title(required(&params, method, "title")?);
            Ok(Value::Null)
        }
        "setEditorText" => {
            ctx.ui().set_editor_text(required(&params, method, "text")?);
            Ok(Value::Null)
        }
        "getEntries" => Ok(Value::Array(ctx.entries().await.map_err(failed)?)),
        "getBranch" => Ok(Value::Array(ctx.branch().await.map_err(failed)?)),
        "getLeafId" => Ok(ctx
            .leaf_id()
            .await
            .map_err(failed)?
            .map_or(Value::Null, Value::from)),
        "getSessionId" => Ok(Value::from(ctx.session_id().await.map_err(failed)?)),
        "isIdle" => Ok(Value::from(ctx.is_idle().map_err(failed)?)),
        "abort" => {
            ctx.abort().map_err(failed)?;
            Ok(Value::Null)
        }
        "getSystemPrompt" => Ok(Value::from(ctx.system_prompt().map_err(failed)?)),
        "getState" => get_state(ctx).await.map_err(failed),
        other => Err(format!("unknown method `{other}`")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::session::extensions::ui::NoUi;

    fn detached() -> ExtensionContext {
        ExtensionContext::detached(
            Arc::new(NoUi),
            std::path::PathBuf::from("/"),
            vec![("PATH".into(), "/usr/bin:/bin".into())],
            Arc::new(|_| {}),
        )
    }

    #[tokio::test]
    async fn unknown_methods_and_missing_parameters_are_call_errors() {
        let ctx = detached();
        assert_eq!(
            handle_call(&ctx, "explode", json!({})).await,
            Err("unknown method `explode`".into())
        );
        assert_eq!(
            handle_call(&ctx, "appendEntry", json!({})).await,
            Err("`appendEntry` needs a string `customType`".into())
        );
        assert_eq!(
            handle_call(&ctx, "appendEntry", json!({"customType": "x"})).await,
            Err("the session has ended".into())
        );
    }

    #[tokio::test]
    async fn dialogs_without_a_ui_give_their_defaults_and_exec_runs() {
        let ctx = detached();
        assert_eq!(
            handle_call(&ctx, "confirm", json!({"title": "Sure?"})).await,
            Ok(Value::Bool(false))
        );
        assert_eq!(
            handle_call(&ctx, "select", json!({"title": "Pick", "options": ["a"]})).await,
            Ok(Value::Null)
        );
        let result = handle_call(
            &ctx,
            "exec",
            json!({"command": "sh", "args": ["-c", "printf hi"]}),
        )
        .await
        .unwrap();
        assert_eq!(result["stdout"], "hi");
        assert_eq!(result["code"], 0);
    }
}
