//! The clock every layer reads time from: the system clock, or a stepping clock for tests.
//!
//! Nothing below `cli/` calls `SystemTime::now()` directly; a [`Clock`] is built at startup
//! and handed down, so tests can fix time (`PI_TEST_CLOCK`) and get strictly increasing,
//! reproducible timestamps.

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, SecondsFormat, Utc};

/// Returns the current time in Unix milliseconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Returns the current time as Unix milliseconds.
    fn now_ms(&self) -> i64;

    /// Returns the current time as an ISO-8601 UTC string with milliseconds.
    fn now_iso(&self) -> String {
        iso_from_ms(self.now_ms())
    }
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        Utc::now().timestamp_millis()
    }
}

/// A clock that starts at a fixed instant and steps forward on every read.
///
/// Each read returns a later time than the one before, which keeps entry timestamps strictly
/// increasing (tree ordering and the compaction guards rely on that).
#[derive(Debug)]
pub struct SteppingClock {
    next: AtomicI64,
    step_ms: i64,
}

impl SteppingClock {
    /// Returns a clock whose first read is `start_ms` and that advances `step_ms` per read.
    pub fn new(start_ms: i64, step_ms: i64) -> Self {
        Self {
            next: AtomicI64::new(start_ms),
            step_ms,
        }
    }
}

impl Clock for SteppingClock {
    fn now_ms(&self) -> i64 {
        self.next.fetch_add(self.step_ms, Ordering::SeqCst)
    }
}

/// Formats Unix milliseconds as the reference does (`Date.prototype.toISOString`).
pub fn iso_from_ms(ms: i64) -> String {
    match DateTime::<Utc>::from_timestamp_millis(ms) {
        Some(time) => time.to_rfc3339_opts(SecondsFormat::Millis, true),
        None => "1970-01-01T00:00:00.000Z".to_owned(),
    }
}

/// Parses an ISO-8601 timestamp to Unix milliseconds, as `Date.parse` does for the forms the
/// reference writes (`2026-05-07T09:15:02.481Z`, with or without fraction, or with an offset).
pub fn ms_from_iso(text: &str) -> Option<i64> {
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Some(time.timestamp_millis());
    }
    // `Date.parse` also accepts a date-time without a zone designator (as UTC for the
    // date-only form) and a bare date.
    if let Ok(naive) = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f") {
        return Some(naive.and_utc().timestamp_millis());
    }
    if let Ok(date) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return date
            .and_hms_opt(0, 0, 0)
            .map(|naive| naive.and_utc().timestamp_millis());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_round_trips_with_milliseconds() {
        let ms = ms_from_iso("2026-05-07T09:15:02.481Z").unwrap();
        assert_eq!(iso_from_ms(ms), "2026-05-07T09:15:02.481Z");
        assert_eq!(ms_from_iso("2026-05-07T09:15:02Z"), Some(ms - 481));
        assert_eq!(ms_from_iso("not a date"), None);
    }

    #[test]
    fn stepping_clock_is_strictly_increasing() {
        let clock = SteppingClock::new(1000, 7);
        assert_eq!(clock.now_ms(), 1000);
        assert_eq!(clock.now_ms(), 1007);
        assert_eq!(clock.now_iso(), "1970-01-01T00:00:01.014Z");
    }
}
