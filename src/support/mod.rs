//! Leaf helpers shared by every layer: time, randomness, JSON text in the reference's style,
//! text made safe for a terminal, files read with bounds.
//!
//! Invariant: `support` imports nothing from the crate; it owns no policy, only mechanisms
//! (a clock, an id source, a serializer) that higher layers configure and pass down.

pub mod atomic;
pub mod clock;
pub mod files;
pub mod hash;
pub mod ids;
pub mod js;
pub mod json;
pub mod term;
pub mod truncate;
