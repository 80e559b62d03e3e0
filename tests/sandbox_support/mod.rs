//! Shared helpers for the sandbox tests: launching the hostile server with
//! and without the sandbox, calling its tools, canaries.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use warden::config::{SandboxSpec, Scope, ServerConfig, StdioConfig, TransportConfig, Trust};
use warden_sandbox::{LaunchContext, Prepared, ProcessGuard, SandboxError};

pub const WARDEN: &str = env!("CARGO_BIN_EXE_warden");
/// The sandbox helper binary of the same build.
pub const HELPER: &str = env!("CARGO_BIN_EXE_warden-sandbox-exec");

/// Temporary folders of one test: a workspace, a runtime dir for private
/// HOME/TMPDIR, and a secret folder outside both holding a random token.
pub struct Fixture {
    pub workspace: tempfile::TempDir,
    pub runtime: tempfile::TempDir,
    pub secret_dir: tempfile::TempDir,
    pub secret_file: PathBuf,
    pub token: String,
}

impl Fixture {
    pub fn new() -> Self {
        let workspace = tempfile::Builder::new()
            .prefix("wsb-ws-")
            .tempdir()
            .expect("tempdir");
        let runtime = tempfile::Builder::new()
            .prefix("wsb-rt-")
            .tempdir()
            .expect("tempdir");
        let secret_dir = tempfile::Builder::new()
            .prefix("wsb-secret-")
            .tempdir()
            .expect("tempdir");
        let token = format!("CANARY-{}", uuid::Uuid::new_v4().simple());
        let secret_file = secret_dir.path().join("secret.txt");
        std::fs::write(&secret_file, &token).expect("write secret");
        Fixture {
            workspace,
            runtime,
            secret_dir,
            secret_file,
            token,
        }
    }

    pub fn ctx(&self) -> LaunchContext {
        LaunchContext::new(self.workspace.path(), self.runtime.path()).with_helper(HELPER)
    }
}

pub fn server_config(
    program: &Path,
    args: &[&str],
    spec: SandboxSpec,
    trust: Trust,
) -> ServerConfig {
    ServerConfig {
        name: "hostile".into(),
        transport: TransportConfig::Stdio(StdioConfig {
            command: program.display().to_string(),
            program: program.to_path_buf(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: BTreeMap::new(),
            env_from: Vec::new(),
            cwd: None,
        }),
        timeout: Duration::from_secs(30),
        protocol: Default::default(),
        sampling: Default::default(),
        elicitation: Default::default(),
        disabled: false,
        trust,
        sandbox: spec,
        scope: Scope::Explicit,
        source: PathBuf::from("test"),
        digest: String::new(),
        content: Default::default(),
        approval_digest: String::new(),
    }
}

/// `warden_sandbox::prepare` for a configured (stdio) server, through the
/// same conversion warden uses.
pub fn prepare(cfg: &ServerConfig, ctx: &LaunchContext) -> Result<Prepared, SandboxError> {
    let spec = warden::launch::launch_spec(cfg).expect("a stdio server");
    warden_sandbox::prepare(&spec, ctx)
}

/// How to launch the server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Through `sandbox::prepare` with the given spec.
    Sandboxed,
    /// A plain spawn with warden's whole environment and no restriction:
    /// the baseline that shows each canary can fire.
    Unsandboxed,
}

pub struct Server {
    pub client: RunningService<RoleClient, ()>,
    pub guard: Option<ProcessGuard>,
    pub pid: Option<u32>,
}

