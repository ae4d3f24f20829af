//! The test suites, one file per area.

mod agent_session;
mod ai_models_json;
mod ai_providers;
mod ai_stream;
mod architecture;
mod cli_interchange;
mod cli_sessions;
mod compaction;
mod durability;
mod extensions;
mod interchange;
mod interchange_props;
mod interop;
mod migrations;
mod print_mode;
mod quickstart;
mod repl;
mod resources;
mod rpc;
mod rpc_interop;
mod search;
mod session_compaction;
mod session_lease;
mod store;
mod store_props;
mod tools;
