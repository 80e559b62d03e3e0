//! `prepare`, `describe` and `exec_in_place`: the only ways a process is
//! launched, and where the helper is found.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::SandboxError;
use crate::cgroup;
use crate::env::filtered_env;
use crate::guard::ProcessGuard;
use crate::kernel::support;
use crate::prepare as steps;
use crate::runtime_dir::{ensure_runtime_dir, make_exec_dir, make_private_dir, sweep_runtime_dir};
use crate::spec::LaunchSpec;
use crate::summary::SandboxSummary;

/// File name of the small helper binary, installed next to `warden`.
pub const HELPER_BIN: &str = "warden-sandbox-exec";
/// First argument that makes the `warden` binary itself act as the helper
/// (the fallback when [`HELPER_BIN`] is not installed beside it).
pub const REEXEC_ARG: &str = "__sandbox-exec";

/// The program that applies the sandbox and runs the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Helper {
    /// The `warden-sandbox-exec` binary: started as `PATH PLAN-JSON`.
    Standalone(PathBuf),
    /// A program whose `main` hands `REEXEC_ARG PLAN-JSON` to
    /// [`crate::helper::main`] before anything else runs (warden itself).
    Reexec(PathBuf),
}

impl Helper {
    /// `warden-sandbox-exec` next to the running executable, else the
    /// running executable itself re-executed with [`REEXEC_ARG`] (e.g.
    /// after `cargo run`, which builds only the `warden` binary). Looked up
    /// once per process; the fallback is logged once at debug level.
    pub fn beside_current_exe() -> Result<Helper, String> {
        static FOUND: OnceLock<Result<Helper, String>> = OnceLock::new();
        FOUND
            .get_or_init(|| {
                let exe = std::env::current_exe().map_err(|e| format!("locating warden: {e}"))?;
                let beside = exe.with_file_name(HELPER_BIN);
                if beside.is_file() {
                    return Ok(Helper::Standalone(beside));
                }
                tracing::debug!(
                    missing = %beside.display(),
                    "sandbox helper binary not found; re-executing {} as the helper",
                    exe.display()
                );
                Ok(Helper::Reexec(exe))
            })
            .clone()
    }

    fn command(&self, plan_json: String) -> Command {
        match self {
            Helper::Standalone(path) => {
                let mut c = Command::new(path);
                c.arg(plan_json);
                c
            }
            Helper::Reexec(path) => {
                let mut c = Command::new(path);
                c.arg(REEXEC_ARG).arg(plan_json);
                c
            }
        }
    }
}

/// What every launch needs to know about the session.
#[derive(Debug, Clone)]
pub struct LaunchContext {
    /// The workspace root (absolute): the default working directory.
    pub workspace: PathBuf,
    /// Where a launch without a mount namespace view (a trusted server
    /// with `"sandbox": false`, or the `best_effort` fallback) gets its
    /// private HOME/TMPDIR folder. Created 0700 when missing; an existing
    /// one must be ours and not a symlink.
    pub runtime_dir: PathBuf,
    /// The helper to run. `None`: [`Helper::beside_current_exe`] (right
    /// for the `warden` binary; tests and other embedders name it, e.g.
    /// `env!("CARGO_BIN_EXE_warden-sandbox-exec")`).
    pub helper: Option<Helper>,
    /// warden's own files and folders (its configuration, policies and
    /// data, pins, the audit log and its head, its configuration folder):
    /// never a server's to write. One inside a `write` grant is bound
    /// read-only over it; a `write` grant that is one of them, or lies
    /// inside one, is refused.
    pub protect: Vec<PathBuf>,
    /// warden's credentials (its configuration folder: OAuth logins,
    /// approvals; the gateway's token files): never visible to a server.
    /// A folder inside a grant is covered by an empty read-only folder, a
    /// file by a device node on a `nodev` mount (any open of it fails
    /// with EACCES); a grant that is one of them or lies inside one is
    /// refused. Each is protected as well (as if in `protect`), so that
    /// the folders above it cannot be moved aside either.
    pub hide: Vec<PathBuf>,
}

impl LaunchContext {
    pub fn new(workspace: impl Into<PathBuf>, runtime_dir: impl Into<PathBuf>) -> Self {
        LaunchContext {
            workspace: workspace.into(),
            runtime_dir: runtime_dir.into(),
            helper: None,
            protect: Vec::new(),
            hide: Vec::new(),
        }
    }

    /// Uses the `warden-sandbox-exec` binary at `path`.
    pub fn with_helper(mut self, path: impl Into<PathBuf>) -> Self {
        self.helper = Some(Helper::Standalone(path.into()));
        self
    }

    /// Protects `paths` (see [`LaunchContext::protect`]).
    pub fn with_protected(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.protect.extend(paths);
        self
    }

    /// Hides `paths` (see [`LaunchContext::hide`]).
    pub fn with_hidden(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.hide.extend(paths);
        self
    }

    /// Re-executes `path` (a warden binary) as the helper.
    pub fn with_reexec_helper(mut self, path: impl Into<PathBuf>) -> Self {
        self.helper = Some(Helper::Reexec(path.into()));
        self
    }
}

