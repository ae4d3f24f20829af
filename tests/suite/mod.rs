//! The test suites, one file per area.

mod architecture;
mod cli_interchange;
mod cli_sessions;
mod interchange;
mod interchange_props;
mod interop;
mod migrations;
mod store;
mod store_props;
