//! From a [`LaunchSpec`] to the [`Plan`] the helper applies and the
//! [`SandboxSummary`] warden reports, in four steps:
//!
//! 1. [`gate`]: which kernel mechanisms this launch uses, checked against
//!    [`Support`]; a missing one fails closed unless `best_effort`, which
//!    records it as a gap instead.
//! 2. [`limits`]: how each limit is enforced on this host (cgroups, the
//!    private tmpfs, rlimits); an explicit limit that cannot be enforced
//!    exactly fails closed unless `best_effort`, a default one is enforced
//!    as well as the host allows and reported.
//! 3. [`grants`] (its own module): what is visible (the view's binds) and
//!    what Landlock allows, with the reason for each install-prefix grant.
//! 4. [`plan`] and [`summary`]: all of it combined, for the helper and in
//!    words.

use std::path::PathBuf;

use crate::SandboxError;
use crate::cgroup::{self, CgroupPlan, Controller};
pub(crate) use crate::grants::{Grants, grants};
use crate::kernel::Support;
use crate::plan::{Layers, Plan, View};
use crate::spec::{LaunchSpec, Network};
use crate::summary::{LayerReport, LimitReport, PrefixGrant, SandboxSummary};

/// Highest Landlock ABI this build knows how to use.
const MAX_LANDLOCK_ABI: u8 = 9;

/// Where the private tmpfs is mounted inside the view (TMPDIR).
pub(crate) const PRIVATE_DIR: &str = "/tmp";
/// HOME inside the view, on the private tmpfs.
pub(crate) const PRIVATE_HOME: &str = "/tmp/home";
/// TMPDIR inside the view when a grant lies under `/tmp` (see
/// `grants::private_write_rules`).
pub(crate) const PRIVATE_TMP: &str = "/tmp/.warden-tmp";

/// The switches that turn user namespaces off for non-root users.
const USERNS_SYSCTLS: &str = "user.max_user_namespaces, kernel.unprivileged_userns_clone \
     (Debian/Ubuntu), kernel.apparmor_restrict_unprivileged_userns (Ubuntu 23.10+)";

/// Collects what is missing: an error unless `best_effort`.
struct Need<'a> {
    spec: &'a LaunchSpec,
    gaps: Vec<String>,
}

impl Need<'_> {
    fn check(&mut self, ok: bool, feature: &str, detail: String) -> Result<bool, SandboxError> {
        self.explicit(ok, true, feature, detail)
    }

    /// `required`: fail unless `best_effort`; else (a default limit) the
    /// caller reports it without a gap.
    fn explicit(
        &mut self,
        ok: bool,
        required: bool,
        feature: &str,
        detail: String,
    ) -> Result<bool, SandboxError> {
        if ok || !required {
            return Ok(ok);
        }
        if self.spec.best_effort {
            self.gaps.push(format!("{feature}: {detail}"));
            Ok(false)
        } else {
            Err(SandboxError::Unsupported {
                server: self.spec.name.clone(),
                feature: feature.to_string(),
                detail,
            })
        }
    }
}

/// The kernel mechanisms one launch uses.
#[derive(Debug)]
pub(crate) struct Gates {
    pub layers: Layers,
    /// The mount namespace view is used.
    pub view: bool,
    /// Protections asked for but not enforced (only with `best_effort`).
    pub gaps: Vec<String>,
}