/// A process ready to spawn and the guard that must outlive it. The
/// command's stdin, stdout and stderr are piped.
pub struct Prepared {
    pub command: Command,
    pub guard: ProcessGuard,
    pub summary: SandboxSummary,
}

/// What [`prepare`] would enforce, without starting anything (for
/// `warden sandbox check --server NAME` and `mcp status`).
pub fn describe(spec: &LaunchSpec, ctx: &LaunchContext) -> Result<SandboxSummary, SandboxError> {
    prepare(spec, ctx).map(|p| p.summary)
}

/// Builds the launch of one process: the command (the helper with the
/// plan, or, unsandboxed, the program itself), the guard owning its
/// process group and private folders, and the summary.
pub fn prepare(spec: &LaunchSpec, ctx: &LaunchContext) -> Result<Prepared, SandboxError> {
    prepare_with(spec, ctx, false)
}

/// Replaces the current process with the sandboxed command, like `bwrap`
/// does (for `warden sandbox exec`): the same plan and helper as
/// [`prepare`], one process and one hand-off fewer. The helper then is the
/// top of the tree: it removes the private HOME/TMPDIR when the command
/// ends, and `kill -9` of it still takes the whole pid namespace down.
/// stdin/stdout/stderr are inherited. Returns only on failure; a spec
/// whose sandbox is disabled is refused here (use [`prepare`]).
pub fn exec_in_place(spec: &LaunchSpec, ctx: &LaunchContext) -> SandboxError {
    if !spec.enabled {
        return SandboxError::Setup {
            server: spec.name.clone(),
            detail: "exec_in_place needs an enabled sandbox".into(),
        };
    }
    let prepared = match prepare_with(spec, ctx, true) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let mut command = prepared.command;
    command
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    let err = command.exec();
    // Only reached when exec failed. A host folder the helper was to
    // remove is swept by the next launch (its pid, ours, will be gone).
    drop(prepared.guard);
    SandboxError::Setup {
        server: spec.name.clone(),
        detail: format!("exec of the sandbox helper failed: {err}"),
    }
}

/// The host folder of a launch without a view: `exec-<pid>-<n>` in the
/// checked runtime folder, with `home/` and `tmp/`.
fn host_folder(spec: &LaunchSpec, ctx: &LaunchContext) -> Result<PathBuf, SandboxError> {
    let setup = |detail: String| SandboxError::Setup {
        server: spec.name.clone(),
        detail,
    };
    let uid = nix::unistd::geteuid().as_raw();
    ensure_runtime_dir(&ctx.runtime_dir, uid).map_err(|e| setup(e.to_string()))?;
    sweep_runtime_dir(&ctx.runtime_dir);
    let dir = make_exec_dir(&ctx.runtime_dir).map_err(|e| setup(e.to_string()))?;
    for sub in ["home", "tmp"] {
        make_private_dir(&dir.join(sub))
            .map_err(|e| setup(format!("{}: {e}", dir.join(sub).display())))?;
    }
    Ok(dir)
}

