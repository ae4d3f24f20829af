//! The resource tools of 1.6.0 (`list_mcp_resources`, `list_mcp_resource_templates`,
//! `read_mcp_resource`; its `resources.js`): the same names, descriptions and parameters; a
//! listing is JSON text (`{server?, resources: [{server, uri, name, …}], errors?}`), a read
//! gives text as text and images as images.
//!
//! pi lists every page of a server at once, so `cursor` is accepted and never needed (no
//! `nextCursor` is returned). MCP App resources (`ui://`, `profile=mcp-app`) are left out, as
//! in the reference.
//!
//! Invariant: a server's failure is an error result (or an `errors` entry of a listing).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::agent::tool::{
    BoxFuture, Tool, ToolContext, ToolDefinition, ToolError, ToolInput, ToolOutput,
};
use crate::model::message::ContentBlock;
use crate::session::mcp::McpManager;
use crate::session::mcp::tool::{READ_MCP_RESOURCE_TOOL, resource_content};

/// `list_mcp_resources`.
pub const LIST_MCP_RESOURCES_TOOL: &str = "list_mcp_resources";
/// `list_mcp_resource_templates`.
pub const LIST_MCP_RESOURCE_TEMPLATES_TOOL: &str = "list_mcp_resource_templates";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    List,
    Templates,
    Read,
}

struct ResourceTool {
    manager: Arc<McpManager>,
    kind: Kind,
    definition: ToolDefinition,
}

fn list_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "server": {"type": "string", "description": "MCP server name. Omit to list every server with resources."},
            "cursor": {"type": "string", "description": "Opaque cursor from a previous call with the same server; omit for the first page."}
        },
        "additionalProperties": false
    })
}

fn definition(name: &str, description: &str, parameters: Value) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        label: name.to_owned(),
        description: description.to_owned(),
        parameters,
        prompt_snippet: None,
        prompt_guidelines: Vec::new(),
        constrained_sampling: None,
    }
}

/// The three resource tools.
pub fn resource_tools(manager: Arc<McpManager>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ResourceTool {
            manager: manager.clone(),
            kind: Kind::List,
            definition: definition(
                LIST_MCP_RESOURCES_TOOL,
                "Lists resources provided by MCP servers. Resources allow servers to share data that provides context to language models, such as files, database schemas, or application-specific information. Prefer resources over web search when possible.",
                list_parameters(),
            ),
        }),
        Arc::new(ResourceTool {
            manager: manager.clone(),
            kind: Kind::Templates,
            definition: definition(
                LIST_MCP_RESOURCE_TEMPLATES_TOOL,
                "Lists resource templates provided by MCP servers. Parameterized resource templates allow servers to share data that takes parameters and provides context to language models, such as files, database schemas, or application-specific information. Prefer resource templates over web search when possible.",
                list_parameters(),
            ),
        }),
        Arc::new(ResourceTool {
            manager,
            kind: Kind::Read,
            definition: definition(
                READ_MCP_RESOURCE_TOOL,
                "Read a specific resource from an MCP server given the server name and resource URI.",
                json!({
                    "type": "object",
                    "properties": {
                        "server": {"type": "string", "description": "MCP server name exactly as configured. Must match the 'server' field returned by list_mcp_resources."},
                        "uri": {"type": "string", "description": "Resource URI to read. Must be one of the URIs returned by list_mcp_resources."}
                    },
                    "required": ["server", "uri"],
                    "additionalProperties": false
                }),
            ),
        }),
    ]
}

fn argument(arguments: &Value, key: &str) -> Result<Option<String>, ToolError> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => {
            let text = text.trim();
            Ok((!text.is_empty()).then(|| text.to_owned()))
        }
        Some(_) => Err(ToolError::ForModel(format!("{key} must be a string"))),
    }
}

