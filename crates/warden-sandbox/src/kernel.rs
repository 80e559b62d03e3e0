//! What the running kernel and host offer.
//!
//! Landlock and seccomp are asked directly (`landlock_create_ruleset`
//! version query, `PR_GET_SECCOMP`). Namespaces are judged from the
//! sysctls that govern them ([`support`], no process started: it runs on
//! every `warden sandbox exec`), and really attempted by [`support_live`]
//! (a forked child calling `unshare`) for `warden sandbox check`; system
//! calls newer than the oldest kernel Landlock runs on (the mount API,
//! pidfd_getfd, per-user-namespace RLIMIT_NPROC) by the kernel release.
//! cgroups: which hierarchy would enforce each limit, and why none would
//! (`cgroup::discover`). Should the kernel still refuse something at
//! launch (e.g. a container's seccomp profile), the helper fails closed
//! with exit status 4; [`crate::live_check`] runs the real helper once to
//! find out.

use std::sync::OnceLock;

use nix::sched::{CloneFlags, unshare};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, fork};
use serde::Serialize;

/// Kernel features the sandbox can use.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Support {
    /// Landlock ABI version (0 = not available).
    pub landlock_abi: u8,
    /// Landlock filesystem rules (ABI ≥ 1).
    pub landlock_fs: bool,
    /// Landlock TCP bind/connect rules (ABI ≥ 4).
    pub landlock_net: bool,
    /// Landlock scoping of signals and abstract unix sockets (ABI ≥ 6).
    pub landlock_scope: bool,
    /// `unshare(CLONE_NEWUSER)` works for this user.
    pub user_namespaces: bool,
    /// A pid namespace can be created (with a user namespace, or as root).
    pub pid_namespaces: bool,
    /// A network namespace can be created (with a user namespace, or as root).
    pub net_namespaces: bool,
    /// seccomp filters (`SECCOMP_MODE_FILTER`).
    pub seccomp: bool,
    /// `kernel.pid_max` can be set per pid namespace (Linux ≥ 6.14): a
    /// process cap that also holds for root, for whom the kernel ignores
    /// `RLIMIT_NPROC`.
    pub pid_max_per_namespace: bool,
    /// `vm.memfd_noexec` is per pid namespace, and `2` makes a memfd
    /// created without flags non-executable rather than failing its
    /// creation (Linux ≥ 6.6). Its file belongs to the host's root: only
    /// root of the initial user namespace may write it (root of a
    /// container's user namespace may not).
    pub memfd_noexec_per_namespace: bool,
    /// The mount API with `mount_setattr` (Linux ≥ 5.12): the mount
    /// namespace view.
    pub mount_api: bool,
    /// `pidfd_getfd` and seccomp user notification (Linux ≥ 5.6): the
    /// `listen()` supervisor of ports mode.
    pub listen_supervision: bool,
    /// `kcmp(KCMP_FILE)` (`CONFIG_KCMP`): the epoll quota tells the
    /// instances it holds apart with it.
    pub kcmp: bool,
    /// `RLIMIT_NPROC` counted per user namespace (Linux ≥ 5.14): an exact
    /// process cap for a non-root user without a pids cgroup.
    pub nproc_per_user_namespace: bool,
    /// Per limit, the cgroup that would enforce it on this host, or why
    /// none would.
    pub cgroups: CgroupSupport,
    /// Effective uid of warden.
    pub euid: u32,
}

/// Where each cgroup-enforced limit would be enforced (e.g. "cgroup v1
/// /sys/fs/cgroup/pids"), and why not where none would.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct CgroupSupport {
    /// `pids` (processes + threads).
    pub pids: Option<String>,
    /// `memory`.
    pub memory: Option<String>,
    /// CPU time accounting (`cpuacct` on v1, `cpu.stat` on v2).
    pub cpu: Option<String>,
    /// "memory: <why not>", one line per missing controller.
    pub missing: Vec<String>,
}

/// The support this process launches with, computed on first use without
/// starting a process.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| probe(false))
}

/// Like [`support`], but namespaces are really created in a forked child.
pub fn support_live() -> Support {
    probe(true)
}

