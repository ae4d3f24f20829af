//! The only test target: shared helpers in `common`, the suites in `suite`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;
mod suite;
