//! The event fan-out: every [`SessionEvent`] goes to every subscriber, in order, through
//! unbounded channels (never lossy); events emitted while the session opens are kept for the
//! first subscriber, who can only subscribe once `open` has returned. Notices are events too.
//!
//! Invariant: a subscriber that went away is dropped at the next event; no other error.

use tokio::sync::mpsc;

use crate::session::agent_session::state::{AgentSession, lock};
use crate::session::events::{NoticeLevel, SessionEvent};

impl AgentSession {
    /// Subscribes to the session's events (every event, in order; never lossy).
    ///
    /// The first subscriber also receives the events emitted while the session opened (such
    /// as an extension that could not start).
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<SessionEvent> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let backlog = std::mem::take(&mut lock(&self.inner.backlog).events);
        for event in backlog {
            // The receiver is still in hand.
            let _ = sender.send(event);
        }
        lock(&self.inner.subscribers).push(sender);
        receiver
    }

    /// Sends an event to every subscriber (and to the backlog while the session opens).
    pub(crate) fn emit(&self, event: SessionEvent) {
        {
            let mut backlog = lock(&self.inner.backlog);
            if backlog.collecting {
                backlog.events.push(event.clone());
            }
        }
        let mut subscribers = lock(&self.inner.subscribers);
        subscribers.retain(|subscriber| subscriber.send(event.clone()).is_ok());
    }

    /// Emits a notice.
    pub(super) fn notice(&self, level: NoticeLevel, message: String) {
        self.emit(SessionEvent::Notice { level, message });
    }

    /// Emits an error notice.
    pub(super) fn notice_error(&self, message: String) {
        self.notice(NoticeLevel::Error, message);
    }
}
