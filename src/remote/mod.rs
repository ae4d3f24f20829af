//! The team archive on PostgreSQL (docs/SYNC.md): `pi sync` pushes this machine's sessions
//! into a shared database and pulls everyone else's into the local store; `sessions
//! search|list|stats --remote` run on the server.
//!
//! Layers: `conninfo` (a `postgres://` URL, `sslmode`, `.pgpass`: pure), `tls` (rustls for
//! `sslmode=require|verify-full`), `schema` (the archive's numbered migrations, applied and
//! recorded in the remote; a remote from a newer pi is refused untouched), `archive` (every
//! statement on the remote), `text` (what an entry contributes to the remote's full-text
//! index, and the query language rendered as a `tsquery`), `sync` (push and pull between a
//! [`SessionStore`](crate::store::SessionStore) and an archive).
//!
//! Invariants: imports `store`, `jsonl`, `model` and `support` only (the layering test);
//! reads no environment variable and no file of the user's (the caller hands it a
//! [`conninfo::Target`] with the password resolved); writes nothing to the terminal; never
//! updates or deletes an entry of the remote.

pub mod archive;
pub mod conninfo;
mod error;
pub mod schema;
pub mod sync;
pub mod text;
mod tls;

pub use archive::Archive;
pub use conninfo::Target;
pub use error::RemoteError;

/// Result alias of this module.
pub type Result<T> = std::result::Result<T, RemoteError>;
