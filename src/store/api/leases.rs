//! Writer leases: acquire, renew, release, take over, and the heartbeat that renews a lease
//! (the rules are `store/lease.rs`'s).

use std::sync::Arc;
use std::time::Duration;

use crate::model::ids::SessionId;
use crate::support::clock::Clock;

use crate::store::error::LeaseHolder;
use crate::store::lease::*;
use crate::store::sql::LeaseRow;
use crate::store::sql::{self};
use crate::store::{Result, SessionStore, StoreError};
use crate::support::clock::SystemClock;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

impl SessionStore {
    /// Takes the session's writer lease if nobody holds it (asked again by the store that
    /// holds it, returns the same lease with a fresh heartbeat).
    ///
    /// Returns [`LeaseAttempt::Held`] when another lease exists, even a stale one or one whose
    /// process is gone: the caller decides (its [`LeaseHolder::can_take_over_now`] says
    /// whether [`Self::take_over_lease`] would succeed; a REPL may do that without asking
    /// when the holder is gone).
    pub fn acquire_lease(
        &self,
        session: &SessionId,
        owner: &str,
        config: LeaseConfig,
    ) -> Result<LeaseAttempt> {
        self.lease_transaction(session, owner, config, |_| false)
    }

    /// Takes the session's writer lease over from a holder that is gone on this host or
    /// whose heartbeat is stale; takes it if nobody holds it. Returns
    /// [`LeaseAttempt::Held`] (and changes nothing) while the holder is alive and fresh.
    pub fn take_over_lease(
        &self,
        session: &SessionId,
        owner: &str,
        config: LeaseConfig,
    ) -> Result<LeaseAttempt> {
        self.lease_transaction(session, owner, config, LeaseHolder::can_take_over_now)
    }

    fn lease_transaction(
        &self,
        session: &SessionId,
        owner: &str,
        config: LeaseConfig,
        may_replace: impl FnOnce(&LeaseHolder) -> bool,
    ) -> Result<LeaseAttempt> {
        let me = this_process();
        let mine = registry(&self.inner.leases).get(session.as_str()).cloned();
        let attempt = self.write(|db| {
            let sid = Self::sid(db, session)?;
            let row = sql::lease(db, sid)?;
            // Asked again by the store that holds it: the same lease, renewed.
            let kept = mine.filter(|token| row.as_ref().is_some_and(|row| &row.token == token));
            if kept.is_none()
                && let Some(row) = &row
            {
                let holder = holder_now(row);
                if !may_replace(&holder) {
                    return Ok(LeaseAttempt::Held(holder));
                }
            }
            let now = SystemClock.now_ms();
            let token =
                kept.unwrap_or_else(|| format!("{}:{}", me.pid, uuid::Uuid::new_v4().simple()));
            sql::put_lease(
                db,
                sid,
                &LeaseRow {
                    token: token.clone(),
                    owner: owner.to_owned(),
                    pid: i64::from(me.pid),
                    pid_start: me.start,
                    host: me.host.clone(),
                    acquired_at: now,
                    heartbeat_at: now,
                    stale_ms: millis(config.stale_after),
                },
            )?;
            Ok(LeaseAttempt::Acquired(Lease {
                session: session.clone(),
                token,
                config,
            }))
        })?;
        if let LeaseAttempt::Acquired(lease) = &attempt {
            registry(&self.inner.leases).insert(lease.session.to_string(), lease.token.clone());
        }
        Ok(attempt)
    }

    /// Renews the lease's heartbeat; fails with [`StoreError::LeaseLost`] when another
    /// process has taken it over.
    pub fn heartbeat(&self, lease: &Lease) -> Result<()> {
        self.write(|db| {
            let sid = Self::sid(db, &lease.session)?;
            if sql::renew_lease(db, sid, &lease.token, SystemClock.now_ms())? {
                return Ok(());
            }
            Err(StoreError::LeaseLost {
                path: db.path().to_owned(),
                session: lease.session.clone(),
                holder: sql::lease(db, sid)?
                    .as_ref()
                    .map(|row| Box::new(holder_now(row))),
            })
        })
    }