/// Decides which kernel mechanisms to use, failing closed on a missing one
/// unless `best_effort`.
pub(crate) fn gate(spec: &LaunchSpec, k: &Support) -> Result<Gates, SandboxError> {
    if spec.network == Network::Host && !spec.trusted {
        return Err(SandboxError::Setup {
            server: spec.name.clone(),
            detail: "network \"host\" is only allowed for trusted servers".into(),
        });
    }
    let mut need = Need {
        spec,
        gaps: Vec::new(),
    };
    let root = k.euid == 0;
    // A non-root user builds everything inside a user namespace.
    if !root {
        need.check(
            k.user_namespaces,
            "user namespaces (a non-root user builds the sandbox inside one)",
            format!("unprivileged user namespaces are off on this host; see the sysctls {USERNS_SYSCTLS}"),
        )?;
    }
    let abi = k.landlock_abi;
    let landlock = need.check(
        abi >= 1,
        "Landlock filesystem rules",
        format!("Landlock ABI {abi}"),
    )?;
    if matches!(spec.network, Network::Ports { .. }) {
        need.check(
            abi >= 4,
            "Landlock TCP port rules (ABI 4)",
            format!("Landlock ABI {abi}"),
        )?;
    }
    need.check(
        abi >= 6,
        "Landlock scoping of signals and abstract unix sockets (ABI 6)",
        format!("Landlock ABI {abi}"),
    )?;
    let seccomp = need.check(k.seccomp, "seccomp", "seccomp filters unavailable".into())?;
    if spec.network == Network::None && !seccomp {
        need.check(
            k.net_namespaces,
            "network isolation",
            "neither seccomp nor network namespaces are available".into(),
        )?;
    }
    let namespaces = k.pid_namespaces && (root || k.user_namespaces);
    let pid_ns = need.check(
        namespaces,
        "pid namespace (tear-down when warden dies)",
        "the kernel refuses new pid namespaces".into(),
    )?;
    let view = need.check(
        namespaces && k.mount_api,
        "mount namespace view (hides every path outside the grants: metadata calls, inotify, \
         listmount, host /proc; private HOME/TMPDIR)",
        if k.mount_api {
            "the kernel refuses new mount namespaces".into()
        } else {
            "needs the mount API with mount_setattr (Linux >= 5.12)".into()
        },
    )?;
    let ports = matches!(spec.network, Network::Ports { .. });
    let listen_supervisor = if ports && seccomp {
        need.check(
            k.listen_supervision,
            "listen() supervision (listen() without bind() would auto-bind an unchecked port)",
            "needs pidfd_getfd and seccomp user notification (Linux >= 5.6)".into(),
        )?
    } else {
        false
    };
    Ok(Gates {
        layers: Layers {
            // Root needs no user namespace for the others, but one drops
            // its host capabilities; use it whenever it works.
            user_ns: k.user_namespaces,
            pid_ns,
            ipc_ns: pid_ns,
            net_ns: spec.network == Network::None && k.net_namespaces && namespaces,
            landlock_abi: landlock.then(|| abi.min(MAX_LANDLOCK_ABI)),
            seccomp,
            listen_supervisor,
            // Needs the same kernel support; without it the kernel's own
            // per-user limit is all there is (reported, not required).
            epoll_quota: seccomp && k.listen_supervision && k.kcmp,
            drop_caps: true,
            // The sysctl file belongs to the host's root: a user namespace
            // of another user (or root of a container's) cannot write it.
            memfd_noexec: root && pid_ns && k.memfd_noexec_per_namespace,
        },
        view,
        gaps: need.gaps,
    })
}

/// How the limits are enforced on this host.
#[derive(Debug)]
pub(crate) struct LimitPlan {
    pub cgroup: Option<CgroupPlan>,
    pub cgroup_required: bool,
    pub pid_max: Option<u64>,
    pub report: Vec<LimitReport>,
    pub gaps: Vec<String>,
}

