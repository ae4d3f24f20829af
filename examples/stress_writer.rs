//! A child process for the durability tests (`tests/suite/durability.rs`) and the durability
//! benchmark: it writes a session through the library as fast as it can and reports each write
//! on stdout only once the store call has returned, so whatever it printed was acknowledged.
//!
//! Modes (all take `--db PATH`):
//! - `append --session ID [--count N] [--seed S] [--max-payload BYTES] [--mix] [--lease OWNER]`:
//!   appends entries (with `--mix`, also labels, branches, compactions, names, model and
//!   thinking changes) and prints `ok\t<id>\t<payload>` after each append, `leaf\t<id>` after
//!   a branch. Without `--count` it runs until killed. With `--after-full N`, a "disk full"
//!   is reported, the soft file-size limit raised, the failed append retried on the same
//!   store and N more made. With `--linger`, it waits to be killed after `--count` appends.
//! - `hold --session ID --lease OWNER [--append-every-ms N] [--stop-after N]`: takes the lease
//!   and renews it every heartbeat until killed or stdin closes, appending every N ms when
//!   asked, and stopping itself (SIGSTOP, between transactions) after N appends.
//!
//! With `--lease OWNER` the process takes the session's writer lease first (taking it over
//! when the holder is gone or stale) and prints `lease\tacquired` or `lease\ttook-over`; when a
//! live process holds it, it prints `held\t<pid>\t<host>\t<alive>\t<take-over-in-ms>` and exits
//! 4. A failed write prints `error\t<kind>\t<message>` and exits 3; `<kind>` is `lease-lost`,
//! `held`, `disk-full`, `read-only`, `busy`, `damaged` or `other`.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use pi::model::ModelRef;
use pi::model::entry::CompactionEntry;
use pi::model::ids::{EntryId, SessionId};
use pi::model::message::AgentMessage;
use pi::store::{
    Lease, LeaseAttempt, LeaseConfig, SessionStore, StoreConfig, StoreError, StoreLocation,
    StoredEntry,
};
use pi::support::clock::{Clock, SystemClock};
use pi::support::ids::IdSource;
use serde_json::json;

#[derive(Debug, Parser)]
struct Args {
    /// The database file.
    #[arg(long)]
    db: PathBuf,
    /// Busy timeout in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    busy_ms: u64,
    /// Lease heartbeat in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    heartbeat_ms: u64,
    /// Lease staleness in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    stale_ms: u64,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    Append {
        #[arg(long)]
        session: String,
        #[arg(long)]
        count: Option<u64>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 4096)]
        max_payload: usize,
        #[arg(long)]
        mix: bool,
        #[arg(long)]
        lease: Option<String>,
        /// A word put into every message (for searches).
        #[arg(long, default_value = "stress")]
        tag: String,
        /// On the first "disk full", raise this process's soft file-size limit to the hard
        /// one, retry the failed append on the same store, append this many more, and stop.
        #[arg(long)]
        after_full: Option<u64>,
        /// After `--count` appends, print `lingering` and wait to be killed (no clean close,
        /// so the WAL stays as the appends left it).
        #[arg(long)]
        linger: bool,
    },
    Hold {
        #[arg(long)]
        session: String,
        #[arg(long)]
        lease: String,
        #[arg(long)]
        append_every_ms: Option<u64>,
        /// After this many appends, print `stopping` and stop (SIGSTOP) between two
        /// transactions, so that a stopped holder holds no SQLite lock.
        #[arg(long)]
        stop_after: Option<u64>,
    },
}

/// A failure that ends the process with a code, after its line was printed.
struct Exit(u8);

type Outcome = Result<(), Exit>;

fn say(line: &str) -> Outcome {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").map_err(|_| Exit(2))?;
    out.flush().map_err(|_| Exit(2))
}

fn fail(error: &StoreError) -> Exit {
    let kind = match error {
        StoreError::LeaseLost { .. } => "lease-lost",
        StoreError::SessionHeld { .. } => "held",
        StoreError::DiskFull { .. } => "disk-full",
        StoreError::ReadOnly { .. } => "read-only",
        StoreError::Busy { .. } => "busy",
        StoreError::Damaged { .. } => "damaged",
        _ => "other",
    };
    let _ = say(&format!("error\t{kind}\t{error}"));
    Exit(3)
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Exit(code)) => ExitCode::from(code),
    }
}

