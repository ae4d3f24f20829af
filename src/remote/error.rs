//! `RemoteError`: what can go wrong talking to an archive, each with what to do.

use crate::store::StoreError;

/// An error of the remote archive or of a sync.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The URL cannot be used.
    #[error("remote URL: {0}")]
    BadUrl(String),
    /// The server could not be reached or the connection broke.
    #[error("remote {remote}: {message}")]
    Connection {
        /// The remote's name.
        remote: String,
        /// What happened (the driver's words).
        message: String,
    },
    /// A statement failed on the server.
    #[error("remote {remote}: {message}")]
    Server {
        /// The remote's name.
        remote: String,
        /// The server's message.
        message: String,
    },
    /// The archive was made by a newer pi: nothing was written to it.
    #[error(
        "remote {remote}: its archive schema is version {found}, newer than this pi's {known}; upgrade pi (nothing was written to the remote)"
    )]
    NewerSchema {
        /// The remote's name.
        remote: String,
        /// The version recorded in the remote.
        found: i64,
        /// The newest version this binary knows.
        known: i64,
    },
    /// TLS set-up failed (a root certificate file, the crypto provider).
    #[error("remote TLS: {0}")]
    Tls(String),
    /// The local store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A blocking store task did not finish.
    #[error("sync: a store task failed: {0}")]
    Task(String),
}

impl RemoteError {
    /// Wraps a driver error: a broken or refused connection, or a server error with its message.
    pub(crate) fn from_pg(remote: &str, error: &tokio_postgres::Error) -> Self {
        if let Some(db) = error.as_db_error() {
            return Self::Server {
                remote: remote.to_owned(),
                message: format!("{} ({})", db.message(), db.code().code()),
            };
        }
        let mut message = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            source = cause.source();
        }
        Self::Connection {
            remote: remote.to_owned(),
            message,
        }
    }

    /// Whether this is a lost or refused connection (a retry may succeed).
    pub fn is_connection(&self) -> bool {
        matches!(self, Self::Connection { .. })
            || matches!(self, Self::Server { message, .. } if message.contains("(57P01)") || message.contains("(57P02)") || message.contains("(57P03)"))
    }
}
