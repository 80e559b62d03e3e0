//! The launch seam: every stdio server process is created here, and only
//! here. Given a server's configuration this module builds the process
//! (filtered environment, own process group, and the sandbox of CONTRACT §7)
//! and hands back a ready `tokio::process::Command` plus a guard that owns
//! the process group and the private directories.
//!
//! Nothing outside this module calls Landlock, seccomp, namespaces or rlimits.
//!
//! # Mechanism (and why)
//!
//! `prepare` decides everything (paths, network mode, limits, which kernel
//! features to use, checked against [`kernel::support`]) and returns a
//! command that runs warden itself as a helper: `warden __sandbox-exec
//! PLAN-JSON` (dispatched at the top of `main`, before clap, threads or a
//! runtime). The helper is single-threaded, so it applies the sandbox with
//! ordinary code, then `exec`s the server. We chose the re-exec helper over
//! `pre_exec` because a pid namespace needs a process that stays outside it
//! (`unshare(CLONE_NEWPID)` affects only children) and an init inside it,
//! which a `pre_exec` closure (no allocation, one process) cannot provide;
//! the cost is about 2 ms per start (see BENCHMARKS.md).
//!
//! What is enforced for an untrusted server (see [`helper`] for the order):
//!
//! - **Filesystem**: Landlock (ABI ≥ 1; all access rights of the kernel's
//!   ABI are handled, so anything not granted is denied): system folders
//!   read+execute, a short `/etc` list, named `/dev` nodes, the executable's
//!   install prefix ([`paths::install_prefixes`]), `sandbox.read`
//!   (read+execute), private HOME/TMPDIR and `sandbox.write` (read+write,
//!   no execute). Never `/proc` (it would expose warden's environ).
//! - **Network `none`**: a fresh network namespace (no interface is up, so
//!   no TCP, UDP or raw packet reaches the host; abstract unix sockets are
//!   per namespace) *and* seccomp refusing every socket family but AF_UNIX
//!   (at `socket()`, never at `send()`: asyncio needs AF_UNIX socketpairs)
//!   *and* Landlock denying all TCP bind/connect. Any one of them alone
//!   stops UDP and TCP; they are layered because each can be missing.
//! - **Network `{connect_tcp, bind_tcp}`**: no network namespace, because
//!   a new namespace has its own loopback and the granted ports are usually
//!   services on the host's loopback (a database, a dev server). Instead
//!   Landlock ABI ≥ 4 allows exactly the listed TCP ports and seccomp
//!   refuses non-TCP sockets (UDP, raw, packet, SCTP/MPTCP), which Landlock
//!   does not cover. Consequence: no DNS over UDP; use addresses or `host`.
//! - **Signals and abstract unix sockets**: Landlock scopes (ABI ≥ 6), plus
//!   the pid and network namespaces.
//! - **Process tree**: own session (`setsid`), a user + pid namespace whose
//!   init is the helper's child; the helper dies with warden (a pidfd of
//!   warden; not `PR_SET_PDEATHSIG`, which fires when the spawning *thread*
//!   exits), init dies with the helper, and the
//!   kernel kills everything in a pid namespace when its init exits. So
//!   `kill -9` of warden leaves nothing behind, even a process that called
//!   `setsid()` or double-forked.
//! - **Limits**: `RLIMIT_DATA` (memory; not `RLIMIT_AS`, which V8's large
//!   PROT_NONE reservations would exhaust), `NOFILE`, `CPU`, `FSIZE`,
//!   `CORE=0`, `NPROC`. The kernel ignores `RLIMIT_NPROC` for uid 0, so as
//!   root the process cap is the pid namespace's own `kernel.pid_max`
//!   (per namespace since Linux 6.14; kernel minimum 301, so about 298
//!   processes). A pids cgroup would give the exact number but moving a
//!   process between cgroups cost 2–18 ms here, more than the whole sandbox.
//! - **seccomp** deny-list ([`seccomp`]): ptrace, mount family, bpf,
//!   keyctl, kexec, modules, unshare/setns/namespace clone flags, io_uring
//!   (it could open sockets behind the socket filter), perf, userfaultfd,
//!   TIOCSTI. Under network `none` on kernels before Landlock ABI 9 it also
//!   refuses `connect()` and addressed `sendto()`: only AF_UNIX sockets
//!   exist there, and a pathname socket such as `/var/run/docker.sock`
//!   would otherwise be reachable (Landlock scopes only abstract ones).
//! - **Environment**: cleared, then CONTRACT §7's list ([`env`]);
//!   `no_new_privs`; inherited descriptors above 2 are closed at exec.
//!
//! Missing kernel support fails closed with [`SandboxError::Unsupported`]
//! unless `best_effort`, in which case the gap is logged and listed in
//! [`SandboxSummary::gaps`].

