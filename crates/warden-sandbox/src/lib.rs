//! The launch seam: every stdio server process warden starts is created
//! here, and only here. Given a [`LaunchSpec`] (program, environment
//! inputs, grants, network, limits) this crate builds the process
//! (filtered environment, own process group, and the sandbox of CONTRACT
//! §7) and hands back a ready [`std::process::Command`] plus a
//! [`ProcessGuard`] that owns the process group and the private folders.
//!
//! Nothing outside this crate calls Landlock, seccomp, namespaces or
//! rlimits, and it is the only crate of the workspace allowed `unsafe`
//! (each block says why it is sound). Why the sandbox is a helper process
//! that re-applies everything before `exec`, what each mechanism covers
//! and the order they are applied in: ARCHITECTURE.md, "The sandbox".
//!
//! Map: [`LaunchSpec`] (the input), `prepare` (spec + [`Support`] → plan
//! and [`SandboxSummary`]; fails closed on a missing kernel feature or an
//! explicit limit it cannot enforce exactly, unless `best_effort`), `paths`
//! (system folders, install prefixes), `env` (the filtered environment),
//! [`helper`] (the processes that apply the plan: the `warden-sandbox-exec`
//! binary, or `warden __sandbox-exec`), and the mechanisms it uses:
//! `mountns` (the view), `cgroup`, `seccomp`, `caps`, `sys` (raw system
//! calls); `kernel` (what this host offers), `runtime_dir` and `guard`
//! (host folders and the process group).

mod bind_check;
mod caps;
mod cgroup;
mod counters;
mod env;
mod epoll_quota;
mod git;
mod grants;
mod guard;
pub mod helper;
mod kernel;
mod launch;
mod mountns;
mod paths;
mod pipes;
mod plan;
mod prepare;
mod proc_mask;
mod runtime_dir;
mod seccomp;
mod spec;
mod summary;
mod sys;
mod umask;

pub use env::{HomeInputs, possible_homes};
pub use guard::ProcessGuard;
pub use kernel::{CgroupSupport, Support, support, support_live};
pub use launch::{
    HELPER_BIN, Helper, LaunchContext, LiveCheck, Prepared, REEXEC_ARG, describe, exec_in_place,
    live_check, prepare,
};
pub use paths::which_in;
pub use pipes::{STDIO_PIPE_BYTES, widen_pipe};
pub use proc_mask::begin_proc_walk;
pub use runtime_dir::{RuntimeDirError, ensure_runtime_dir, sweep_runtime_dir};
pub use spec::{EnvInputs, ExplicitLimits, HostVar, LaunchSpec, Limits, Network};
pub use summary::{LayerReport, LimitReport, PrefixGrant, SandboxSummary};
pub use umask::remember_umask;

/// Ends a forked child at once: no atexit handlers, no flushing of buffers
/// shared with the parent (`_exit(2)`; nix has no wrapper).
fn exit_now(code: i32) -> ! {
    // SAFETY: _exit takes an integer, never returns and is
    // async-signal-safe, so it is sound even in the child of a threaded fork.
    unsafe { libc::_exit(code) }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
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
