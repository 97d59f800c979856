//! `zt`: inspect, check, compare and convert tensor files.
//!
//! Reads `.zt` (every version), `.mag` (every layout) and `.safetensors`; writes `.zt` v2
//! (the default; `--compact` for 4096-byte packing) or v1.2,
//! `.mag` version 1 or 300, and `.safetensors`. Commands and their JSON output are documented
//! in docs/cli.md. Exit status: 0 success, 1 an invalid file or a failed check (or files that
//! differ), 2 a usage error (and, for `diff`, any trouble: a file missing or unreadable).
//!
//! The commands are this library, [`run_from`]: the `zt` binary (src/main.rs) calls it, and
//! so does the Python package's `zt` command and `python -m ztio`, one code path. Map:
//! `commands` (info, ls, verify, cat, convert ...), `sets` (the same over sharded sets),
//! `diff`, `json` (the JSON schemas), `slice_arg` (`--slice` syntax), `upload` (writing to
//! URLs), `common` (opening inputs, output, exit statuses).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod commands;
mod common;
mod diff;
mod json;
mod sets;
mod slice_arg;
#[cfg(feature = "remote")]
mod upload;

use common::{check_output, output_kind, tolerance, zt_only, zt_version, DigestArg, Failure, Kind};
pub use common::{printable, ProgressListener};
use common::{MagVersion, Outcome};

/// Inspect, check, compare and convert tensor files: zTensor .zt (every version), .mag,
/// .safetensors, GGUF, NumPy .npy/.npz, PyTorch checkpoints, ONNX models, HDF5 and Keras
/// files, Flax and TensorFlow checkpoints, pickles of NumPy arrays (Paddle's `.pdparams`),
/// Paddle's inference parameters (`.pdiparams`), TensorFlow Lite models (`.tflite`), Caffe
/// models (`.caffemodel`), OpenVINO models (`.xml` and `.bin`), legacy GGML files (llama.cpp,
/// whisper.cpp).
#[derive(Parser, Debug)]
#[command(
    name = "zt",
    version,
    about,
    propagate_version = true,
    after_help = "Wherever a command reads a FILE, it may also be a sharded set's \
                  *.index.json, a model folder (the index or the one model file in it) or a \
                  URL (s3://, gs://, az://, http(s)://, hf://owner/name/file). Exit status: \
                  0 success, 1 an invalid file, a failed check or files that differ, 2 a \
                  usage error (for diff: any trouble). See docs/cli.md."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// What one read may allocate for a copy larger than the file stores for it (a broadcast
    /// or strided tensor materialized), e.g. 8GiB; by default twice the stored bytes plus
    /// 64 MiB. Also what a listing and a file's attribute values may take, where the file
    /// is over their own caps (256 MiB and more).
    #[arg(long, global = true, value_name = "SIZE", value_parser = common::byte_size)]
    max_memory: Option<u64>,
}

/// How a reading command treats the digests and checksums it meets.
#[derive(Args, Debug, Clone, Copy)]
struct Checks {
    /// Do not check the digests and checksums of what is read. By default a command that
    /// hands bytes on (cat, convert, upgrade, merge, rm, diff) checks every digest and
    /// checksum covering them and fails on a mismatch, naming object, component and offset.
    #[arg(long)]
    no_verify: bool,
}

/// What every writing command takes.
#[derive(Args, Debug, Clone, Copy)]
struct Writing {
    /// Replace the output if it exists (it stays intact until the new one is complete).
    #[arg(long)]
    force: bool,
    /// Do not wait for the output to reach the disk (no fsync). The output still appears
    /// only when complete, so a killed `zt` never leaves a torn file; a power loss soon after
    /// may lose it.
    #[arg(long)]
    no_sync: bool,
    #[command(flatten)]
    checks: Checks,
}

/// The kinds of file upgrade, merge and rm write: zTensor only.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ZtKind {
    /// zTensor of the default version (v2).
    Zt,
    #[value(name = "v2")]
    V2,
    #[value(name = "v1.2")]
    V1_2,
}

