//! A session as one self-contained HTML page (`pi export --html`, `pi --export FILE`,
//! `/export FILE.html`, RPC `export_html`; issue 24).
//!
//! The page holds everything it shows and loads nothing (a Content-Security-Policy allows
//! inline styles, the inline script and `data:` images only): the session's name, directory,
//! models, tokens and cost; the whole tree of entries in the reference's order (branch points
//! foldable, the active path marked, labels shown); and every entry rendered once, in append
//! order — Markdown (`markdown.rs`), thinking, tool calls and results collapsible, images
//! inline, bash runs, compaction and branch summaries. Without script the active path is shown;
//! with it (`page.js`), a click on a tree node shows the path from the root to that node, and
//! code blocks are highlighted by the page's own small highlighter. Written for pi, not the
//! reference's template.
//!
//! Session text is data: every string is escaped (`text.rs`), Markdown cannot inject markup,
//! and control characters are dropped.

mod markdown;
mod text;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Write};

use serde_json::Value;

use crate::model::entry::{Entry, EntryKind};
use crate::model::ids::SessionId;
use crate::model::message::{AgentMessage, ContentBlock, UserContent};
use crate::store::{LeafSelector, SessionStore, SessionSummary, StoreError, StoredEntry, TreeNode};

use text::{escape_into, preview};

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");
/// What the page may load: nothing but itself and `data:` images.
const POLICY: &str =
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'";

/// Everything a page shows.
pub struct Page<'a> {
    /// The session's listing (id, directory, name, counts, tokens, cost).
    pub summary: &'a SessionSummary,
    /// Every entry, in append order.
    pub entries: &'a [StoredEntry],
    /// The tree flattened in the reference's pre-order, with labels.
    pub tree: &'a [TreeNode],
    /// The sequences of the active path (root to leaf).
    pub active: &'a [i64],
}

/// Why a page could not be written.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    /// The session could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The page could not be written.
    #[error("cannot write the page: {0}")]
    Output(#[from] io::Error),
}

/// Reads a stored session and writes its page.
pub fn write_session(
    store: &SessionStore,
    session: &SessionId,
    out: &mut dyn Write,
) -> Result<(), HtmlError> {
    let summary = store.session(session)?;
    let entries = store.entries(session)?;
    let tree = store.tree(session)?;
    let active: Vec<i64> = store
        .branch_path(session, &LeafSelector::Current)?
        .iter()
        .map(|stored| stored.seq)
        .collect();
    write_page(
        out,
        &Page {
            summary: &summary,
            entries: &entries,
            tree: &tree,
            active: &active,
        },
    )?;
    Ok(())
}

/// The reference's default name of a session's page: `pi-session-<its file name>.html`.
pub fn default_file_name(summary: &SessionSummary) -> String {
    let name = crate::jsonl::writer::session_file_name(&summary.created, &summary.id);
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    format!("pi-session-{stem}.html")
}

/// Writes the page of a stored session to `path`, all or nothing (`support::atomic`).
pub fn write_session_file(
    store: &SessionStore,
    session: &SessionId,
    path: &std::path::Path,
) -> Result<(), HtmlError> {
    crate::support::atomic::write_atomically(path, |out| write_session(store, session, out))
}

/// Writes the page.
pub fn write_page(out: &mut dyn Write, page: &Page<'_>) -> io::Result<()> {
    let mut html = String::with_capacity(64 * 1024);
    render(&mut html, page);
    out.write_all(html.as_bytes())?;
    out.flush()
}

/// The page as a string.
pub fn render_page(page: &Page<'_>) -> String {
    let mut html = String::new();
    render(&mut html, page);
    html
}