mod env;
mod guard;
pub mod helper;
pub mod kernel;
pub mod paths;
pub mod plan;
pub mod seccomp;

use std::path::PathBuf;

use serde::Serialize;

use crate::config::{NetworkSpec, ServerConfig, StdioConfig, TransportConfig, Trust};

pub use env::filtered_env;
pub use guard::ProcessGuard;
pub use kernel::{Support, support};
use plan::{Plan, PlanLimits, PlanNetwork};

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("server `{server}` is not a stdio server; only stdio servers are launched")]
    NotStdio { server: String },
    #[error("server `{server}`: host variable `{var}` named in {key} is not set")]
    MissingEnv {
        server: String,
        var: String,
        key: &'static str,
    },
    #[error("server `{server}` needs {feature}, which this kernel does not provide: {detail}")]
    Unsupported {
        server: String,
        feature: String,
        detail: String,
    },
    #[error("server `{server}`: preparing the sandbox failed: {detail}")]
    Setup { server: String, detail: String },
}

/// What every launch needs to know about the session.
#[derive(Debug, Clone)]
pub struct LaunchContext {
    /// The workspace root (absolute).
    pub workspace: PathBuf,
    /// Where per-server private HOME/TMPDIR folders are created.
    pub runtime_dir: PathBuf,
    /// The warden executable that serves `__sandbox-exec`. `None`: this
    /// process's own executable (right for the `warden` binary; tests and
    /// other embedders pass `env!("CARGO_BIN_EXE_warden")`).
    pub helper: Option<PathBuf>,
}

impl LaunchContext {
    pub fn new(workspace: impl Into<PathBuf>, runtime_dir: impl Into<PathBuf>) -> Self {
        LaunchContext {
            workspace: workspace.into(),
            runtime_dir: runtime_dir.into(),
            helper: None,
        }
    }

    pub fn with_helper(mut self, helper: impl Into<PathBuf>) -> Self {
        self.helper = Some(helper.into());
        self
    }
}

/// A summary of what is enforced on one server, for `mcp status` and audit.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct SandboxSummary {
    pub enabled: bool,
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub network: String,
    /// Protections asked for but not enforced (only with `best_effort`).
    pub gaps: Vec<String>,
    /// Read + execute paths found from the executable (install prefix,
    /// interpreters, venv), part of `read`.
    pub install_prefix: Vec<PathBuf>,
    /// Mechanisms in force, e.g. `landlock-abi-6`, `user+pid+net namespaces`.
    pub mechanisms: Vec<String>,
    /// The limits applied.
    pub limits: Option<PlanLimits>,
    /// Known limits of what is enforced on this kernel (not gaps: nothing
    /// required is missing), e.g. no DNS under `connect_tcp`.
    pub notes: Vec<String>,
}

/// A process ready to spawn and the guard that must outlive it.
pub struct Prepared {
    pub command: tokio::process::Command,
    pub guard: ProcessGuard,
    pub summary: SandboxSummary,
}

