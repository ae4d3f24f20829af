//! The source of randomness for new ids: random by default, seedable for tests.
//!
//! Entry ids are 8 lowercase hex characters (the reference takes the first 8 characters of a
//! random UUIDv4); session ids are UUIDv7. Nothing else in the crate draws random numbers.

use std::sync::Mutex;

/// Draws random numbers for ids; reproducible when built with a seed.
#[derive(Debug)]
pub struct IdSource {
    state: Mutex<u64>,
}

impl IdSource {
    /// Returns a source seeded from the operating system's randomness: std's hash keys, which
    /// std draws from the OS (`getrandom`) once per thread, through SipHash. Not a UUIDv4: its
    /// `rand` generator's set-up (a ChaCha state, CPU feature probes) cost every short `pi`
    /// process (`pi sessions search`) measurable time (`docs/BENCHMARKS.md`, "Search").
    pub fn random() -> Self {
        use std::hash::{BuildHasher, RandomState};
        // Every `RandomState::new()` on a thread differs (std steps its key), so two sources
        // made in one process differ too.
        let seed = RandomState::new().hash_one(std::process::id());
        Self::seeded(seed)
    }

    /// Returns a source whose sequence is fixed by `seed`.
    pub fn seeded(seed: u64) -> Self {
        Self {
            state: Mutex::new(seed),
        }
    }

    /// Returns the next 64 random bits (SplitMix64).
    pub fn next_u64(&self) -> u64 {
        let mut state = match self.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Returns 8 lowercase hex characters.
    pub fn hex8(&self) -> String {
        format!("{:08x}", self.next_u64() >> 32)
    }

    /// Returns a full UUIDv4 string (the reference's fallback after 100 id collisions).
    pub fn uuid_v4(&self) -> String {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_be_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_be_bytes());
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    /// Returns a UUIDv7 string for the given Unix milliseconds.
    pub fn uuid_v7(&self, unix_ms: i64) -> String {
        let mut random = [0u8; 10];
        random[..8].copy_from_slice(&self.next_u64().to_be_bytes());
        random[8..].copy_from_slice(&self.next_u64().to_be_bytes()[..2]);
        let ms = u64::try_from(unix_ms).unwrap_or(0);
        uuid::Builder::from_unix_timestamp_millis(ms, &random)
            .into_uuid()
            .hyphenated()
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_sources_repeat() {
        let a = IdSource::seeded(42);
        let b = IdSource::seeded(42);
        assert_eq!(a.hex8(), b.hex8());
        let id = a.hex8();
        assert_eq!(id.len(), 8);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }

    #[test]
    fn random_sources_differ() {
        let a = IdSource::random();
        let b = IdSource::random();
        assert_ne!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn uuid_v7_carries_the_time() {
        let ids = IdSource::seeded(1);
        let id = ids.uuid_v7(1_700_000_000_000);
        let parsed = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        assert!(id.starts_with("018bcfe5-6800"));
    }
}
