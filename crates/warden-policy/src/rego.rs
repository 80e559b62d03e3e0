//! The Rego stage (CONTRACT §5): policies in package `warden`, evaluated
//! with regorus. Policies are parsed, compiled and evaluated once at load
//! (so a syntax error or an unknown function is a startup error), and one
//! internal rule that gathers `deny`, `ask` and `allow` is compiled into a
//! `CompiledPolicy`; each decision evaluates it from `&self` with the
//! call's input (no engine is cloned).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regorus::{Engine, Value as RegoValue};
use serde_json::Value;

use warden_core::Scope;

use crate::error::PolicyError;
use crate::vm::{VmMiss, VmPolicy};
use warden_core::digest::sha256_hex;

/// The shipped policies, embedded so the binary works anywhere.
pub const DEFAULT_REGO: &str = include_str!("../../../policies/default.rego");
pub const DEFAULT_TEST_REGO: &str = include_str!("../../../policies/default_test.rego");
pub const CI_REGO: &str = include_str!("../../../policies/ci.rego");
pub const CI_TEST_REGO: &str = include_str!("../../../policies/ci_test.rego");
/// Name under which the embedded default is reported.
pub const DEFAULT_REGO_NAME: &str = "<builtin>/policies/default.rego";

/// Gathers the three outputs of package `warden` in one evaluation. Rules
/// the user's policy does not define fall back to the defaults.
const GATHER: &str = r#"package warden__internal
import rego.v1
default deny := set()
deny := data.warden.deny
default ask := set()
ask := data.warden.ask
default allow := false
allow := data.warden.allow
decision := {"deny": deny, "ask": ask, "allow": allow}
"#;
const GATHER_RULE: &str = "data.warden__internal.decision";

/// Wall-clock budget of one policy evaluation; beyond it the evaluation
/// fails (and the call is denied).
pub const EVAL_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// One policy or data file that was loaded, with its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedFile {
    pub path: PathBuf,
    pub sha256: String,
}

/// What the Rego stage said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegoVerdict {
    pub deny: Vec<String>,
    pub ask: Vec<String>,
    pub allow: bool,
}

/// A compiled group of policies sharing one scope class.
#[derive(Clone)]
pub struct RegoSet {
    /// The prepared engine (kept for diagnostics such as the `allow` probe).
    engine: Engine,
    /// The gather rule compiled once; evaluated per decision from `&self`.
    compiled: regorus::CompiledPolicy,
    /// The gather rule as bytecode, when the policy runs on the VM
    /// ([`crate::vm`]); the interpreter answers otherwise.
    pub(crate) vm: Option<VmPolicy>,
    /// Project-scope policies may only restrict: their `allow` is ignored.
    restrict_only: bool,
    /// Whether a module may call `print`: then decisions are evaluated on
    /// a clone of `engine` with its prints gathered ([`show_prints`]),
    /// since `CompiledPolicy` always lets regorus write them to stderr.
    prints: bool,
    pub files: Vec<LoadedFile>,
}

impl std::fmt::Debug for RegoSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegoSet")
            .field("restrict_only", &self.restrict_only)
            .field("files", &self.files)
            .finish()
    }
}

/// Where a policy comes from: a path, or embedded text; or a data file.
#[derive(Debug, Clone)]
pub enum PolicyInput {
    Path(PathBuf),
    Embedded {
        name: String,
        text: String,
    },
    /// A project-scope file or folder: a repository chose it, so every
    /// `.rego` file found in the folder must resolve inside it. A link
    /// in a checked-out repository (`policy/x.rego -> /proc/self/environ`)
    /// would otherwise have its target read, and the parse error shows the
    /// target's text, secrets included, in a CI log.
    Confined(PathBuf),
    /// A JSON document the configuration names as data (`policy_data`).
    Data(PathBuf),
}

