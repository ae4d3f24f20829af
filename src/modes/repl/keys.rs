//! The REPL's application keys as the reference names them (its `docs/keybindings.md`): the
//! action ids this REPL has, their default keys, `<agent dir>/keybindings.json` (an id mapped to
//! one key or a list; a list replaces the default, an empty one disables the action), and the
//! key syntax (`ctrl+shift+x`, `alt+p`, `shift+tab`, `f5`, …) turned into the editor's keys.
//!
//! A line editor on a classic terminal cannot tell some keys apart: `shift+ctrl+p` arrives as
//! `ctrl+p`, `super` is never sent, `ctrl+1` arrives as `1`. Such a binding is kept, shown by
//! `/hotkeys` as one this terminal cannot send, and not bound (it would take another key).
//! Keys that typing or the editor itself needs (a plain letter, Enter, Esc, Backspace) are
//! refused with a warning.
//!
//! Invariant: pure but for [`Keymap::load`] reading the file; an invalid file or entry is a
//! warning and the defaults stay.

use std::path::Path;

use rustyline::{KeyCode, KeyEvent, Modifiers};
use serde_json::Value;

/// What a key does at the prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyAction {
    /// `app.model.cycleForward`: the next scoped (or available) model.
    ModelCycleForward,
    /// `app.model.cycleBackward`: the previous one.
    ModelCycleBackward,
    /// `app.model.select`: the model picker (`/model`).
    ModelSelect,
    /// `app.thinking.cycle`: the next thinking level.
    ThinkingCycle,
    /// `app.thinking.toggle`: thinking shown or collapsed.
    ThinkingToggle,
    /// `app.tools.expand`: tool output cut or shown whole.
    ToolsExpand,
    /// `app.editor.external`: the line in `$VISUAL`/`$EDITOR`.
    ExternalEditor,
    /// `app.session.new`: `/new`.
    SessionNew,
    /// `app.session.tree`: `/tree`.
    SessionTree,
    /// `app.session.fork`: `/fork`.
    SessionFork,
    /// `app.session.resume`: `/resume`.
    SessionResume,
    /// `app.message.copy`: the last answer to the clipboard (`/copy`).
    MessageCopy,
}

/// Each action: its id, the action, its default keys and what `/hotkeys` says of it.
const ACTIONS: &[(&str, KeyAction, &[&str], &str)] = &[
    (
        "app.model.cycleForward",
        KeyAction::ModelCycleForward,
        &["ctrl+p"],
        "Cycle to the next model",
    ),
    (
        "app.model.cycleBackward",
        // The reference's default; `alt+p` (its Windows key) added, which a terminal can send.
        KeyAction::ModelCycleBackward,
        &["shift+ctrl+p", "alt+p"],
        "Cycle to the previous model",
    ),
    (
        "app.model.select",
        KeyAction::ModelSelect,
        &["ctrl+l"],
        "Open the model selector",
    ),
    (
        "app.thinking.cycle",
        KeyAction::ThinkingCycle,
        &["shift+tab"],
        "Cycle the thinking level",
    ),
    (
        "app.thinking.toggle",
        KeyAction::ThinkingToggle,
        &["ctrl+t"],
        "Collapse or expand thinking",
    ),
    (
        "app.tools.expand",
        KeyAction::ToolsExpand,
        &["ctrl+o"],
        "Collapse or expand tool output",
    ),
    (
        "app.editor.external",
        KeyAction::ExternalEditor,
        &["ctrl+g"],
        "Edit the prompt in $VISUAL / $EDITOR",
    ),
    (
        "app.session.new",
        KeyAction::SessionNew,
        &[],
        "Start a new session (/new)",
    ),
    (
        "app.session.tree",
        KeyAction::SessionTree,
        &[],
        "Open the session tree (/tree)",
    ),
    (
        "app.session.fork",
        KeyAction::SessionFork,
        &[],
        "Fork the session (/fork)",
    ),
    (
        "app.session.resume",
        KeyAction::SessionResume,
        &[],
        "Resume another session (/resume)",
    ),
    (
        "app.message.copy",
        KeyAction::MessageCopy,
        &["ctrl+x"],
        "Copy the last answer (/copy)",
    ),
];

/// Ids of the reference whose keys this REPL has but does not let be moved (they are the line
/// editor's own, or the keys read while a turn runs).
const FIXED: &[&str] = &[
    "app.interrupt",
    "app.clear",
    "app.exit",
    "app.message.followUp",
    "app.message.dequeue",
    "tui.input.submit",
    "tui.input.newLine",
    "tui.input.tab",
];

/// A key as written, and what the editor receives for it (`None`: this terminal cannot send
/// it as a key of its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    /// As written in the defaults or `keybindings.json`.
    pub text: String,
    /// The editor's key.
    pub event: Option<KeyEvent>,
}

