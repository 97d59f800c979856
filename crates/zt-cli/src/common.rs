//! What the commands share: the kinds and options they take, how a command fails
//! ([`Failure`], [`Outcome`]), the output-kind rules of writing commands, progress on a
//! terminal, and writing to stdout. It names no command module.

use std::io::{IsTerminal, Write};
use std::path::Path;

use clap::ValueEnum;
use ztensor::Durability;

/// How the command running on this thread reads and writes, from its options: set for the
/// length of one run ([`with_settings`]). Not process-wide: a host that runs many commands in
/// one process (the Python package's `ztio.convert`, `ztio.diff`, ...) gives each its own
/// options, from any thread, and a `verify=False` or `sync=False` of one call must not
/// carry over to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Whether writing commands sync their output (`--no-sync` turns it off).
    pub durability: Durability,
    /// Whether reads check the digests and checksums of what they read (`--no-verify`
    /// turns it off).
    pub checks: bool,
    /// `--max-memory`: the memory budget of every read (`None`: the library's default).
    pub memory_budget: Option<u64>,
}

impl Settings {
    /// A command given no option: synced, checked, the library's budget.
    pub const DEFAULT: Settings = Settings {
        durability: Durability::Synced,
        checks: true,
        memory_budget: None,
    };
}

thread_local! {
    /// The settings of the command running on this thread.
    static SETTINGS: std::cell::Cell<Settings> = const { std::cell::Cell::new(Settings::DEFAULT) };
}

/// Runs `work` under `settings`, and puts the settings before it back afterwards, also when
/// `work` panics (a host that catches the panic runs its next command as it asks).
pub fn with_settings<T>(settings: Settings, work: impl FnOnce() -> T) -> T {
    struct Restore(Settings);
    impl Drop for Restore {
        fn drop(&mut self) {
            SETTINGS.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SETTINGS.with(|s| s.replace(settings)));
    work()
}

fn settings() -> Settings {
    SETTINGS.with(|s| s.get())
}

/// How writing commands finish their output: synced unless `--no-sync` was given.
pub fn durability() -> Durability {
    settings().durability
}

/// How every command opens a file: a command that hands bytes on (`cat`, the writing
/// commands) checks every digest and checksum covering them, unless `--no-verify` was given.
pub fn open_options() -> ztensor::OpenOptions {
    let settings = settings();
    let verify = if settings.checks {
        ztensor::Verify::Always
    } else {
        ztensor::Verify::Never
    };
    let options = ztensor::OpenOptions::new().verify(verify);
    match settings.memory_budget {
        Some(bytes) => options.memory_budget(bytes),
        None => options,
    }
}

/// An output file kind: `zt` is zTensor of the default version (v2); `v2` and `v1.2` name
/// the version.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Zt,
    #[value(name = "v2")]
    V2,
    #[value(name = "v1.2")]
    V1_2,
    Mag,
    Safetensors,
    Gguf,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestArg {
    None,
    Crc32c,
    Sha256,
    Xxh3,
}

/// `--dtype`: the float type a conversion casts floating-point tensors to.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastArg {
    F64,
    F32,
    F16,
    Bf16,
}

impl From<CastArg> for ztensor::DType {
    fn from(t: CastArg) -> Self {
        match t {
            CastArg::F64 => ztensor::DType::F64,
            CastArg::F32 => ztensor::DType::F32,
            CastArg::F16 => ztensor::DType::F16,
            CastArg::Bf16 => ztensor::DType::BF16,
        }
    }
}

/// `o` as a conversion with `--dtype` writes it (as it is without).
pub fn cast_view(
    o: ztensor::ObjectView<'_>,
    cast: Option<CastArg>,
) -> Result<ztensor::ObjectView<'_>, Failure> {
    match cast {
        Some(t) => o
            .cast_floats(t.into())
            .map_err(|e| Failure::Usage(e.message().to_owned().into())),
        None => Ok(o),
    }
}