/// Expands files and folders into `.rego` files (tests excluded unless
/// `with_tests`). JSON files beside a policy are *not* data: data comes
/// only from files the configuration names as data ([`PolicyInput::Data`]).
///
/// When `confined`, every file found in a folder must resolve (symlinks
/// followed) inside the folder.
pub(crate) fn collect_within(
    path: &Path,
    with_tests: bool,
    confined: bool,
) -> Result<Vec<PathBuf>, PolicyError> {
    let meta = std::fs::metadata(path).map_err(|e| PolicyError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut rego = Vec::new();
    if meta.is_dir() {
        walk(path, with_tests, &mut rego)?;
        if confined {
            confine(path, &rego)?;
        }
    } else {
        rego.push(path.to_path_buf());
    }
    rego.sort();
    Ok(rego)
}

/// The `*.json` files directly in `dir` (for `warden policy test`, which
/// loads data beside tests as `opa test` does).
pub fn json_beside(dir: &Path) -> Result<Vec<PathBuf>, PolicyError> {
    Ok(read_dir_sorted(dir)?
        .into_iter()
        .filter(|p| is_data_file(p))
        .collect())
}

fn hidden(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

fn is_data_file(p: &Path) -> bool {
    p.is_file() && !hidden(p) && p.extension().is_some_and(|e| e == "json")
}

fn is_test_file(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with("_test.rego"))
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, PolicyError> {
    let io = |e: std::io::Error| PolicyError::Io {
        path: dir.to_path_buf(),
        message: e.to_string(),
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        out.push(entry.map_err(io)?.path());
    }
    out.sort();
    Ok(out)
}

/// Every `.rego` file under `dir`, each folder read once: a folder met
/// again through a link (`a -> .`, `b -> .`) is skipped, where the walk
/// once went down every path of links, 2^depth of them, until the kernel
/// refused the fortieth (a repository's policy folder held the session
/// for minutes).
fn walk(dir: &Path, with_tests: bool, rego: &mut Vec<PathBuf>) -> Result<(), PolicyError> {
    let mut seen = std::collections::HashSet::new();
    walk_once(dir, with_tests, rego, &mut seen)
}

fn walk_once(
    dir: &Path,
    with_tests: bool,
    rego: &mut Vec<PathBuf>,
    seen: &mut std::collections::HashSet<(u64, u64)>,
) -> Result<(), PolicyError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(|e| PolicyError::Io {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    if !seen.insert((meta.dev(), meta.ino())) {
        return Ok(());
    }
    for p in read_dir_sorted(dir)? {
        if hidden(&p) {
            continue;
        }
        if p.is_dir() {
            walk_once(&p, with_tests, rego, seen)?;
        } else if p.extension().is_some_and(|e| e == "rego") && (with_tests || !is_test_file(&p)) {
            rego.push(p);
        }
    }
    Ok(())
}

/// Refuses a file in `files` that resolves outside the folder `root` (a
/// project's policy folder; the folder `warden policy test` was given).
pub(crate) fn confine(root: &Path, files: &[PathBuf]) -> Result<(), PolicyError> {
    let io = |path: &Path, e: std::io::Error| PolicyError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let real_root = std::fs::canonicalize(root).map_err(|e| io(root, e))?;
    for file in files {
        let real = std::fs::canonicalize(file).map_err(|e| io(file, e))?;
        if !real.starts_with(&real_root) {
            // The target is not named: it is a place the repository chose
            // to point at, perhaps to learn whether it exists.
            return Err(PolicyError::Io {
                path: file.clone(),
                message: format!(
                    "resolves outside the policy folder {}; a folder's policies and \
                     data are read only from inside it, so this file is not read",
                    root.display()
                ),
            });
        }
    }
    Ok(())
}

/// The most a policy file may hold. Real policies are kilobytes; a link to
/// `/dev/zero` or a file grown without bound must not be read whole.
const MAX_POLICY_BYTES: u64 = 4 << 20;

/// A policy file's text: a regular file (a FIFO would block the session
/// forever, a device never end) of at most [`MAX_POLICY_BYTES`].
fn read(path: &Path) -> Result<String, PolicyError> {
    use std::io::Read;
    let io = |e: std::io::Error| PolicyError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let not_regular = || PolicyError::Io {
        path: path.to_path_buf(),
        message: "not a regular file (a FIFO, device or socket is not read as a policy)".into(),
    };
    // Checked before opening: opening a FIFO waits for a writer.
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::File::open(path).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(not_regular());
    }
    let mut text = String::new();
    file.take(MAX_POLICY_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_POLICY_BYTES {
        return Err(PolicyError::Io {
            path: path.to_path_buf(),
            message: format!("larger than {} MiB", MAX_POLICY_BYTES >> 20),
        });
    }
    no_controls(path, &text)?;
    Ok(text)
}

/// Whether `c` may not appear raw in a policy's name or text: a control
/// character but tab and line ends, or a bidirectional override (which
/// makes a line read otherwise than it parses).
fn forbidden(c: char) -> bool {
    (c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Refuses a policy whose path or text holds a [`forbidden`] character,
/// before regorus sees it: regorus writes some warnings (`import input`,
/// a keyword used as a name) to stderr itself, quoting the file's name and
/// line unfiltered, so such a character would reach the terminal or a CI
/// log raw (an escape sequence; a newline starting a workflow command).
/// Rego strings spell these as escapes (`"\u001b"`).
fn no_controls(path: &Path, text: &str) -> Result<(), PolicyError> {
    let refuse = |message: String| {
        Err(PolicyError::Io {
            path: path.to_path_buf(),
            message,
        })
    };
    if path
        .to_string_lossy()
        .chars()
        .any(|c| c.is_control() || forbidden(c))
    {
        return refuse("the file's name holds a control character; rename the file".into());
    }
    for (n, line) in text.lines().enumerate() {
        if let Some((col, c)) = line.chars().enumerate().find(|(_, c)| forbidden(*c)) {
            return refuse(format!(
                "line {}, column {}: U+{:04X} written raw; a policy holds no control or \
                 bidirectional characters (inside a string, write an escape: \"\\u{:04x}\")",
                n + 1,
                col + 1,
                u32::from(c),
                u32::from(c)
            ));
        }
    }
    Ok(())
}

pub(crate) fn timer_config() -> regorus::utils::limits::ExecutionTimerConfig {
    timer_within(EVAL_TIME_LIMIT)
}

/// An execution timer of `limit`, checked every 256 steps.
pub(crate) fn timer_within(
    limit: std::time::Duration,
) -> regorus::utils::limits::ExecutionTimerConfig {
    regorus::utils::limits::ExecutionTimerConfig {
        limit,
        check_interval: std::num::NonZeroU32::MIN.saturating_add(255),
    }
}

/// An engine, the files it loaded and the `(name, text)` of each module.
pub type BuiltEngine = (Engine, Vec<LoadedFile>, Vec<(String, String)>);

/// regorus keeps compiled regex and glob patterns in process-wide LRU
/// caches of 256 and 128 entries. A policy with more pattern call sites
/// than that evicts each pattern before a decision uses it again, so every
/// decision compiles every pattern anew: 100 files with 4 `glob.match`
/// each took 96 ms per decision (benches/growth.rs). The caches are grown
/// (never shrunk: another loaded pipeline may still use them) to twice
/// the call sites of the loaded sources, within regorus's own bound.
fn size_pattern_caches(sources: &[(String, String)]) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static REGEX: AtomicUsize = AtomicUsize::new(256);
    static GLOB: AtomicUsize = AtomicUsize::new(128);
    let sites = |needle: &str| -> usize {
        sources
            .iter()
            .map(|(_, text)| text.matches(needle).count())
            .sum()
    };
    let max = regorus::cache::Config::MAX_CAPACITY;
    let regex = sites("regex.").saturating_mul(2).min(max);
    let glob = sites("glob.").saturating_mul(2).min(max);
    crate::patterns::reserve(regex);
    let regex = REGEX.fetch_max(regex, Ordering::AcqRel).max(regex);
    let glob = GLOB.fetch_max(glob, Ordering::AcqRel).max(glob);
    regorus::cache::configure(regorus::cache::Config { regex, glob });
}

/// Largest data file read (a data document is configuration, not a dump).
const MAX_DATA_BYTES: u64 = 16 << 20;

/// Builds an engine from policy inputs. Returns the engine (not yet
/// evaluated), the files loaded (policies then data) and the source texts.
/// Every policy is checked for builtins that can allocate without bound
/// ([`crate::bounded`]); data may not define anything under `warden` nor
/// shadow a loaded package.
pub fn build_engine(inputs: &[PolicyInput], with_tests: bool) -> Result<BuiltEngine, PolicyError> {
    let mut engine = Engine::new();
    // A policy that loops or explodes is stopped and becomes a deny.
    engine.set_execution_timer_config(timer_config());
    // `CompiledPolicy` evaluations use the process-wide fallback only.
    regorus::utils::limits::set_fallback_execution_timer_config(Some(timer_config()));
    crate::patterns::install(&mut engine).map_err(|message| PolicyError::Rego {
        file: "<warden internal>".into(),
        message,
    })?;
    crate::bounded::install(&mut engine).map_err(|message| PolicyError::Rego {
        file: "<warden internal>".into(),
        message,
    })?;
    let mut files = Vec::new();
    let mut sources = Vec::new();
    let mut data = Vec::new();
    for input in inputs {
        match input {
            PolicyInput::Embedded { name, text } => {
                add_policy(&mut engine, name, text)?;
                files.push(LoadedFile {
                    path: PathBuf::from(name),
                    sha256: sha256_hex(text.as_bytes()),
                });
                sources.push((name.clone(), text.clone()));
            }
            PolicyInput::Path(path) | PolicyInput::Confined(path) => {
                let confined = matches!(input, PolicyInput::Confined(_));
                let rego = collect_within(path, with_tests, confined)?;
                if rego.is_empty() {
                    return Err(PolicyError::Io {
                        path: path.clone(),
                        message: "no .rego files found".into(),
                    });
                }
                for file in rego {
                    let text = read(&file)?;
                    let name = file.display().to_string();
                    add_policy(&mut engine, &name, &text)?;
                    files.push(LoadedFile {
                        path: file.clone(),
                        sha256: sha256_hex(text.as_bytes()),
                    });
                    sources.push((name, text));
                }
            }
            PolicyInput::Data(path) => {
                if !data.contains(path) {
                    data.push(path.clone());
                }
            }
        }
    }
    size_pattern_caches(&sources);
    // Every call must resolve now, not when evaluation first reaches it.
    let modules = crate::functions::Module::all(&sources);
    crate::functions::check(&modules).map_err(|message| PolicyError::Rego {
        file: modules
            .first()
            .map(|m| m.file.to_string())
            .unwrap_or_default(),
        message,
    })?;
    // Package roots the data may not shadow (`data.lib` of `package lib`).
    let roots: BTreeSet<String> = sources
        .iter()
        .filter_map(|(_, text)| package_of(text))
        .filter_map(|p| p.split('.').next().map(str::to_string))
        .collect();
    for file in data {
        let text = read_bounded(&file)?;
        let value = RegoValue::from_json_str(&text).map_err(|e| PolicyError::Data {
            path: file.clone(),
            message: e.to_string(),
        })?;
        let Ok(object) = value.as_object() else {
            return Err(PolicyError::Data {
                path: file.clone(),
                message: "a data document must be a JSON object".into(),
            });
        };
        for key in object.iter().map(|(k, _)| k) {
            let key = key.as_string().map(|k| k.to_string()).unwrap_or_default();
            if key.starts_with("warden") {
                return Err(PolicyError::Data {
                    path: file.clone(),
                    message: format!(
                        "top-level key `{key}`: data may not define anything under \
                         `data.warden…` (only policies decide `deny`, `ask` and `allow`); \
                         rename the key, e.g. `{}`",
                        key.replacen("warden", "lists", 1)
                    ),
                });
            }
            if roots.contains(&key) {
                return Err(PolicyError::Data {
                    path: file.clone(),
                    message: format!(
                        "top-level key `{key}` would shadow the rules of `package {key}`; \
                         rename the key"
                    ),
                });
            }
        }
        engine.add_data(value).map_err(|e| PolicyError::Data {
            path: file.clone(),
            message: format!("{e} (conflicts with data loaded before)"),
        })?;
        files.push(LoadedFile {
            path: file,
            sha256: sha256_hex(text.as_bytes()),
        });
    }
    Ok((engine, files, sources))
}

fn read_bounded(path: &Path) -> Result<String, PolicyError> {
    use std::io::Read;
    let io = |e: std::io::Error| PolicyError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_DATA_BYTES + 1).read_to_string(&mut text))
        .map_err(io)?;
    if text.len() as u64 > MAX_DATA_BYTES {
        return Err(PolicyError::Data {
            path: path.to_path_buf(),
            message: format!("larger than {} MiB", MAX_DATA_BYTES >> 20),
        });
    }
    Ok(text)
}

fn add_policy(engine: &mut Engine, name: &str, text: &str) -> Result<(), PolicyError> {
    crate::bounded::check_source(name, text).map_err(|message| PolicyError::Rego {
        file: name.to_string(),
        message,
    })?;
    engine
        .add_policy(name.to_string(), text.to_string())
        .map(|_| ())
        .map_err(|e| PolicyError::Rego {
            file: name.to_string(),
            message: e.to_string(),
        })
}

/// Logs the prints `engine` gathered, through the filter every text warden
/// does not control passes ([`warden_core::display`]): a policy printing
/// `input.arguments.x` prints what a tool's caller chose, and regorus on
/// its own writes it raw to stderr, where an escape drives the terminal
/// and a `::stop-commands::` line steers a CI runner.
pub(crate) fn show_prints(engine: &mut Engine) {
    for print in engine.take_prints().unwrap_or_default() {
        tracing::info!(target: "warden::policy::print", "{}", warden_core::display::line(&print));
    }
}

/// The package a module declares (first `package` line).
pub fn package_of(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix("package ")
            .map(|p| p.trim().trim_end_matches(';').to_string())
    })
}