impl Server {
    /// Stops the server and everything it started.
    pub async fn stop(mut self) {
        let _ = self.client.cancel().await;
        if let Some(g) = self.guard.take() {
            drop(g);
        } else if let Some(pid) = self.pid {
            // Baseline: kill its process group.
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
}

pub async fn launch(
    fx: &Fixture,
    mode: Mode,
    program: &Path,
    args: &[&str],
    spec: SandboxSpec,
) -> Server {
    let (command, guard) = match mode {
        Mode::Sandboxed => {
            let cfg = server_config(program, args, spec, Trust::Untrusted);
            let p = prepare(&cfg, &fx.ctx()).expect("prepare");
            assert!(p.summary.enabled);
            assert!(p.summary.gaps.is_empty(), "gaps: {:?}", p.summary.gaps);
            (tokio::process::Command::from(p.command), Some(p.guard))
        }
        Mode::Unsandboxed => {
            let mut c = tokio::process::Command::new(program);
            c.args(args)
                .current_dir(fx.workspace.path())
                .process_group(0);
            (c, None)
        }
    };
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = transport.id();
    let mut guard = guard;
    if let (Some(g), Some(pid)) = (guard.as_mut(), pid) {
        g.attach(pid);
    }
    let client = tokio::time::timeout(Duration::from_secs(30), ().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize");
    Server { client, guard, pid }
}

/// Speaks MCP with a server started by `cmd` (which owns its own sandbox,
/// if any, e.g. `warden sandbox exec -- …`).
pub async fn launch_command(cmd: tokio::process::Command) -> Server {
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = transport.id();
    let client = tokio::time::timeout(Duration::from_secs(30), ().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize");
    Server {
        client,
        guard: None,
        pid,
    }
}

/// Runs a prepared command to its end with no stdin, its process group
/// under the guard's watch, and returns its output.
pub fn run_prepared(prepared: Prepared) -> std::process::Output {
    let mut command = prepared.command;
    let mut guard = prepared.guard;
    command.stdin(std::process::Stdio::null());
    let child = command.spawn().expect("spawn the helper");
    guard.attach(child.id());
    let out = child.wait_with_output().expect("wait");
    drop(guard);
    out
}

/// `prepare` of the hostile server with `spec`, for tests of what is
/// refused before anything starts.
pub fn prepare_hostile(fx: &Fixture, spec: SandboxSpec) -> Result<Prepared, SandboxError> {
    let cfg = server_config(
        Path::new(WARDEN),
        &["__hostile-server"],
        spec,
        Trust::Untrusted,
    );
    prepare(&cfg, &fx.ctx())
}

pub async fn launch_hostile(fx: &Fixture, mode: Mode, spec: SandboxSpec) -> Server {
    launch(fx, mode, Path::new(WARDEN), &["__hostile-server"], spec).await
}

/// Like [`call`], but a call the server never answers (it was ended, e.g.
/// by the OOM killer or at the CPU limit) is `Err` with the error.
pub async fn try_call(server: &Server, tool: &str, args: Value) -> Result<(String, Value), String> {
    let Value::Object(map) = args else {
        panic!("args must be an object")
    };
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        server
            .client
            .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(map)),
    )
    .await
    .map_err(|_| "tool call timed out".to_string())?
    .map_err(|e| e.to_string())?;
    let raw = serde_json::to_string(&result).expect("serialize");
    let text = serde_json::to_value(&result).expect("value")["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let parsed = serde_json::from_str(&text).unwrap_or(json!(null));
    Ok((raw, parsed))
}

/// Calls a tool and returns the raw text of its result (what a model or
/// user would see) and the parsed JSON report.
pub async fn call(server: &Server, tool: &str, args: Value) -> (String, Value) {
    let Value::Object(map) = args else {
        panic!("args must be an object")
    };
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        server
            .client
            .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(map)),
    )
    .await
    .expect("tool call timed out")
    .expect("tool call");
    let raw = serde_json::to_string(&result).expect("serialize");
    let text = serde_json::to_value(&result).expect("value")["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let parsed = serde_json::from_str(&text).unwrap_or(json!(null));
    (raw, parsed)
}

/// Whether the tests run as root (some attacks need root to fire, some
/// mechanisms, e.g. writable cgroups, are there only for root).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Says loudly that (part of) a test did not run, and why.
pub fn skipped(test: &str, why: &str) {
    eprintln!(
        "SKIPPED {test} (uid {}): {why}",
        nix::unistd::geteuid().as_raw()
    );
}

/// Asserts that a hostile tool's report is a refusal by one of the
/// filesystem layers: ENOENT (not in the view), EROFS (read-only bind) or
/// EACCES (Landlock).
pub fn assert_refused(report: &Value, raw: &str) {
    assert_eq!(report["ok"], json!(false), "{raw}");
    use nix::errno::Errno;
    let errno = report["errno"].as_i64().unwrap_or_default() as i32;
    assert!(
        [Errno::ENOENT, Errno::EROFS, Errno::EACCES]
            .iter()
            .any(|e| *e as i32 == errno),
        "errno {errno}: {raw}"
    );
}

/// Pids of live (non-zombie) processes whose argv[0] is `marker`.
pub fn processes_named(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let argv0 = cmd.split(|b| *b == 0).next().unwrap_or_default();
        if argv0 != marker.as_bytes() {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next());
        if state != Some("Z") {
            out.push(pid);
        }
    }
    out
}

pub fn kill_all(pids: &[i32]) {
    for &p in pids {
        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
    }
}

/// Waits up to `within` for `f` to hold.
pub async fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn marker() -> String {
    format!("wsb-marker-{}", uuid::Uuid::new_v4().simple())
}

/// `warden sandbox exec --profile P -- ARGV…` for `fx` (`profile` written
/// to the workspace as P), HOME the workspace, TMPDIR the runtime folder.
pub fn sandbox_exec(fx: &Fixture, profile: &Value, argv: &[&str]) -> std::process::Command {
    let path = fx.workspace.path().join("profile.json");
    std::fs::write(&path, profile.to_string()).expect("profile");
    let mut c = std::process::Command::new(WARDEN);
    c.args(["sandbox", "exec", "--profile"])
        .arg(&path)
        .arg("--")
        .args(argv)
        .env("HOME", fx.workspace.path())
        .env("TMPDIR", fx.runtime.path())
        .env_remove("WARDEN_CGROUP_PARENT")
        .current_dir(fx.workspace.path());
    c
}

/// `argv` outside every sandbox, never as root: as `nobody` (uid 65534,
/// no groups, no inheritable capabilities) when the tests run as root,
/// else as the current (unprivileged) user. The baseline of an attack.
pub fn unprivileged(argv: &[&str]) -> std::process::Command {
    if is_root() {
        let mut c = std::process::Command::new("/usr/bin/setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .args(argv);
        c
    } else {
        let mut c = std::process::Command::new(argv[0]);
        c.args(&argv[1..]);
        c
    }
}
