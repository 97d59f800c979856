//! `zt`: inspect, check, compare and convert tensor files.
//!
//! Reads `.zt` (every version), `.mag` (every layout) and `.safetensors`; writes `.zt` v2
//! (the default; `--compact` for 4096-byte packing) or v1.2,
//! `.mag` version 1 or 300, and `.safetensors`. Commands and their JSON output are documented
//! in docs/cli.md. Exit status: 0 success, 1 an invalid file or a failed check (or files that
//! differ), 2 a usage error (and, for `diff`, any trouble: a file missing or unreadable).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod commands;
mod common;
mod diff;
mod json;
mod sets;
mod slice_arg;
#[cfg(feature = "remote")]
mod upload;

use common::{check_output, output_kind, tolerance, zt_only, zt_version, DigestArg, Failure, Kind};
use common::{MagVersion, Outcome};

/// Inspect, check, compare and convert tensor files (.zt, .mag, .safetensors).
#[derive(Parser, Debug)]
#[command(name = "zt", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Writing commands: do not wait for the output to reach the disk (no fsync). The output
    /// still appears only when complete, so a killed `zt` never leaves a torn file; a power
    /// loss soon after may lose it.
    #[arg(long, global = true)]
    no_sync: bool,
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
        #[arg(long, conflicts_with = "dequantize")]
        component: Option<String>,
        /// A quantized object (a GGUF block type, `quantized_group`) as f32 values.
        #[arg(long)]
        dequantize: bool,
        /// A box of a dense object, reading only its bytes: one item per dimension,
        /// `a:b`, `a:`, `:b`, `:` or an index, e.g. `0:8,:` or `2:4,1:3` (see docs/cli.md).
        #[arg(long, value_name = "SPEC", value_parser = slice_arg::SliceSpec::parse, allow_hyphen_values = true)]
        slice: Option<slice_arg::SliceSpec>,
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
    /// Convert between .zt, .mag, .safetensors and GGUF (IN or OUT may be a sharded set's
    /// index or a URL: an output URL is written locally first, then uploaded).
    Convert {
        input: PathBuf,
        output: PathBuf,
        /// Output kind; by default taken from OUT's extension (.zt: zTensor v2).
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
        /// v2 output: a sharded model, OUT as the root and OUT's stem-00001-of-0000N.zt
        /// beside it, each shard at most SIZE of data (e.g. 5GB, 512MiB).
        #[arg(long, value_name = "SIZE", value_parser = common::byte_size)]
        shard_size: Option<u64>,
        /// Overwrite OUT if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Upgrade any zTensor file (or any file we read) to v2 or v1.2, losslessly (writes .zt
    /// only).
    Upgrade {
        input: PathBuf,
        output: PathBuf,
        /// Output version: zt (the default, v2), v2 or v1.2.
        #[arg(long, value_enum)]
        to: Option<Kind>,
        /// v2 output: blobs on 4096-byte boundaries instead of 64 KiB (still valid v2; for
        /// models of many small tensors).
        #[arg(long)]
        compact: bool,

        #[arg(long)]
        force: bool,
    },
    /// Combine files into one .zt (object names must not clash; writes .zt only).
    Merge {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(short, long)]
        output: PathBuf,
        /// Output version: zt (the default, v2), v2 or v1.2.
        #[arg(long, value_enum)]
        to: Option<Kind>,
        /// v2 output: blobs on 4096-byte boundaries instead of 64 KiB (still valid v2; for
        /// models of many small tensors).
        #[arg(long)]
        compact: bool,

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
        /// Output version: zt (the default, v2), v2 or v1.2.
        #[arg(long, value_enum)]
        to: Option<Kind>,
        /// v2 output: blobs on 4096-byte boundaries instead of 64 KiB (still valid v2; for
        /// models of many small tensors).
        #[arg(long)]
        compact: bool,

        #[arg(long)]
        force: bool,
    },
}

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
    common::set_durability(if cli.no_sync {
        ztensor::Durability::Unsynced
    } else {
        ztensor::Durability::Synced
    });
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
        Info { file, json } if sets::is_set(&file) => {
            // The set, then each shard's own table.
            for shard in sets::info(&file, json)? {
                println!();
                commands::info(&shard, false)?;
            }
            Ok(())
        }
        Info { file, json } => commands::info(&file, json),
        Ls { file } if sets::is_set(&file) => sets::ls(&file),
        Ls { file } => commands::ls(&file),
        Cat {
            file,
            name,
            component,
            dequantize,
            slice,
            json,
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
            commands::cat(&file, &name, what, json)
        }
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
            compact,
            shard_size,
        } => {
            let kind = output_kind(&output, to)?;
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
                        mag_version,
                        force,
                    );
                }
                check_output(output, force)?;
                if let Some(size) = shard_size {
                    return commands::convert_sharded(
                        &input, output, version, size, compress, digest, densify,
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
            force,
            compact,
        } => {
            let version = zt_only("upgrade", &output, to, compact)?;
            check_output(&output, force)?;
            commands::upgrade(&input, &output, version)
        }
        Merge {
            inputs,
            output,
            to,
            force,
            compact,
        } => {
            let version = zt_only("merge", &output, to, compact)?;
            check_output(&output, force)?;
            commands::merge(&sets::expand_inputs(&inputs)?, &output, version)
        }
        Rm {
            input,
            names,
            output,
            to,
            force,
            compact,
        } => {
            let version = zt_only("rm", &output, to, compact)?;
            check_output(&output, force)?;
            commands::rm(&input, &names, &output, version)
        }
    }
}
