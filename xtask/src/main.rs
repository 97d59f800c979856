//! Project tasks, run as `cargo xtask <task>`.
//!
//! | task | what it does |
//! |---|---|
//! | `gen-fixtures` | writes `fixtures/valid` and `fixtures/invalid` from code, deterministically |
//! | `gen-fixtures --check` | fails when the files on disk differ from what the code generates |
//! | `bench [--scale N] [--only S,...]` | benchmarks against safetensors and the machine's limits (release build), section by section |
//! | `fuzz [--seconds N] [--target T]` | seeds and runs every cargo-fuzz target (nightly) for N seconds |
//! | `check-modules` | fails when the modules of a crate import each other in a cycle |

use anyhow::Result;

mod bench;
mod fixtures;
mod fuzz;
mod modules;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["gen-fixtures"] => fixtures::run(false),
        ["gen-fixtures", "--check"] => fixtures::run(true),
        ["fuzz", rest @ ..] => fuzz::run(rest),
        ["bench", rest @ ..] => bench::run(rest),
        ["check-modules"] => modules::run(),
        _ => {
            eprintln!("usage: cargo xtask gen-fixtures [--check] | cargo xtask bench [--scale N] [--only SECTION,...] | cargo xtask fuzz [--seconds N] [--target T] | cargo xtask check-modules");
            std::process::exit(2);
        }
    }
}
