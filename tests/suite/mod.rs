//! The test suites, one file per area.

mod architecture;
mod cli_sessions;
mod migrations;
mod store;
mod store_props;
mod tools;
