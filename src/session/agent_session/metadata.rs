//! Entries written on request that are not messages: the session's name (`session_info`,
//! `--name`, `/name`), entry labels (`label`), and extension state (`custom`).
//!
//! Invariant: names keep no line breaks ([`sanitize_session_name`]) and are never empty.

use serde_json::Value;

use crate::model::entry::EntryKind;
use crate::model::ids::EntryId;
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::state::AgentSession;
use crate::session::events::SessionEvent;
use crate::session::persist::blocking;

/// A session name as 1.6.0 stores it: each run of CR/LF becomes a space, then trimmed.
pub fn sanitize_session_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_break = false;
    for ch in name.chars() {
        if ch == '\r' || ch == '\n' {
            if !in_break {
                out.push(' ');
            }
            in_break = true;
        } else {
            out.push(ch);
            in_break = false;
        }
    }
    out.trim().to_owned()
}

impl AgentSession {
    /// Returns the session name.
    pub fn session_name(&self) -> Option<String> {
        self.state().name.clone()
    }

    /// Names the session (appends `session_info`, trimmed; empty names are refused).
    pub async fn set_session_name(&self, name: &str) -> Result<(), SessionError> {
        let name = sanitize_session_name(name);
        let name = name.as_str();
        if name.is_empty() {
            return Err(SessionError::InvalidEntry(
                "Session name cannot be empty".to_owned(),
            ));
        }
        self.persist(EntryKind::SessionInfo {
            name: Some(name.to_owned()),
        })
        .await;
        self.state().name = Some(name.to_owned());
        self.emit(SessionEvent::SessionInfoChanged {
            name: Some(name.to_owned()),
        });
        Ok(())
    }

    /// Sets (or clears, with `None` or an empty label) the label of an entry.
    pub async fn set_label(
        &self,
        target: &EntryId,
        label: Option<&str>,
    ) -> Result<(), SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let target = target.clone();
        let label = label.map(str::to_owned);
        blocking(move || store.append_label(&session, &target, label.as_deref())).await?;
        Ok(())
    }

    /// Appends a `custom` entry (extension state, never in the context).
    pub async fn append_custom(&self, custom_type: &str, data: Option<Value>) {
        self.persist(EntryKind::Custom {
            custom_type: custom_type.to_owned(),
            data,
        })
        .await;
    }
}
