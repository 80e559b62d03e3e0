//! What is enforced on one launch, in words: shown by `warden mcp status`
//! and `warden sandbox check`, and written to the audit log.

use std::path::PathBuf;

use serde::Serialize;

use crate::spec::Limits;

/// A summary of what is enforced on one server.
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
    /// Mechanisms in force, e.g. `landlock-abi-6`, `user+pid+ipc+net namespaces`.
    pub mechanisms: Vec<String>,
    /// The limits applied.
    pub limits: Option<Limits>,
    /// Known limits of what is enforced on this kernel (not gaps: nothing
    /// required is missing), e.g. no DNS under `connect_tcp`.
    pub notes: Vec<String>,
}