/// What `--digest` asks a conversion to do with digests (`None`: keep the source's).
pub fn digest_choice(digest: Option<DigestArg>) -> ztensor::Keep<ztensor::DigestAlgorithm> {
    use ztensor::{DigestAlgorithm, Keep};
    match digest {
        None => Keep::Source,
        Some(DigestArg::None) => Keep::Never,
        Some(DigestArg::Crc32c) => Keep::Always(DigestAlgorithm::Crc32c),
        Some(DigestArg::Sha256) => Keep::Always(DigestAlgorithm::Sha256),
        Some(DigestArg::Xxh3) => Keep::Always(DigestAlgorithm::Xxh3),
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MagVersion {
    #[value(name = "1")]
    V1,
    #[value(name = "300")]
    V300,
}

impl From<MagVersion> for ztensor::mag::WriteVersion {
    fn from(v: MagVersion) -> Self {
        match v {
            MagVersion::V1 => ztensor::mag::WriteVersion::V1,
            MagVersion::V300 => ztensor::mag::WriteVersion::V300,
        }
    }
}

/// Why a command failed: the library's error as it was (its kind, file, object and offset,
/// which an in-process host such as the Python package raises as its own exception), or a
/// message of the tool's own.
#[derive(Debug)]
pub enum Reason {
    /// A library error.
    Error(Box<ztensor::Error>),
    /// The tool's own words.
    Text(String),
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Error(e) => e.fmt(f),
            Reason::Text(t) => f.write_str(t),
        }
    }
}

impl From<ztensor::Error> for Reason {
    fn from(e: ztensor::Error) -> Self {
        Reason::Error(Box::new(e))
    }
}

impl From<String> for Reason {
    fn from(text: String) -> Self {
        Reason::Text(text)
    }
}

impl From<&str> for Reason {
    fn from(text: &str) -> Self {
        Reason::Text(text.to_owned())
    }
}

/// How a command ended, when it did not simply succeed.
#[derive(Debug)]
pub enum Failure {
    /// The caller asked for something impossible (exit 2).
    Usage(Reason),
    /// A file is invalid, a check failed, or files differ (exit 1); the message is printed.
    Failed(Reason),
    /// Already reported on stdout (verify, diff): exit 1 quietly.
    Reported,
    /// `diff` could not compare (a file missing or unreadable): exit 2, as diff(1) does; the
    /// message is printed.
    Trouble(Reason),
    /// `diff` reported on stdout, but could not compare everything: exit 2 quietly.
    ReportedTrouble,
    /// Whoever read stdout stopped reading (`zt ls f | head -1`): stop at once, quietly,
    /// with the status a shell gives a writer a closed pipe ended (128 + SIGPIPE).
    PipeClosed,
}

impl From<ztensor::Error> for Failure {
    /// The caller's mistakes (a missing object, a conversion the target cannot hold) are usage
    /// errors; everything a file or the system did wrong is a failure.
    fn from(e: ztensor::Error) -> Self {
        match e.kind() {
            ztensor::ErrorKind::InvalidArgument | ztensor::ErrorKind::NotFound => {
                Failure::Usage(e.into())
            }
            _ => Failure::Failed(e.into()),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        match e.downcast::<ztensor::Error>() {
            Ok(e) => Failure::Failed(e.into()),
            Err(e) => Failure::Failed(format!("{e:#}").into()),
        }
    }
}

impl Failure {
    /// For `diff`, which exits 2 on any trouble: a usage or file failure becomes trouble.
    pub fn into_trouble(self) -> Failure {
        match self {
            Failure::Usage(m) | Failure::Failed(m) => Failure::Trouble(m),
            other => other,
        }
    }
}

pub type Outcome = Result<(), Failure>;

/// The kind a writing command writes: `--to` if given, else OUT's extension; the one place
/// every writing command learns what the user asked for.
pub fn output_kind(path: &Path, to: Option<Kind>) -> Result<Kind, Failure> {
    match to {
        Some(k) => Ok(k),
        None => kind_of(path),
    }
}

/// Commands that write `.zt` only refuse any other kind asked for (by `--to` or OUT's
/// extension) instead of writing a kind the user did not ask for; the version they write.
pub fn zt_only(command: &str, path: &Path, to: Option<Kind>, compact: bool) -> ZtResult {
    let kind = output_kind(path, to)?;
    if !kind.is_zt() {
        return Err(Failure::Usage(
            format!(
                "{}: {command} writes .zt only, not {}; write a .zt and `zt convert` it",
                path.display(),
                kind.extension()
            )
            .into(),
        ));
    }
    zt_version(kind, compact)
}

type ZtResult = Result<ztensor::Version, Failure>;

/// The zTensor version a `.zt` kind means, `--compact` applied (v2 only).
pub fn zt_version(kind: Kind, compact: bool) -> ZtResult {
    match (kind, compact) {
        (Kind::V1_2, true) => Err(Failure::Usage(
            "--compact applies to v2 output only (v1.2 packs blobs on 64 bytes already)".into(),
        )),
        (Kind::V1_2, false) => Ok(ztensor::Version::V1_2),
        (_, true) => Ok(ztensor::Version::V2Compact),
        (_, false) => Ok(ztensor::Version::V2),
    }
}

impl Kind {
    /// Whether this is zTensor output (of any version).
    pub fn is_zt(self) -> bool {
        matches!(self, Kind::Zt | Kind::V2 | Kind::V1_2)
    }

