//! The agent run modes: the REPL, print (`-p`), JSON events and RPC over stdin/stdout. Each
//! drives the same `AgentSession`; `modes` and `cli` are the only layers that write to the
//! terminal.

pub mod print;
pub mod repl;
pub mod rpc;