/// Why a key cannot be bound.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not the reference's key syntax.
    #[error("{0:?} is not a key (write it as modifier+key, e.g. ctrl+shift+x)")]
    Syntax(String),
    /// A key typing or the editor needs.
    #[error("{0:?} is needed for typing or by the line editor")]
    Reserved(String),
}

/// Parses a key in the reference's syntax.
pub fn parse_key(text: &str) -> Result<Key, KeyError> {
    let lower = text.trim().to_ascii_lowercase();
    let syntax = || KeyError::Syntax(text.to_owned());
    // `ctrl++`: the key is `+`.
    let (mods_text, key) = match lower.strip_suffix("++") {
        Some(mods) => (mods, "+"),
        None => match lower.rsplit_once('+') {
            Some((mods, key)) => (mods, key),
            None => ("", lower.as_str()),
        },
    };
    let (mut ctrl, mut shift, mut alt, mut sup) = (false, false, false, false);
    for modifier in mods_text.split('+').filter(|part| !part.is_empty()) {
        match modifier {
            "ctrl" => ctrl = true,
            "shift" => shift = true,
            "alt" => alt = true,
            "super" => sup = true,
            _ => return Err(syntax()),
        }
    }
    let key_code = match key {
        "escape" | "esc" | "enter" | "return" | "backspace" => {
            return Err(KeyError::Reserved(text.to_owned()));
        }
        "tab" => Some(KeyCode::Tab),
        "space" => Some(KeyCode::Char(' ')),
        "delete" => Some(KeyCode::Delete),
        "insert" => Some(KeyCode::Insert),
        "home" => Some(KeyCode::Home),
        "end" => Some(KeyCode::End),
        "pageup" => Some(KeyCode::PageUp),
        "pagedown" => Some(KeyCode::PageDown),
        "up" => Some(KeyCode::Up),
        "down" => Some(KeyCode::Down),
        "left" => Some(KeyCode::Left),
        "right" => Some(KeyCode::Right),
        "clear" => None,
        _ => {
            if let Some(number) = key.strip_prefix('f').and_then(|n| n.parse::<u8>().ok()) {
                if !(1..=12).contains(&number) {
                    return Err(syntax());
                }
                Some(KeyCode::F(number))
            } else {
                let mut chars = key.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) if c.is_ascii_graphic() => Some(KeyCode::Char(c)),
                    _ => return Err(syntax()),
                }
            }
        }
    };
    let unsendable = || Key {
        text: text.to_owned(),
        event: None,
    };
    let Some(code) = key_code else {
        return Ok(unsendable());
    };
    if sup {
        return Ok(unsendable());
    }
    let event = match code {
        KeyCode::Tab if shift && !ctrl && !alt => KeyEvent(KeyCode::BackTab, Modifiers::NONE),
        KeyCode::Tab if !ctrl && !alt => return Err(KeyError::Reserved(text.to_owned())),
        KeyCode::Char(c) => {
            if !ctrl && !alt {
                // A plain (or shifted) character is typed, not an action.
                return Err(KeyError::Reserved(text.to_owned()));
            }
            if ctrl {
                // A classic terminal sends Ctrl with letters and @ [ \ ] ^ _ only, and the same
                // byte with or without Shift.
                let sendable = c.is_ascii_lowercase() || "@[\\]^_".contains(c);
                if shift || !sendable {
                    return Ok(unsendable());
                }
                // Ctrl+I, M, [ are Tab, Enter and Esc; Ctrl+H is Backspace.
                if matches!(c, 'i' | 'm' | '[' | 'h') {
                    return Err(KeyError::Reserved(text.to_owned()));
                }
                let mods = if alt {
                    Modifiers::CTRL_ALT
                } else {
                    Modifiers::CTRL
                };
                KeyEvent::normalize(KeyEvent(KeyCode::Char(c), mods))
            } else {
                let c = if shift { c.to_ascii_uppercase() } else { c };
                KeyEvent(KeyCode::Char(c), Modifiers::ALT)
            }
        }
        other => {
            let mut mods = Modifiers::NONE;
            if ctrl {
                mods |= Modifiers::CTRL;
            }
            if shift {
                mods |= Modifiers::SHIFT;
            }
            if alt {
                mods |= Modifiers::ALT;
            }
            KeyEvent(other, mods)
        }
    };
    Ok(Key {
        text: text.to_owned(),
        event: Some(event),
    })
}

/// The REPL's keys: each action with its keys, and what was wrong in `keybindings.json`.
#[derive(Clone, Debug)]
pub struct Keymap {
    bindings: Vec<(KeyAction, Vec<Key>)>,
    /// Problems of the file (shown at start-up and by `/hotkeys`).
    pub warnings: Vec<String>,
}