impl From<ZtKind> for Kind {
    fn from(k: ZtKind) -> Kind {
        match k {
            ZtKind::Zt => Kind::Zt,
            ZtKind::V2 => Kind::V2,
            ZtKind::V1_2 => Kind::V1_2,
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Kind, version, attributes, objects and components of a file.
    Info {
        /// The file (or index, model folder or URL) to describe.
        file: PathBuf,
        /// One JSON object (schema zt.info/1) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Object names, one a line.
    Ls {
        /// The file (or index, model folder or URL) to list.
        file: PathBuf,
    },
    /// An object's decoded elements as raw little-endian bytes (or JSON).
    Cat {
        /// The file (or index, model folder or URL) holding the object.
        file: PathBuf,
        /// The object's name.
        name: String,
        /// One component instead of the dense data.
        #[arg(long, conflicts_with = "dequantize")]
        component: Option<String>,
        /// A quantized object (a GGUF block type, `quantized_group`) as f32 values.
        #[arg(long)]
        dequantize: bool,
        /// A box of a dense object, reading only its bytes: one item per dimension,
        /// `a:b`, `a:`, `:b`, `:` or an index, a range with an optional step (`a:b:s`), e.g.
        /// `0:8,:`, `2:4,1:3` or `::-1` (see docs/cli.md).
        #[arg(long, value_name = "SPEC", value_parser = slice_arg::SliceSpec::parse, allow_hyphen_values = true)]
        slice: Option<slice_arg::SliceSpec>,
        /// Shape, dtype and values as JSON (schema zt.cat/1).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        checks: Checks,
    },
    /// Full structural validation, every digest and checksum, every object decoded.
    Verify {
        /// The files (or indexes, model folders or URLs) to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// One JSON object (schema zt.verify/1) instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Compare two files object by object: exit 0 same, 1 different, 2 trouble.
    Diff {
        /// The first file (or index, model folder or URL).
        a: PathBuf,
        /// The second file (or index, model folder or URL).
        b: PathBuf,
        /// Absolute tolerance for float values: equal when |a-b| <= atol + rtol*|b|.
        #[arg(long, value_name = "ATOL", default_value_t = 0.0, value_parser = tolerance)]
        atol: f64,
        /// Relative tolerance for float values (see --atol).
        #[arg(long, value_name = "RTOL", default_value_t = 0.0, value_parser = tolerance)]
        rtol: f64,
        /// Compare object names, shapes, types and values only, not file attributes.
        #[arg(long)]
        values_only: bool,
        /// One JSON object (schema zt.diff/1) instead of lines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        checks: Checks,
    },
    /// Convert between .zt, .mag, .safetensors and GGUF (from any kind zt reads). INPUT or
    /// OUTPUT may be a sharded set's index; an output URL is written locally first, then
    /// uploaded.
    Convert {
        /// What to convert: a file, index, model folder or URL.
        input: PathBuf,
        /// Where to write: a file, an index (a sharded set) or a URL.
        output: PathBuf,
        /// Output kind; by default taken from OUTPUT's extension (.zt: zTensor v2).
        #[arg(long, value_enum)]
        to: Option<Kind>,
        /// v2 output: blobs on 4096-byte boundaries instead of 64 KiB (still valid v2; for
        /// models of many small tensors).
        #[arg(long)]
        compact: bool,

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
        /// Cast floating-point tensors (f64, f32, f16, bf16) to TYPE, rounded to nearest,
        /// ties to even; integer, bool, FP8 and quantized tensors keep their types (with
        /// --densify, quantized ones become TYPE).
        #[arg(long, value_enum, value_name = "TYPE")]
        dtype: Option<common::CastArg>,
        /// Write the file attributes the output's metadata cannot hold as their JSON text:
        /// for .safetensors (text only) numbers, lists and maps, a GGUF's or a checkpoint's;
        /// for GGUF null, maps and mixed lists. Without it, such an attribute is an error.
        #[arg(long)]
        attributes_as_json: bool,
        /// Set a file attribute of the output, KEY=VALUE (repeatable), in place of the
        /// input's: VALUE as JSON (4096, 1e-5, true, [1,2], "text"), else as the text it is
        /// (format=pt). A legacy llama.cpp model to GGUF takes llama.context_length and
        /// llama.attention.layer_norm_rms_epsilon (else 2048 and 5e-6, the header has
        /// neither), typed as llama.cpp reads them.
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = json::attribute_arg)]
        set: Vec<(String, ztensor::Value)>,
        /// Leave the file attribute KEY out of the output (repeatable); no error where the
        /// input has no KEY.
        #[arg(long = "unset", value_name = "KEY")]
        unset: Vec<String>,
        /// Sharded output, each shard at most SIZE of data (e.g. 5GB, 512MiB): v2's own
        /// shards beside a .zt root, or an index with .safetensors/.zt shards.
        #[arg(long, value_name = "SIZE", value_parser = common::byte_size)]
        shard_size: Option<u64>,
        /// Leave out the objects the input lists but cannot read (damaged entries), each
        /// named on stderr, and write the rest: to salvage a damaged file (one input file).
        #[arg(long)]
        skip_unreadable: bool,
        #[command(flatten)]
        writing: Writing,
    },
    /// Upgrade any zTensor file (or any file we read) to v2 or v1.2, losslessly (writes .zt
    /// only).
    Upgrade {
        /// What to upgrade: a file, index, model folder or URL.
        input: PathBuf,
        /// The .zt to write.
        output: PathBuf,
        /// Output version (default: zt, which is v2).
        #[arg(long, value_enum)]
        to: Option<ZtKind>,
        /// v2 output: blobs on 4096-byte boundaries instead of 64 KiB (still valid v2; for
        /// models of many small tensors).
        #[arg(long)]
        compact: bool,
        /// Leave out the objects the input lists but cannot read (damaged entries), each
        /// named on stderr, and write the rest: to salvage a damaged file.
        #[arg(long)]
        skip_unreadable: bool,
        #[command(flatten)]
        writing: Writing,
    },
    /// Combine files into one .zt (object names must not clash; writes .zt only).
    Merge {
        /// The files (or indexes, model folders or URLs) to combine.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// The .zt to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Output version (default: zt, which is v2).
        #[arg(long, value_enum)]
        to: Option<ZtKind>,
        /// v2 output: blobs on 4096-byte boundaries instead of 64 KiB (still valid v2; for
        /// models of many small tensors).
        #[arg(long)]
        compact: bool,
        /// Set a file attribute of the output, KEY=VALUE (repeatable), as `convert --set`
        /// takes it: the inputs' values of KEY, which must otherwise agree, are replaced.
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = json::attribute_arg)]
        set: Vec<(String, ztensor::Value)>,
        /// Leave the file attribute KEY out of the output (repeatable): the inputs' values
        /// of KEY need not agree.
        #[arg(long = "unset", value_name = "KEY")]
        unset: Vec<String>,
        /// Leave out the objects an input lists but cannot read (damaged entries), each
        /// named on stderr, and write the rest.
        #[arg(long)]
        skip_unreadable: bool,
        #[command(flatten)]
        writing: Writing,
    },
    /// Copy a file without the named objects (writes .zt only).
    Rm {
        /// The file (or index, model folder or URL) to copy.
        input: PathBuf,
        /// The objects to leave out.
        #[arg(required = true)]
        names: Vec<String>,
        /// The .zt to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Output version (default: zt, which is v2).
        #[arg(long, value_enum)]
        to: Option<ZtKind>,
        /// v2 output: blobs on 4096-byte boundaries instead of 64 KiB (still valid v2; for
        /// models of many small tensors).
        #[arg(long)]
        compact: bool,
        #[command(flatten)]
        writing: Writing,
    },
}