fn is_app_resource(item: &Map<String, Value>) -> bool {
    let uri = item
        .get("uri")
        .or_else(|| item.get("uriTemplate"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mime = item
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_lowercase()
        .replace([' ', '"'], "");
    uri.starts_with("ui://") || mime.contains(";profile=mcp-app")
}

fn listed(server: &str, mut item: Map<String, Value>) -> Value {
    item.shift_remove("_meta");
    item.shift_remove("icons");
    let mut out = Map::new();
    out.insert("server".to_owned(), json!(server));
    out.extend(item);
    Value::Object(out)
}

impl ResourceTool {
    async fn list(&self, arguments: &Value) -> Result<ToolOutput, ToolError> {
        let server = argument(arguments, "server")?;
        let cursor = argument(arguments, "cursor")?;
        let key = if self.kind == Kind::List {
            "resources"
        } else {
            "resourceTemplates"
        };
        let servers = match &server {
            Some(name) => vec![
                self.manager
                    .resource_server(name)
                    .map_err(ToolError::ForModel)?,
            ],
            None => {
                if cursor.is_some() {
                    return Err(ToolError::ForModel(
                        "cursor can only be used when a server is specified".to_owned(),
                    ));
                }
                let mut servers = self.manager.resource_servers();
                servers.sort_by(|a, b| a.name().cmp(b.name()));
                servers
            }
        };
        let mut items = Vec::new();
        let mut errors = Vec::new();
        for conn in servers {
            let on_drop = |_: &str| {};
            let listed_items = if self.kind == Kind::List {
                conn.list_resources(&on_drop).await
            } else {
                conn.list_resource_templates(&on_drop).await
            };
            match listed_items {
                Ok(found) => items.extend(
                    found
                        .into_iter()
                        .filter(|item| !is_app_resource(item))
                        .map(|item| listed(conn.name(), item)),
                ),
                Err(error) if server.is_some() => return Err(ToolError::ForModel(error)),
                Err(error) => errors.push(json!({"server": conn.name(), "error": error})),
            }
        }
        let mut payload = Map::new();
        if let Some(server) = &server {
            payload.insert("server".to_owned(), json!(server));
        }
        payload.insert(key.to_owned(), Value::Array(items));
        if !errors.is_empty() {
            payload.insert("errors".to_owned(), Value::Array(errors));
        }
        let text = crate::support::json::to_js_string(&Value::Object(payload));
        Ok(ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: Some(
                json!({"server": server.unwrap_or_default(), "tool": self.definition.name}),
            ),
        })
    }

    async fn read(&self, arguments: &Value) -> Result<ToolOutput, ToolError> {
        let server = argument(arguments, "server")?
            .ok_or_else(|| ToolError::ForModel("server must be provided".to_owned()))?;
        let uri = argument(arguments, "uri")?
            .ok_or_else(|| ToolError::ForModel("uri must be provided".to_owned()))?;
        let contents = self
            .manager
            .read_resource(&server, &uri)
            .await
            .map_err(ToolError::ForModel)?;
        let mut content = Vec::new();
        for item in &contents {
            let Some(item) = item.as_object() else {
                continue;
            };
            if contents.len() > 1 {
                let item_uri = item.get("uri").and_then(Value::as_str).unwrap_or_default();
                content.push(ContentBlock::text(format!("{item_uri}:")));
            }
            content.extend(resource_content(item, self.manager.temp_dir()));
        }
        if content.is_empty() {
            content.push(ContentBlock::text(format!("Resource {uri} is empty.")));
        }
        Ok(ToolOutput {
            content,
            details: Some(json!({"server": server, "tool": READ_MCP_RESOURCE_TOOL})),
        })
    }
}

impl Tool for ResourceTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn mutates_workspace(&self) -> bool {
        false
    }

    fn execute<'a>(
        &'a self,
        input: ToolInput,
        ctx: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let work = async {
                match self.kind {
                    Kind::List | Kind::Templates => self.list(&input.arguments).await,
                    Kind::Read => self.read(&input.arguments).await,
                }
            };
            tokio::select! {
                result = work => result,
                () = ctx.cancel.cancelled() => Err(ToolError::aborted()),
            }
        })
    }
}
