//! From a [`LaunchSpec`] to the [`Plan`] the helper applies and the
//! [`SandboxSummary`] warden reports, in four steps:
//!
//! 1. [`gate`]: which kernel features this launch uses, checked against
//!    [`Support`]; a missing one fails closed unless `best_effort`, which
//!    records it as a gap instead.
//! 2. [`grants`]: which paths are readable, executable and writable.
//! 3. [`plan`]: both combined into what the helper does.
//! 4. [`summary`]: what is in force, in words, for `mcp status`,
//!    `sandbox check` and the audit log.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::SandboxError;
use crate::guard::ProcessGuard;
use crate::kernel::Support;
use crate::paths;
use crate::plan::Plan;
use crate::spec::{LaunchSpec, Network};
use crate::summary::SandboxSummary;

/// Highest Landlock ABI this build knows how to use.
const MAX_LANDLOCK_ABI: u8 = 9;

/// The kernel features one launch uses.
#[derive(Debug)]
pub(crate) struct Gates {
    pub landlock_abi: Option<u8>,
    pub seccomp: bool,
    pub user_ns: bool,
    pub net_ns: bool,
    pub pid_ns: bool,
    pub pid_max: Option<u64>,
    /// Protections asked for but not enforced (only with `best_effort`).
    pub gaps: Vec<String>,
}

/// Decides which kernel features to use, failing closed on a missing one
/// unless `best_effort`.
pub(crate) fn gate(spec: &LaunchSpec, k: &Support) -> Result<Gates, SandboxError> {
    if spec.network == Network::Host && !spec.trusted {
        return Err(SandboxError::Setup {
            server: spec.name.clone(),
            detail: "network \"host\" is only allowed for trusted servers".into(),
        });
    }
    let mut gaps = Vec::new();
    let mut need = |ok: bool, feature: &str, detail: String| -> Result<bool, SandboxError> {
        if ok {
            return Ok(true);
        }
        if spec.best_effort {
            gaps.push(format!("{feature}: {detail}"));
            Ok(false)
        } else {
            Err(SandboxError::Unsupported {
                server: spec.name.clone(),
                feature: feature.to_string(),
                detail,
            })
        }
    };
    let abi = k.landlock_abi;
    let landlock = need(
        abi >= 1,
        "Landlock filesystem rules",
        format!("Landlock ABI {abi}"),
    )?;
    if matches!(spec.network, Network::Ports { .. }) {
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
    if spec.network == Network::None && !seccomp {
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
    // Process cap: RLIMIT_NPROC (per uid; ignored for root) and, inside
    // the pid namespace, a pid_max (kernel minimum 301) that holds for root.
    let pid_max = (pid_ns && k.pid_max_per_namespace)
        .then(|| spec.limits.processes.saturating_add(3).max(301));
    if k.euid == 0 && pid_max.is_none() {
        need(
            false,
            "process limit",
            "running as root (RLIMIT_NPROC is not enforced) and no per-namespace pid_max (Linux >= 6.14)"
                .into(),
        )?;
    }
    Ok(Gates {
        landlock_abi: landlock.then(|| abi.min(MAX_LANDLOCK_ABI)),
        seccomp,
        // Root needs no user namespace for the others, but one drops its
        // host capabilities; use it whenever it works.
        user_ns: k.user_namespaces,
        net_ns: spec.network == Network::None && k.net_namespaces,
        pid_ns,
        pid_max,
        gaps,
    })
}

/// The paths of one launch.
#[derive(Debug)]
pub(crate) struct Grants {
    /// Read + execute: system folders, the install prefix, `read`.
    pub read_exec: Vec<PathBuf>,
    /// Read only: the `/etc` list and device nodes.
    pub read: Vec<PathBuf>,
    /// Read + write: device nodes, private HOME/TMPDIR, `write`.
    pub write: Vec<PathBuf>,
    /// The part of `read_exec` found from the executable.
    pub install_prefix: Vec<PathBuf>,
}

/// Collects the granted paths. A granted path that does not exist is an
/// error (Landlock would skip it silently, hiding a typo).
pub(crate) fn grants(
    spec: &LaunchSpec,
    guard: &ProcessGuard,
    path_var: &str,
) -> Result<Grants, SandboxError> {
    let mut read_exec: Vec<PathBuf> = paths::SYSTEM_RX.iter().map(PathBuf::from).collect();
    let install_prefix: Vec<PathBuf> = paths::install_prefixes(&spec.program, path_var)
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
                    server: spec.name.clone(),
                    detail: format!("{key} path {} does not exist", p.display()),
                });
            }
            out.push(p.clone());
        }
    }
    read.retain(|p| p.exists());
    read_exec.retain(|p| p.exists());
    let mut seen = BTreeSet::new();
    read_exec.retain(|p| seen.insert(p.clone()));
    Ok(Grants {
        read_exec,
        read,
        write,
        install_prefix,
    })
}

