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
    /// Protections asked for but not enforced (only with `best_effort`),
    /// including explicit limits that cannot be enforced exactly.
    pub gaps: Vec<String>,
    /// Read + execute paths found from the executable (install prefix,
    /// interpreters, venv), part of `read`.
    pub install_prefix: Vec<PathBuf>,
    /// Mechanisms in force, e.g. `landlock-abi-6`, `user+pid+ipc+net+mount namespaces`.
    pub mechanisms: Vec<String>,
    /// The limits applied (values, and which were written explicitly).
    pub limits: Option<Limits>,
    /// Known limits of what is enforced on this kernel (not gaps: nothing
    /// required is missing), e.g. no DNS under `connect_tcp`.
    pub notes: Vec<String>,
    /// Why each install-prefix path was granted.
    pub install_prefix_reasons: Vec<PrefixGrant>,
    /// Each layer of the sandbox: whether it is in force, and the threat
    /// it answers.
    pub layers: Vec<LayerReport>,
    /// Each limit: how it is enforced on this host, and whether exactly.
    pub limit_report: Vec<LimitReport>,
}

/// One install-prefix grant.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PrefixGrant {
    pub path: PathBuf,
    /// E.g. "python venv", "file alone (~/.cargo holds credentials.toml)".
    pub reason: String,
}

/// One layer of the sandbox.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LayerReport {
    /// E.g. "mount namespace view".
    pub layer: String,
    pub enforced: bool,
    /// What exactly (e.g. "fresh /proc of the pid namespace"), or why not.
    pub detail: String,
    /// The threat it answers.
    pub answers: String,
}

/// How one limit is enforced.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LimitReport {
    /// The configuration key, e.g. "memory_mb".
    pub limit: String,
    pub value: u64,
    /// Written by the operator (else the default).
    pub explicit: bool,
    /// What the limit counts: "sandbox" (all its processes together),
    /// "process" or "file".
    pub scope: String,
    /// Enforced exactly as documented for that scope.
    pub exact: bool,
    /// The mechanism, e.g. "cgroup v1 pids.max = 65 (init included)".
    pub mechanism: String,
    /// Why it is only enforced as well as the host allows.
    pub why_not_exact: Option<String>,
}

impl LimitReport {
    /// One line: "memory_mb 1024: exact (cgroup v1 …)" or "… as well as
    /// the host allows: … (why)".
    pub fn line(&self) -> String {
        let origin = if self.explicit { "" } else { " (default)" };
        match (&self.exact, &self.why_not_exact) {
            (true, _) => format!(
                "{} {}{origin}: exact per {}: {}",
                self.limit, self.value, self.scope, self.mechanism
            ),
            (false, why) => format!(
                "{} {}{origin}: as well as the host allows: {} ({})",
                self.limit,
                self.value,
                self.mechanism,
                why.as_deref().unwrap_or("not exact")
            ),
        }
    }
}
