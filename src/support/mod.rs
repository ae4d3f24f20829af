//! Leaf helpers shared by every layer: time, randomness, JSON text in the reference's style.
//!
//! Invariant: `support` imports nothing from the crate; it owns no policy, only mechanisms
//! (a clock, an id source, a serializer) that higher layers configure and pass down.

pub mod clock;
pub mod hash;
pub mod ids;
pub mod json;
pub mod truncate;