    pub fn extension(self) -> &'static str {
        match self {
            Kind::Zt | Kind::V2 | Kind::V1_2 => ".zt",
            Kind::Mag => ".mag",
            Kind::Safetensors => ".safetensors",
            Kind::Gguf => ".gguf",
        }
    }
}

/// A tolerance: a finite number >= 0.
pub fn tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a finite number >= 0")),
    }
}

pub fn kind_of(path: &Path) -> Result<Kind, Failure> {
    // A sharded set's index (`model.safetensors.index.json`) names its shards' kind. Read
    // lossily: a name that is not UTF-8 still ends in an ASCII extension.
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let base = Path::new(name.strip_suffix(".index.json").unwrap_or(&name));
    match base.extension().and_then(|e| e.to_str()) {
        Some("zt") => Ok(Kind::Zt),
        Some("mag") => Ok(Kind::Mag),
        Some("safetensors") => Ok(Kind::Safetensors),
        Some("gguf") => Ok(Kind::Gguf),
        _ => Err(Failure::Usage(format!(
            "{}: cannot tell the output kind from the extension; use --to zt|v2|v1.2|mag|safetensors|gguf",
            path.display()
        ).into())),
    }
}

/// Whether a command-line path names a URL (any scheme, known here or not) rather than a
/// file: the test every command applies before touching the disk, with the `remote` feature
/// or without it.
pub fn names_a_url(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.contains("://"))
}

/// Writing commands never replace an existing file unless told to.
pub fn check_output(path: &Path, force: bool) -> Outcome {
    if names_a_url(path) {
        return Err(Failure::Usage(
            format!(
                "{}: not a URL zt writes to (zt convert writes s3://, gs://, az://, http(s):// \
             when built with the remote feature)",
                path.to_string_lossy()
                    .split("://")
                    .next()
                    .unwrap_or("a URL")
            )
            .into(),
        ));
    }
    // A device, pipe or folder is refused with or without --force (the writer's rename
    // would replace it); said before suggesting --force, which could not help.
    if let Some(m) = std::fs::metadata(path).ok().filter(|m| !m.is_file()) {
        let what = if m.is_dir() {
            "a folder"
        } else {
            "not a regular file"
        };
        return Err(Failure::Usage(
            format!(
                "{}: {what}; zt writes its output to a regular file, replacing it whole",
                path.display()
            )
            .into(),
        ));
    }
    if path.exists() && !force {
        return Err(Failure::Usage(output_exists(path).into()));
    }
    Ok(())
}