fn run(args: Args) -> Outcome {
    let seed = match &args.mode {
        Mode::Append { seed, .. } => *seed,
        _ => 1,
    };
    let store = SessionStore::open(StoreConfig {
        location: StoreLocation::File(args.db.clone()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(IdSource::seeded(seed)),
        busy_timeout: Duration::from_millis(args.busy_ms),
    })
    .map_err(|error| fail(&error))?;
    let config = LeaseConfig {
        heartbeat: Duration::from_millis(args.heartbeat_ms),
        stale_after: Duration::from_millis(args.stale_ms),
    };
    match args.mode {
        Mode::Append {
            session,
            count,
            seed,
            max_payload,
            mix,
            lease,
            tag,
            after_full,
            linger,
        } => {
            let session = SessionId::new(session);
            let lease = match lease {
                Some(owner) => Some(take_lease(&store, &session, &owner, config)?),
                None => None,
            };
            let mut writer = Writer {
                store: &store,
                session: &session,
                rng: IdSource::seeded(seed ^ 0x5eed),
                ids: Vec::new(),
                max_payload,
                tag,
                n: 0,
            };
            let mut last_beat = Instant::now();
            let mut stop_at = count;
            while stop_at.is_none_or(|stop_at| writer.n < stop_at) {
                let step = if mix {
                    writer.mixed_step()
                } else {
                    writer.message()
                };
                match step {
                    Ok(()) => {}
                    Err(Failure::Store(error @ StoreError::DiskFull { .. }))
                        if after_full.is_some() && stop_at == count =>
                    {
                        // The REPL's case: keep the unsaved entry, get room, retry it.
                        let _ = fail(&error);
                        raise_file_size_limit()?;
                        stop_at = Some(writer.n + 1 + after_full.unwrap_or(0));
                    }
                    Err(Failure::Store(error)) => return Err(fail(&error)),
                    Err(Failure::Exit(exit)) => return Err(exit),
                }
                if let Some(lease) = &lease
                    && last_beat.elapsed() >= config.heartbeat
                {
                    store.heartbeat(lease).map_err(|error| fail(&error))?;
                    last_beat = Instant::now();
                }
            }
            if linger {
                say("lingering")?;
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            if let Some(lease) = &lease {
                store.release_lease(lease).map_err(|error| fail(&error))?;
            }
            say("done")
        }
        Mode::Hold {
            session,
            lease,
            append_every_ms,
            stop_after,
        } => {
            let session = SessionId::new(session);
            let lease = take_lease(&store, &session, &lease, config)?;
            hold(&store, &lease, config, append_every_ms, stop_after)
        }
    }
}

fn take_lease(
    store: &SessionStore,
    session: &SessionId,
    owner: &str,
    config: LeaseConfig,
) -> Result<Lease, Exit> {
    match store
        .acquire_lease(session, owner, config)
        .map_err(|error| fail(&error))?
    {
        LeaseAttempt::Acquired(lease) => {
            say("lease\tacquired")?;
            Ok(lease)
        }
        LeaseAttempt::Held(holder) if holder.can_take_over_now() => {
            match store
                .take_over_lease(session, owner, config)
                .map_err(|error| fail(&error))?
            {
                LeaseAttempt::Acquired(lease) => {
                    say("lease\ttook-over")?;
                    Ok(lease)
                }
                LeaseAttempt::Held(holder) => Err(held(&holder)),
            }
        }
        LeaseAttempt::Held(holder) => Err(held(&holder)),
    }
}

fn held(holder: &pi::store::LeaseHolder) -> Exit {
    let alive = match holder.owner_alive_on_this_host {
        Some(true) => "alive",
        Some(false) => "gone",
        None => "unknown",
    };
    let _ = say(&format!(
        "held\t{}\t{}\t{alive}\t{}",
        holder.pid,
        holder.host,
        holder.take_over_in().as_millis()
    ));
    Exit(4)
}

/// Renews the lease until stdin closes (the parent ends the hold that way) or the process is
/// killed; appends every `append_every_ms` when asked, and stops itself after `stop_after`
/// appends.
fn hold(
    store: &SessionStore,
    lease: &Lease,
    config: LeaseConfig,
    append_every_ms: Option<u64>,
    stop_after: Option<u64>,
) -> Outcome {
    let (closed_tx, closed_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            if line.is_err() {
                break;
            }
        }
        let _ = closed_tx.send(());
    });
    let tick = append_every_ms.map_or(config.heartbeat, Duration::from_millis);
    let mut writer = Writer {
        store,
        session: lease.session(),
        rng: IdSource::seeded(99),
        ids: Vec::new(),
        max_payload: 200,
        tag: "hold".to_owned(),
        n: 0,
    };
    let mut last_beat = Instant::now();
    loop {
        match closed_rx.recv_timeout(tick) {
            Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if append_every_ms.is_some() {
            match writer.message() {
                Ok(()) => {}
                Err(Failure::Store(error)) => return Err(fail(&error)),
                Err(Failure::Exit(exit)) => return Err(exit),
            }
        }
        if stop_after == Some(writer.n) {
            say("stopping")?;
            nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP).map_err(|_| Exit(2))?;
        }
        if last_beat.elapsed() >= config.heartbeat {
            store.heartbeat(lease).map_err(|error| fail(&error))?;
            last_beat = Instant::now();
        }
    }
    store.release_lease(lease).map_err(|error| fail(&error))?;
    say("released")
}

