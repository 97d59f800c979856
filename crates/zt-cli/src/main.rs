//! `zt`: inspect, check, compare and convert tensor files.
//!
//! Reads `.zt` (every version), `.mag` (every layout) and `.safetensors`; writes `.zt` v1.2,
//! `.mag` version 1 or 300, and `.safetensors`. Commands and their JSON output are documented
//! in docs/cli.md. Exit status: 0 success, 1 an invalid file or a failed check (or files that
//! differ), 2 a usage error (and, for `diff`, any trouble: a file missing or unreadable).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod commands;
mod diff;
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
    /// Compare two files object by object: exit 0 same, 1 different, 2 trouble.
    Diff {
        a: PathBuf,
        b: PathBuf,
        /// Absolute tolerance for float values: equal when |a-b| <= atol + rtol*|b|.
        #[arg(long, value_name = "ATOL", default_value_t = 0.0, value_parser = tolerance)]
        atol: f64,
        /// Relative tolerance for float values (see --atol).
        #[arg(long, value_name = "RTOL", default_value_t = 0.0, value_parser = tolerance)]
        rtol: f64,
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
        /// zstd-compress every component (.zt only); a level only as --compress=LEVEL
        /// (default 3), so the option never takes a file name that follows it.
        #[arg(
            long,
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "3",
            value_name = "LEVEL"
        )]
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
    /// Upgrade any older zTensor file to v1.2, losslessly (writes .zt only).
    Upgrade {
        input: PathBuf,
        output: PathBuf,
        /// Output kind; by default taken from OUT's extension. Only zt is accepted.
        #[arg(long, value_enum)]
        to: Option<Kind>,
        #[arg(long)]
        force: bool,
    },
    /// Combine files into one .zt (object names must not clash; writes .zt only).
    Merge {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(short, long)]
        output: PathBuf,
        /// Output kind; by default taken from OUT's extension. Only zt is accepted.
        #[arg(long, value_enum)]
        to: Option<Kind>,
        #[arg(long)]
        force: bool,
    },
    /// Copy a file without the named objects (writes .zt only).
    Rm {
        input: PathBuf,
        #[arg(required = true)]
        names: Vec<String>,
        #[arg(short, long)]
        output: PathBuf,
        /// Output kind; by default taken from OUT's extension. Only zt is accepted.
        #[arg(long, value_enum)]
        to: Option<Kind>,
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
    /// `diff` could not compare (a file missing or unreadable): exit 2, as diff(1) does; the
    /// message is printed.
    Trouble(String),
    /// `diff` reported on stdout, but could not compare everything: exit 2 quietly.
    ReportedTrouble,
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
        Err(Failure::ReportedTrouble) => ExitCode::from(2),
        Err(Failure::Failed(m)) => {
            eprintln!("zt: {m}");
            ExitCode::from(1)
        }
        Err(Failure::Usage(m)) | Err(Failure::Trouble(m)) => {
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
        Diff {
            a,
            b,
            atol,
            rtol,
            json,
        } => diff::diff(&a, &b, diff::Tolerance { atol, rtol }, json),
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
            let kind = output_kind(&output, to)?;
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
            to,
            force,
        } => {
            zt_only("upgrade", &output, to)?;
            check_output(&output, force)?;
            commands::upgrade(&input, &output)
        }
        Merge {
            inputs,
            output,
            to,
            force,
        } => {
            zt_only("merge", &output, to)?;
            check_output(&output, force)?;
            commands::merge(&inputs, &output)
        }
        Rm {
            input,
            names,
            output,
            to,
            force,
        } => {
            zt_only("rm", &output, to)?;
            check_output(&output, force)?;
            commands::rm(&input, &names, &output)
        }
    }
}

/// The kind a writing command writes: `--to` if given, else OUT's extension; the one place
/// every writing command learns what the user asked for.
fn output_kind(path: &Path, to: Option<Kind>) -> Result<Kind, Failure> {
    match to {
        Some(k) => Ok(k),
        None => kind_of(path),
    }
}

/// Commands that write `.zt` only refuse any other kind asked for (by `--to` or OUT's
/// extension) instead of writing a kind the user did not ask for.
fn zt_only(command: &str, path: &Path, to: Option<Kind>) -> Outcome {
    match output_kind(path, to)? {
        Kind::Zt => Ok(()),
        k => Err(Failure::Usage(format!(
            "{}: {command} writes .zt only, not {}; write a .zt and `zt convert` it",
            path.display(),
            k.extension()
        ))),
    }
}

impl Kind {
    fn extension(self) -> &'static str {
        match self {
            Kind::Zt => ".zt",
            Kind::Mag => ".mag",
            Kind::Safetensors => ".safetensors",
        }
    }
}

/// A tolerance: a finite number >= 0.
fn tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a finite number >= 0")),
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

/// A progress bar over `total` bytes on stderr when stderr is a terminal; hidden otherwise.
/// Commands advance it by the bytes they have read (stored bytes of the objects copied,
/// decoded bytes compared), so it shows a rate and a time left.
fn progress(total: u64, what: &str) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

/// A spinner on stderr (when a terminal) for work the library does in one call, where no
/// byte count can be followed: it shows the elapsed time and how much there is to do.
fn spinner(what: &str, total: u64) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
        bar.set_style(style);
    }
    bar.set_message(format!("{what} ({})", indicatif::HumanBytes(total)));
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
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