/// Decides how each limit is enforced: exact where the host allows,
/// failing closed on an explicit limit that is not (unless `best_effort`).
pub(crate) fn limits(
    spec: &LaunchSpec,
    k: &Support,
    gates: &Gates,
    cgroups: &cgroup::HostCgroups,
) -> Result<LimitPlan, SandboxError> {
    let l = spec.limits;
    let e = l.explicit;
    let (cg, missing) = cgroup::discover(
        cgroups,
        &Controller::ALL,
        cgroup::v2_parent_from_env().as_deref(),
    );
    let why_missing = |c: Controller| {
        missing
            .iter()
            .find(|(m, _)| *m == c)
            .map(|(_, w)| w.clone())
            .unwrap_or_else(|| "no cgroup".into())
    };
    let root = k.euid == 0;
    let mut report = Vec::new();
    let mut need = Need {
        spec,
        gaps: Vec::new(),
    };
    let mut cgroup_required = false;
    let mut one = |need: &mut Need<'_>,
                   limit: &str,
                   value: u64,
                   explicit: bool,
                   scope: &str,
                   mechanism: String,
                   why_not: Option<String>|
     -> Result<(), SandboxError> {
        if let Some(why) = &why_not {
            need.explicit(
                false,
                explicit,
                &format!("limits.{limit} = {value} enforced exactly"),
                format!("{mechanism} only: {why}"),
            )?;
        }
        report.push(LimitReport {
            limit: limit.to_string(),
            value,
            explicit,
            scope: scope.to_string(),
            exact: why_not.is_none(),
            mechanism,
            why_not_exact: why_not,
        });
        Ok(())
    };

    // processes: pids cgroup; else RLIMIT_NPROC, per user namespace for a
    // non-root user; root is exempt from it: pid_max of the namespace.
    let pid_max = (root && gates.layers.pid_ns && k.pid_max_per_namespace)
        .then(|| l.processes.saturating_add(3).max(301));
    match cg.version_of(Controller::Pids) {
        Some(v) => {
            cgroup_required |= e.processes && !spec.best_effort;
            one(
                &mut need,
                "processes",
                l.processes,
                e.processes,
                "sandbox",
                format!(
                    "{v} pids.max = {} (init included), threads included",
                    l.processes.saturating_add(1)
                ),
                None,
            )?
        }
        None if !root && gates.layers.user_ns && k.nproc_per_user_namespace => one(
            &mut need,
            "processes",
            l.processes,
            e.processes,
            "sandbox",
            format!(
                "RLIMIT_NPROC {} counted per user namespace (init included), threads included",
                l.processes.saturating_add(1)
            ),
            None,
        )?,
        None if !root => one(
            &mut need,
            "processes",
            l.processes,
            e.processes,
            "sandbox",
            format!("RLIMIT_NPROC {} per uid", l.processes.saturating_add(1)),
            Some(format!(
                "{}; RLIMIT_NPROC counts all processes of the uid (per user namespace only from \
                 Linux 5.14)",
                why_missing(Controller::Pids)
            )),
        )?,
        None => one(
            &mut need,
            "processes",
            l.processes,
            e.processes,
            "sandbox",
            match pid_max {
                Some(p) => format!("pid namespace pid_max {p}: about {} processes", p - 3),
                None => "nothing".into(),
            },
            Some(format!(
                "{}; the kernel ignores RLIMIT_NPROC for root{}",
                why_missing(Controller::Pids),
                if pid_max.is_some() {
                    " and pid_max cannot go below 301"
                } else {
                    ", and pid_max is per namespace only from Linux 6.14"
                }
            )),
        )?,
    }

    // memory_mb: memory cgroup (everything, shared memory and tmpfs too).
    match cg.version_of(Controller::Memory) {
        Some(v) => {
            cgroup_required |= e.memory_mb && !spec.best_effort;
            one(
                &mut need,
                "memory_mb",
                l.memory_mb,
                e.memory_mb,
                "sandbox",
                format!(
                    "{v} memory limit {} MB, no swap (anonymous, shared and SysV memory, stacks, \
                     the private tmpfs)",
                    l.memory_mb
                ),
                None,
            )?
        }
        None => one(
            &mut need,
            "memory_mb",
            l.memory_mb,
            e.memory_mb,
            "sandbox",
            format!(
                "RLIMIT_DATA {} MB and a stack of at most {} MB per process",
                l.memory_mb,
                l.memory_mb / 4
            ),
            Some(format!(
                "{}; shared memory and several processes together can exceed it",
                why_missing(Controller::Memory)
            )),
        )?,
    }

    // cpu_seconds: CPU accounting of the whole sandbox + a kill.
    match cg.version_of(Controller::Cpu) {
        Some(v) => {
            cgroup_required |= e.cpu_seconds && !spec.best_effort;
            one(
                &mut need,
                "cpu_seconds",
                l.cpu_seconds,
                e.cpu_seconds,
                "sandbox",
                format!(
                    "{v} CPU accounting; the helper ends the sandbox at {} s (checked at most \
                     every 10 ms x CPUs before the limit)",
                    l.cpu_seconds
                ),
                None,
            )?
        }
        None => one(
            &mut need,
            "cpu_seconds",
            l.cpu_seconds,
            e.cpu_seconds,
            "sandbox",
            format!("RLIMIT_CPU {} s per process", l.cpu_seconds),
            Some(format!(
                "{}; several processes together can exceed it",
                why_missing(Controller::Cpu)
            )),
        )?,
    }

    // private_mb: the size of the private tmpfs.
    one(
        &mut need,
        "private_mb",
        l.private_mb,
        e.private_mb,
        "sandbox",
        if gates.view {
            format!("tmpfs size={}m for HOME, TMPDIR and /dev/shm", l.private_mb)
        } else {
            "nothing".into()
        },
        (!gates.view).then(|| "no mount namespace view: HOME and TMPDIR are host folders".into()),
    )?;
    one(
        &mut need,
        "open_files",
        l.open_files,
        e.open_files,
        "process",
        format!(
            "RLIMIT_NOFILE {} (no per-sandbox counter exists)",
            l.open_files
        ),
        None,
    )?;
    one(
        &mut need,
        "file_size_mb",
        l.file_size_mb,
        e.file_size_mb,
        "file",
        format!("RLIMIT_FSIZE {} MB", l.file_size_mb),
        None,
    )?;
    let cgroup = (!cg.is_empty()).then_some(cg);
    Ok(LimitPlan {
        cgroup,
        cgroup_required,
        pid_max,
        report,
        gaps: need.gaps,
    })
}

