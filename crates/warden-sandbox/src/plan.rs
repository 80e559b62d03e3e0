//! The fully resolved sandbox of one launch, handed from `prepare` to the
//! helper as one JSON argument. Everything is decided before the helper
//! runs: it only applies. Both ends are the same build, so the format is
//! internal.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::spec::{Limits, Network};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Plan {
    /// Absolute executable to run.
    pub program: PathBuf,
    /// argv, including argv[0].
    pub argv: Vec<String>,
    /// Read + execute.
    pub read_exec: Vec<PathBuf>,
    /// Read only.
    pub read: Vec<PathBuf>,
    /// Read + write (no execute).
    pub write: Vec<PathBuf>,
    pub network: Network,
    pub limits: Limits,
    /// Landlock ABI to request (`None`: no Landlock).
    pub landlock_abi: Option<u8>,
    pub seccomp: bool,
    /// seccomp refuses connect() and sendto() with an address (network
    /// `none` on kernels without Landlock's pathname unix socket rule).
    pub deny_connect: bool,
    pub user_ns: bool,
    pub net_ns: bool,
    pub pid_ns: bool,
    /// Write this `kernel.pid_max` inside the new pid namespace.
    pub pid_max: Option<u64>,
    /// warden's pid: the helper dies with it. `None`: the helper replaced
    /// warden (`exec_in_place`) and is the top of the tree itself.
    pub parent_pid: Option<i32>,
    /// A folder the helper removes when the command has ended (the private
    /// HOME/TMPDIR when no guard outlives the exec).
    pub cleanup: Option<PathBuf>,
    /// Start even if Landlock reports partial enforcement.
    pub best_effort: bool,
}
