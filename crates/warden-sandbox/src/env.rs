//! The environment a launched process sees (CONTRACT §7): `PATH`, `LANG`,
//! a private `HOME`/`TMPDIR`, the variables the spec sets, and the host
//! variables it names. Nothing else from the host.

use std::collections::BTreeMap;
use std::path::Path;

use crate::SandboxError;
use crate::spec::LaunchSpec;

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

pub(crate) fn filtered_env(
    spec: &LaunchSpec,
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
    for var in &spec.env.from_host {
        let value = std::env::var(&var.name).map_err(|_| SandboxError::MissingEnv {
            server: spec.name.clone(),
            var: var.name.clone(),
            key: var.named_in,
        })?;
        env.insert(var.name.clone(), value);
    }
    for (name, value) in &spec.env.set {
        env.insert(name.clone(), value.clone());
    }
    Ok(env)
}
