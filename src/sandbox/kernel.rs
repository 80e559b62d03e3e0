//! What the running kernel offers, probed once per process.
//!
//! Probes are real attempts (a forked child that calls `unshare`, a
//! `landlock_create_ruleset` version query), never guesses from version
//! strings: a kernel can have a feature compiled out or disabled by policy.

use std::path::{Path, PathBuf};
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
    /// A writable pids cgroup under which a per-server cgroup can be made
    /// (needed for a process cap when running as root, where
    /// `RLIMIT_NPROC` is not enforced).
    pub pids_cgroup: Option<PathBuf>,
    /// Effective uid of warden.
    pub euid: u32,
}

impl Support {
    /// `RLIMIT_NPROC` is ignored by the kernel for uid 0, so a process cap
    /// for root needs a pids cgroup.
    pub fn process_cap(&self) -> bool {
        self.euid != 0 || self.pids_cgroup.is_some()
    }
}

/// The probed support, computed on first use.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(probe)
}

fn probe() -> Support {
    let landlock_abi = landlock_abi();
    let full = libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    let user_namespaces = try_unshare(full);
    // Without a user namespace, root can still create the others.
    let others = user_namespaces || try_unshare(libc::CLONE_NEWNET | libc::CLONE_NEWPID);
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
        pids_cgroup: pids_cgroup_parent(),
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

/// The cgroup (v1 `pids` hierarchy, or v2 with `pids` delegated) that this
/// process is in, if warden may create child cgroups there.
fn pids_cgroup_parent() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(mnt), Some(fstype), Some(opts)) = (fields.get(1), fields.get(2), fields.get(3))
        else {
            continue;
        };
        let parent = match *fstype {
            "cgroup" if opts.split(',').any(|o| o == "pids") => {
                let rel = own.lines().find_map(|l| {
                    let mut parts = l.splitn(3, ':');
                    let _id = parts.next()?;
                    let ctrls = parts.next()?;
                    let path = parts.next()?;
                    ctrls.split(',').any(|c| c == "pids").then_some(path)
                })?;
                Path::new(mnt).join(rel.trim_start_matches('/'))
            }
            "cgroup2" => {
                let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
                let dir = Path::new(mnt).join(rel.trim_start_matches('/'));
                let ctl = std::fs::read_to_string(dir.join("cgroup.subtree_control")).ok()?;
                if !ctl.split_whitespace().any(|c| c == "pids") {
                    continue;
                }
                dir
            }
            _ => continue,
        };
        if writable_dir(&parent) {
            return Some(parent);
        }
    }
    None
}

fn writable_dir(dir: &Path) -> bool {
    let probe = dir.join(format!("warden-probe-{}", std::process::id()));
    match std::fs::create_dir(&probe) {
        Ok(()) => std::fs::remove_dir(&probe).is_ok(),
        Err(_) => false,
    }
}