/// What `prepare` would enforce on `server`, without starting anything
/// (for `warden sandbox check --server NAME` and `mcp status`).
pub fn describe(
    server: &ServerConfig,
    ctx: &LaunchContext,
) -> Result<SandboxSummary, SandboxError> {
    prepare(server, ctx).map(|p| p.summary)
}

/// Builds the launch of one stdio server.
pub fn prepare(server: &ServerConfig, ctx: &LaunchContext) -> Result<Prepared, SandboxError> {
    prepare_with(server, ctx, false)
}

/// Replaces the current process with the sandboxed command, like `bwrap`
/// does (for `warden sandbox exec`): the same plan and helper as
/// [`prepare`], one process and one hand-off fewer. The helper then is the
/// top of the tree: it removes the private HOME/TMPDIR when the command
/// ends, and `kill -9` of it still takes the whole pid namespace down.
/// stdin/stdout/stderr are inherited. Returns only on failure; a server
/// whose sandbox is disabled is refused here (use [`prepare`]).
pub fn exec_in_place(server: &ServerConfig, ctx: &LaunchContext) -> SandboxError {
    use std::os::unix::process::CommandExt;
    if !server.sandbox.enabled {
        return SandboxError::Setup {
            server: server.name.clone(),
            detail: "exec_in_place needs an enabled sandbox".into(),
        };
    }
    let prepared = match prepare_with(server, ctx, true) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let mut command = prepared.command.into_std();
    command
        .stdin(std::process::Stdio::inherit())
        .stdout(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::inherit());
    let err = command.exec();
    // Only reached when exec failed: the guard removes the folders.
    drop(prepared.guard);
    SandboxError::Setup {
        server: server.name.clone(),
        detail: format!("exec of the sandbox helper failed: {err}"),
    }
}