/// What the helper does for this launch.
pub(crate) fn plan(
    spec: &LaunchSpec,
    cwd: PathBuf,
    gates: &Gates,
    limits: &LimitPlan,
    grants: &Grants,
) -> Plan {
    let argv0 = spec
        .argv0
        .clone()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| spec.program.display().to_string());
    let mut argv = vec![argv0];
    argv.extend(spec.args.iter().cloned());
    Plan {
        name: spec.name.clone(),
        program: spec.program.clone(),
        argv,
        cwd,
        view: gates.view.then(|| View {
            binds: grants.binds.clone(),
            private_dir: PathBuf::from(PRIVATE_DIR),
            home: PathBuf::from(PRIVATE_HOME),
            tmp: grants.tmpdir.clone(),
            private_mb: spec.limits.private_mb,
            proc_root_only: nix::unistd::geteuid()
                .is_root()
                .then(crate::proc_mask::host_root_only)
                .flatten(),
        }),
        landlock: grants.landlock.clone(),
        network: spec.network.clone(),
        limits: spec.limits,
        layers: gates.layers.clone(),
        cgroup: limits.cgroup.clone(),
        cgroup_required: limits.cgroup_required,
        pid_max: limits.pid_max,
        parent_pid: Some(i32::try_from(std::process::id()).unwrap_or(i32::MAX)),
        cleanup: None,
        best_effort: spec.best_effort,
        umask: crate::umask::for_servers(),
    }
}