fn render(html: &mut String, page: &Page<'_>) {
    let by_seq: HashMap<i64, &Entry> = page
        .entries
        .iter()
        .map(|stored| (stored.seq, &stored.entry))
        .collect();
    let active: HashSet<i64> = page.active.iter().copied().collect();
    let leaf = page.active.last().copied();
    let parents = tree_parents(page.tree);
    let title = title_of(page);

    html.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(
        html,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">"
    );
    html.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    html.push_str("<meta name=\"generator\" content=\"pi\">\n<title>");
    escape_into(html, &title);
    html.push_str("</title>\n<style>\n");
    html.push_str(STYLE);
    html.push_str("</style>\n</head>\n<body>\n");
    header(html, page, &title);
    html.push_str("<div class=\"layout\">\n");
    tree(html, page.tree, &by_seq, &active, leaf);
    html.push_str("<main id=\"messages\">\n");
    let mut rendered = HashSet::new();
    for stored in page.entries {
        if !rendered.insert(stored.seq) {
            continue;
        }
        let parent = parents.get(&stored.seq).copied().flatten();
        article(html, stored, parent, active.contains(&stored.seq));
    }
    if page.entries.is_empty() {
        html.push_str("<p class=\"empty\">This session has no entries yet.</p>\n");
    }
    html.push_str("</main>\n</div>\n<script>\n");
    html.push_str(SCRIPT);
    html.push_str("</script>\n</body>\n</html>\n");
}

/// The session's name, else its first message, else its id.
fn title_of(page: &Page<'_>) -> String {
    if let Some(name) = page
        .summary
        .name
        .as_deref()
        .filter(|n| !n.trim().is_empty())
    {
        return preview(name, 120);
    }
    if let Some(first) = page
        .summary
        .first_message
        .as_deref()
        .filter(|m| !m.trim().is_empty())
    {
        return preview(first, 80);
    }
    format!("pi session {}", page.summary.id)
}

fn header(html: &mut String, page: &Page<'_>, title: &str) {
    let summary = page.summary;
    html.push_str("<header class=\"session\">\n<h1>");
    escape_into(html, title);
    html.push_str("</h1>\n<dl>\n");
    let mut field = |name: &str, value: &str| {
        let _ = write!(html, "<dt>{name}</dt><dd>");
        escape_into(html, value);
        html.push_str("</dd>\n");
    };
    field("Session", summary.id.as_str());
    field("Directory", &summary.cwd);
    field("Created", &summary.created);
    if let Some(parent) = &summary.parent_session {
        field("Forked from", parent);
    }
    let models = models_of(page.entries);
    if !models.is_empty() {
        field("Models", &models.join(", "));
    }
    field(
        "Entries",
        &format!("{} ({} messages)", summary.entries, summary.messages),
    );
    let tokens = &summary.tokens;
    field(
        "Tokens",
        &format!(
            "{} in, {} out, {} cache read, {} cache write",
            tokens.input, tokens.output, tokens.cache_read, tokens.cache_write
        ),
    );
    field("Cost", &format!("${:.4}", summary.cost));
    html.push_str("</dl>\n</header>\n");
}

/// The distinct `provider/model` of the assistant messages and model changes, in first-use
/// order.
fn models_of(entries: &[StoredEntry]) -> Vec<String> {
    let mut seen = Vec::<String>::new();
    for stored in entries {
        let model = match &stored.entry.kind {
            EntryKind::Message(AgentMessage::Assistant(message)) if !message.model.is_empty() => {
                format!("{}/{}", message.provider, message.model)
            }
            EntryKind::ModelChange(model) => format!("{}/{}", model.provider, model.model_id),
            _ => continue,
        };
        if !seen.contains(&model) {
            seen.push(model);
        }
    }
    seen
}

/// The parent of each node in the flattened tree (`None` for a root), from the walk depths.
fn tree_parents(nodes: &[TreeNode]) -> HashMap<i64, Option<i64>> {
    let mut parents = HashMap::with_capacity(nodes.len());
    let mut stack: Vec<(usize, i64)> = Vec::new();
    for node in nodes {
        while stack.last().is_some_and(|(depth, _)| *depth >= node.depth) {
            stack.pop();
        }
        parents
            .entry(node.seq)
            .or_insert(stack.last().map(|(_, seq)| *seq));
        stack.push((node.depth, node.seq));
    }
    parents
}

