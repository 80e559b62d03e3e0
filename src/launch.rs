//! Configuration → [`warden_sandbox::LaunchSpec`]: the one place that
//! knows both a server's configuration and the sandbox crate's input. The
//! sandbox sees no trust levels, scopes or config files: trust becomes the
//! single `trusted` permission (run unsandboxed, or with `"host"` network).

use std::path::{Path, PathBuf};

use warden_policy::ServerDirs;
use warden_sandbox::{EnvInputs, HomeInputs, HostVar, LaunchSpec, Network};

use crate::config::{Config, NetworkSpec, ServerConfig, StdioConfig, TransportConfig, Trust};

/// What no server may see even inside a grant
/// (`warden_sandbox::LaunchContext::hide`): the configuration folder
/// (OAuth logins, approvals, pins, the user configuration with its `env`
/// values; [`protected_paths`] lists it too); the audit log and its head,
/// and the pin file and its lock, wherever they are (other servers'
/// records are none of a server's business, and a server that could open
/// one of these files could hold its `flock` and stall warden's writes);
/// and `extra` (files a command named, e.g. the gateway's `--token-file`).
pub fn hidden_paths(
    config: &Config,
    audit: Option<&Path>,
    pins: &[PathBuf],
    extra: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out = vec![config.config_dir.clone()];
    if let Some(log) = audit {
        out.push(log.to_path_buf());
        out.push(warden_audit::head_path(log));
    }
    out.extend(pins.iter().cloned());
    out.extend(extra.iter().cloned());
    out
}

/// warden's own files, which no server may write (the sandbox binds each
/// one that lies inside a write grant read-only over it, and refuses a
/// write grant inside one; `warden_sandbox::LaunchContext::protect`): the
/// configuration files read and the configuration folder (approvals,
/// logins, the default pin file), the policies and policy data, the pin
/// file and its lock, the audit log and its head, what every configured server runs
/// from the workspace (its executable or script: `ServerConfig::content`),
/// and `extra` (files a command named, e.g. `--answers`). A server that
/// could rewrite them could rewrite what decides and records its own
/// calls, or what another server (perhaps a trusted one) runs next.
pub fn protected_paths(
    config: &Config,
    extra_policies: &[PathBuf],
    audit: Option<&Path>,
    pins: &[PathBuf],
    extra: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = config.sources.clone();
    out.push(config.config_dir.clone());
    out.extend(config.policies.iter().flatten().map(|p| p.path.clone()));
    out.extend(extra_policies.iter().cloned());
    out.extend(config.policy_data.iter().map(|d| d.path.clone()));
    out.extend(pins.iter().cloned());
    if let Some(log) = audit {
        out.push(log.to_path_buf());
        out.push(warden_audit::head_path(log));
    }
    out.extend(
        config
            .servers
            .values()
            .flat_map(|server| server.content.keys().cloned()),
    );
    out.extend(extra.iter().cloned());
    out
}

/// Where a server opens the paths it is given, for the policy's reading of
/// its arguments: its configured `cwd` (a relative path is opened from
/// there; the workspace otherwise) and every HOME it may have (`~`,
/// `$HOME`: the sandbox's private HOME, `env.HOME`, the host's when passed
/// through; [`warden_sandbox::possible_homes`] says which, as the launch
/// sets it). A remote server's are unknown: the default.
pub fn server_dirs(server: &ServerConfig, runtime_dir: &Path) -> ServerDirs {
    let TransportConfig::Stdio(stdio) = &server.transport else {
        return ServerDirs::default();
    };
    let named = |name: &String| name == "HOME";
    let homes = warden_sandbox::possible_homes(HomeInputs {
        set: stdio.env.get("HOME").map(|v| v.expose()),
        from_host: stdio.env_from.iter().any(named) || server.sandbox.env.iter().any(named),
        enabled: server.sandbox.enabled,
        best_effort: server.sandbox.best_effort,
        runtime_dir,
    });
    let text = |p: &Path| {
        warden_core::path::normalize(p)
            .to_string_lossy()
            .into_owned()
    };
    ServerDirs {
        cwd: stdio.cwd.as_deref().filter(|c| c.is_absolute()).map(text),
        homes: homes
            .iter()
            .filter(|h| h.is_absolute())
            .map(|h| text(h))
            .collect(),
    }
}

/// The launch of a stdio server; `None` for a remote one (nothing to start).
pub fn launch_spec(server: &ServerConfig) -> Option<LaunchSpec> {
    match &server.transport {
        TransportConfig::Stdio(stdio) => Some(stdio_spec(server, stdio)),
        TransportConfig::Http(_) | TransportConfig::Sse(_) => None,
    }
}

pub(crate) fn stdio_spec(server: &ServerConfig, stdio: &StdioConfig) -> LaunchSpec {
    let sandbox = &server.sandbox;
    let from_host = stdio
        .env_from
        .iter()
        .map(|name| (name, "env_from"))
        .chain(sandbox.env.iter().map(|name| (name, "sandbox.env")))
        .map(|(name, named_in)| HostVar {
            name: name.clone(),
            named_in,
        })
        .collect();
    let set = stdio
        .env
        .iter()
        .map(|(name, value)| (name.clone(), value.expose().to_string()))
        .collect();
    let l = sandbox.limits;
    LaunchSpec {
        name: server.name.clone(),
        program: stdio.program.clone(),
        argv0: (!stdio.command.is_empty()).then(|| stdio.command.clone()),
        args: stdio.args.clone(),
        env: EnvInputs { from_host, set },
        cwd: stdio.cwd.clone(),
        enabled: sandbox.enabled,
        trusted: server.trust == Trust::Trusted,
        read: sandbox.read.clone(),
        write: sandbox.write.clone(),
        network: match &sandbox.network {
            NetworkSpec::None => Network::None,
            NetworkSpec::Ports {
                connect_tcp,
                bind_tcp,
            } => Network::Ports {
                connect_tcp: connect_tcp.clone(),
                bind_tcp: bind_tcp.clone(),
            },
            NetworkSpec::Host => Network::Host,
        },
        limits: l,
        best_effort: sandbox.best_effort,
    }
}
