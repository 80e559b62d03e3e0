//! What the running kernel offers, probed once per process.
//!
//! Probes are real attempts (a forked child that calls `unshare`, a
//! `landlock_create_ruleset` version query), never guesses from version
//! strings: a kernel can have a feature compiled out or disabled by policy.

use std::sync::OnceLock;

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
    /// Effective uid of warden.
    pub euid: u32,
}

impl Support {
    /// `RLIMIT_NPROC` is ignored by the kernel for uid 0, so a process cap
    /// for root needs a pid namespace with its own `pid_max`.
    pub fn process_cap(&self) -> bool {
        self.euid != 0 || (self.pid_namespaces && self.pid_max_per_namespace)
    }
}

/// The probed support, computed on first use.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(probe)
}

fn probe() -> Support {
    let landlock_abi = landlock_abi();
    // One cheap probe: a user namespace alone. With it, this user may also
    // create pid, net and ipc namespaces (owned by it); without it, only
    // root can, which the second probe checks. A network namespace is not
    // probed by creating one (that costs ~1 ms per start); if the helper's
    // unshare still fails, it fails closed with exit status 125.
    let user_namespaces = try_unshare(libc::CLONE_NEWUSER);
    let others = user_namespaces || try_unshare(libc::CLONE_NEWPID | libc::CLONE_NEWIPC);
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    Support {
        landlock_abi,
        landlock_fs: landlock_abi >= 1,
        landlock_net: landlock_abi >= 4,
        landlock_scope: landlock_abi >= 6,
        user_namespaces,
        pid_namespaces: others,
        net_namespaces: others,
        seccomp: seccomp_available(),
        pid_max_per_namespace: pid_max_per_namespace(),
        euid,
    }
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`.
fn landlock_abi() -> u8 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: a version query takes no pointer and creates no descriptor.
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
    // SAFETY: PR_GET_SECCOMP takes no pointer.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    // EINVAL means the kernel was built without seccomp; filter support
    // came with it in every kernel Landlock runs on.
    mode >= 0
}

/// Forks a child that tries `unshare(flags)` and reports by exit status.
/// The child only makes raw syscalls (safe after fork in a threaded
/// process).
fn try_unshare(flags: libc::c_int) -> bool {
    // SAFETY: the child calls only async-signal-safe functions, then _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return false;
    }
    if pid == 0 {
        // SAFETY: raw syscalls in the forked child.
        unsafe {
            let rc = libc::unshare(flags);
            libc::_exit(if rc == 0 { 0 } else { 1 });
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    rc == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// `kernel.pid_max` is per pid namespace from Linux 6.14 on; before that
/// it is global and must never be written.
fn pid_max_per_namespace() -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (6, 14)
}
