//! The test suites, one file per area.

mod architecture;
mod cli_sessions;
mod migrations;
mod resources;
mod store;
mod store_props;
