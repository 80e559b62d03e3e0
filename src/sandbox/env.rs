//! The environment a server sees (CONTRACT §7): `PATH`, `LANG`, a private
//! `HOME`/`TMPDIR`, the server's `env`, and host variables named in
//! `env_from` / `sandbox.env`. Nothing else from the host.

use std::collections::BTreeMap;
use std::path::Path;

use super::SandboxError;
use crate::config::{ServerConfig, StdioConfig};

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

pub fn filtered_env(
    server: &ServerConfig,
    stdio: &StdioConfig,
    home: &Path,
    tmp: &Path,
) -> Result<BTreeMap<String, String>, SandboxError> {
    let mut env = BTreeMap::new();
    env.insert(
        "PATH".to_string(),
        std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_string()),
    );
    if let Ok(lang) = std::env::var("LANG") {
        env.insert("LANG".to_string(), lang);
    }
    env.insert("HOME".to_string(), home.display().to_string());
    env.insert("TMPDIR".to_string(), tmp.display().to_string());
    for (key, list) in [
        ("env_from", &stdio.env_from),
        ("sandbox.env", &server.sandbox.env),
    ] {
        for var in list {
            let value = std::env::var(var).map_err(|_| SandboxError::MissingEnv {
                server: server.name.clone(),
                var: var.clone(),
                key,
            })?;
            env.insert(var.clone(), value);
        }
    }
    for (name, value) in &stdio.env {
        env.insert(name.clone(), value.expose().to_string());
    }
    Ok(env)
}