fn prepare_with(
    server: &ServerConfig,
    ctx: &LaunchContext,
    in_place: bool,
) -> Result<Prepared, SandboxError> {
    let TransportConfig::Stdio(stdio) = &server.transport else {
        return Err(SandboxError::NotStdio {
            server: server.name.clone(),
        });
    };
    let setup = |detail: String| SandboxError::Setup {
        server: server.name.clone(),
        detail,
    };
    // Checked here, where the path can still be named: inside the helper an
    // exec failure only shows as the server ending.
    if let Err(e) = std::fs::metadata(&stdio.program) {
        return Err(setup(format!(
            "cannot execute {}: {e}",
            stdio.program.display()
        )));
    }
    let guard = ProcessGuard::new(&server.name, &ctx.runtime_dir).map_err(|e| {
        setup(format!(
            "private HOME/TMPDIR under {}: {e}",
            ctx.runtime_dir.display()
        ))
    })?;
    let env = filtered_env(server, stdio, guard.home(), guard.tmp())?;
    let cwd = stdio.cwd.clone().unwrap_or_else(|| ctx.workspace.clone());
    if !server.sandbox.enabled {
        if server.trust != Trust::Trusted {
            return Err(setup(
                "only a trusted server may run without the sandbox".into(),
            ));
        }
        let mut command = tokio::process::Command::new(&stdio.program);
        command
            .args(&stdio.args)
            .env_clear()
            .envs(env)
            .current_dir(&cwd)
            .process_group(0);
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
    let path_var = env.get("PATH").cloned().unwrap_or_default();
    let (mut plan, summary) = build_plan(server, stdio, &guard, &path_var, support())?;
    if in_place {
        plan.parent_pid = 0;
        plan.cleanup = Some(guard.root().to_path_buf());
    }
    let helper = match &ctx.helper {
        Some(h) => h.clone(),
        None => std::env::current_exe().map_err(|e| setup(format!("locating warden: {e}")))?,
    };
    let json = serde_json::to_string(&plan).map_err(|e| setup(e.to_string()))?;
    let mut command = tokio::process::Command::new(helper);
    // The helper calls setsid(): its pid is the process group the guard kills.
    command
        .arg("__sandbox-exec")
        .arg(json)
        .env_clear()
        .envs(env)
        .current_dir(&cwd);
    piped(&mut command);
    for gap in &summary.gaps {
        tracing::warn!(server = %server.name, gap = %gap, "sandbox protection not enforced (best_effort)");
    }
    tracing::debug!(server = %server.name, mechanisms = ?summary.mechanisms, "sandbox prepared");
    Ok(Prepared {
        command,
        guard,
        summary,
    })
}

fn piped(command: &mut tokio::process::Command) {
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
}

/// Resolves a server's sandbox into a plan, checking each required feature
/// against the kernel.
fn build_plan(
    server: &ServerConfig,
    stdio: &StdioConfig,
    guard: &ProcessGuard,
    path_var: &str,
    k: &Support,
) -> Result<(Plan, SandboxSummary), SandboxError> {
    let spec = &server.sandbox;
    let mut gaps = Vec::new();
    let mut mechanisms = Vec::new();
    let mut need = |ok: bool, feature: &str, detail: String| -> Result<bool, SandboxError> {
        if ok {
            return Ok(true);
        }
        if spec.best_effort {
            gaps.push(format!("{feature}: {detail}"));
            Ok(false)
        } else {
            Err(SandboxError::Unsupported {
                server: server.name.clone(),
                feature: feature.to_string(),
                detail,
            })
        }
    };
    if spec.network == NetworkSpec::Host && server.trust != Trust::Trusted {
        return Err(SandboxError::Setup {
            server: server.name.clone(),
            detail: "network \"host\" is only allowed for trusted servers".into(),
        });
    }
    let abi = k.landlock_abi;
    let landlock = need(
        abi >= 1,
        "Landlock filesystem rules",
        format!("Landlock ABI {abi}"),
    )?;
    if matches!(spec.network, NetworkSpec::Ports { .. }) {
        need(
            abi >= 4,
            "Landlock TCP port rules (ABI 4)",
            format!("Landlock ABI {abi}"),
        )?;
    }
    need(
        abi >= 6,
        "Landlock scoping of signals and abstract unix sockets (ABI 6)",
        format!("Landlock ABI {abi}"),
    )?;
    let seccomp = need(k.seccomp, "seccomp", "seccomp filters unavailable".into())?;
    if spec.network == NetworkSpec::None && !seccomp {
        need(
            k.net_namespaces,
            "network isolation",
            "neither seccomp nor network namespaces are available".into(),
        )?;
    }
    let pid_ns = need(
        k.pid_namespaces,
        "pid namespace (tear-down when warden dies)",
        "unshare(CLONE_NEWPID) failed".into(),
    )?;
    // Root needs no user namespace for the others, but one drops its host
    // capabilities; use it whenever it works.
    let user_ns = k.user_namespaces;
    let net_ns = spec.network == NetworkSpec::None && k.net_namespaces;
    // Process cap: RLIMIT_NPROC (per uid; ignored for root) and, inside
    // the pid namespace, a pid_max (kernel minimum 301) that holds for root.
    let pid_max = if pid_ns && k.pid_max_per_namespace {
        spec.limits.processes.saturating_add(3).max(301)
    } else {
        0
    };
    if k.euid == 0 && pid_max == 0 {
        need(
            false,
            "process limit",
            "running as root (RLIMIT_NPROC is not enforced) and no per-namespace pid_max (Linux >= 6.14)"
                .into(),
        )?;
    }
    // Paths.
    let mut read_exec: Vec<PathBuf> = paths::SYSTEM_RX.iter().map(PathBuf::from).collect();
    let install_prefix: Vec<PathBuf> = paths::install_prefixes(&stdio.program, path_var)
        .into_iter()
        .collect();
    read_exec.extend(install_prefix.iter().cloned());
    let mut read: Vec<PathBuf> = paths::ETC_READ
        .iter()
        .chain(paths::DEV_READ)
        .map(PathBuf::from)
        .collect();
    let mut write: Vec<PathBuf> = paths::DEV_RW.iter().map(PathBuf::from).collect();
    write.push(guard.home().to_path_buf());
    write.push(guard.tmp().to_path_buf());
    for (key, list, out) in [
        ("sandbox.read", &spec.read, &mut read_exec),
        ("sandbox.write", &spec.write, &mut write),
    ] {
        for p in list {
            if !p.exists() {
                return Err(SandboxError::Setup {
                    server: server.name.clone(),
                    detail: format!("{key} path {} does not exist", p.display()),
                });
            }
            out.push(p.clone());
        }
    }
    read.retain(|p| p.exists());
    read_exec.retain(|p| p.exists());
    let mut seen = std::collections::BTreeSet::new();
    read_exec.retain(|p| seen.insert(p.clone()));

    let network = match &spec.network {
        NetworkSpec::None => PlanNetwork::None,
        NetworkSpec::Ports {
            connect_tcp,
            bind_tcp,
        } => PlanNetwork::Ports {
            connect_tcp: connect_tcp.clone(),
            bind_tcp: bind_tcp.clone(),
        },
        NetworkSpec::Host => PlanNetwork::Host,
    };
    let l = spec.limits;
    let limits = PlanLimits {
        memory_mb: l.memory_mb,
        processes: l.processes,
        open_files: l.open_files,
        cpu_seconds: l.cpu_seconds,
        file_size_mb: l.file_size_mb,
    };
    let argv0 = if stdio.command.is_empty() {
        stdio.program.display().to_string()
    } else {
        stdio.command.clone()
    };
    let mut argv = vec![argv0];
    argv.extend(stdio.args.iter().cloned());
    let plan = Plan {
        program: stdio.program.clone(),
        argv,
        read_exec: read_exec.clone(),
        read: read.clone(),
        write: write.clone(),
        network: network.clone(),
        limits,
        landlock_abi: if landlock { abi.min(9) } else { 0 },
        seccomp,
        deny_connect: seccomp && network == PlanNetwork::None && abi < 9,
        user_ns,
        net_ns,
        pid_ns,
        pid_max,
        cleanup: None,
        parent_pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
        best_effort: spec.best_effort,
    };

    if landlock {
        mechanisms.push(format!("landlock-abi-{}", abi.min(9)));
    }
    if seccomp {
        mechanisms.push("seccomp".into());
    }
    let mut notes = Vec::new();
    if abi < 9 {
        match &network {
            PlanNetwork::None if seccomp => notes.push(
                "pathname unix sockets: connect() refused by seccomp (Landlock ABI < 9 cannot scope them)"
                    .to_string(),
            ),
            PlanNetwork::None => {}
            _ => notes.push(
                "pathname unix sockets outside the grants stay connectable (needs Landlock ABI 9); \
                 DAC permissions still apply"
                    .to_string(),
            ),
        }
    }
    if matches!(network, PlanNetwork::Ports { .. }) {
        notes.push(
            "no UDP, so no DNS: connect to addresses, or use a trusted server with \"host\"".into(),
        );
    }
    let mut ns = Vec::new();
    if user_ns {
        ns.push("user");
    }
    if pid_ns {
        ns.push("pid");
    }
    if net_ns {
        ns.push("net+ipc");
    }
    if !ns.is_empty() {
        mechanisms.push(format!("{} namespaces", ns.join("+")));
    }
    mechanisms.push("rlimits".into());
    if k.euid != 0 {
        mechanisms.push(format!(
            "process cap {} (RLIMIT_NPROC, per uid)",
            limits.processes
        ));
    }
    if pid_max > 0 {
        mechanisms.push(format!(
            "process cap {} (pid namespace pid_max)",
            pid_max - 3
        ));
    }
    mechanisms.push("no_new_privs".into());
    mechanisms.push("own session".into());
    mechanisms.push("filtered environment".into());
    let summary = SandboxSummary {
        enabled: true,
        read: read_exec.into_iter().chain(read).collect(),
        write,
        network: network_label(&network),
        gaps,
        install_prefix,
        mechanisms,
        limits: Some(limits),
        notes,
    };
    Ok((plan, summary))
}

fn network_label(n: &PlanNetwork) -> String {
    match n {
        PlanNetwork::None => "none".into(),
        PlanNetwork::Host => "host".into(),
        PlanNetwork::Ports {
            connect_tcp,
            bind_tcp,
        } => {
            format!("tcp connect {connect_tcp:?} bind {bind_tcp:?}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Scope, StdioConfig};
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn server(best_effort: bool) -> ServerConfig {
        ServerConfig {
            name: "t".into(),
            transport: TransportConfig::Stdio(StdioConfig {
                command: "/bin/true".into(),
                program: PathBuf::from("/bin/true"),
                args: vec![],
                env: BTreeMap::new(),
                env_from: vec![],
                cwd: None,
            }),
            timeout: Duration::from_secs(1),
            disabled: false,
            trust: Trust::Untrusted,
            sandbox: crate::config::SandboxSpec {
                best_effort,
                ..Default::default()
            },
            scope: Scope::Explicit,
            source: PathBuf::from("t"),
            digest: String::new(),
        }
    }

    /// A kernel without Landlock, namespaces or seccomp.
    fn bare_kernel() -> Support {
        Support {
            landlock_abi: 0,
            landlock_fs: false,
            landlock_net: false,
            landlock_scope: false,
            user_namespaces: false,
            pid_namespaces: false,
            net_namespaces: false,
            seccomp: false,
            pid_max_per_namespace: false,
            euid: 1000,
        }
    }

    fn plan_for(best_effort: bool, k: &Support) -> Result<(Plan, SandboxSummary), SandboxError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let guard = ProcessGuard::new("t", dir.path()).expect("guard");
        let s = server(best_effort);
        let TransportConfig::Stdio(stdio) = &s.transport else {
            unreachable!()
        };
        build_plan(&s, stdio, &guard, "/usr/bin:/bin", k)
    }

    #[test]
    fn missing_kernel_features_fail_closed() {
        match plan_for(false, &bare_kernel()) {
            Err(SandboxError::Unsupported { feature, .. }) => assert!(feature.contains("Landlock")),
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => panic!("started without a sandbox"),
        }
    }

    #[test]
    fn best_effort_records_every_gap() {
        let (plan, summary) = plan_for(true, &bare_kernel()).expect("best effort");
        assert_eq!(plan.landlock_abi, 0);
        assert!(!plan.seccomp && !plan.pid_ns && !plan.net_ns);
        for needle in [
            "Landlock filesystem",
            "scoping",
            "seccomp",
            "pid namespace",
            "network isolation",
        ] {
            assert!(
                summary.gaps.iter().any(|g| g.contains(needle)),
                "no gap for {needle}: {:?}",
                summary.gaps
            );
        }
    }

    #[test]
    fn root_without_per_namespace_pid_max_has_no_process_cap() {
        let k = Support {
            landlock_abi: 6,
            landlock_fs: true,
            landlock_net: true,
            landlock_scope: true,
            user_namespaces: true,
            pid_namespaces: true,
            net_namespaces: true,
            seccomp: true,
            pid_max_per_namespace: false,
            euid: 0,
        };
        assert!(matches!(
            plan_for(false, &k),
            Err(SandboxError::Unsupported { .. })
        ));
        let (_, summary) = plan_for(true, &k).expect("best effort");
        assert!(
            summary.gaps.iter().any(|g| g.contains("process limit")),
            "{:?}",
            summary.gaps
        );
    }
}