/// The error for an output (a file or a URL) that exists when `--force` was not given: of
/// the operating system's kind, so that an in-process host raises what its language raises
/// for it (Python: `FileExistsError`); a usage error all the same.
pub fn output_exists(path: &Path) -> ztensor::Error {
    let exists = std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "use --force (force=True from Python) to replace it",
    );
    ztensor::Error::io(exists, "the output exists").in_file(path)
}

/// Where an embedding host hears how far a command has come, in place of bars drawn on
/// stderr (the Python package hands its `progress=` callback or tqdm to it).
pub trait ProgressListener: Send + Sync {
    /// The piece of work `what` (of `total` bytes; 0 when the size is not known) has `done`
    /// bytes done. Called with `done` 0 when it starts, as it advances (from any thread), and
    /// once with `finished` when it ends.
    fn report(&self, what: &str, done: u64, total: u64, finished: bool);
}

thread_local! {
    /// The listener of the command running on this thread, if its host gave one.
    static LISTENER: std::cell::RefCell<Option<std::sync::Arc<dyn ProgressListener>>> =
        const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// The notes of the command running on this thread, when its host collects them.
    static NOTES: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

/// Says `text` (an object left out, and why) as a note: on stderr as `zt: note: ...`, or into
/// the notes an in-process host collects ([`collecting_notes`]).
pub fn note(text: String) {
    let printed = NOTES.with(|notes| match &mut *notes.borrow_mut() {
        Some(collected) => {
            collected.push(text);
            None
        }
        None => Some(text),
    });
    if let Some(text) = printed {
        eprintln!("zt: note: {}", printable(&text));
    }
}

/// Whether a copying command passes over `o` (not numbers we decode); says so in a note.
pub fn skip_with_note(input: &Path, o: &ztensor::ObjectInfo) -> bool {
    match o.skipped() {
        Some(why) => {
            note(format!(
                "{}: object {:?} skipped: {why}",
                input.display(),
                o.name
            ));
            true
        }
        None => false,
    }
}

/// What a command that can leave unreadable objects out says when one stops it.
const SKIP_UNREADABLE_ADVICE: &str = "to write the rest without it: --skip-unreadable \
     (ztio: skip_unreadable=True)";

/// `e`, from copying `o`, with [`SKIP_UNREADABLE_ADVICE`] when `o` is listed as unreadable:
/// the user learns of the way past it where it stops them.
pub fn advised(o: &ztensor::ObjectInfo, e: ztensor::Error) -> ztensor::Error {
    if o.defect.is_some() && e.object() == Some(o.name.as_str()) {
        e.with_advice(SKIP_UNREADABLE_ADVICE)
    } else {
        e
    }
}

/// Whether `o` is left out as unreadable (`--skip-unreadable`), saying so in a note.
pub fn left_out_unreadable(input: &Path, o: &ztensor::ObjectInfo, skip_unreadable: bool) -> bool {
    match (&o.defect, skip_unreadable) {
        (Some(d), true) => {
            note(format!(
                "{}: object {:?} left out, unreadable: {d}",
                input.display(),
                o.name
            ));
            true
        }
        _ => false,
    }
}

/// Runs `work` with its notes collected instead of printed, and returns them beside its
/// result.
pub fn collecting_notes<T>(work: impl FnOnce() -> T) -> (T, Vec<String>) {
    struct Restore(Option<Vec<String>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            NOTES.with(|n| *n.borrow_mut() = self.0.take());
        }
    }
    let restore = Restore(NOTES.with(|n| n.replace(Some(Vec::new()))));
    let out = work();
    let notes = NOTES.with(|n| n.replace(None)).unwrap_or_default();
    drop(restore);
    (out, notes)
}

