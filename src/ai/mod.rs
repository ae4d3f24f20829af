//! One LLM call, streamed back as one event enum; the providers' wire protocols, the model
//! registry and transport retries.
//!
//! Invariant: `ai` knows nothing of sessions or storage.