impl Command {
    /// The options that say how files are read and written, for the commands that take them.
    fn settings(&self) -> (Option<Checks>, Option<Writing>) {
        use Command::*;
        match self {
            Cat { checks, .. } | Diff { checks, .. } => (Some(*checks), None),
            Convert { writing, .. }
            | Upgrade { writing, .. }
            | Merge { writing, .. }
            | Rm { writing, .. } => (Some(writing.checks), Some(*writing)),
            Info { .. } | Ls { .. } | Verify { .. } => (None, None),
        }
    }
}

/// Runs `zt` with `args` (the program's name first, as `std::env::args_os` gives them) and
/// returns its exit status. Installs a SIGINT/SIGTERM handler (once per process) that removes
/// named temporaries and exits with 130: call it from a process that is the tool.
///
/// ```no_run
/// let status = zt_cli::run_from(["zt", "verify", "model.safetensors"]);
/// std::process::exit(i32::from(status));
/// ```
pub fn run_from<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    // Ctrl-C or a TERM: unnamed temporaries vanish with the process; named ones (file systems
    // without O_TMPFILE, the folder of a conversion before its upload) are removed first.
    // 130 is the status a shell reports for an interrupted command.
    let _ = ctrlc::set_handler(|| {
        ztensor::container::cleanup::remove_registered();
        std::process::exit(130);
    });
    run_embedded(args)
}