impl Keymap {
    /// The reference's defaults.
    pub fn defaults() -> Self {
        let bindings = ACTIONS
            .iter()
            .map(|(_, action, keys, _)| {
                let keys = keys.iter().filter_map(|key| parse_key(key).ok()).collect();
                (*action, keys)
            })
            .collect();
        Self {
            bindings,
            warnings: Vec::new(),
        }
    }

    /// The defaults with `<agent dir>/keybindings.json` applied (a missing file: the defaults).
    pub fn load(agent_dir: &Path) -> Self {
        let path = agent_dir.join("keybindings.json");
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::from_json(&text, &path.display().to_string()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Self::defaults(),
            Err(error) => {
                let mut keymap = Self::defaults();
                keymap
                    .warnings
                    .push(format!("{}: cannot be read: {error}", path.display()));
                keymap
            }
        }
    }

    /// The defaults with the file's text applied; `name` names it in warnings.
    pub fn from_json(text: &str, name: &str) -> Self {
        let mut keymap = Self::defaults();
        let object = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(object)) => object,
            Ok(_) => {
                keymap.warnings.push(format!(
                    "{name}: not a JSON object; the default keys are used"
                ));
                return keymap;
            }
            Err(error) => {
                keymap.warnings.push(format!(
                    "{name}: invalid JSON ({error}); the default keys are used"
                ));
                return keymap;
            }
        };
        for (id, value) in &object {
            if id.starts_with('$') {
                continue;
            }
            let Some((_, action, _, _)) = ACTIONS.iter().find(|(known, ..)| known == id) else {
                if FIXED.contains(&id.as_str()) {
                    keymap.warnings.push(format!(
                        "{name}: {id} keeps its key in this REPL (the line editor's own)"
                    ));
                } else if !(id.starts_with("tui.") || id.starts_with("app.")) {
                    keymap
                        .warnings
                        .push(format!("{name}: {id:?} is no keybinding id"));
                }
                // Other ids of the reference name parts of its full-screen interface.
                continue;
            };
            let texts: Vec<&str> = match value {
                Value::String(key) => vec![key.as_str()],
                Value::Array(keys) => {
                    let texts: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
                    if texts.len() != keys.len() {
                        keymap
                            .warnings
                            .push(format!("{name}: {id}: every key must be a string"));
                        continue;
                    }
                    texts
                }
                _ => {
                    keymap.warnings.push(format!(
                        "{name}: {id}: a key or a list of keys was expected"
                    ));
                    continue;
                }
            };
            let mut keys = Vec::new();
            for text in texts {
                match parse_key(text) {
                    Ok(key) => keys.push(key),
                    Err(error) => keymap.warnings.push(format!("{name}: {id}: {error}")),
                }
            }
            if let Some((_, bound)) = keymap.bindings.iter_mut().find(|(a, _)| a == action) {
                *bound = keys;
            }
        }
        // A key bound to two actions does the first one's; say so.
        let mut seen: Vec<(KeyEvent, KeyAction)> = Vec::new();
        for (action, keys) in &keymap.bindings {
            for key in keys {
                let Some(event) = key.event else { continue };
                if let Some((_, first)) = seen.iter().find(|(e, _)| *e == event) {
                    keymap.warnings.push(format!(
                        "{name}: {} is bound to both {} and {}; it does the first",
                        key.text,
                        id_of(*first),
                        id_of(*action)
                    ));
                } else {
                    seen.push((event, *action));
                }
            }
        }
        keymap
    }

    /// The editor's keys and their actions (each key once).
    pub fn events(&self) -> Vec<(KeyEvent, KeyAction)> {
        let mut events: Vec<(KeyEvent, KeyAction)> = Vec::new();
        for (action, keys) in &self.bindings {
            for key in keys {
                if let Some(event) = key.event
                    && !events.iter().any(|(e, _)| *e == event)
                {
                    events.push((event, *action));
                }
            }
        }
        events
    }

    /// The keys of `action` as written, e.g. `ctrl+p`; the ones this terminal cannot send
    /// are marked.
    pub fn keys_text(&self, action: KeyAction) -> String {
        let keys = self
            .bindings
            .iter()
            .find(|(a, _)| *a == action)
            .map(|(_, keys)| keys.as_slice())
            .unwrap_or_default();
        if keys.is_empty() {
            return "(no key)".to_owned();
        }
        keys.iter()
            .map(|key| match key.event {
                Some(_) => key.text.clone(),
                None => format!("{} (not sent by this terminal)", key.text),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `/hotkeys`' lines for the actions: `id  keys  description`.
    pub fn describe(&self) -> Vec<String> {
        ACTIONS
            .iter()
            .map(|(id, action, _, description)| {
                format!("{description}: {} ({id})", self.keys_text(*action))
            })
            .collect()
    }
}

/// The reference's id of an action.
pub fn id_of(action: KeyAction) -> &'static str {
    ACTIONS
        .iter()
        .find(|(_, a, ..)| *a == action)
        .map_or("?", |(id, ..)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_into_what_the_terminal_sends() {
        let event = |text: &str| parse_key(text).unwrap().event;
        assert_eq!(
            event("ctrl+p"),
            Some(KeyEvent(KeyCode::Char('P'), Modifiers::CTRL))
        );
        assert_eq!(
            event("Ctrl+P"),
            Some(KeyEvent(KeyCode::Char('P'), Modifiers::CTRL))
        );
        assert_eq!(
            event("alt+p"),
            Some(KeyEvent(KeyCode::Char('p'), Modifiers::ALT))
        );
        assert_eq!(
            event("alt+shift+p"),
            Some(KeyEvent(KeyCode::Char('P'), Modifiers::ALT))
        );
        assert_eq!(
            event("shift+tab"),
            Some(KeyEvent(KeyCode::BackTab, Modifiers::NONE))
        );
        assert_eq!(event("f5"), Some(KeyEvent(KeyCode::F(5), Modifiers::NONE)));
        assert_eq!(
            event("ctrl+up"),
            Some(KeyEvent(KeyCode::Up, Modifiers::CTRL))
        );
        assert_eq!(
            event("ctrl+]"),
            Some(KeyEvent(KeyCode::Char(']'), Modifiers::CTRL))
        );
        // Keys a classic terminal cannot tell apart.
        for text in ["shift+ctrl+p", "super+k", "ctrl+1", "ctrl+-"] {
            assert_eq!(event(text), None, "{text}");
        }
        // Keys typing needs, and keys that are no keys.
        for text in [
            "a",
            "shift+l",
            "enter",
            "escape",
            "ctrl+m",
            "tab",
            "backspace",
        ] {
            assert!(
                matches!(parse_key(text), Err(KeyError::Reserved(_))),
                "{text}"
            );
        }
        for text in ["hyper+x", "ctrl+nope", "f13", ""] {
            assert!(
                matches!(parse_key(text), Err(KeyError::Syntax(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn the_file_replaces_defaults_disables_with_an_empty_list_and_warns_about_the_rest() {
        let keymap = Keymap::from_json(
            r#"{
                "$schema": "https://pi.dev/schemas/keybindings.schema.json",
                "app.session.new": "ctrl+shift+n",
                "app.session.tree": ["alt+t", "f2"],
                "app.tools.expand": [],
                "app.thinking.toggle": "ctrl+p",
                "app.exit": "ctrl+q",
                "app.model.select": "q",
                "not.an.id": "ctrl+k",
                "tui.altScreen.pageUp": []
            }"#,
            "keybindings.json",
        );
        let events = keymap.events();
        let action = |event: KeyEvent| {
            events
                .iter()
                .find(|(e, _)| *e == event)
                .map(|(_, action)| *action)
        };
        assert_eq!(
            action(KeyEvent(KeyCode::Char('t'), Modifiers::ALT)),
            Some(KeyAction::SessionTree)
        );
        assert_eq!(
            action(KeyEvent(KeyCode::F(2), Modifiers::NONE)),
            Some(KeyAction::SessionTree)
        );
        assert_eq!(action(KeyEvent(KeyCode::Char('O'), Modifiers::CTRL)), None);
        assert_eq!(
            action(KeyEvent(KeyCode::Char('P'), Modifiers::CTRL)),
            Some(KeyAction::ModelCycleForward)
        );
        assert_eq!(
            keymap.keys_text(KeyAction::SessionNew),
            "ctrl+shift+n (not sent by this terminal)"
        );
        assert_eq!(keymap.keys_text(KeyAction::ToolsExpand), "(no key)");
        // The model selector's invalid key leaves it without one (the list replaced the default).
        assert_eq!(keymap.keys_text(KeyAction::ModelSelect), "(no key)");
        let warnings = keymap.warnings.join("\n");
        for expected in [
            "app.exit keeps its key",
            "\"q\" is needed for typing",
            "\"not.an.id\" is no keybinding id",
            "ctrl+p is bound to both app.model.cycleForward and app.thinking.toggle",
        ] {
            assert!(warnings.contains(expected), "{expected}: {warnings}");
        }
        assert!(!warnings.contains("pageUp"), "{warnings}");
        let broken = Keymap::from_json("{", "k.json");
        assert!(
            broken.warnings[0].contains("invalid JSON"),
            "{:?}",
            broken.warnings
        );
        assert_eq!(broken.events(), Keymap::defaults().events());
    }
}
