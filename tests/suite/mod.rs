//! The test suites, one file per area.

mod ai_providers;
mod architecture;
mod cli_sessions;
mod migrations;
mod store;
mod store_props;