impl RegoSet {
    /// Compiles one group of policies and evaluates it once against the
    /// first of `probes` so that unknown functions and evaluation errors
    /// are startup errors. It runs on the bytecode VM when the VM gives
    /// the interpreter's answer on every probe.
    pub fn load(
        inputs: &[PolicyInput],
        scope: Scope,
        probes: &[RegoValue],
    ) -> Result<RegoSet, PolicyError> {
        Self::load_using(inputs, scope, probes, VmUse::from_env())
    }

    pub(crate) fn load_using(
        inputs: &[PolicyInput],
        scope: Scope,
        probes: &[RegoValue],
        vm_use: VmUse,
    ) -> Result<RegoSet, PolicyError> {
        let probe = probes
            .first()
            .cloned()
            .unwrap_or_else(RegoValue::new_object);
        let probe = &probe;
        let (mut engine, files, sources) = build_engine(inputs, false)?;
        if !sources
            .iter()
            .any(|(_, text)| package_of(text).as_deref() == Some("warden"))
        {
            let (file, text) = sources.first().cloned().unwrap_or_default();
            return Err(PolicyError::Package {
                file,
                package: package_of(&text).unwrap_or_default(),
            });
        }
        let modules = crate::functions::Module::all(&sources);
        let checked = crate::functions::unconsulted_decisions(&modules).and_then(|()| {
            if scope == Scope::Project {
                crate::functions::no_print(&modules)
            } else {
                Ok(())
            }
        });
        checked.map_err(|message| PolicyError::Rego {
            file: modules
                .iter()
                .find(|m| message.starts_with(m.file))
                .map(|m| m.file.to_string())
                .unwrap_or_default(),
            message,
        })?;
        let prints = crate::functions::mentions_print(&modules);
        // Every evaluation from `engine` (the load probe, the `allow`
        // probe, the decisions of a policy that prints) gathers its prints
        // instead of regorus writing them unfiltered to stderr.
        engine.set_gather_prints(true);
        for (file, text) in &sources {
            let package = package_of(text).unwrap_or_default();
            if package != "warden" && !package.starts_with("warden.") {
                tracing::warn!(%file, %package, "policy is not in package `warden`; only `data.warden` is consulted");
            }
        }
        engine
            .add_policy("<warden internal>".into(), GATHER.into())
            .map_err(|e| PolicyError::Rego {
                file: "<warden internal>".into(),
                message: e.to_string(),
            })?;
        let names = || source_names(&sources);
        // Prepare the stored engine itself (analysis, scheduling), so the
        // per-decision clones start prepared; compiling the entry point
        // surfaces unknown functions anywhere in the policy.
        let compiled = engine
            .compile_with_entrypoint(&GATHER_RULE.into())
            .map_err(|e| PolicyError::RegoEval {
                files: names(),
                message: e.to_string(),
            })?;
        engine.set_input(probe.clone());
        let probed = engine.eval_rule(GATHER_RULE.into());
        // Shown, and not left in the engine for every clone to repeat.
        show_prints(&mut engine);
        probed.map_err(|e| PolicyError::RegoEval {
            files: names(),
            message: e.to_string(),
        })?;
        let vm = on_vm(&engine, &compiled, &sources, probes, vm_use);
        let set = RegoSet {
            engine,
            compiled,
            vm,
            restrict_only: scope == Scope::Project,
            prints,
            files,
        };
        set.eval_value(probe.clone())
            .map_err(|message| PolicyError::RegoEval {
                files: names(),
                message,
            })?;
        if set.restrict_only {
            let mut e = set.engine.clone();
            e.set_input(probe.clone());
            let allow = e.eval_rule("data.warden__internal.allow".into());
            show_prints(&mut e);
            if let Ok(RegoValue::Bool(true)) = allow {
                tracing::warn!(files = %names(), "project-scope policy defines `allow`; it is ignored");
            }
        }
        Ok(set)
    }

