//! Identifier newtypes: entry ids, session ids and tool-call ids.
//!
//! Readers accept any string (reference files may hold anything); ids this project creates are
//! 8 lowercase hex characters for entries and UUIDv7 for sessions. Order never comes from
//! comparing ids — it comes from the append sequence.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::support::ids::IdSource;

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps a string read from a file, a user or the database.
            pub fn new(value: impl Into<String>) -> Self {
                Self(value.into())
            }

            /// Returns the id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Returns the owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self(value.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                Self(value)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

id_type!(
    /// The id of an entry, unique within its session for entries this project writes.
    EntryId
);
id_type!(
    /// The id of a session (the header `id`).
    SessionId
);
id_type!(
    /// The id of a tool call inside an assistant message.
    ToolCallId
);

impl EntryId {
    /// Draws a new entry id that `taken` does not already hold, as the reference does:
    /// 8 hex characters, re-drawn up to 100 times, then a full UUID.
    pub fn generate(ids: &IdSource, mut taken: impl FnMut(&str) -> bool) -> Self {
        for _ in 0..100 {
            let candidate = ids.hex8();
            if !taken(&candidate) {
                return Self(candidate);
            }
        }
        Self(ids.uuid_v4())
    }
}

impl SessionId {
    /// Draws a new UUIDv7 session id for the given creation time.
    pub fn generate(ids: &IdSource, unix_ms: i64) -> Self {
        Self(ids.uuid_v7(unix_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_entry_ids_avoid_taken_ones() {
        let ids = IdSource::seeded(7);
        let first = IdSource::seeded(7).hex8();
        let id = EntryId::generate(&ids, |candidate| candidate == first);
        assert_ne!(id.as_str(), first);
        assert_eq!(id.as_str().len(), 8);
        let fallback = EntryId::generate(&ids, |_| true);
        assert_eq!(fallback.as_str().len(), 36);
    }
}
