//! The fully resolved sandbox of one launch, handed from `prepare` to the
//! `__sandbox-exec` helper as one JSON argument. Everything is decided
//! before the helper runs: it only applies.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanNetwork {
    None,
    Ports {
        connect_tcp: Vec<u16>,
        bind_tcp: Vec<u16>,
    },
    Host,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanLimits {
    pub memory_mb: u64,
    pub processes: u64,
    pub open_files: u64,
    pub cpu_seconds: u64,
    pub file_size_mb: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
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
    pub network: PlanNetwork,
    pub limits: PlanLimits,
    /// Landlock ABI to request (0 = no Landlock).
    pub landlock_abi: u8,
    pub seccomp: bool,
    /// seccomp refuses connect() and sendto() with an address (network
    /// `none` on kernels without Landlock's pathname unix socket rule).
    pub deny_connect: bool,
    pub user_ns: bool,
    pub net_ns: bool,
    pub pid_ns: bool,
    /// Write this `kernel.pid_max` inside the new pid namespace (0 = no).
    pub pid_max: u64,
    /// warden's pid: the helper dies with it. 0: the helper replaced warden
    /// (`exec_in_place`) and is the top of the tree itself.
    pub parent_pid: i32,
    /// A folder the helper removes when the command has ended (the private
    /// HOME/TMPDIR when no guard outlives the exec).
    pub cleanup: Option<PathBuf>,
    /// Start even if Landlock reports partial enforcement.
    pub best_effort: bool,
}