    /// Whether decisions run on the bytecode VM ([`crate::vm`]).
    pub fn on_vm(&self) -> bool {
        self.vm.is_some()
    }

    /// The gather rule's value for `input`: from the VM when the policy
    /// runs there and the VM answers, else from the interpreter.
    fn evaluate(&self, input: RegoValue) -> Result<RegoValue, String> {
        if let Some(vm) = &self.vm {
            match vm.eval(input.clone()) {
                Ok(out) => return Ok(out),
                Err(VmMiss::Limit(e)) => return Err(e),
                Err(VmMiss::Defer(why)) => {
                    tracing::debug!(%why, "the Rego VM deferred to the interpreter");
                }
            }
        }
        self.interpret(input)
    }

    pub(crate) fn interpret(&self, input: RegoValue) -> Result<RegoValue, String> {
        if self.prints {
            let mut e = self.engine.clone();
            e.set_input(input);
            let out = e.eval_rule(GATHER_RULE.into());
            show_prints(&mut e);
            return out.map_err(|e| e.to_string());
        }
        self.compiled
            .eval_with_input(input)
            .map_err(|e| e.to_string())
    }

    /// The VM's and the interpreter's answers, when the VM answers
    /// (`Ok`: the value; `Err`: a limit error, the interpreter's error).
    pub(crate) fn both_engines(
        &self,
        input: RegoValue,
    ) -> Option<(Result<RegoValue, String>, Result<RegoValue, String>)> {
        let vm = match self.vm.as_ref()?.eval(input.clone()) {
            Ok(v) => Ok(v),
            Err(VmMiss::Limit(e)) => Err(e),
            Err(VmMiss::Defer(_)) => return None,
        };
        Some((vm, self.interpret(input)))
    }