/// Raises the soft file-size limit to the hard limit.
fn raise_file_size_limit() -> Outcome {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_FSIZE).map_err(|_| Exit(2))?;
    setrlimit(Resource::RLIMIT_FSIZE, hard, hard).map_err(|_| Exit(2))
}

/// Why a write step ended: a store error the caller may handle, or an exit already reported.
enum Failure {
    Store(StoreError),
    Exit(Exit),
}

impl From<Exit> for Failure {
    fn from(exit: Exit) -> Self {
        Self::Exit(exit)
    }
}

type Step = Result<(), Failure>;

struct Writer<'a> {
    store: &'a SessionStore,
    session: &'a SessionId,
    rng: IdSource,
    ids: Vec<EntryId>,
    max_payload: usize,
    tag: String,
    n: u64,
}

const WORDS: &[&str] = &[
    "alpha", "branch", "commit", "durable", "entry", "fsync", "journal", "kill", "lease", "merge",
    "page", "query", "replay", "sqlite", "tree", "write",
];

impl Writer<'_> {
    fn below(&self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.rng.next_u64() % n }
    }

    fn text(&self) -> String {
        // Mostly small, now and then large enough to spill into overflow pages.
        let size = if self.below(16) == 0 {
            self.max_payload
        } else {
            usize::try_from(self.below(self.max_payload as u64 / 8 + 1)).unwrap_or(0)
        };
        let mut text = format!("{} n{} ", self.tag, self.n);
        while text.len() < size {
            text.push_str(WORDS[usize::try_from(self.below(WORDS.len() as u64)).unwrap_or(0)]);
            text.push(' ');
        }
        text
    }

    fn report(&mut self, stored: StoredEntry) -> Step {
        let id = stored
            .entry
            .id
            .clone()
            .map(|id| id.to_string())
            .unwrap_or_default();
        let payload = String::from_utf8_lossy(&stored.payload).into_owned();
        if let Some(id) = stored.entry.id {
            self.ids.push(id);
        }
        self.n += 1;
        Ok(say(&format!("ok\t{id}\t{payload}"))?)
    }

    fn message(&mut self) -> Step {
        let now = SystemClock.now_ms();
        let message = if self.n.is_multiple_of(2) {
            json!({"role": "user", "content": self.text(), "timestamp": now})
        } else {
            json!({
                "role": "assistant",
                "content": [{"type": "text", "text": self.text()}],
                "api": "openai-completions",
                "provider": "stress",
                "model": "m1",
                "usage": {"input": 2, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
                          "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.001}},
                "stopReason": "stop",
                "timestamp": now
            })
        };
        let stored = self
            .store
            .append_message(self.session, AgentMessage::from_value(message))
            .map_err(Failure::Store)?;
        self.report(stored)
    }

    fn earlier_id(&self) -> Option<EntryId> {
        if self.ids.is_empty() {
            return None;
        }
        let idx = usize::try_from(self.below(self.ids.len() as u64)).unwrap_or(0);
        self.ids.get(idx).cloned()
    }

    fn mixed_step(&mut self) -> Step {
        let store = self.store;
        let session = self.session;
        let roll = self.below(100);
        let result = match roll {
            0..=69 => return self.message(),
            70..=77 => match self.earlier_id() {
                Some(target) => {
                    let label = (self.below(4) != 0).then(|| format!("mark{}", self.n));
                    store.append_label(session, &target, label.as_deref())
                }
                None => return self.message(),
            },
            78..=82 => match self.earlier_id() {
                Some(target) => {
                    store.branch(session, &target).map_err(Failure::Store)?;
                    return Ok(say(&format!("leaf\t{target}"))?);
                }
                None => return self.message(),
            },
            83..=87 => store.append_compaction(
                session,
                CompactionEntry {
                    summary: format!("summary {}", self.text()),
                    first_kept_entry_id: self.earlier_id(),
                    tokens_before: self.below(100_000),
                    details: None,
                    from_hook: None,
                    usage: None,
                    system_message: None,
                },
            ),
            88..=89 => store.append_session_info(session, &format!("stress {}", self.n)),
            90..=94 => store.append_thinking_level(
                session,
                ["off", "low", "medium", "high"][usize::try_from(self.below(4)).unwrap_or(0)],
            ),
            _ => store.append_model_change(
                session,
                ModelRef {
                    provider: "stress".to_owned(),
                    model_id: format!("m{}", self.below(3)),
                },
            ),
        };
        let stored = result.map_err(Failure::Store)?;
        self.report(stored)
    }
}