/// Runs `work` with `listener` hearing the progress of the bars it makes on this thread.
pub fn with_listener<T>(
    listener: Option<std::sync::Arc<dyn ProgressListener>>,
    work: impl FnOnce() -> T,
) -> T {
    type Listener = Option<std::sync::Arc<dyn ProgressListener>>;
    // Put back also when `work` panics, as `with_settings` does.
    struct Restore(Listener);
    impl Drop for Restore {
        fn drop(&mut self) {
            LISTENER.with(|l| *l.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(LISTENER.with(|l| l.replace(listener)));
    work()
}

/// Progress of one piece of work: an indicatif bar on stderr when stderr is a terminal and
/// nobody listens, else the host's listener, else nothing. Advanced from any thread.
pub struct Bar {
    draw: indicatif::ProgressBar,
    heard: Option<Heard>,
}

/// What a [`Bar`] tells a listener.
struct Heard {
    listener: std::sync::Arc<dyn ProgressListener>,
    what: String,
    total: u64,
    done: std::sync::atomic::AtomicU64,
}

impl Bar {
    fn new(what: &str, total: u64, draw: impl FnOnce() -> indicatif::ProgressBar) -> Self {
        let listener = LISTENER.with(|l| l.borrow().clone());
        match listener {
            Some(listener) => {
                listener.report(what, 0, total, false);
                Bar {
                    draw: indicatif::ProgressBar::hidden(),
                    heard: Some(Heard {
                        listener,
                        what: what.to_owned(),
                        total,
                        done: std::sync::atomic::AtomicU64::new(0),
                    }),
                }
            }
            None if std::io::stderr().is_terminal() => Bar {
                draw: draw(),
                heard: None,
            },
            None => Bar {
                draw: indicatif::ProgressBar::hidden(),
                heard: None,
            },
        }
    }

    /// `n` more bytes done.
    pub fn inc(&self, n: u64) {
        self.draw.inc(n);
        if let Some(h) = &self.heard {
            let done = h.done.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
            h.listener.report(&h.what, done, h.total, false);
        }
    }

    /// The work is over: the bar leaves the terminal; a listener hears the end.
    pub fn finish_and_clear(&self) {
        self.draw.finish_and_clear();
        if let Some(h) = &self.heard {
            // A spinner never advanced: its end is all of it.
            let done = h
                .done
                .load(std::sync::atomic::Ordering::Relaxed)
                .max(h.total);
            h.listener.report(&h.what, done, h.total, true);
        }
    }
}

/// A progress bar over `total` bytes (see [`Bar`]). Commands advance it by the bytes they
/// have read (stored bytes of the objects copied, decoded bytes compared), so it shows a
/// rate and a time left.
pub fn progress(total: u64, what: &str) -> Bar {
    Bar::new(what, total, || {
        let bar = indicatif::ProgressBar::new(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_owned());
        bar
    })
}

/// A spinner (see [`Bar`]) for work the library does in one call, where no byte count can
/// be followed: it shows the elapsed time and how much there is to do.
pub fn spinner(what: &str, total: u64) -> Bar {
    Bar::new(what, total, || {
        let bar = indicatif::ProgressBar::new_spinner();
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            bar.set_style(style);
        }
        bar.set_message(if total == 0 {
            what.to_owned()
        } else {
            format!("{what} ({})", indicatif::HumanBytes(total))
        });
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        bar
    })
}

/// `n` things, singular or plural: `count(1, "object")` is "1 object".
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `text` as it may reach a terminal: control characters (C0, DEL, C1) and the bidirectional
/// overrides shown as escapes (`\u{1b}`), so that a name or message from a file cannot move
/// the cursor, retitle the window, clear the screen, fake a line of output or reorder what is
/// shown. Text without them is returned as it is. `--json` output is exact instead (JSON
/// escapes control characters itself).
///
/// ```
/// assert_eq!(zt_cli::printable("w\u{1b}[2J\nx"), "w\\u{1b}[2J\\nx");
/// assert_eq!(zt_cli::printable("layers.0.weight"), "layers.0.weight");
/// ```
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !text.contains(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    std::borrow::Cow::Owned(shown)
}

/// Writes to stdout; a closed pipe (`zt ls f | head`) ends the command quietly
/// ([`Failure::PipeClosed`]).
pub fn out(s: &str) -> Outcome {
    let mut o = std::io::stdout().lock();
    stdout_written(o.write_all(s.as_bytes()).and_then(|_| o.flush()))
}

/// What a command's write to stdout came to: a closed pipe ends it quietly
/// ([`Failure::PipeClosed`]), any other error is a failure that says it was stdout.
pub fn stdout_written(written: std::io::Result<()>) -> Outcome {
    match written {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::PipeClosed),
        Err(e) => Err(Failure::Failed(
            format!("cannot write to stdout: {e}").into(),
        )),
    }
}

/// A size in bytes: a number, optionally followed by KB, MB, GB (powers of 1000) or KiB,
/// MiB, GiB (powers of 1024).
pub fn byte_size(s: &str) -> Result<u64, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => {
            return Err(format!(
                "{s:?}: the unit must be B, KB, MB, GB, KiB, MiB or GiB"
            ))
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{s:?} is not a size of at least 1 byte"))
}

/// The elements of the objects that hold numbers (a model's parameter count), saturating.
pub fn element_count(objects: &[ztensor::ObjectInfo]) -> u64 {
    objects
        .iter()
        .filter(|o| o.skipped().is_none())
        .map(ztensor::ObjectInfo::element_count)
        .fold(0, u64::saturating_add)
}

/// What a command-line input names: a file or URL as it is, a model folder as the model file
/// in it ([`ztensor::model_file`]: an index before a single file, `.safetensors` before
/// `pytorch_model.bin`).
pub fn resolve_input(path: std::path::PathBuf) -> Result<std::path::PathBuf, Failure> {
    // A hf:// repository named without a file is a model folder too.
    #[cfg(feature = "remote")]
    let hub = path.to_str().is_some_and(ztensor::remote::hub::is_hub_url);
    #[cfg(not(feature = "remote"))]
    let hub = false;
    if !hub && names_a_url(&path) {
        return Ok(path);
    }
    ztensor::model_file(&path).map_err(Failure::from)
}

/// The attributes to write as a GGUF model converted from `input`: a legacy GGML llama.cpp
/// model (its listing's `ggml.family` is `llama`) gets `general.name`, its file's name, as
/// llama.cpp's converter of such models names them (the library, which writes llama.cpp's
/// other keys, is not told the name); anything else is written as it is.
pub fn gguf_attributes<'a>(
    input: &Path,
    mut attributes: std::borrow::Cow<'a, ztensor::Attributes>,
) -> std::borrow::Cow<'a, ztensor::Attributes> {
    let llama = attributes.get("ggml.family").and_then(|f| f.as_str()) == Some("llama");
    if llama && !attributes.contains_key("general.name") {
        if let Some(name) = input.file_name().and_then(|n| n.to_str()) {
            let name = ztensor::Value::Text(name.to_owned());
            attributes.to_mut().insert("general.name".into(), name);
        }
    }
    attributes
}

