//! The `pi` binary: everything happens in `pi::cli`, which returns the exit code.

use std::process::ExitCode;

fn main() -> ExitCode {
    pi::cli::main()
}
