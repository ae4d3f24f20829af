//! Writer leases: one process writes a session at a time (`session_leases`, migration 0003).
//!
//! A process that writes a session for a while (the REPL, an agent run) takes the session's
//! lease with [`SessionStore::acquire_lease`] and renews it with a heartbeat
//! ([`spawn_heartbeat`] runs one on tokio). A second process gets
//! [`LeaseAttempt::Held`] with who holds it, and chooses: open read-only, fork into a new
//! session, or [`SessionStore::take_over_lease`], which succeeds at once when the holder's pid
//! is gone on this host and otherwise once its heartbeat is older than the holder's own
//! `stale_after` (stored in the row, so processes with different settings agree).
//!
//! Every write to an existing session checks the lease inside its `BEGIN IMMEDIATE`
//! transaction ([`guard_write`]):
//! - a store that holds the session's lease writes only while the row still carries its
//!   token; once another process took over, the write fails with [`StoreError::LeaseLost`];
//! - a store that holds no lease (the one-shot commands `sessions rename`, `sessions rm`)
//!   writes when nobody holds the session or the holder is gone or stale, and otherwise fails
//!   with [`StoreError::SessionHeld`] (exit 1 in the CLI). So a one-shot command never
//!   interleaves with a live writer, and never needs a lease row of its own: its single
//!   transaction is its whole write.
//!
//! Readers take no lease and never look at it.
//!
//! Time: leases coordinate real processes, so they are judged by the wall clock
//! ([`SystemClock`]), never by the store's entry clock (a test clock steps from the same start
//! in every process). Pid liveness reads `/proc/<pid>/stat` (a zombie or a different start
//! time means gone; the start time tells a reused pid apart) and falls back to `kill(pid, 0)`.
//!
//! Invariants: a lease row is written only inside a write transaction that first read it;
//! `take_over_lease` never replaces a lease whose holder is alive and fresh; nothing here
//! blocks a reader.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::model::ids::SessionId;
use crate::store::db::Db;
use crate::store::error::LeaseHolder;
use crate::store::sql::{self, LeaseRow};
use crate::store::{Result, StoreError};
use crate::support::clock::{Clock, SystemClock};

/// How often a lease holder renews its heartbeat, and how old a heartbeat may get before
/// another process may take the lease over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The heartbeat interval (default 10 s).
    pub heartbeat: Duration,
    /// The age after which a heartbeat is stale (default 30 s); stored in the lease row.
    pub stale_after: Duration,
}

impl LeaseConfig {
    /// The default heartbeat interval.
    pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
    /// The default staleness.
    pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(30);
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            heartbeat: Self::DEFAULT_HEARTBEAT,
            stale_after: Self::DEFAULT_STALE_AFTER,
        }
    }
}

/// A lease this process holds on a session. Cloning it does not take another lease.
///
/// Dropping it does not release it (that would need the database on the drop path): call
/// [`SessionStore::release_lease`] at a clean exit. A lease that is never released is taken
/// over like a crashed holder's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub(crate) session: SessionId,
    pub(crate) token: String,
    pub(crate) config: LeaseConfig,
}

impl Lease {
    /// Returns the session this lease is for.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// Returns the intervals this lease was taken with.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }
}

/// The answer to a request for a session's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseAttempt {
    /// This process holds the lease now.
    Acquired(Lease),
    /// Another process holds it; nothing was changed.
    Held(LeaseHolder),
}

/// This process as a lease row records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessIdentity {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/self/stat` field 22), when readable.
    pub start: Option<i64>,
    /// Host name.
    pub host: String,
}

/// Returns this process's identity (read once).
pub fn this_process() -> &'static ProcessIdentity {
    static IDENTITY: OnceLock<ProcessIdentity> = OnceLock::new();
    IDENTITY.get_or_init(|| {
        let pid = std::process::id();
        ProcessIdentity {
            pid,
            start: proc_stat(pid).and_then(|stat| stat.start),
            host: nix::unistd::gethostname()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "localhost".to_owned()),
        }
    })
}

/// The fields of `/proc/<pid>/stat` that liveness needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProcStat {
    /// The state letter (`R`, `S`, `Z`, …).
    state: char,
    /// The start time in clock ticks since boot.
    start: Option<i64>,
}

/// Parses `/proc/<pid>/stat`: `pid (comm) state … starttime(22) …` (comm may hold spaces and
/// parentheses, so fields are counted after the last `)`).
fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 3 is the state; field 22 is 19 fields after it.
    let start = fields.nth(18).and_then(|value| value.parse().ok());
    Some(ProcStat { state, start })
}

fn proc_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_proc_stat(&text)
}

/// Returns whether the process `pid` (started at `start`, when known) still runs on this host.
pub fn process_alive(pid: u32, start: Option<i64>) -> bool {
    if std::path::Path::new("/proc/self/stat").exists() {
        return match proc_stat(pid) {
            None => false,
            Some(stat) => {
                !matches!(stat.state, 'Z' | 'X' | 'x')
                    && match (start, stat.start) {
                        (Some(recorded), Some(now)) => recorded == now,
                        _ => true,
                    }
            }
        };
    }
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) | Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    }
}