/// Opens a file, or (built with the `remote` feature, the default) an `s3://`, `gs://`,
/// `az://`, `http://` or `https://` URL with ranged reads.
pub fn open_input(path: &Path) -> ztensor::Result<ztensor::Reader> {
    #[cfg(feature = "remote")]
    if let Some(url) = path.to_str().filter(|s| ztensor::is_url(s)) {
        return open_options().open_url(url);
    }
    #[cfg(not(feature = "remote"))]
    if names_a_url(path) {
        return Err(ztensor::Error::unsupported(
            "a URL: this zt was built without URL support (feature \"remote\")",
        ));
    }
    open_options().open(path)
}

/// Opens an input that a command copies into a new file. One split of a llama.cpp split model
/// opened by itself (its name not `<prefix>-NNNNN-of-MMMMM.gguf`, so that the others are not
/// found: an Ollama blob, a renamed file, a presigned URL) is refused: the copy would be part
/// of the model, and would keep the `split.*` keys that send llama.cpp looking for the rest
/// (llama.cpp refuses such a file too: "invalid split file name").
pub fn open_to_copy(path: &Path) -> Result<ztensor::Reader, Failure> {
    let r = open_input(path).map_err(|e| Failure::Failed(e.in_file(path).into()))?;
    let number = |key: &str| r.attributes().get(key).and_then(ztensor::Value::as_u64);
    if r.version().kind() == "gguf" {
        if let Some(count) = number("split.count").filter(|&n| n >= 2) {
            let no = number("split.no").map_or("?".to_owned(), |n| (n + 1).to_string());
            let why = format!(
                "is split {no} of {count} of a llama.cpp model, opened by itself: a copy would \
                 hold part of the model. Give the splits llama.cpp's names \
                 (<prefix>-00001-of-{count:05}.gguf ...) side by side and name any of them"
            );
            return Err(Failure::Failed(
                ztensor::Error::invalid(why).in_file(path).into(),
            ));
        }
    }
    Ok(r)
}

