//! The environment a launched process sees (CONTRACT §7): `PATH`, `LANG`,
//! a private `HOME`/`TMPDIR`, the variables the spec sets, and the host
//! variables it names. Nothing else from the host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::SandboxError;
use crate::spec::LaunchSpec;

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The server's environment reaches the helper with every name behind this
/// prefix, and the helper takes it off for the server's `execve` alone:
/// the helper runs outside every namespace with warden's rights, and a
/// name the dynamic loader, libc or Rust's runtime reads (`LD_PRELOAD`,
/// `LD_LIBRARY_PATH` into a folder a server can write, `LD_AUDIT`,
/// `LD_DEBUG_OUTPUT`, `GLIBC_TUNABLES`, `MIMALLOC_*`…) would act there,
/// before the sandbox exists. No such name starts with it.
pub(crate) const SERVER_ENV_PREFIX: &str = "WARDEN_SERVER_ENV_";

/// The helper's environment: `env` with each name behind
/// [`SERVER_ENV_PREFIX`].
pub(crate) fn for_helper(env: BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.into_iter()
        .map(|(k, v)| (format!("{SERVER_ENV_PREFIX}{k}"), v))
        .collect()
}

/// The server's environment, from the helper's own (the names it was
/// given behind [`SERVER_ENV_PREFIX`]; nothing else of the helper's).
pub(crate) fn server_env() -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    std::env::vars_os()
        .filter_map(|(k, v)| {
            let name = k.as_bytes().strip_prefix(SERVER_ENV_PREFIX.as_bytes())?;
            let mut pair = name.to_vec();
            pair.push(b'=');
            pair.extend_from_slice(v.as_bytes());
            Some(std::ffi::OsString::from_vec(pair))
        })
        .collect()
}

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

/// How a server's HOME is chosen ([`filtered_env`] at launch), known from
/// its configuration without launching it.
#[derive(Debug, Clone, Copy)]
pub struct HomeInputs<'a> {
    /// `HOME` among the variables the spec sets (`env.HOME`).
    pub set: Option<&'a str>,
    /// `HOME` among the host variables it names (`env_from`, `sandbox.env`).
    pub from_host: bool,
    /// Sandboxed.
    pub enabled: bool,
    /// `best_effort`: a sandbox without a mount namespace view is allowed.
    pub best_effort: bool,
    /// The session's runtime folder ([`crate::LaunchContext::runtime_dir`]).
    pub runtime_dir: &'a Path,
}

/// Every HOME a server launched with these inputs may get: what
/// [`filtered_env`] sets, in the same order of precedence (the spec's own
/// `HOME`, then the host's when named, then the private one). The private
/// HOME is the view's [`crate::prepare::PRIVATE_HOME`], or, without a view
/// (unsandboxed, or `best_effort` on a kernel without one), a folder of the
/// runtime folder made at launch, `exec-PID-N/home`, whose `N` is not known
/// before: it is written `exec-PID-*` (a reader of `~/../..` still knows
/// where that climbs: the runtime folder).
pub fn possible_homes(inputs: HomeInputs<'_>) -> Vec<PathBuf> {
    if let Some(home) = inputs.set {
        return vec![PathBuf::from(home)];
    }
    if inputs.from_host {
        return std::env::var_os("HOME")
            .map(PathBuf::from)
            .into_iter()
            .collect();
    }
    let host_folder = inputs
        .runtime_dir
        .join(format!("exec-{}-*", std::process::id()))
        .join("home");
    match (inputs.enabled, inputs.best_effort) {
        (true, false) => vec![PathBuf::from(crate::prepare::PRIVATE_HOME)],
        (true, true) => vec![PathBuf::from(crate::prepare::PRIVATE_HOME), host_folder],
        (false, _) => vec![host_folder],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{EnvInputs, HostVar, Limits, Network};

    fn spec(env: EnvInputs) -> LaunchSpec {
        LaunchSpec {
            name: "s".into(),
            program: PathBuf::from("/bin/true"),
            argv0: None,
            args: Vec::new(),
            env,
            cwd: None,
            enabled: true,
            trusted: false,
            read: Vec::new(),
            write: Vec::new(),
            network: Network::None,
            limits: Limits::default(),
            best_effort: false,
        }
    }

    /// What `possible_homes` says is what `filtered_env` sets.
    #[test]
    fn possible_homes_are_the_homes_set() {
        let runtime = Path::new("/run/w");
        let inputs = |set, from_host, enabled, best_effort| HomeInputs {
            set,
            from_host,
            enabled,
            best_effort,
            runtime_dir: runtime,
        };
        let private = Path::new(crate::prepare::PRIVATE_HOME);
        let set = spec(EnvInputs {
            from_host: Vec::new(),
            set: [("HOME".to_string(), "/srv/h".to_string())].into(),
        });
        let env = filtered_env(&set, private, Path::new("/tmp")).unwrap();
        assert_eq!(
            possible_homes(inputs(Some("/srv/h"), true, true, false)),
            [PathBuf::from(&env["HOME"])]
        );
        if let Ok(host) = std::env::var("HOME") {
            let named = spec(EnvInputs {
                from_host: vec![HostVar {
                    name: "HOME".into(),
                    named_in: "env_from",
                }],
                set: BTreeMap::new(),
            });
            let env = filtered_env(&named, private, Path::new("/tmp")).unwrap();
            assert_eq!(env["HOME"], host);
            assert_eq!(
                possible_homes(inputs(None, true, true, false)),
                [PathBuf::from(host)]
            );
        }
        let plain = spec(EnvInputs::default());
        let env = filtered_env(&plain, private, Path::new("/tmp")).unwrap();
        assert_eq!(
            possible_homes(inputs(None, false, true, false)),
            [PathBuf::from(&env["HOME"])]
        );
        // Without a view: `exec-PID-N/home` of the runtime folder.
        let folder = format!("/run/w/exec-{}-*/home", std::process::id());
        assert_eq!(
            possible_homes(inputs(None, false, false, false)),
            [PathBuf::from(&folder)]
        );
        assert_eq!(possible_homes(inputs(None, false, true, true)).len(), 2);
    }
}
