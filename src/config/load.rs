//! Finding the configuration files, and merging them (CONTRACT §3).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::error::ConfigError;
use super::expand::EnvLookup;
use super::file::{FileConfig, load_file};
use super::{AuditConfig, Config, PolicySource, RuleSource, Scope, ServerConfig, TransportConfig};
use warden_core::path::normalize;

/// Where to look. Built by the CLI from `--config`, `--workspace` and
/// [`default_config_dir`].
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `--config FILE`: this file alone, fully trusted.
    pub config_file: Option<PathBuf>,
    /// The workspace root; the project `.mcp.json` is searched from here up.
    pub workspace: PathBuf,
    /// Holds `config.json` (user scope), `approvals.json` and `pins.json`.
    pub config_dir: PathBuf,
}

/// `$WARDEN_CONFIG_DIR`, else `$HOME/.config/warden`; `None` when neither is
/// set (empty counts as unset).
pub fn default_config_dir() -> Option<PathBuf> {
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = nonempty("WARDEN_CONFIG_DIR") {
        return Some(PathBuf::from(dir));
    }
    nonempty("HOME").map(|home| PathBuf::from(home).join(".config").join("warden"))
}

/// Loads, validates and merges the configuration, expanding `${VAR}` from
/// the host environment. Nothing partial is returned on error.
pub fn load(opts: &LoadOptions) -> Result<Config, ConfigError> {
    load_with_env(opts, &|name| std::env::var(name).ok())
}

/// [`load`] with the environment given explicitly (for `${VAR}` and the
/// `PATH` that commands are looked up in): tests and embedders use this
/// instead of changing the process environment.
pub fn load_with_env(opts: &LoadOptions, env: EnvLookup<'_>) -> Result<Config, ConfigError> {
    let workspace =
        std::fs::canonicalize(&opts.workspace).map_err(|source| ConfigError::Workspace {
            path: opts.workspace.clone(),
            source,
        })?;
    if !workspace.is_dir() {
        return Err(ConfigError::Workspace {
            path: opts.workspace.clone(),
            source: std::io::Error::other("not a directory"),
        });
    }

    let mut files: Vec<(PathBuf, Scope)> = Vec::new();
    if let Some(file) = &opts.config_file {
        let abs = std::path::absolute(file).map_err(|source| ConfigError::Read {
            path: file.clone(),
            source,
        })?;
        files.push((normalize(&abs), Scope::Explicit));
    } else {
        let user = opts.config_dir.join("config.json");
        if user.is_file() {
            files.push((user, Scope::User));
        }
        if let Some(project) = find_project_file(&workspace) {
            files.push((project, Scope::Project));
        }
    }

    let mut loaded = Vec::new();
    for (path, scope) in &files {
        tracing::debug!(file = %path.display(), scope = ?scope, "loading configuration");
        loaded.push((load_file(path, *scope, &workspace, env)?, *scope));
    }
    let sources = files.into_iter().map(|(p, _)| p).collect();
    let config = merge(workspace, opts.config_dir.clone(), sources, loaded);
    // From here on, no output of this process shows a secret of it.
    crate::scrub::register(super::secrets_of(&config));
    Ok(config)
}

/// One file loaded as `scope` and merged as [`load_with_env`] would,
/// without registering its secrets with `crate::scrub` (a fuzz target
/// loads millions of files; the process-wide list would only grow).
/// `workspace` must already be canonical.
#[cfg(feature = "fuzzing")]
pub(crate) fn load_file_unregistered(
    path: &Path,
    scope: Scope,
    workspace: &Path,
    config_dir: &Path,
    env: EnvLookup<'_>,
) -> Result<Config, ConfigError> {
    let file = load_file(path, scope, workspace, env)?;
    Ok(merge(
        workspace.to_path_buf(),
        config_dir.to_path_buf(),
        vec![path.to_path_buf()],
        vec![(file, scope)],
    ))
}

/// The nearest `.mcp.json` at or above `start`. One above `start` that
/// another user owns (the file, or a symlink to it) is passed over: anyone
/// who can write a folder above the workspace (`/tmp`, a shared parent)
/// could otherwise give it a project file, as git's CVE-2022-24765 did
/// with `.git`. The workspace's own file is the one the user chose.
pub fn find_project_file(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|dir| (dir, dir.join(".mcp.json")))
        .filter(|(_, candidate)| candidate.is_file())
        .find(|(dir, candidate)| *dir == start || ours(candidate))
        .map(|(_, candidate)| candidate)
}

