//! `zt`: inspect, check, compare and convert tensor files.
//!
//! Reads `.zt` (every version), `.mag` (every layout) and `.safetensors`; writes `.zt` v1.2,
//! `.mag` version 1 or 300, and `.safetensors`. Commands and their JSON output are documented
//! in docs/cli.md. Exit status: 0 success, 1 an invalid file or a failed check (or files that
//! differ), 2 a usage error.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod commands;
mod json;

/// Inspect, check, compare and convert tensor files (.zt, .mag, .safetensors).
#[derive(Parser, Debug)]
#[command(name = "zt", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Kind, version, attributes, objects and components of a file.
    Info {
        file: PathBuf,
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Object names, one a line.
    Ls { file: PathBuf },
    /// An object's decoded elements as raw little-endian bytes (or JSON).
    Cat {
        file: PathBuf,
        name: String,
        /// One component instead of the dense data.
        #[arg(long)]
        component: Option<String>,
        /// Shape, dtype and values as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Full structural validation, every digest and checksum, every object decoded.
    Verify {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Compare two files object by object; exit 1 when they differ.
    Diff {
        a: PathBuf,
        b: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Convert between .zt, .mag and .safetensors.
    Convert {
        input: PathBuf,
        output: PathBuf,
        /// Output kind; by default taken from OUT's extension.
        #[arg(long, value_enum)]
        to: Option<Kind>,
        /// zstd-compress every component (.zt only), at LEVEL (default 3).
        #[arg(long, num_args = 0..=1, default_missing_value = "3", value_name = "LEVEL")]
        compress: Option<i32>,
        /// Digest every component (.zt only).
        #[arg(long, value_enum)]
        digest: Option<DigestArg>,
        /// .mag layout to write.
        #[arg(long, value_enum, default_value = "300")]
        mag_version: MagVersion,
        /// Write sparse objects dense and quantized objects dequantized to f32.
        #[arg(long)]
        densify: bool,
        /// Overwrite OUT if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Upgrade any older zTensor file to v1.2, losslessly.
    Upgrade {
        input: PathBuf,
        output: PathBuf,
        #[arg(long)]
        force: bool,
    },
    /// Combine files into one .zt (object names must not clash).
    Merge {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long)]
        force: bool,
    },
    /// Copy a file without the named objects.
    Rm {
        input: PathBuf,
        #[arg(required = true)]
        names: Vec<String>,
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long)]
        force: bool,
    },
}

/// An output file kind.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Zt,
    Mag,
    Safetensors,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum DigestArg {
    None,
    Crc32c,
    Sha256,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum MagVersion {
    #[value(name = "1")]
    V1,
    #[value(name = "300")]
    V300,
}

/// How a command ended, when it did not simply succeed.
#[derive(Debug)]
enum Failure {
    /// The caller asked for something impossible (exit 2).
    Usage(String),
    /// A file is invalid, a check failed, or files differ (exit 1); the message is printed.
    Failed(String),
    /// Already reported on stdout (verify, diff): exit 1 quietly.
    Reported,
}

impl From<ztensor::Error> for Failure {
    /// The caller's mistakes (a missing object, a conversion the target cannot hold) are usage
    /// errors; everything a file or the system did wrong is a failure.
    fn from(e: ztensor::Error) -> Self {
        match e.kind() {
            ztensor::ErrorKind::InvalidArgument | ztensor::ErrorKind::NotFound => {
                Failure::Usage(e.to_string())
            }
            _ => Failure::Failed(e.to_string()),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Failed(format!("{e:#}"))
    }
}

type Outcome = Result<(), Failure>;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // Help and version go to stdout with status 0; mistakes are usage errors.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Reported) => ExitCode::from(1),
        Err(Failure::Failed(m)) => {
            eprintln!("zt: {m}");
            ExitCode::from(1)
        }
        Err(Failure::Usage(m)) => {
            eprintln!("zt: {m}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command) -> Outcome {
    use Command::*;
    match command {
        Info { file, json } => commands::info(&file, json),
        Ls { file } => commands::ls(&file),
        Cat {
            file,
            name,
            component,
            json,
        } => commands::cat(&file, &name, component.as_deref(), json),
        Verify { files, json } => commands::verify(&files, json),
        Diff { a, b, json } => commands::diff(&a, &b, json),
        Convert {
            input,
            output,
            to,
            compress,
            digest,
            mag_version,
            densify,
            force,
        } => {
            let kind = match to {
                Some(k) => k,
                None => kind_of(&output)?,
            };
            check_output(&output, force)?;
            commands::convert(
                &input,
                &output,
                kind,
                compress,
                digest,
                mag_version,
                densify,
            )
        }
        Upgrade {
            input,
            output,
            force,
        } => {
            check_output(&output, force)?;
            commands::upgrade(&input, &output)
        }
        Merge {
            inputs,
            output,
            force,
        } => {
            check_output(&output, force)?;
            commands::merge(&inputs, &output)
        }
        Rm {
            input,
            names,
            output,
            force,
        } => {
            check_output(&output, force)?;
            commands::rm(&input, &names, &output)
        }
    }
}

fn kind_of(path: &Path) -> Result<Kind, Failure> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("zt") => Ok(Kind::Zt),
        Some("mag") => Ok(Kind::Mag),
        Some("safetensors") => Ok(Kind::Safetensors),
        _ => Err(Failure::Usage(format!(
            "{}: cannot tell the output kind from the extension; use --to zt|mag|safetensors",
            path.display()
        ))),
    }
}

/// Writing commands never replace an existing file unless told to.
fn check_output(path: &Path, force: bool) -> Outcome {
    if path.exists() && !force {
        return Err(Failure::Usage(format!(
            "{} exists; use --force to overwrite it",
            path.display()
        )));
    }
    Ok(())
}

/// A progress bar on stderr when stderr is a terminal; hidden otherwise.
fn progress(len: usize, what: &str) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} objects")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

/// Writes to stdout; a closed pipe (`zt ls f | head`) ends quietly.
fn out(s: &str) -> Outcome {
    let mut o = std::io::stdout().lock();
    match o.write_all(s.as_bytes()).and_then(|_| o.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Failed(format!("cannot write to stdout: {e}"))),
    }
}