/// The tree as a flat list: one row per node, indented by the branch points above it (a
/// linear stretch stays at one level, however long), each branch point's children foldable.
fn tree(
    html: &mut String,
    nodes: &[TreeNode],
    by_seq: &HashMap<i64, &Entry>,
    active: &HashSet<i64>,
    leaf: Option<i64>,
) {
    // Children per node (by position), for the branch points.
    let mut children = vec![0usize; nodes.len()];
    let mut parent_at = vec![None::<usize>; nodes.len()];
    let mut stack: Vec<usize> = Vec::new();
    for (at, node) in nodes.iter().enumerate() {
        while stack
            .last()
            .is_some_and(|top| nodes[*top].depth >= node.depth)
        {
            stack.pop();
        }
        if let Some(parent) = stack.last() {
            children[*parent] += 1;
            parent_at[at] = Some(*parent);
        }
        stack.push(at);
    }
    let mut indent = vec![0usize; nodes.len()];
    html.push_str("<nav id=\"tree\" aria-label=\"Session tree\">\n<h2>Tree</h2>\n<ul>\n");
    for (at, node) in nodes.iter().enumerate() {
        let (level, branch) = match parent_at[at] {
            Some(parent) if children[parent] > 1 => (indent[parent] + 1, true),
            Some(parent) => (indent[parent], false),
            None => (0, nodes.len() > 1 && at > 0),
        };
        indent[at] = level;
        let mut class = String::from("node");
        if active.contains(&node.seq) {
            class.push_str(" active");
        }
        if Some(node.seq) == leaf {
            class.push_str(" leaf");
        }
        if branch {
            class.push_str(" branch");
        }
        let _ = write!(
            html,
            "<li class=\"{class}\" data-seq=\"{}\" data-depth=\"{}\" style=\"--indent:{level}\">",
            node.seq, node.depth
        );
        if children[at] > 1 {
            html.push_str("<button class=\"fold\" type=\"button\" aria-label=\"Fold\" title=\"Fold this branch point\">▾</button>");
        }
        let _ = write!(
            html,
            "<button class=\"goto\" type=\"button\" data-seq=\"{}\">",
            node.seq
        );
        let (role, text) = match by_seq.get(&node.seq) {
            Some(entry) => describe(entry),
            None => (node.type_name.clone(), String::new()),
        };
        let _ = write!(html, "<span class=\"role\">");
        escape_into(html, &role);
        html.push_str("</span> ");
        escape_into(html, &text);
        html.push_str("</button>");
        if let Some(label) = &node.label {
            html.push_str("<span class=\"label\">");
            escape_into(html, label);
            html.push_str("</span>");
        }
        html.push_str("</li>\n");
    }
    html.push_str("</ul>\n</nav>\n");
}

/// A tree row's role word and one-line text.
fn describe(entry: &Entry) -> (String, String) {
    const MAX: usize = 70;
    match &entry.kind {
        EntryKind::Message(message) => match message {
            AgentMessage::User(user) => ("user".into(), preview(&user.content.joined_text(), MAX)),
            AgentMessage::Assistant(assistant) => {
                let text: Vec<&str> = assistant
                    .content
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .collect();
                let calls: Vec<&str> = assistant
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::ToolCall(call) => Some(call.name.as_str()),
                        _ => None,
                    })
                    .collect();
                let mut line = preview(&text.join(" "), MAX);
                if !calls.is_empty() {
                    if !line.is_empty() {
                        line.push(' ');
                    }
                    line.push_str(&format!("→ {}", calls.join(", ")));
                }
                ("assistant".into(), line)
            }
            AgentMessage::ToolResult(result) => (
                "tool".into(),
                format!(
                    "{}{}",
                    result.tool_name,
                    if result.is_error { " (error)" } else { "" }
                ),
            ),
            AgentMessage::BashExecution(bash) => ("bash".into(), preview(&bash.command, MAX)),
            AgentMessage::Custom(custom) => (
                custom.custom_type.clone(),
                preview(&custom.content.joined_text(), MAX),
            ),
            AgentMessage::System(_) => ("system".into(), "system prompt".into()),
            AgentMessage::BranchSummary(summary) => {
                ("branch summary".into(), preview(&summary.summary, MAX))
            }
            AgentMessage::CompactionSummary(summary) => {
                ("compaction".into(), preview(&summary.summary, MAX))
            }
            AgentMessage::Unknown(value) => (
                value
                    .get("role")
                    .and_then(Value::as_str)
                    .unwrap_or("message")
                    .to_owned(),
                String::new(),
            ),
        },
        EntryKind::ThinkingLevelChange { thinking_level } => {
            ("thinking".into(), thinking_level.clone())
        }
        EntryKind::ModelChange(model) => (
            "model".into(),
            format!("{}/{}", model.provider, model.model_id),
        ),
        EntryKind::Compaction(compaction) => (
            "compaction".into(),
            format!("{} tokens summarised", compaction.tokens_before),
        ),
        EntryKind::BranchSummary(summary) => {
            ("branch summary".into(), preview(&summary.summary, MAX))
        }
        EntryKind::Usage(usage) => ("usage".into(), usage.kind.clone()),
        EntryKind::ContextEdit(_) => ("context edit".into(), String::new()),
        EntryKind::Custom { custom_type, .. } => ("custom".into(), custom_type.clone()),
        EntryKind::CustomMessage {
            custom_type,
            content,
            ..
        } => (custom_type.clone(), preview(&content.joined_text(), MAX)),
        EntryKind::Label { label, .. } => ("label".into(), label.clone().unwrap_or_default()),
        EntryKind::SessionInfo { name } => ("name".into(), name.clone().unwrap_or_default()),
        EntryKind::Unknown { type_name } => (type_name.clone(), String::new()),
    }
}

