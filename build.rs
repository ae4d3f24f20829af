//! Build script: links the `pi` executable position-dependent (non-PIE) on Linux.
//!
//! A PIE of pi's size carries ≈ 33,000 relative relocations (≈ 800 KB) that the dynamic loader
//! applies at every start, copying ≈ 130 pages of `.data.rel.ro` on the way: ≈ 0.3 ms of
//! every `pi sessions search` or `pi --version` process (`docs/BENCHMARKS.md`, "Search").
//! Linked without PIE the linker resolves them once. The code itself stays position-independent
//! (shared libraries, the heap and the stack are still randomised); only the executable's own
//! image loads at a fixed address.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=pi=-no-pie");
    }
}
