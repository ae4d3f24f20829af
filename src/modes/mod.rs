//! The agent run modes: the REPL, print (`-p`), JSON events and RPC over stdin/stdout.