/// What is in force, in words.
pub(crate) fn summary(
    plan: &Plan,
    gates: Gates,
    limits: LimitPlan,
    grants: Grants,
) -> SandboxSummary {
    let l = &plan.layers;
    let mut ns = Vec::new();
    for (on, name) in [
        (l.user_ns, "user"),
        (l.pid_ns, "pid"),
        (l.ipc_ns, "ipc"),
        (l.net_ns, "net"),
        (plan.view.is_some(), "mount"),
    ] {
        if on {
            ns.push(name);
        }
    }
    let mut mechanisms = Vec::new();
    if !ns.is_empty() {
        mechanisms.push(format!("{} namespaces", ns.join("+")));
    }
    if plan.view.is_some() {
        mechanisms.push(
            "read-only view of the grants, fresh /proc, private tmpfs HOME/TMPDIR".to_string(),
        );
    }
    if let Some(abi) = l.landlock_abi {
        mechanisms.push(format!("landlock-abi-{abi}"));
    }
    if l.seccomp {
        mechanisms.push("seccomp".into());
    }
    if l.listen_supervisor {
        mechanisms.push("listen() supervisor".into());
    }
    mechanisms.push("no capabilities".into());
    if let Some(cg) = &plan.cgroup {
        let mut on = Vec::new();
        for c in Controller::ALL {
            if let Some(v) = cg.version_of(c) {
                on.push(format!("{} ({v})", c.label()));
            }
        }
        mechanisms.push(format!("cgroups: {}", on.join(", ")));
    }
    mechanisms.push("rlimits".into());
    mechanisms.push("no_new_privs".into());
    mechanisms.push("own session".into());
    mechanisms.push("filtered environment".into());

    let mut notes = Vec::new();
    match &plan.network {
        Network::None => notes.push(
            "pathname unix sockets: connect(), addressed sends and datagram sockets refused by \
             seccomp"
                .to_string(),
        ),
        Network::Ports { .. } => {
            notes.push(
                "no UDP, so no DNS: connect to addresses, or use a trusted server with \"host\""
                    .into(),
            );
            notes.push(
                "unix sockets: only connected pairs (socketpair); socket(AF_UNIX) is refused, so \
                 no pathname socket in a grant is connectable and no host abstract name can be \
                 taken"
                    .into(),
            );
            notes.push(
                "the host's network namespace: /proc/net shows its socket tables (listening \
                 ports, peers, unix socket paths), though nothing outside the grants is \
                 reachable through them"
                    .into(),
            );
        }
        Network::Host => {}
    }
    let private_dir = std::path::Path::new(PRIVATE_DIR);
    if let Some(v) = &plan.view
        && v.tmp != private_dir
    {
        notes.push(if plan.landlock.write.iter().any(|w| w == private_dir) {
            format!(
                "a write grant lies under {PRIVATE_DIR}: TMPDIR is {}, and FIFOs and unix \
                 sockets can be made there and in HOME, not in {PRIVATE_DIR} itself (a rule \
                 there would cover the grant)",
                v.tmp.display()
            )
        } else {
            format!(
                "a grant that is not writable lies under {PRIVATE_DIR}: TMPDIR is {}, and \
                 {PRIVATE_DIR} itself is not writable (a write rule there would cover the grant)",
                v.tmp.display()
            )
        });
    }
    notes.extend(grants.notes.iter().cloned());
    let layer = |layer: &str, enforced: bool, detail: &str, answers: &str| LayerReport {
        layer: layer.into(),
        enforced,
        detail: detail.into(),
        answers: answers.into(),
    };
    let layers = vec![
        layer(
            "user namespace",
            l.user_ns,
            "identity map: files keep their owners",
            "host capabilities of root; lets a non-root user build the other layers",
        ),
        layer(
            "pid namespace",
            l.pid_ns,
            "the server's init is pid 1; its death ends every process",
            "signals, ptrace and /proc of host processes; processes left behind after kill -9 of warden",
        ),
        layer(
            "mount namespace view",
            plan.view.is_some(),
            "read-only binds of the grants, rw binds of write grants, size-capped private tmpfs \
             HOME/TMPDIR, minimal /dev, fresh /proc of the pid namespace (a read-only snapshot \
             where a fresh one is refused), pivot_root",
            "every name and metadata call outside the grants (chmod, chown, utimes, setxattr: \
             ENOENT, EROFS in read grants), inotify, listmount, host pids; bytes written to \
             HOME/TMPDIR",
        ),
        layer(
            "network namespace",
            l.net_ns,
            match &plan.network {
                Network::None if l.net_ns => "no interface up",
                Network::None => "not available on this kernel",
                _ => "not used: the granted ports (or \"host\") are on the host's network",
            },
            "TCP, UDP, raw and abstract sockets to the host (network none)",
        ),
        layer(
            "ipc namespace",
            l.ipc_ns,
            "own SysV IPC and POSIX message queues",
            "the host's shared memory segments, semaphores and queues",
        ),
        layer(
            "Landlock",
            l.landlock_abi.is_some(),
            &l.landlock_abi
                .map(|a| format!("ABI {a}, every access right handled"))
                .unwrap_or_else(|| "not available".into()),
            "read/write/execute per grant inside the view, FIFOs and unix sockets made in \
             write grants (only HOME/TMPDIR may hold them), TCP ports, signals and abstract \
             unix sockets outside the sandbox",
        ),
        layer(
            "seccomp",
            l.seccomp,
            "deny-list plus argument rules",
            "set-id mode bits (chmod family, open/creat/mknod), device nodes and whiteouts, \
             huge pages, other processes' limits, AF_UNIX datagrams and addressed sends \
             (network none), TCP Fast Open and SO_REUSEPORT (ports), namespaces, mounts, \
             ptrace, io_uring, x32",
        ),
        layer(
            "listen() supervisor",
            l.listen_supervisor,
            match &plan.network {
                Network::Ports { .. } => "seccomp user notification answered by init",
                Network::None => "not needed: no TCP socket can be made (network none)",
                Network::Host => "not used (network \"host\")",
            },
            "listen() without bind() auto-binding a port the bind rule never saw, and bind() \
             naming a socketpair() end with a host abstract unix name (ports mode)",
        ),
        layer(
            "epoll watch quota",
            l.epoll_quota,
            if l.epoll_quota {
                "epoll_ctl(ADD) answered by init: an eighth of fs.epoll.max_user_watches"
            } else {
                "needs seccomp user notification (Linux >= 5.6) and kcmp (CONFIG_KCMP)"
            },
            "a server using up the person's epoll watches, counted per user across namespaces",
        ),
        layer(
            "memfd no-exec",
            l.memfd_noexec,
            if l.memfd_noexec {
                "vm.memfd_noexec = 2 in the pid namespace"
            } else {
                "only root can set vm.memfd_noexec per namespace (Linux >= 6.6)"
            },
            "a program run from a memfd (code in no grant, past Landlock's execute right)",
        ),
        layer(
            "no capabilities",
            l.drop_caps,
            "bounding, ambient and permitted sets empty, SECBIT_NOROOT locked",
            "a root-mapped server writing file capabilities or chowning in its grants",
        ),
        layer(
            "cgroups",
            plan.cgroup.is_some(),
            &plan
                .cgroup
                .as_ref()
                .map(|c| {
                    c.parents()
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_else(|| "none writable on this host".into()),
            "processes, memory and CPU time of the whole sandbox, for root too",
        ),
    ];

    let read: Vec<PathBuf> = plan
        .landlock
        .read_exec
        .iter()
        .chain(&plan.landlock.read)
        .cloned()
        .collect();
    let mut gaps = gates.gaps;
    gaps.extend(limits.gaps);
    gaps.extend(grants.gaps.iter().cloned());
    SandboxSummary {
        enabled: true,
        read,
        write: plan
            .landlock
            .write
            .iter()
            .chain(&plan.landlock.private)
            .cloned()
            .collect(),
        network: network_label(&plan.network),
        gaps,
        install_prefix: grants.install_prefix.keys().cloned().collect(),
        mechanisms,
        limits: Some(plan.limits),
        notes,
        install_prefix_reasons: grants
            .install_prefix
            .into_iter()
            .map(|(path, reason)| PrefixGrant { path, reason })
            .collect(),
        layers,
        limit_report: limits.report,
    }
}

pub(crate) fn network_label(n: &Network) -> String {
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
    use crate::kernel::CgroupSupport;
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
            limits: Limits::default(),
            best_effort,
        }
    }

    /// A kernel without Landlock, namespaces or seccomp.
    fn bare_kernel(euid: u32) -> Support {
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
            memfd_noexec_per_namespace: false,
            mount_api: false,
            listen_supervision: false,
            kcmp: false,
            nproc_per_user_namespace: false,
            cgroups: CgroupSupport::default(),
            euid,
        }
    }

    fn full_kernel(euid: u32) -> Support {
        Support {
            landlock_abi: 6,
            landlock_fs: true,
            landlock_net: true,
            landlock_scope: true,
            user_namespaces: true,
            pid_namespaces: true,
            net_namespaces: true,
            seccomp: true,
            pid_max_per_namespace: true,
            memfd_noexec_per_namespace: true,
            mount_api: true,
            listen_supervision: true,
            kcmp: true,
            nproc_per_user_namespace: true,
            cgroups: CgroupSupport::default(),
            euid,
        }
    }

    /// A host without any cgroup hierarchy.
    fn no_cgroups() -> cgroup::HostCgroups {
        cgroup::HostCgroups::default()
    }

    fn plan_for(s: &LaunchSpec, k: &Support) -> Result<(Plan, SandboxSummary), SandboxError> {
        let gates = gate(s, k)?;
        let limits = limits(s, k, &gates, &no_cgroups())?;
        let ctx = crate::LaunchContext::new("/w", "/tmp");
        let grants = grants(s, &ctx, "/usr/bin:/bin", gates.view, None)?;
        let plan = plan(s, PathBuf::from("/"), &gates, &limits, &grants);
        let summary = summary(&plan, gates, limits, grants);
        Ok((plan, summary))
    }

    #[test]
    fn missing_kernel_features_fail_closed() {
        match plan_for(&spec(false), &bare_kernel(1000)) {
            Err(SandboxError::Unsupported {
                feature, detail, ..
            }) => {
                assert!(feature.contains("user namespaces"), "{feature}");
                assert!(detail.contains("unprivileged_userns_clone"), "{detail}");
            }
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => panic!("started without a sandbox"),
        }
    }

    #[test]
    fn best_effort_records_every_gap() {
        let (plan, summary) = plan_for(&spec(true), &bare_kernel(0)).expect("best effort");
        assert_eq!(plan.layers.landlock_abi, None);
        assert!(!plan.layers.seccomp && !plan.layers.pid_ns && !plan.layers.net_ns);
        assert!(plan.view.is_none());
        for needle in [
            "Landlock filesystem",
            "scoping",
            "seccomp",
            "pid namespace",
            "network isolation",
            "mount namespace view",
        ] {
            assert!(
                summary.gaps.iter().any(|g| g.contains(needle)),
                "no gap for {needle}: {:?}",
                summary.gaps
            );
        }
    }

    /// Default limits that cannot be exact run and are reported; the same
    /// limits written explicitly stop the launch unless best_effort.
    #[test]
    fn explicit_limits_that_cannot_be_exact_fail_closed_defaults_are_reported() {
        let k = full_kernel(0);
        let (_, summary) = plan_for(&spec(false), &k).expect("defaults run");
        assert!(summary.gaps.is_empty(), "{:?}", summary.gaps);
        let memory = summary
            .limit_report
            .iter()
            .find(|r| r.limit == "memory_mb")
            .expect("memory report");
        assert!(
            !memory.exact && memory.why_not_exact.is_some(),
            "{memory:?}"
        );
        let private = summary
            .limit_report
            .iter()
            .find(|r| r.limit == "private_mb")
            .expect("private report");
        assert!(private.exact, "{private:?}");

        let mut s = spec(false);
        s.limits.explicit.memory_mb = true;
        match plan_for(&s, &k) {
            Err(SandboxError::Unsupported { feature, .. }) => {
                assert!(feature.contains("memory_mb"), "{feature}")
            }
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => panic!("explicit memory_mb accepted without a memory cgroup"),
        }
        s.best_effort = true;
        let (_, summary) = plan_for(&s, &k).expect("best effort");
        assert!(
            summary.gaps.iter().any(|g| g.contains("memory_mb")),
            "{:?}",
            summary.gaps
        );
    }

    #[test]
    fn a_non_root_user_gets_an_exact_process_cap_from_rlimit_nproc() {
        let (_, summary) = plan_for(&spec(false), &full_kernel(1000)).expect("plan");
        let p = summary
            .limit_report
            .iter()
            .find(|r| r.limit == "processes")
            .expect("processes");
        assert!(
            p.exact && p.mechanism.contains("per user namespace"),
            "{p:?}"
        );
    }

    #[test]
    fn summary_names_the_namespaces_really_created() {
        let (plan, summary) = plan_for(&spec(false), &full_kernel(1000)).expect("plan");
        assert!(plan.layers.user_ns && plan.layers.pid_ns && plan.layers.net_ns);
        assert!(
            summary
                .mechanisms
                .contains(&"user+pid+ipc+net+mount namespaces".to_string()),
            "{:?}",
            summary.mechanisms
        );
        assert_eq!(plan.pid_max, None);
        assert!(!plan.layers.memfd_noexec, "a non-root user cannot set it");
        let (root_plan, _) = plan_for(&spec(false), &full_kernel(0)).expect("plan");
        assert!(root_plan.layers.memfd_noexec);
        assert_eq!(plan.layers.landlock_abi, Some(6));
        assert!(plan.view.is_some());
        assert!(
            summary.layers.iter().all(|l| l.enforced
                    || l.layer == "cgroups"
                    || l.layer == "listen() supervisor"
                    // Only the host's root may set vm.memfd_noexec.
                    || l.layer == "memfd no-exec"),
            "{:?}",
            summary.layers
        );
    }
}