fn prepare_with(
    spec: &LaunchSpec,
    ctx: &LaunchContext,
    in_place: bool,
) -> Result<Prepared, SandboxError> {
    let setup = |detail: String| SandboxError::Setup {
        server: spec.name.clone(),
        detail,
    };
    // Checked here, where the path can still be named: inside the helper an
    // exec failure only shows as the server ending.
    if let Err(e) = std::fs::metadata(&spec.program) {
        return Err(setup(format!(
            "cannot execute {}: {e}",
            spec.program.display()
        )));
    }
    let cwd = spec.cwd.clone().unwrap_or_else(|| ctx.workspace.clone());
    if !spec.enabled {
        if !spec.trusted {
            return Err(setup(
                "only a trusted server may run without the sandbox".into(),
            ));
        }
        let guard = ProcessGuard::new(Some(host_folder(spec, ctx)?));
        let dir = guard.dir().map(Path::to_path_buf).unwrap_or_default();
        let env = filtered_env(spec, &dir.join("home"), &dir.join("tmp"))?;
        let mut command = Command::new(&spec.program);
        command
            .args(&spec.args)
            .env_clear()
            .envs(env)
            .current_dir(&cwd)
            .process_group(0);
        // The umask warden started with, not the one it may have for a
        // moment now (crate::umask): the helper sets it for a sandboxed
        // server; here nothing runs between fork and exec but this.
        let mask = crate::umask::for_servers() as libc::mode_t;
        // SAFETY: the closure runs in the forked child before exec and
        // calls only umask(2), which is async-signal-safe, allocates
        // nothing and cannot fail.
        unsafe {
            command.pre_exec(move || {
                libc::umask(mask);
                Ok(())
            });
        }
        piped(&mut command);
        let summary = SandboxSummary {
            enabled: false,
            network: "host".into(),
            mechanisms: vec!["filtered environment".into(), "process group".into()],
            ..Default::default()
        };
        return Ok(Prepared {
            command,
            guard,
            summary,
        });
    }
    let k = support();
    let gates = steps::gate(spec, k)?;
    let limits = steps::limits(spec, k, &gates, &cgroup::host())?;
    // Without a view (best_effort on an old kernel), HOME and TMPDIR are a
    // folder on the host.
    let mut guard = ProcessGuard::new(if gates.view {
        None
    } else {
        Some(host_folder(spec, ctx)?)
    });
    let (home, tmp) = match guard.dir() {
        Some(d) => (d.join("home"), d.join("tmp")),
        None => (
            PathBuf::from(steps::PRIVATE_HOME),
            PathBuf::from(steps::PRIVATE_DIR),
        ),
    };
    let mut env = filtered_env(spec, &home, &tmp)?;
    let path_var = env.get("PATH").cloned().unwrap_or_default();
    let host_dirs = guard.dir().map(|_| (home.as_path(), tmp.as_path()));
    let grants = steps::grants(spec, ctx, &path_var, gates.view, host_dirs)?;
    // The view's TMPDIR may be a folder of its own (a grant that is not
    // writable lies under /tmp); a TMPDIR the configuration set stays.
    if gates.view && env.get("TMPDIR").map(String::as_str) == Some(steps::PRIVATE_DIR) {
        env.insert("TMPDIR".to_string(), grants.tmpdir.display().to_string());
    }
    let mut plan = steps::plan(spec, cwd.clone(), &gates, &limits, &grants);
    let summary = steps::summary(&plan, gates, limits, grants);
    if in_place {
        plan.parent_pid = None;
        plan.cleanup = guard.release_dir();
    }
    let helper = match &ctx.helper {
        Some(h) => h.clone(),
        None => Helper::beside_current_exe().map_err(setup)?,
    };
    let json = serde_json::to_string(&plan).map_err(|e| setup(e.to_string()))?;
    let mut command = helper.command(json);
    // The server's variables are not the helper's own (helper::SERVER_ENV:
    // `LD_PRELOAD` and friends would run code in it before the sandbox
    // holds); it hands them to the server at exec.
    let env: Vec<(String, String)> = env.into_iter().collect();
    let env = serde_json::to_string(&env).map_err(|e| setup(e.to_string()))?;
    // The helper calls setsid(): its pid is the process group the guard kills.
    command
        .env_clear()
        .env(crate::helper::SERVER_ENV, env)
        .current_dir(&cwd);
    piped(&mut command);
    for gap in &summary.gaps {
        tracing::warn!(server = %spec.name, gap = %gap, "sandbox protection not enforced (best_effort)");
    }
    tracing::debug!(server = %spec.name, mechanisms = ?summary.mechanisms, "sandbox prepared");
    Ok(Prepared {
        command,
        guard,
        summary,
    })
}

fn piped(command: &mut Command) {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
}

/// What running the default sandbox for real showed (for `warden sandbox
/// check`): whether it starts, and which `/proc` it got.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub struct LiveCheck {
    /// The default profile started a command and it ran.
    pub started: bool,
    /// "fresh" (the pid namespace's own) or "snapshot (why)".
    pub proc: Option<String>,
    /// Why it did not start, or what the helper said.
    pub error: Option<String>,
}

/// Runs `/bin/sh -c 'test -r /proc/self/status'` under the default
/// untrusted sandbox with the real helper (namespaces, view, cgroups,
/// Landlock, seccomp), and reports what happened. Sweeps stale cgroups
/// and runtime folders on the way (the helper does).
pub fn live_check(ctx: &LaunchContext) -> LiveCheck {
    let spec = LaunchSpec {
        name: "check".into(),
        program: PathBuf::from("/bin/sh"),
        argv0: None,
        args: vec!["-c".into(), "test -r /proc/self/status".into()],
        env: crate::spec::EnvInputs::default(),
        cwd: Some(PathBuf::from("/")),
        enabled: true,
        trusted: false,
        read: Vec::new(),
        write: Vec::new(),
        network: crate::spec::Network::None,
        limits: crate::spec::Limits::default(),
        best_effort: false,
    };
    let failed = |error: String| LiveCheck {
        started: false,
        proc: None,
        error: Some(error),
    };
    let prepared = match prepare(&spec, ctx) {
        Ok(p) => p,
        Err(e) => return failed(e.to_string()),
    };
    let mut command = prepared.command;
    let mut guard = prepared.guard;
    command.stdin(Stdio::null()).stdout(Stdio::null());
    let child = match command.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("starting the helper: {e}")),
    };
    guard.attach(child.id());
    let out = match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => return failed(format!("waiting for the helper: {e}")),
    };
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match out.status.code() {
        Some(0) => LiveCheck {
            started: true,
            proc: Some("fresh".into()),
            error: None,
        },
        // The test failed: /proc has no `self`, i.e. the snapshot.
        Some(1) => LiveCheck {
            started: true,
            proc: Some(match stderr.split_once("refused: ") {
                Some((_, why)) => format!("snapshot (a fresh proc was refused: {why}"),
                None => "snapshot".into(),
            }),
            error: None,
        },
        code => failed(format!(
            "the sandbox did not start (exit {}): {stderr}",
            code.map_or_else(|| "by signal".to_string(), |c| c.to_string())
        )),
    }
}