/// Judges a lease row as seen from `here` at `now_ms`, with `alive` telling whether a pid on
/// this host still runs. Pure apart from `alive`.
pub fn assess(
    row: &LeaseRow,
    now_ms: i64,
    here: &str,
    alive: impl FnOnce(u32, Option<i64>) -> bool,
) -> LeaseHolder {
    let pid = u32::try_from(row.pid).unwrap_or(0);
    let owner_alive_on_this_host = (row.host == here).then(|| alive(pid, row.pid_start));
    LeaseHolder {
        owner: row.owner.clone(),
        pid,
        host: row.host.clone(),
        acquired_at_ms: row.acquired_at,
        // A heartbeat from the future (clock skew between hosts) counts as fresh.
        heartbeat_age: Duration::from_millis(
            u64::try_from(now_ms.saturating_sub(row.heartbeat_at)).unwrap_or(0),
        ),
        stale_after: Duration::from_millis(u64::try_from(row.stale_ms).unwrap_or(0)),
        owner_alive_on_this_host,
    }
}

pub(crate) fn holder_now(row: &LeaseRow) -> LeaseHolder {
    assess(
        row,
        SystemClock.now_ms(),
        &this_process().host,
        process_alive,
    )
}

/// The leases a store holds: session id → token.
pub(crate) type LeaseRegistry = Mutex<HashMap<String, String>>;

pub(crate) fn registry(leases: &LeaseRegistry) -> MutexGuard<'_, HashMap<String, String>> {
    // The map is updated by single inserts and removes, so a panic elsewhere cannot leave it
    // half-changed.
    match leases.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Checks, inside a write transaction on session `sid`, that this store may write it (see the
/// module docs): its own lease still holds, or nobody else's live lease does.
pub(crate) fn guard_write(
    db: Db<'_>,
    sid: i64,
    session: &SessionId,
    leases: &LeaseRegistry,
) -> Result<()> {
    let mine = registry(leases).get(session.as_str()).cloned();
    let row = sql::lease(db, sid)?;
    match (mine, row) {
        (Some(token), Some(row)) if row.token == token => Ok(()),
        (Some(_), row) => Err(StoreError::LeaseLost {
            path: db.path().to_owned(),
            session: session.clone(),
            holder: row.as_ref().map(|row| Box::new(holder_now(row))),
        }),
        (None, None) => Ok(()),
        (None, Some(row)) => {
            let holder = holder_now(&row);
            if holder.can_take_over_now() {
                Ok(())
            } else {
                Err(StoreError::SessionHeld {
                    path: db.path().to_owned(),
                    session: session.clone(),
                    holder: Box::new(holder),
                })
            }
        }
    }
}

pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(host: &str, heartbeat_at: i64, stale_ms: i64) -> LeaseRow {
        LeaseRow {
            token: "t".into(),
            owner: "pi (interactive)".into(),
            pid: 4242,
            pid_start: Some(99),
            host: host.into(),
            acquired_at: 0,
            heartbeat_at,
            stale_ms,
        }
    }

    #[test]
    fn a_fresh_lease_of_a_live_process_cannot_be_taken_over() {
        let holder = assess(&row("h", 10_000, 30_000), 12_000, "h", |_, _| true);
        assert_eq!(holder.owner_alive_on_this_host, Some(true));
        assert_eq!(holder.heartbeat_age, Duration::from_secs(2));
        assert!(!holder.is_stale());
        assert!(!holder.can_take_over_now());
        assert_eq!(holder.take_over_in(), Duration::from_secs(28));
    }

    #[test]
    fn a_lease_whose_process_is_gone_on_this_host_can_be_taken_over_at_once() {
        let mut seen = None;
        let holder = assess(&row("h", 10_000, 30_000), 10_001, "h", |pid, start| {
            seen = Some((pid, start));
            false
        });
        assert_eq!(seen, Some((4242, Some(99))));
        assert_eq!(holder.owner_alive_on_this_host, Some(false));
        assert!(holder.can_take_over_now());
        assert_eq!(holder.take_over_in(), Duration::ZERO);
    }

    #[test]
    fn a_lease_on_another_host_is_judged_by_its_heartbeat_alone() {
        let fresh = assess(&row("other", 10_000, 30_000), 39_999, "h", |_, _| {
            panic!("liveness is not asked for another host")
        });
        assert_eq!(fresh.owner_alive_on_this_host, None);
        assert!(!fresh.can_take_over_now());
        assert_eq!(fresh.take_over_in(), Duration::from_millis(1));
        let stale = assess(&row("other", 10_000, 30_000), 40_000, "h", |_, _| true);
        assert!(stale.is_stale() && stale.can_take_over_now());
    }

    #[test]
    fn staleness_follows_the_holders_own_setting_and_tolerates_skew() {
        let short = assess(&row("h", 10_000, 200), 10_250, "h", |_, _| true);
        assert!(short.can_take_over_now());
        let future = assess(&row("h", 50_000, 200), 10_000, "h", |_, _| true);
        assert_eq!(future.heartbeat_age, Duration::ZERO);
        assert!(!future.can_take_over_now());
    }

    #[test]
    fn proc_stat_fields_are_counted_after_the_command_name() {
        let text = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(
            parse_proc_stat(text),
            Some(ProcStat {
                state: 'S',
                start: Some(987_654)
            })
        );
        assert_eq!(parse_proc_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_means_gone() {
        let me = this_process();
        assert!(process_alive(me.pid, me.start));
        if let Some(start) = me.start {
            assert!(!process_alive(me.pid, Some(start + 1)));
        }
        // Pid numbers above the kernel's limit (at most 2^22) never run.
        assert!(!process_alive(4_194_305, None));
    }

    #[test]
    fn the_holder_reads_as_one_line() {
        let holder = assess(&row("h", 10_000, 30_000), 13_500, "h", |_, _| false);
        assert_eq!(
            holder.to_string(),
            "pi (interactive), pid 4242 on h, last heartbeat 3 s ago, process gone"
        );
    }
}