    /// Evaluates against one input. Errors are returned as text; the
    /// pipeline turns them into a deny.
    pub fn eval_value(&self, input: RegoValue) -> Result<RegoVerdict, String> {
        let out = self.evaluate(input)?;
        self.verdict_of(&out)
    }

    /// The verdict from the VM alone, its timer at `limit`: `None` when
    /// this group is not on the VM, or the VM defers to the interpreter or
    /// runs out of `limit` (the caller then decides on an evaluation
    /// thread, where the full budget applies: [`crate::pipeline`]'s
    /// inline decisions).
    pub(crate) fn eval_value_within(
        &self,
        input: RegoValue,
        limit: std::time::Duration,
    ) -> Option<Result<RegoVerdict, String>> {
        let out = self.vm.as_ref()?.eval_within(input, limit).ok()?;
        Some(self.verdict_of(&out))
    }

    fn verdict_of(&self, out: &RegoValue) -> Result<RegoVerdict, String> {
        let obj = out
            .as_object()
            .map_err(|_| format!("policy produced no decision ({out})"))?;
        let get = |k: &str| {
            obj.get(&RegoValue::from(k))
                .cloned()
                .unwrap_or(RegoValue::Undefined)
        };
        let deny = reasons(&get("deny"), "deny")?;
        let ask = reasons(&get("ask"), "ask")?;
        let allow = match get("allow") {
            RegoValue::Bool(b) => b,
            RegoValue::Undefined | RegoValue::Null => false,
            other => return Err(format!("`allow` must be a boolean, found {other}")),
        };
        Ok(RegoVerdict {
            deny,
            ask,
            allow: allow && !self.restrict_only,
        })
    }
}

