//! The sandbox crate's input: what one launch needs, decided by the caller
//! (warden converts a server's configuration into a [`LaunchSpec`] in
//! `src/launch.rs`). Nothing here knows about configuration files, trust
//! levels or scopes.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One process to launch, and the sandbox it asks for.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// A name for messages, logs and the private folder's prefix.
    pub name: String,
    /// The executable: absolute, already resolved by the caller.
    pub program: PathBuf,
    /// `argv[0]` as the user wrote the command (`None`: the program path).
    pub argv0: Option<String>,
    pub args: Vec<String>,
    pub env: EnvInputs,
    /// Working directory (`None`: the workspace of the [`crate::LaunchContext`]).
    pub cwd: Option<PathBuf>,
    /// `false`: run without the sandbox, only the filtered environment and
    /// the own process group (refused unless `trusted`).
    pub enabled: bool,
    /// The operator trusts this program: only then may it run with
    /// `enabled: false` or [`Network::Host`].
    pub trusted: bool,
    /// Extra paths readable (and executable); absolute, must exist.
    pub read: Vec<PathBuf>,
    /// Extra paths readable and writable (not executable); absolute, must exist.
    pub write: Vec<PathBuf>,
    pub network: Network,
    pub limits: Limits,
    /// Start even when the kernel lacks a protection; each gap is reported
    /// in [`crate::SandboxSummary::gaps`].
    pub best_effort: bool,
}

/// The environment inputs besides the fixed `PATH`, `LANG`, private `HOME`
/// and `TMPDIR` (CONTRACT §7).
#[derive(Clone, Default)]
pub struct EnvInputs {
    /// Host variables passed through by name; an unset one is an error.
    pub from_host: Vec<HostVar>,
    /// Variables set to literal values (often secrets: never logged, and
    /// `Debug` shows only the names).
    pub set: BTreeMap<String, String>,
}

impl fmt::Debug for EnvInputs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvInputs")
            .field("from_host", &self.from_host)
            .field("set", &self.set.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A host variable passed through by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostVar {
    pub name: String,
    /// Where the name came from (e.g. `env_from`), for the error when the
    /// variable is unset.
    pub named_in: &'static str,
}

/// Network access (CONTRACT §7).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// No network of any kind: TCP, UDP, raw, abstract unix sockets.
    #[default]
    None,
    /// Only the listed TCP ports (Landlock ABI ≥ 4).
    Ports {
        connect_tcp: Vec<u16>,
        bind_tcp: Vec<u16>,
    },
    /// No restriction; only for trusted programs.
    Host,
}

/// Resource limits. Each is enforced for the whole sandbox where the host
/// allows it (cgroups, the private tmpfs), else as well as it allows
/// (per-process rlimits); `open_files` is per process and `file_size_mb`
/// per file by nature. What is exact on this host, and why not otherwise,
/// is in [`crate::SandboxSummary::limit_report`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// All memory of all processes: anonymous, shared and SysV memory,
    /// stacks, and the private tmpfs' pages.
    pub memory_mb: u64,
    /// Processes and threads together, the server included.
    pub processes: u64,
    /// Open descriptors, per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Total CPU time of every process of the sandbox, dead ones included.
    pub cpu_seconds: u64,
    /// Size of one file written (`RLIMIT_FSIZE`).
    pub file_size_mb: u64,
    /// Bytes the server keeps in its private HOME + TMPDIR (+ `/dev/shm`).
    pub private_mb: u64,
    /// Which limits the operator wrote: one of these that cannot be
    /// enforced exactly stops the launch (`SandboxError::Unsupported`)
    /// unless `best_effort`; a default one is enforced as well as the host
    /// allows and reported.
    pub explicit: ExplicitLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_mb: 1024,
            processes: 64,
            open_files: 256,
            cpu_seconds: 600,
            file_size_mb: 64,
            private_mb: 256,
            explicit: ExplicitLimits::default(),
        }
    }
}

/// Which limits were written explicitly (see [`Limits::explicit`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExplicitLimits {
    pub memory_mb: bool,
    pub processes: bool,
    pub open_files: bool,
    pub cpu_seconds: bool,
    pub file_size_mb: bool,
    pub private_mb: bool,
}
