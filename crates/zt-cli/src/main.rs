//! The `zt` binary: the commands are the `zt_cli` library ([`zt_cli::run_from`]).

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(zt_cli::run_from(std::env::args_os()))
}