/// What the helper does for this launch.
pub(crate) fn plan(spec: &LaunchSpec, gates: &Gates, grants: &Grants) -> Plan {
    let argv0 = spec
        .argv0
        .clone()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| spec.program.display().to_string());
    let mut argv = vec![argv0];
    argv.extend(spec.args.iter().cloned());
    Plan {
        program: spec.program.clone(),
        argv,
        read_exec: grants.read_exec.clone(),
        read: grants.read.clone(),
        write: grants.write.clone(),
        network: spec.network.clone(),
        limits: spec.limits,
        landlock_abi: gates.landlock_abi,
        seccomp: gates.seccomp,
        deny_connect: gates.seccomp
            && spec.network == Network::None
            && gates.landlock_abi.is_none_or(|abi| abi < 9),
        user_ns: gates.user_ns,
        net_ns: gates.net_ns,
        pid_ns: gates.pid_ns,
        pid_max: gates.pid_max,
        cleanup: None,
        parent_pid: Some(i32::try_from(std::process::id()).unwrap_or(i32::MAX)),
        best_effort: spec.best_effort,
    }
}

/// What is in force, in words.
pub(crate) fn summary(plan: &Plan, gates: Gates, grants: Grants, k: &Support) -> SandboxSummary {
    let mut mechanisms = Vec::new();
    if let Some(abi) = plan.landlock_abi {
        mechanisms.push(format!("landlock-abi-{abi}"));
    }
    if plan.seccomp {
        mechanisms.push("seccomp".into());
    }
    let mut notes = Vec::new();
    if k.landlock_abi < 9 {
        match &plan.network {
            Network::None if plan.seccomp => notes.push(
                "pathname unix sockets: connect() refused by seccomp (Landlock ABI < 9 cannot scope them)"
                    .to_string(),
            ),
            Network::None => {}
            _ => notes.push(
                "pathname unix sockets outside the grants stay connectable (needs Landlock ABI 9); \
                 DAC permissions still apply"
                    .to_string(),
            ),
        }
    }
    if matches!(plan.network, Network::Ports { .. }) {
        notes.push(
            "no UDP, so no DNS: connect to addresses, or use a trusted server with \"host\"".into(),
        );
    }
    // As the helper unshares them: IPC goes with the pid namespace.
    let mut ns = Vec::new();
    if plan.user_ns {
        ns.push("user");
    }
    if plan.pid_ns {
        ns.push("pid+ipc");
    }
    if plan.net_ns {
        ns.push("net");
    }
    if !ns.is_empty() {
        mechanisms.push(format!("{} namespaces", ns.join("+")));
    }
    mechanisms.push("rlimits".into());
    if k.euid != 0 {
        mechanisms.push(format!(
            "process cap {} (RLIMIT_NPROC, per uid)",
            plan.limits.processes
        ));
    }
    if let Some(pid_max) = plan.pid_max {
        mechanisms.push(format!(
            "process cap {} (pid namespace pid_max)",
            pid_max - 3
        ));
    }
    mechanisms.push("no_new_privs".into());
    mechanisms.push("own session".into());
    mechanisms.push("filtered environment".into());
    SandboxSummary {
        enabled: true,
        read: grants.read_exec.into_iter().chain(grants.read).collect(),
        write: grants.write,
        network: network_label(&plan.network),
        gaps: gates.gaps,
        install_prefix: grants.install_prefix,
        mechanisms,
        limits: Some(plan.limits),
        notes,
    }
}

fn network_label(n: &Network) -> String {
    match n {
        Network::None => "none".into(),
        Network::Host => "host".into(),
        Network::Ports {
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
    use crate::spec::{EnvInputs, Limits};

    fn spec(best_effort: bool) -> LaunchSpec {
        LaunchSpec {
            name: "t".into(),
            program: PathBuf::from("/bin/true"),
            argv0: Some("/bin/true".into()),
            args: vec![],
            env: EnvInputs::default(),
            cwd: None,
            enabled: true,
            trusted: false,
            read: vec![],
            write: vec![],
            network: Network::None,
            limits: Limits {
                memory_mb: 1024,
                processes: 64,
                open_files: 256,
                cpu_seconds: 600,
                file_size_mb: 64,
            },
            best_effort,
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

    fn full_kernel(euid: u32, pid_max_per_namespace: bool) -> Support {
        Support {
            landlock_abi: 6,
            landlock_fs: true,
            landlock_net: true,
            landlock_scope: true,
            user_namespaces: true,
            pid_namespaces: true,
            net_namespaces: true,
            seccomp: true,
            pid_max_per_namespace,
            euid,
        }
    }

    fn plan_for(best_effort: bool, k: &Support) -> Result<(Plan, SandboxSummary), SandboxError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let guard = ProcessGuard::new("t", dir.path()).expect("guard");
        let s = spec(best_effort);
        let gates = gate(&s, k)?;
        let grants = grants(&s, &guard, "/usr/bin:/bin")?;
        let plan = plan(&s, &gates, &grants);
        let summary = summary(&plan, gates, grants, k);
        Ok((plan, summary))
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
        assert_eq!(plan.landlock_abi, None);
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
        let k = full_kernel(0, false);
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

    /// The summary names the namespaces as the helper unshares them: IPC
    /// with the pid namespace, not with the network one.
    #[test]
    fn summary_names_the_namespaces_really_unshared() {
        let (plan, summary) = plan_for(false, &full_kernel(1000, true)).expect("plan");
        assert!(plan.user_ns && plan.pid_ns && plan.net_ns);
        assert!(
            summary
                .mechanisms
                .contains(&"user+pid+ipc+net namespaces".to_string()),
            "{:?}",
            summary.mechanisms
        );
        assert_eq!(plan.pid_max, Some(301));
        assert_eq!(plan.landlock_abi, Some(6));
        assert!(plan.deny_connect);
    }
}