/// As [`run_from`], without taking over the process's signals: for a host that handles them
/// itself (the Python package's `ztio.convert`, which checks Python's signals between pieces
/// of work, so that Ctrl-C raises `KeyboardInterrupt` and the output stays as it was).
pub fn run_embedded<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    run_embedded_with(args, None)
}

/// As [`run_embedded`], with the command's progress told to `listener` instead of drawn on
/// stderr (a host that shows progress its own way, or `None` for bars on a terminal).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// struct Ends(Mutex<Vec<String>>);
/// impl zt_cli::ProgressListener for Ends {
///     fn report(&self, what: &str, _done: u64, _total: u64, finished: bool) {
///         if finished { self.0.lock().unwrap().push(what.to_owned()); }
///     }
/// }
/// let ends = Arc::new(Ends(Mutex::new(Vec::new())));
/// // A file that does not exist: the command fails before any work, and nothing is heard.
/// let status = zt_cli::run_embedded_with(["zt", "verify", "/nonexistent.zt"], Some(ends.clone()));
/// assert_eq!(status, 1);
/// assert!(ends.0.lock().unwrap().is_empty());
/// ```
pub fn run_embedded_with<I, T>(
    args: I,
    listener: Option<std::sync::Arc<dyn ProgressListener>>,
) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let (ended, clap_error) = common::with_listener(listener, || run_parsed(args));
    match (clap_error, &ended.failure) {
        // clap's own words and layout: the mistake, the usage line, where to find help.
        (Some(e), _) => drop(e.print()),
        (None, Some(why)) => eprintln!("zt: {}", printable(&why.to_string())),
        (None, None) => {}
    }
    ended.status
}

/// What a command run in-process by [`run_embedded_reporting`] ended with.
#[derive(Debug)]
pub struct Ended {
    /// The exit status the `zt` binary would exit with.
    pub status: u8,
    /// Why the command failed, unless it succeeded or said so itself on stdout (`verify`'s
    /// and `diff`'s reports).
    pub failure: Option<Failed>,
    /// What the command noted on the way, each what the binary prints after `zt: note: `
    /// (an object left out of a conversion, and why).
    pub notes: Vec<String>,
}

/// Why an in-process command failed: what the `zt` binary prints after `zt: `, and more.
#[derive(Debug)]
#[non_exhaustive]
pub enum Failed {
    /// A library error as the library gave it: its kind, file, object, component and offset
    /// (a host raises it as its own exception: the Python package as `ztio.ChecksumError`,
    /// `FileNotFoundError`, ...).
    Error(ztensor::Error),
    /// A mistake in the arguments that the tool found itself (exit status 2).
    Usage(String),
    /// Any other failure the tool found itself.
    Other(String),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Error(e) => e.fmt(f),
            Failed::Usage(m) | Failed::Other(m) => f.write_str(m),
        }
    }
}