/// Set to `interpreter` to keep every policy off the VM (to compare, or
/// should the VM be suspected of a wrong answer).
pub const ENGINE_ENV: &str = "WARDEN_REGO_ENGINE";

/// Which policy groups may run on the bytecode VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VmUse {
    /// Only a group made of the shipped policies (`default.rego`,
    /// `ci.rego`), whose answers the differential tests hold to the
    /// interpreter's. Any other policy runs on the interpreter: the VM
    /// does not fail on conflicting values (`x := 1` and `x := 2` both
    /// true, a function with two outputs, a partial object with two values
    /// for a key), where the interpreter fails the evaluation and warden
    /// denies; on the VM such a policy would silently decide (fail open).
    Shipped,
    /// Any group that compiles and agrees on the probes (the VM's own
    /// tests).
    #[cfg(test)]
    Any,
    /// None (`WARDEN_REGO_ENGINE=interpreter`).
    Never,
}

impl VmUse {
    fn from_env() -> VmUse {
        match std::env::var(ENGINE_ENV) {
            Ok(v) if v == "interpreter" => VmUse::Never,
            Ok(v) if !v.is_empty() && v != "auto" => {
                tracing::warn!(
                    "{ENGINE_ENV}={v:?} is not `interpreter` or `auto`; using `auto` \
                     (the shipped policies on the bytecode VM)"
                );
                VmUse::Shipped
            }
            _ => VmUse::Shipped,
        }
    }
}