fn article(html: &mut String, stored: &StoredEntry, parent: Option<i64>, on_path: bool) {
    let entry = &stored.entry;
    let (role, _) = describe(entry);
    let kind = css_kind(entry);
    let _ = write!(
        html,
        "<article class=\"entry {kind}\" id=\"e{}\" data-seq=\"{}\" data-parent=\"{}\"{}>\n<div class=\"meta\"><span class=\"role\">",
        stored.seq,
        stored.seq,
        parent.map(|p| p.to_string()).unwrap_or_default(),
        if on_path { "" } else { " hidden" }
    );
    escape_into(html, &role);
    html.push_str("</span>");
    if !entry.timestamp.is_empty() {
        html.push_str(" <time>");
        escape_into(html, &entry.timestamp);
        html.push_str("</time>");
    }
    if let EntryKind::Message(AgentMessage::Assistant(message)) = &entry.kind {
        html.push_str(" <span class=\"model\">");
        escape_into(html, &format!("{}/{}", message.provider, message.model));
        html.push_str("</span>");
        let usage = &message.usage;
        let _ = write!(
            html,
            " <span class=\"usage\">{} in · {} out · ${:.4}</span>",
            usage.input, usage.output, usage.cost.total
        );
    }
    html.push_str("</div>\n");
    body(html, entry);
    html.push_str("</article>\n");
}

fn css_kind(entry: &Entry) -> &'static str {
    match &entry.kind {
        EntryKind::Message(message) => match message {
            AgentMessage::User(_) => "user",
            AgentMessage::Assistant(_) => "assistant",
            AgentMessage::ToolResult(_) => "tool-result",
            AgentMessage::BashExecution(_) => "bash",
            AgentMessage::Custom(_) => "custom",
            AgentMessage::System(_) => "system",
            AgentMessage::BranchSummary(_) | AgentMessage::CompactionSummary(_) => "summary",
            AgentMessage::Unknown(_) => "other",
        },
        EntryKind::Compaction(_) | EntryKind::BranchSummary(_) => "summary",
        EntryKind::CustomMessage { .. } => "custom",
        _ => "note",
    }
}