/// Whether `file`, and the link it may be, belong to this user or root.
fn ours(file: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let owners = [std::fs::symlink_metadata(file), std::fs::metadata(file)];
    let ok = owners
        .iter()
        .all(|m| m.as_ref().is_ok_and(|m| m.uid() == me || m.uid() == 0));
    if !ok {
        tracing::warn!(
            file = %file.display(),
            "passing over a .mcp.json above the workspace that another user owns"
        );
    }
    ok
}

fn merge(
    workspace: PathBuf,
    config_dir: PathBuf,
    sources: Vec<PathBuf>,
    files: Vec<(FileConfig, Scope)>,
) -> Config {
    let mut servers = BTreeMap::new();
    let mut rules = Vec::new();
    let mut policies: Option<Vec<_>> = None;
    let mut own_policy_key = false;
    let mut audit = AuditConfig::default();
    let mut policy_data = Vec::new();
    let mut expanded_secrets = Vec::new();
    // Files arrive in precedence order (user, then project): the first
    // definition of a name wins.
    for (file, scope) in files {
        for server in file.servers {
            if let Some(existing) = servers.get(&server.name) {
                let existing: &ServerConfig = existing;
                tracing::warn!(
                    server = %server.name,
                    kept = %existing.source.display(),
                    ignored = %server.source.display(),
                    "server defined in both files; the user's definition wins"
                );
                continue;
            }
            let mut server = server;
            if let TransportConfig::Http(remote) = &mut server.transport {
                remote.oauth_store = Some(
                    config_dir
                        .join("oauth")
                        .join(format!("{}.json", server.name)),
                );
            }
            servers.insert(server.name.clone(), server);
        }
        rules.extend(file.rules);
        policy_data.extend(file.policy_data);
        expanded_secrets.extend(
            file.secrets
                .into_iter()
                .map(|(name, value)| (name, super::Secret::new(value))),
        );
        if let Some(list) = file.policy {
            if scope != Scope::Project {
                own_policy_key = true;
            }
            policies.get_or_insert_with(Vec::new).extend(list);
        }
        if let Some(a) = file.audit {
            // Project files cannot carry `audit` (rejected when parsed).
            audit = a;
        }
    }
    // The shipped default stays on unless the user's own file chose
    // policies: a project file may add policies, never remove the default.
    let default_policy = !own_policy_key;
    // Every session is audited (CONTRACT §6: `on_failure: continue` is the
    // only way to run unaudited): without `audit.path` the log is the
    // config dir's, synced in batches unless `audit.fsync` says otherwise.
    if audit.path.is_none() {
        audit.path = Some(config_dir.join(super::DEFAULT_AUDIT_FILE));
        if !audit.fsync_explicit {
            audit.fsync = warden_audit::FsyncMode::Batch;
        }
    }

    let digest = warden_core::digest::sha256_json(&json!({
        "workspace": workspace.to_string_lossy(),
        "sources": sources.iter().map(|p| p.to_string_lossy().into_owned()).collect::<Vec<_>>(),
        "servers": servers.values().map(|s: &ServerConfig| (s.name.clone(), json!({
            "digest": s.digest,
            "scope": s.scope,
            "source": s.source.to_string_lossy(),
        }))).collect::<serde_json::Map<String, Value>>(),
        "rules": rules.iter().map(|r: &RuleSource| json!({
            "effect": r.effect, "text": r.text, "scope": r.scope,
        })).collect::<Vec<_>>(),
        "policies": policies.as_ref().map(|list: &Vec<PolicySource>| list.iter().map(|p| json!({
            "path": p.path.to_string_lossy(), "scope": p.scope,
        })).collect::<Vec<_>>()),
        "policy_data": policy_data.iter().map(|d: &warden_policy::DataSource| json!({
            "path": d.path.to_string_lossy(), "scope": d.scope,
        })).collect::<Vec<_>>(),
        "default_policy": default_policy,
        "audit": {
            "path": audit.path.as_ref().map(|p| p.to_string_lossy().into_owned()),
            "redact": audit.redact,
            "fsync": audit.fsync,
            "on_failure": audit.on_failure,
            "max_value_bytes": audit.max_value_bytes,
        },
    }));

    Config {
        workspace,
        sources,
        servers,
        rules,
        policies,
        policy_data,
        audit,
        digest,
        default_policy,
        config_dir,
        expanded_secrets,
    }
}