/// Whether `o` has no dense form here, so its components are all there is to give or
/// compare: a format the library carries but does not decode (MX blocks, a writer's own
/// formats); GGUF blocks and the other formats have one (`ObjectView::dense_form`).
pub fn has_no_dense_form(o: &ztensor::ObjectView<'_>) -> bool {
    matches!(o.format, ztensor::Format::Unknown(_)) && o.ggml_type().is_none()
}

/// Whether two attribute values are the same, floats by their bits: a NaN is the same as a
/// NaN with the same bits (a file compared with itself is the same), and -0.0 is not 0.0 (a
/// conversion must keep the sign).
pub fn same_value(a: &ztensor::Value, b: &ztensor::Value) -> bool {
    use ztensor::Value;
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, x), (ky, y))| kx == ky && same_value(x, y))
        }
        (Value::Tag(tx, x), Value::Tag(ty, y)) => tx == ty && same_value(x, y),
        _ => a == b,
    }
}

/// Adds the file attributes `from` (of the file at `source`) to `into`. An attribute both
/// have with different values is an error: the files disagree on what the model is (`zt
/// merge` and `zt convert` take `--set` or `--unset` for it, which the message names).
pub fn merge_attributes(
    into: &mut ztensor::Attributes,
    from: &ztensor::Attributes,
    between: &str,
    source: &std::path::Path,
) -> Result<(), Failure> {
    for (k, v) in from {
        match into.get(k) {
            Some(old) if !same_value(old, v) => {
                // `rm` and `upgrade` take neither option: the message says which commands do.
                let fix = format!(
                    "; --set {k}=VALUE gives the output one, --unset {k} none (zt convert, \
                     zt merge)"
                );
                return Err(Failure::Failed(
                    format!(
                        "file attribute {k:?} differs between {between} ({}){fix}",
                        source.display()
                    )
                    .into(),
                ));
            }
            _ => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_floats_are_the_same_by_their_bits() {
        let nan = ztensor::Value::Float(f64::NAN);
        assert!(same_value(&nan, &nan));
        assert!(!same_value(&nan, &ztensor::Value::Float(-f64::NAN)));
        assert!(!same_value(
            &ztensor::Value::Float(0.0),
            &ztensor::Value::Float(-0.0)
        ));
        let nested = |x| {
            ztensor::Value::Array(vec![ztensor::Value::Map(
                [("k".to_owned(), ztensor::Value::Float(x))].into(),
            )])
        };
        assert!(same_value(&nested(f64::NAN), &nested(f64::NAN)));
        assert!(!same_value(&nested(1.0), &nested(2.0)));
        assert!(!same_value(
            &ztensor::Value::Integer(1),
            &ztensor::Value::Float(1.0)
        ));
    }

    #[test]
    fn settings_last_one_run_and_are_put_back_after_a_panic() {
        let unsynced = Settings {
            durability: Durability::Unsynced,
            checks: false,
            memory_budget: Some(1024),
        };
        let inside = with_settings(unsynced, settings);
        assert_eq!(inside, unsynced);
        assert_eq!(settings(), Settings::DEFAULT);
        let panicked = std::panic::catch_unwind(|| {
            with_settings(unsynced, || panic!("a command that panics"));
        });
        assert!(panicked.is_err());
        assert_eq!(settings(), Settings::DEFAULT);
        assert_eq!(durability(), Durability::Synced);
    }
}