/// As [`run_embedded_with`], printing nothing on stderr: the command's failure comes back in
/// [`Ended::failure`] for the host to raise, and its notes in [`Ended::notes`] (what a
/// command writes on stdout, and its progress, are as in [`run_embedded_with`]).
///
/// ```
/// let ended = zt_cli::run_embedded_reporting(["zt", "ls", "/nonexistent.zt"], None);
/// assert_eq!(ended.status, 1);
/// match ended.failure {
///     Some(zt_cli::Failed::Error(e)) => assert_eq!(e.kind(), ztensor::ErrorKind::Io),
///     other => panic!("{other:?}"),
/// }
/// ```
pub fn run_embedded_reporting<I, T>(
    args: I,
    listener: Option<std::sync::Arc<dyn ProgressListener>>,
) -> Ended
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let (mut ended, notes) =
        common::collecting_notes(|| common::with_listener(listener, || run_parsed(args).0));
    ended.notes = notes;
    ended
}

/// Parses `args` and runs the command. A mistake in the arguments comes back both as a
/// [`Failed::Usage`] in clap's words (which name the argument and what it takes) and as
/// clap's error, for a caller that prints it as clap lays it out.
fn run_parsed<I, T>(args: I) -> (Ended, Option<clap::Error>)
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let ended = |status, failure| Ended {
        status,
        failure,
        notes: Vec::new(),
    };
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            let text = e.render().to_string();
            let text = text
                .trim_end()
                .trim_end_matches("For more information, try '--help'.")
                .trim_end()
                .trim_start_matches("error: ")
                .to_owned();
            return (ended(2, Some(Failed::Usage(text))), Some(e));
        }
        // Help and version go to stdout with status 0.
        Err(e) => {
            let _ = e.print();
            return (ended(0, None), None);
        }
    };
    let (checks, writing) = cli.command.settings();
    let settings = common::Settings {
        durability: if writing.is_some_and(|w| w.no_sync) {
            ztensor::Durability::Unsynced
        } else {
            ztensor::Durability::Synced
        },
        checks: !checks.is_some_and(|c| c.no_verify),
        memory_budget: cli.max_memory,
    };
    let why = |reason: common::Reason, usage: bool| match reason {
        common::Reason::Error(e) => Failed::Error(*e),
        common::Reason::Text(t) if usage => Failed::Usage(t),
        common::Reason::Text(t) => Failed::Other(t),
    };
    let ended = match common::with_settings(settings, || run(cli.command)) {
        Ok(()) => ended(0, None),
        Err(Failure::Reported) => ended(1, None),
        Err(Failure::ReportedTrouble) => ended(2, None),
        Err(Failure::PipeClosed) => ended(128 + 13, None),
        Err(Failure::Failed(m)) => ended(1, Some(why(m, false))),
        Err(Failure::Usage(m)) => ended(2, Some(why(m, true))),
        Err(Failure::Trouble(m)) => ended(2, Some(why(m, false))),
    };
    (ended, None)
}