fn probe(live: bool) -> Support {
    let landlock_abi = landlock_abi();
    let euid = nix::unistd::geteuid().as_raw();
    let (user_namespaces, others) = if live {
        // A user namespace lets this user create the others (owned by it);
        // without one, only root can.
        let user = try_unshare(CloneFlags::CLONE_NEWUSER);
        let flags = CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWIPC;
        let others = try_unshare(if user {
            flags | CloneFlags::CLONE_NEWUSER
        } else {
            flags
        });
        (user, others)
    } else {
        let user = userns_allowed(euid);
        let others = std::path::Path::new("/proc/self/ns/pid").exists()
            && std::path::Path::new("/proc/self/ns/net").exists()
            && (user || euid == 0);
        (user, others)
    };
    Support {
        landlock_abi,
        landlock_fs: landlock_abi >= 1,
        landlock_net: landlock_abi >= 4,
        landlock_scope: landlock_abi >= 6,
        user_namespaces,
        pid_namespaces: others,
        net_namespaces: others,
        seccomp: seccomp_available(),
        pid_max_per_namespace: kernel_at_least(6, 14),
        memfd_noexec_per_namespace: kernel_at_least(6, 6)
            && euid == 0
            && in_initial_user_namespace(),
        mount_api: kernel_at_least(5, 12),
        listen_supervision: kernel_at_least(5, 6),
        kcmp: crate::epoll_quota::kcmp_available(),
        nproc_per_user_namespace: kernel_at_least(5, 14),
        cgroups: cgroup_support(),
        euid,
    }
}

fn cgroup_support() -> CgroupSupport {
    use crate::cgroup::{Controller, discover, host, v2_parent_from_env};
    let all = [Controller::Pids, Controller::Memory, Controller::Cpu];
    let (plan, missing) = discover(&host(), &all, v2_parent_from_env().as_deref());
    let one = |c: Controller| -> Option<String> {
        let where_ = if plan.v2.contains(&c) {
            plan.v2_parent.clone()
        } else {
            plan.v1
                .iter()
                .find(|(x, _)| *x == c)
                .map(|(_, p)| p.clone())
        };
        Some(format!("{} {}", plan.version_of(c)?, where_?.display()))
    };
    CgroupSupport {
        pids: one(Controller::Pids),
        memory: one(Controller::Memory),
        cpu: one(Controller::Cpu),
        missing: missing
            .iter()
            .map(|(c, why)| format!("{}: {why}", c.label()))
            .collect(),
    }
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`
/// (neither nix nor the landlock crate exposes the raw version).
fn landlock_abi() -> u8 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: a version query passes a null attribute pointer with size 0,
    // which the kernel never dereferences, and creates no descriptor.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u8::try_from(v.max(0)).unwrap_or(u8::MAX)
}

fn seccomp_available() -> bool {
    // nix has no PR_GET_SECCOMP wrapper.
    // SAFETY: PR_GET_SECCOMP reads no argument and passes no pointer.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    // EINVAL means the kernel was built without seccomp; filter support
    // came with it in every kernel Landlock runs on.
    mode >= 0
}

/// Forks a child that tries `unshare(flags)` and reports by exit status.
/// The child only makes raw syscalls (safe after fork in a threaded
/// process).
fn try_unshare(flags: CloneFlags) -> bool {
    // SAFETY: the child calls only async-signal-safe functions (unshare,
    // _exit) and allocates nothing, so forking a threaded process is sound.
    match unsafe { fork() } {
        Err(_) => false,
        Ok(ForkResult::Child) => crate::exit_now(if unshare(flags).is_ok() { 0 } else { 1 }),
        Ok(ForkResult::Parent { child }) => {
            matches!(waitpid(child, None), Ok(WaitStatus::Exited(_, 0)))
        }
    }
}

/// The sysctls that switch user namespaces off (upstream, Debian/Ubuntu,
/// AppArmor on Ubuntu 23.10+).
/// Whether this process is in the host's own user namespace (its uid map
/// is the identity over every uid).
fn in_initial_user_namespace() -> bool {
    std::fs::read_to_string("/proc/self/uid_map").is_ok_and(|map| {
        let fields: Vec<&str> = map.split_whitespace().collect();
        fields == ["0", "0", "4294967295"]
    })
}

fn userns_allowed(euid: u32) -> bool {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
    };
    if !std::path::Path::new("/proc/self/ns/user").exists()
        || read("/proc/sys/user/max_user_namespaces") == Some(0)
    {
        return false;
    }
    euid == 0
        || (read("/proc/sys/kernel/unprivileged_userns_clone") != Some(0)
            && read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") != Some(1))
}

/// Whether the running kernel's release is at least `major.minor`.
pub(crate) fn kernel_at_least(major: u32, minor: u32) -> bool {
    static RELEASE: OnceLock<(u32, u32)> = OnceLock::new();
    let have = *RELEASE.get_or_init(|| {
        let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
            return (0, 0);
        };
        let mut parts = release.trim().split(['.', '-']);
        let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        (major, minor)
    });
    have >= (major, minor)
}
