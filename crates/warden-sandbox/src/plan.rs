//! The fully resolved sandbox of one launch, handed from `prepare` to the
//! helper as one JSON argument. Everything is decided before the helper
//! runs (paths resolved, kernel support checked, cgroup hierarchies
//! chosen): it only applies. Both ends are the same build, so the format
//! is internal. Secrets never travel here (argv is visible in
//! `/proc/PID/cmdline`): the environment reaches the server through the
//! helper's own environment, each name behind a prefix the helper takes
//! off only for the server's `execve` (`crate::env::SERVER_ENV_PREFIX`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cgroup::CgroupPlan;
use crate::spec::{Limits, Network};

/// How a host path appears inside the mount namespace (at the same path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum BindKind {
    /// Read-only, executable (system folders, install prefix, `read`).
    ReadExec,
    /// Read-only, not executable (the `/etc` list, `/sys/devices/system/cpu`).
    Read,
    /// Read-write, not executable (`write` grants).
    Write,
    /// Nothing of the host: an empty read-only folder over a folder of
    /// warden's credentials that a grant contains.
    Hidden,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Bind {
    pub src: PathBuf,
    pub kind: BindKind,
    /// A system path that may vanish (skipped), not a configured grant.
    pub optional: bool,
    /// A configured grant named inside the workspace: the object it reaches
    /// must lie under this folder (the workspace, resolved). A symlink the
    /// workspace holds, or puts there later, never redirects it outside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confine: Option<PathBuf>,
}

/// The mount namespace view (ARCHITECTURE.md, "The sandbox").
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct View {
    pub binds: Vec<Bind>,
    /// Where the private tmpfs is mounted (TMPDIR).
    pub private_dir: PathBuf,
    /// HOME, inside the private tmpfs.
    pub home: PathBuf,
    /// TMPDIR (and `/dev/shm`): the private tmpfs itself, or a folder
    /// inside it (`grants::private_write_rules`).
    pub tmp: PathBuf,
    /// Size of the private tmpfs.
    pub private_mb: u64,
    /// A root-started server's owner-only `/proc` entries to cover
    /// (`proc_mask`), found once by warden; `None`: the helper walks its
    /// fresh `/proc` itself (or the server is not root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proc_root_only: Option<Vec<crate::proc_mask::RootOnly>>,
}

/// The paths Landlock allows (inside the view when there is one).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct LandlockPaths {
    pub read_exec: Vec<PathBuf>,
    pub read: Vec<PathBuf>,
    /// The configured `write` grants (and the writable device nodes):
    /// no FIFO or unix socket may be made in them, since host programs
    /// later open what the workspace holds (a FIFO blocks them; a socket
    /// answers as their daemon).
    pub write: Vec<PathBuf>,
    /// The server's private HOME and TMPDIR (and `/dev/shm` in them):
    /// writable like `write`, and FIFOs and unix sockets may be made
    /// there too (servers use them between their own processes).
    pub private: Vec<PathBuf>,
    /// Folders whose entries may be listed, nothing more (`/` of the view:
    /// it holds only mount points).
    pub list: Vec<PathBuf>,
    /// Without a view, the host paths above that are confined grants
    /// ([`Bind::confine`]): path → the folder it must resolve under.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confine: Vec<(PathBuf, PathBuf)>,
}

/// The kernel mechanisms one launch uses.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Layers {
    pub user_ns: bool,
    pub pid_ns: bool,
    pub ipc_ns: bool,
    pub net_ns: bool,
    /// Landlock ABI to request (`None`: no Landlock).
    pub landlock_abi: Option<u8>,
    pub seccomp: bool,
    /// Send `listen()` to init for a check (ports mode).
    pub listen_supervisor: bool,
    /// Send `epoll_ctl(EPOLL_CTL_ADD)` to init, which keeps the sandbox
    /// within its share of the person's epoll watches (`epoll_quota.rs`).
    pub epoll_quota: bool,
    /// Drop every capability before exec.
    pub drop_caps: bool,
    /// Set `vm.memfd_noexec = 2` in the new pid namespace: no program
    /// runs from a memfd, code that is in no grant.
    pub memfd_noexec: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Plan {
    /// For messages and the cgroup folder's name.
    pub name: String,
    /// Absolute executable to run.
    pub program: PathBuf,
    /// argv, including argv[0].
    pub argv: Vec<String>,
    /// Working directory of the server (inside the view).
    pub cwd: PathBuf,
    /// `None`: no mount namespace (only with `best_effort` where the
    /// kernel lacks the mount API; today's layering).
    pub view: Option<View>,
    pub landlock: LandlockPaths,
    pub network: Network,
    pub limits: Limits,
    pub layers: Layers,
    /// Per-server cgroups (processes, memory, CPU time).
    pub cgroup: Option<CgroupPlan>,
    /// A failed cgroup creation ends the launch (exit 4): an explicit limit
    /// needs it and `best_effort` is off.
    pub cgroup_required: bool,
    /// Write this `kernel.pid_max` inside the new pid namespace (root: a
    /// process cap that holds without a pids cgroup; floor 301).
    pub pid_max: Option<u64>,
    /// warden's pid: the helper dies with it. `None`: the helper replaced
    /// warden (`exec_in_place`) and is the top of the tree itself.
    pub parent_pid: Option<i32>,
    /// A folder the helper removes when the command has ended (host
    /// HOME/TMPDIR without a view, when no guard outlives the exec).
    pub cleanup: Option<PathBuf>,
    /// Start even if Landlock reports partial enforcement.
    pub best_effort: bool,
    /// The umask the server gets (warden's own at its start:
    /// [`crate::remember_umask`]), not the one the helper inherited.
    pub umask: u32,
}
