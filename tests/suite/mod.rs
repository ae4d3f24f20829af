//! The test suites, one file per area.

mod architecture;
mod cli_sessions;
mod interchange;
mod interop;
mod migrations;
mod store;
mod store_props;