fn body(html: &mut String, entry: &Entry) {
    match &entry.kind {
        EntryKind::Message(message) => message_body(html, message),
        EntryKind::ThinkingLevelChange { thinking_level } => {
            note(html, &format!("Thinking level: {thinking_level}"));
        }
        EntryKind::ModelChange(model) => {
            note(
                html,
                &format!("Model: {}/{}", model.provider, model.model_id),
            );
        }
        EntryKind::Compaction(compaction) => {
            let _ = writeln!(
                html,
                "<details class=\"summary\"><summary>Compacted: {} tokens of context summarised</summary>",
                compaction.tokens_before
            );
            markdown::render(&compaction.summary, html);
            html.push_str("</details>\n");
        }
        EntryKind::BranchSummary(summary) => {
            html.push_str(
                "<details class=\"summary\" open><summary>Summary of an abandoned branch</summary>\n",
            );
            markdown::render(&summary.summary, html);
            html.push_str("</details>\n");
        }
        EntryKind::Usage(usage) => note(
            html,
            &format!(
                "Usage ({}) by {}/{}: {} in, {} out, ${:.4}",
                usage.kind,
                usage.provider,
                usage.model,
                usage.usage.input,
                usage.usage.output,
                usage.usage.cost.total
            ),
        ),
        EntryKind::ContextEdit(edit) => note(
            html,
            &format!(
                "Context edit of {}",
                edit.target_id.as_ref().map_or("?", |id| id.as_str())
            ),
        ),
        EntryKind::Custom { custom_type, data } => {
            let _ = write!(html, "<details><summary>Extension data: ");
            escape_into(html, custom_type);
            html.push_str("</summary>\n");
            if let Some(data) = data {
                json_block(html, data);
            }
            html.push_str("</details>\n");
        }
        EntryKind::CustomMessage {
            content, display, ..
        } => {
            if *display {
                user_content(html, content);
            } else {
                html.push_str("<details><summary>Hidden extension message</summary>\n");
                user_content(html, content);
                html.push_str("</details>\n");
            }
        }
        EntryKind::Label { target_id, label } => note(
            html,
            &match label.as_deref().filter(|l| !l.is_empty()) {
                Some(label) => format!(
                    "Label “{label}” on {}",
                    target_id.as_ref().map_or("?", |id| id.as_str())
                ),
                None => format!(
                    "Label removed from {}",
                    target_id.as_ref().map_or("?", |id| id.as_str())
                ),
            },
        ),
        EntryKind::SessionInfo { name } => note(
            html,
            &format!("Session named “{}”", name.as_deref().unwrap_or("")),
        ),
        EntryKind::Unknown { type_name } => {
            note(html, &format!("An entry of type “{type_name}”"));
        }
    }
}

fn note(html: &mut String, text: &str) {
    html.push_str("<p class=\"note\">");
    escape_into(html, text);
    html.push_str("</p>\n");
}