/// The policy as bytecode, if `vm_use` allows it, it compiles and the VM
/// gives the interpreter's answer on every probe; otherwise `None` (and
/// why, at debug).
fn on_vm(
    engine: &Engine,
    compiled: &regorus::CompiledPolicy,
    sources: &[(String, String)],
    probes: &[RegoValue],
    vm_use: VmUse,
) -> Option<VmPolicy> {
    let names = || source_names(sources);
    let shipped = || {
        sources
            .iter()
            .all(|(_, text)| text == DEFAULT_REGO || text == CI_REGO)
    };
    match vm_use {
        VmUse::Never => {
            tracing::debug!(files = %names(), "policy runs on the Rego interpreter ({ENGINE_ENV})");
            return None;
        }
        VmUse::Shipped if !shipped() => {
            tracing::debug!(files = %names(), "policy runs on the Rego interpreter (not a shipped policy)");
            return None;
        }
        _ => {}
    }
    let vm = match VmPolicy::compile(compiled, GATHER_RULE, engine.get_data(), sources) {
        Ok(vm) => vm,
        Err(why) => {
            tracing::debug!(files = %names(), %why, "policy runs on the Rego interpreter");
            return None;
        }
    };
    for probe in probes {
        let reference = compiled.eval_with_input(probe.clone()).ok();
        match vm.eval(probe.clone()) {
            Ok(out) if Some(&out) == reference.as_ref() => {}
            other => {
                tracing::debug!(files = %names(), vm = ?other.map(|v| v.to_string()), interpreter = ?reference.map(|v| v.to_string()),
                    "the Rego VM disagreed with the interpreter on a probe; policy runs on the interpreter");
                return None;
            }
        }
    }
    Some(vm)
}

