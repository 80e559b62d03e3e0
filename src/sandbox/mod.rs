//! The launch seam: every stdio server process is created here, and only
//! here. Given a server's configuration this module builds the process
//! (filtered environment, own process group, and the sandbox of CONTRACT §7)
//! and hands back a ready `tokio::process::Command` plus a guard that owns
//! the process group and the private directories.
//!
//! Nothing outside this module calls Landlock, seccomp, namespaces or rlimits.

mod env;
mod guard;

use std::path::PathBuf;

use serde::Serialize;

use crate::config::{ServerConfig, TransportConfig};

pub use env::filtered_env;
pub use guard::ProcessGuard;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("server `{server}` is not a stdio server; only stdio servers are launched")]
    NotStdio { server: String },
    #[error("server `{server}`: host variable `{var}` named in {key} is not set")]
    MissingEnv {
        server: String,
        var: String,
        key: &'static str,
    },
    #[error("server `{server}` needs {feature}, which this kernel does not provide: {detail}")]
    Unsupported {
        server: String,
        feature: String,
        detail: String,
    },
    #[error("server `{server}`: preparing the sandbox failed: {detail}")]
    Setup { server: String, detail: String },
}

/// What every launch needs to know about the session.
#[derive(Debug, Clone)]
pub struct LaunchContext {
    /// The workspace root (absolute).
    pub workspace: PathBuf,
    /// Where per-server private HOME/TMPDIR folders are created.
    pub runtime_dir: PathBuf,
}

/// A summary of what is enforced on one server, for `mcp status` and audit.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct SandboxSummary {
    pub enabled: bool,
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub network: String,
    /// Protections asked for but not enforced (only with `best_effort`).
    pub gaps: Vec<String>,
}

/// A process ready to spawn and the guard that must outlive it.
pub struct Prepared {
    pub command: tokio::process::Command,
    pub guard: ProcessGuard,
    pub summary: SandboxSummary,
}

/// Builds the launch of one stdio server.
pub fn prepare(server: &ServerConfig, ctx: &LaunchContext) -> Result<Prepared, SandboxError> {
    let TransportConfig::Stdio(stdio) = &server.transport else {
        return Err(SandboxError::NotStdio {
            server: server.name.clone(),
        });
    };
    let guard =
        ProcessGuard::new(&server.name, &ctx.runtime_dir).map_err(|e| SandboxError::Setup {
            server: server.name.clone(),
            detail: e.to_string(),
        })?;
    let env = filtered_env(server, stdio, guard.home(), guard.tmp())?;
    let mut command = tokio::process::Command::new(&stdio.program);
    command
        .args(&stdio.args)
        .env_clear()
        .envs(env)
        .current_dir(stdio.cwd.as_deref().unwrap_or(&ctx.workspace))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Its own process group, so the whole tree can be signalled at once.
        .process_group(0)
        .kill_on_drop(true);
    let summary = SandboxSummary {
        enabled: false,
        network: "host".into(),
        gaps: vec!["sandbox not implemented yet".into()],
        ..Default::default()
    };
    Ok(Prepared {
        command,
        guard,
        summary,
    })
}