fn message_body(html: &mut String, message: &AgentMessage) {
    match message {
        AgentMessage::User(user) => user_content(html, &user.content),
        AgentMessage::Assistant(assistant) => {
            for block in &assistant.content {
                match block {
                    ContentBlock::Text(text) => markdown::render(&text.text, html),
                    ContentBlock::Thinking(thinking) => {
                        if thinking.redacted == Some(true) && thinking.thinking.is_empty() {
                            html.push_str(
                                "<details class=\"thinking\"><summary>Thinking (redacted by the provider)</summary></details>\n",
                            );
                        } else {
                            html.push_str(
                                "<details class=\"thinking\"><summary>Thinking</summary>\n",
                            );
                            markdown::render(&thinking.thinking, html);
                            html.push_str("</details>\n");
                        }
                    }
                    ContentBlock::ToolCall(call) => {
                        html.push_str("<details class=\"tool-call\"><summary>Tool call <code>");
                        escape_into(html, &call.name);
                        html.push_str("</code> <span class=\"args\">");
                        escape_into(html, &preview(&call.arguments.to_string(), 100));
                        html.push_str("</span></summary>\n");
                        json_block(html, &call.arguments);
                        if let Some(error) = &call.arguments_error {
                            html.push_str("<p class=\"error\">");
                            escape_into(html, error);
                            html.push_str("</p>\n");
                        }
                        html.push_str("</details>\n");
                    }
                    ContentBlock::Image(image) => image_tag(html, &image.mime_type, &image.data),
                    ContentBlock::Unknown(value) => json_block(html, value),
                }
            }
            if let Some(error) = &assistant.error_message {
                let _ = write!(
                    html,
                    "<p class=\"error\">{}: ",
                    assistant.stop_reason.as_str()
                );
                escape_into(html, error);
                html.push_str("</p>\n");
            }
        }
        AgentMessage::ToolResult(result) => {
            let text: Vec<&str> = result
                .content
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect();
            let text = text.join("\n");
            let lines = text.lines().count();
            let _ = write!(
                html,
                "<details class=\"tool-result{}\"{}><summary>Result of <code>",
                if result.is_error { " error" } else { "" },
                if lines <= 12 { " open" } else { "" }
            );
            escape_into(html, &result.tool_name);
            let _ = writeln!(
                html,
                "</code>{} · {lines} line{}</summary>",
                if result.is_error { " (error)" } else { "" },
                if lines == 1 { "" } else { "s" }
            );
            if !text.is_empty() {
                pre(html, &text);
            }
            for block in &result.content {
                if let ContentBlock::Image(image) = block {
                    image_tag(html, &image.mime_type, &image.data);
                }
            }
            html.push_str("</details>\n");
        }
        AgentMessage::BashExecution(bash) => {
            html.push_str("<p class=\"command\"><code>$ ");
            escape_into(html, &bash.command);
            html.push_str("</code>");
            match (bash.cancelled, bash.exit_code) {
                (true, _) => html.push_str(" <span class=\"error\">cancelled</span>"),
                (false, Some(0)) => {}
                (false, Some(code)) => {
                    let _ = write!(html, " <span class=\"error\">exit {code}</span>");
                }
                (false, None) => {}
            }
            if bash.exclude_from_context == Some(true) {
                html.push_str(" <span class=\"dim\">(not sent to the model)</span>");
            }
            html.push_str("</p>\n");
            let lines = bash.output.lines().count();
            let _ = writeln!(
                html,
                "<details class=\"output\"{}><summary>Output · {lines} line{}{}</summary>",
                if lines <= 12 { " open" } else { "" },
                if lines == 1 { "" } else { "s" },
                if bash.truncated { " (truncated)" } else { "" }
            );
            pre(html, &bash.output);
            html.push_str("</details>\n");
        }
        AgentMessage::Custom(custom) => user_content(html, &custom.content),
        AgentMessage::System(system) => {
            html.push_str("<details class=\"system\"><summary>System prompt</summary>\n");
            if let Some(content) = &system.content {
                pre(html, &content.joined_text());
            }
            if let Some(tools) = &system.tools_added {
                let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
                note(html, &format!("Tools: {}", names.join(", ")));
            }
            html.push_str("</details>\n");
        }
        AgentMessage::BranchSummary(summary) => markdown::render(&summary.summary, html),
        AgentMessage::CompactionSummary(summary) => markdown::render(&summary.summary, html),
        AgentMessage::Unknown(value) => json_block(html, value),
    }
}

fn user_content(html: &mut String, content: &UserContent) {
    match content {
        UserContent::Text(text) => markdown::render(text, html),
        UserContent::Blocks(blocks) => {
            for block in blocks {
                match block {
                    ContentBlock::Text(text) => markdown::render(&text.text, html),
                    ContentBlock::Image(image) => image_tag(html, &image.mime_type, &image.data),
                    ContentBlock::Thinking(thinking) => markdown::render(&thinking.thinking, html),
                    ContentBlock::ToolCall(call) => json_block(html, &call.arguments),
                    ContentBlock::Unknown(value) => json_block(html, value),
                }
            }
        }
    }
}

/// An inline image, for the four formats pi reads, when its data is plain base64.
fn image_tag(html: &mut String, mime: &str, data: &str) {
    let allowed = matches!(
        mime,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    );
    let base64 = !data.is_empty()
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    if allowed && base64 {
        let _ = writeln!(
            html,
            "<img class=\"inline\" alt=\"image\" src=\"data:{mime};base64,{data}\">"
        );
    } else {
        note(html, &format!("[an image that cannot be shown: {mime}]"));
    }
}

fn pre(html: &mut String, text: &str) {
    html.push_str("<pre>");
    escape_into(html, text);
    html.push_str("</pre>\n");
}

fn json_block(html: &mut String, value: &Value) {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    html.push_str("<pre><code class=\"language-json\">");
    escape_into(html, &text);
    html.push_str("</code></pre>\n");
}