/// The file names of a group, for messages.
fn source_names(sources: &[(String, String)]) -> String {
    sources
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn reasons(v: &RegoValue, name: &str) -> Result<Vec<String>, String> {
    let items: Vec<RegoValue> = match v {
        RegoValue::Set(s) => s.iter().cloned().collect(),
        RegoValue::Array(a) => a.iter().cloned().collect(),
        RegoValue::Undefined | RegoValue::Null => Vec::new(),
        RegoValue::Bool(true) => vec![RegoValue::from(format!("policy `{name}` is true"))],
        RegoValue::Bool(false) => Vec::new(),
        other => {
            return Err(format!(
                "`{name}` must be a set of reason strings, found {other}"
            ));
        }
    };
    Ok(items
        .into_iter()
        .map(|r| match r.as_string() {
            Ok(s) => s.to_string(),
            Err(_) => r.to_json_str().unwrap_or_else(|_| format!("{r}")),
        })
        .collect())
}

/// Converts JSON to a regorus value directly (regorus's own `From` goes
/// through serde and yields `Undefined` on any error, which would let a
/// deny-only policy see no input at all).
pub fn to_rego(v: &Value) -> RegoValue {
    match v {
        Value::Null => RegoValue::Null,
        Value::Bool(b) => RegoValue::from(*b),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                RegoValue::from(u)
            } else if let Some(i) = n.as_i64() {
                RegoValue::from(i)
            } else {
                RegoValue::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => RegoValue::from(s.as_str()),
        Value::Array(items) => RegoValue::from(items.iter().map(to_rego).collect::<Vec<_>>()),
        Value::Object(map) => RegoValue::from(
            map.iter()
                .map(|(k, v)| (RegoValue::from(k.as_str()), to_rego(v)))
                .collect::<std::collections::BTreeMap<_, _>>(),
        ),
    }
}

/// Builds a regorus object from `(key, value)` pairs.
pub fn rego_object<'a>(pairs: impl IntoIterator<Item = (&'a str, RegoValue)>) -> RegoValue {
    RegoValue::from(
        pairs
            .into_iter()
            .map(|(k, v)| (RegoValue::from(k), v))
            .collect::<std::collections::BTreeMap<_, _>>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A policy naming `print` decides on a gathering copy of the engine
    /// (not `CompiledPolicy`, which lets regorus write to stderr), with the
    /// answers of the same policy without it.
    #[test]
    fn a_policy_naming_print_decides_as_without_it() {
        let with_print = "package warden\nimport rego.v1\ndeny contains m if {\n  m := input.arguments.m\n  print(\"seen\", m)\n}\n";
        let without = with_print.replace("  print(\"seen\", m)\n", "");
        let load = |text: &str| {
            RegoSet::load_using(
                &[
                    PolicyInput::Embedded {
                        name: "default.rego".into(),
                        text: DEFAULT_REGO.into(),
                    },
                    PolicyInput::Embedded {
                        name: "p.rego".into(),
                        text: text.into(),
                    },
                ],
                Scope::User,
                &[RegoValue::from_json_str(r#"{"arguments": {}}"#).unwrap()],
                VmUse::Never,
            )
            .unwrap()
        };
        let (printing, plain) = (load(with_print), load(&without));
        assert!(printing.prints && !plain.prints);
        let input = RegoValue::from_json_str(
            r#"{"tool": "echo", "server": "fx", "arguments": {"m": "\u001b]0;x\u0007"}}"#,
        )
        .unwrap();
        let (a, b) = (
            printing.eval_value(input.clone()).unwrap(),
            plain.eval_value(input.clone()).unwrap(),
        );
        assert_eq!(a.deny, b.deny);
        assert!(a.deny.iter().any(|d| d.contains("0;x")), "{:?}", a.deny);
    }

    fn load(text: &str) -> Result<RegoSet, PolicyError> {
        RegoSet::load(
            &[PolicyInput::Embedded {
                name: "p.rego".into(),
                text: text.into(),
            }],
            Scope::User,
            &[RegoValue::from_json_str(r#"{"arguments": {}}"#).unwrap()],
        )
    }

    #[test]
    fn the_empty_set_literal_loads() {
        let set = load("package warden\nimport rego.v1\ndefault deny := set()\nask := set()\n")
            .expect("`set()` is the empty set, not an unknown function");
        let v = set
            .eval_value(RegoValue::from_json_str(r#"{"arguments": {}}"#).unwrap())
            .unwrap();
        assert_eq!(v, RegoVerdict::default());
    }

    #[test]
    fn unknown_functions_fail_at_load() {
        for text in [
            "package warden\nimport rego.v1\ndeny contains \"x\" if { input.arguments.boom; foo.bar(1) }\n",
            "package warden\nimport rego.v1\nhelper(x) := y if { y := nope(x) }\ndeny contains \"x\" if { input.arguments.boom; helper(1) }\n",
            "package warden\nimport rego.v1\nunused := strings.nope(\"a\")\n",
        ] {
            let e = load(text).err().map(|e| e.to_string());
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.contains("nope") || e.contains("foo.bar")),
                "{text}: {e:?}"
            );
        }
    }
}