    /// Gives the lease up (a clean exit); nothing happens if it was taken over meanwhile.
    pub fn release_lease(&self, lease: &Lease) -> Result<()> {
        let result = self.write(|db| {
            match sql::sid_of(db, lease.session.as_str())? {
                Some(sid) => sql::delete_lease(db, sid, &lease.token).map(|_| ()),
                // The session was deleted meanwhile: nothing to release.
                None => Ok(()),
            }
        });
        let mut held = registry(&self.inner.leases);
        if held.get(lease.session.as_str()) == Some(&lease.token) {
            held.remove(lease.session.as_str());
        }
        result
    }

    /// Returns who holds the session's lease, if anyone (a read; takes nothing).
    pub fn lease_holder(&self, session: &SessionId) -> Result<Option<LeaseHolder>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            Ok(sql::lease(db, sid)?.as_ref().map(holder_now))
        })
    }
}

/// What a running heartbeat last saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatStatus {
    /// The lease is held; renewed at this time (Unix ms; the acquisition time before the
    /// first renewal).
    Held {
        /// The last renewal.
        renewed_at_ms: i64,
    },
    /// The last renewal failed (busy, disk full, …) but the lease was not taken over; the
    /// heartbeat keeps trying.
    Failing {
        /// The error message.
        message: String,
    },
    /// Another process took the lease over; the heartbeat has stopped.
    Lost {
        /// The error message.
        message: String,
    },
}

/// A heartbeat task renewing one lease on the tokio runtime.
#[derive(Debug)]
pub struct Heartbeat {
    status: watch::Receiver<HeartbeatStatus>,
    stop: Arc<Notify>,
    task: JoinHandle<()>,
}

/// Starts renewing `lease` every `lease.config().heartbeat`, each renewal one
/// `spawn_blocking` call. Must be called from within a tokio runtime.
pub fn spawn_heartbeat(store: SessionStore, lease: Lease) -> Heartbeat {
    let (sender, status) = watch::channel(HeartbeatStatus::Held {
        renewed_at_ms: SystemClock.now_ms(),
    });
    let stop = Arc::new(Notify::new());
    let stop_signal = Arc::clone(&stop);
    let period = lease.config.heartbeat.max(Duration::from_millis(1));
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop_signal.notified() => break,
                _ = ticks.tick() => {}
            }
            let renew_store = store.clone();
            let renew_lease = lease.clone();
            let result =
                tokio::task::spawn_blocking(move || renew_store.heartbeat(&renew_lease)).await;
            let next = match result {
                Ok(Ok(())) => HeartbeatStatus::Held {
                    renewed_at_ms: SystemClock.now_ms(),
                },
                Ok(Err(error @ StoreError::LeaseLost { .. })) => {
                    let _ = sender.send(HeartbeatStatus::Lost {
                        message: error.to_string(),
                    });
                    break;
                }
                Ok(Err(error)) => HeartbeatStatus::Failing {
                    message: error.to_string(),
                },
                Err(join) => HeartbeatStatus::Failing {
                    message: format!("heartbeat task failed: {join}"),
                },
            };
            let _ = sender.send(next);
        }
    });
    Heartbeat { status, stop, task }
}

impl Heartbeat {
    /// Returns what the heartbeat last saw.
    pub fn status(&self) -> HeartbeatStatus {
        self.status.borrow().clone()
    }

    /// Waits until the lease is lost and returns the message (pending forever while it is
    /// held; stop the heartbeat to end it).
    pub async fn lost(&mut self) -> String {
        loop {
            if let HeartbeatStatus::Lost { message } = &*self.status.borrow_and_update() {
                return message.clone();
            }
            if self.status.changed().await.is_err() {
                // The task ended without a loss (stopped): never resolve.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Stops renewing and waits for the task to end (a renewal in flight completes first).
    pub async fn stop(self) {
        self.stop.notify_one();
        let _ = self.task.await;
    }
}