fn run(command: Command) -> Outcome {
    // A model folder stands for the model file in it, for every command that reads.
    use common::resolve_input as resolve;
    use Command::*;
    match command {
        Info { file, json } => {
            let file = resolve(file)?;
            if !sets::is_set(&file) {
                return commands::info(&file, json);
            }
            // The set, then each shard's own table.
            for shard in sets::info(&file, json)? {
                common::out("\n")?;
                commands::info(&shard, false)?;
            }
            Ok(())
        }
        Ls { file } => {
            let file = resolve(file)?;
            if sets::is_set(&file) {
                sets::ls(&file)
            } else {
                commands::ls(&file)
            }
        }
        Cat {
            file,
            name,
            component,
            dequantize,
            slice,
            json,
            checks: _,
        } => {
            let what = match (&component, dequantize, &slice) {
                (Some(_), _, Some(_)) | (_, true, Some(_)) => {
                    return Err(Failure::Usage(
                        "--slice reads a box of the dense values; it does not combine with \
                         --component or --dequantize"
                            .into(),
                    ))
                }
                (None, false, Some(spec)) => commands::CatWhat::Slice(spec),
                (Some(role), _, None) => commands::CatWhat::Component(role),
                (None, true, None) => commands::CatWhat::Dequantized,
                (None, false, None) => commands::CatWhat::Dense,
            };
            commands::cat(&resolve(file)?, &name, what, json)
        }
        Verify { files, json } => {
            let files: Vec<PathBuf> = files.into_iter().map(resolve).collect::<Result<_, _>>()?;
            commands::verify(&files, json)
        }
        Diff {
            a,
            b,
            atol,
            rtol,
            json,
            values_only,
            checks: _,
        } => {
            let how = diff::Compare {
                tolerance: diff::Tolerance { atol, rtol },
                values_only,
            };
            let a = resolve(a).map_err(Failure::into_trouble)?;
            let b = resolve(b).map_err(Failure::into_trouble)?;
            diff::diff(&a, &b, how, json)
        }
        Convert {
            input,
            output,
            to,
            compress,
            digest,
            mag_version,
            densify,
            dtype,
            attributes_as_json,
            set,
            unset,
            compact,
            shard_size,
            skip_unreadable,
            writing,
        } => {
            let input = resolve(input)?;
            let force = writing.force;
            let kind = output_kind(&output, to)?;
            // What the output's metadata holds as it is, when asked to write the rest as text.
            let as_text = match (attributes_as_json, json::metadata_holds(kind)) {
                (false, _) => None,
                (true, Some(holds)) => Some(holds),
                (true, None) => {
                    return Err(Failure::Usage(
                        "--attributes-as-json applies to .safetensors and GGUF output only".into(),
                    ))
                }
            };
            let changes =
                json::attribute_changes(set, unset).map_err(|m| Failure::Usage(m.into()))?;
            let edits = json::AttributeEdits {
                changes: &changes,
                as_text,
            };
            let version = if kind.is_zt() {
                Some(zt_version(kind, compact)?)
            } else if compact {
                return Err(Failure::Usage(
                    "--compact applies to .zt output only".into(),
                ));
            } else {
                None
            };
            // The conversion into a local path; `force` already settled for it.
            let run = |output: &std::path::Path, force: bool| {
                if sets::handles_convert(&input, output, kind, shard_size) {
                    return sets::convert_command(
                        &input,
                        output,
                        kind,
                        version,
                        shard_size,
                        compress,
                        digest,
                        densify,
                        dtype,
                        edits,
                        mag_version,
                        force,
                        skip_unreadable,
                    );
                }
                check_output(output, force)?;
                if let Some(size) = shard_size {
                    return commands::convert_sharded(
                        &input,
                        output,
                        version,
                        size,
                        compress,
                        digest,
                        densify,
                        dtype,
                        edits,
                        skip_unreadable,
                    );
                }
                commands::convert(
                    &input,
                    output,
                    kind,
                    version,
                    compress,
                    digest,
                    mag_version,
                    densify,
                    dtype,
                    edits,
                    skip_unreadable,
                )
            };
            #[cfg(feature = "remote")]
            if let Some(url) = output.to_str().filter(|s| ztensor::is_url(s)) {
                return upload::convert_to_url(url, force, |local| run(local, true));
            }
            run(&output, force)
        }
        Upgrade {
            input,
            output,
            to,
            compact,
            skip_unreadable,
            writing,
        } => {
            let input = resolve(input)?;
            let version = zt_only("upgrade", &output, to.map(Kind::from), compact)?;
            check_output(&output, writing.force)?;
            commands::upgrade(&input, &output, version, skip_unreadable)
        }
        Merge {
            inputs,
            output,
            to,
            compact,
            set,
            unset,
            skip_unreadable,
            writing,
        } => {
            let inputs: Vec<PathBuf> = inputs.into_iter().map(resolve).collect::<Result<_, _>>()?;
            let version = zt_only("merge", &output, to.map(Kind::from), compact)?;
            check_output(&output, writing.force)?;
            let changes =
                json::attribute_changes(set, unset).map_err(|m| Failure::Usage(m.into()))?;
            commands::merge(&inputs, &output, version, &changes, skip_unreadable)
        }
        Rm {
            input,
            names,
            output,
            to,
            compact,
            writing,
        } => {
            let input = resolve(input)?;
            let version = zt_only("rm", &output, to.map(Kind::from), compact)?;
            check_output(&output, writing.force)?;
            commands::rm(&input, &names, &output, version)
        }
    }
}
