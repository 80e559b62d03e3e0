//! The configuration loader: one file (the input, after a scope byte) as
//! `--config`, user or project scope, with `${VAR}` expansion from a fixed
//! environment, every section, then its rules compiled. Properties: no
//! panic; an error never shows the value of a host variable the file
//! expanded (it may be a secret); `Debug` of `env`, `headers` and URL
//! credentials never shows one; a project file never yields an `allow`
//! rule.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use warden::config::{Scope, TransportConfig};
use warden_policy::{Pipeline, PipelineConfig, RuleEffect};

const CANARY: &str = "fuzz-canary-value-7f3a";

struct Dirs {
    _tmp: tempfile::TempDir,
    workspace: PathBuf,
    config_dir: PathBuf,
    home: String,
    file: PathBuf,
}

fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(tmp.path()).expect("canonical temp dir");
        let workspace = root.join("ws");
        let config_dir = root.join("config");
        let home = root.join("home");
        for d in [&workspace, &config_dir, &home, &workspace.join("sub")] {
            std::fs::create_dir_all(d).expect("fuzz dirs");
        }
        Dirs {
            file: workspace.join(".mcp.json"),
            home: home.to_string_lossy().into_owned(),
            workspace,
            config_dir,
            _tmp: tmp,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let d = dirs();
    let scope = match selector % 3 {
        0 => Scope::Explicit,
        1 => Scope::User,
        _ => Scope::Project,
    };
    if std::fs::write(&d.file, body).is_err() {
        return;
    }
    let env = |name: &str| -> Option<String> {
        match name {
            "PATH" => Some("/usr/local/bin:/usr/bin:/bin".into()),
            "HOME" => Some(d.home.clone()),
            "FUZZ_TOKEN" => Some(CANARY.into()),
            "FUZZ_EMPTY" => Some(String::new()),
            "FUZZ_DIR" => Some("sub".into()),
            _ => None,
        }
    };
    let shows_canary = body.windows(CANARY.len()).any(|w| w == CANARY.as_bytes());
    match warden::fuzzing::load_config_file(&d.file, scope, &d.workspace, &d.config_dir, &env) {
        Err(e) => {
            let message = format!("{e}\n{e:?}");
            assert!(
                shows_canary || !message.contains(CANARY),
                "an error message shows an expanded host value: {message}"
            );
        }
        Ok(config) => {
            if scope == Scope::Project {
                assert!(
                    config.rules.iter().all(|r| r.effect != RuleEffect::Allow),
                    "a project file produced an allow rule"
                );
            }
            // Secret-bearing fields never show an expanded value in
            // Debug: `env` values, `headers` values, URL credentials (the
            // canary may still be in a URL's host or path).
            for server in config.servers.values() {
                let (shown, allowed) = match &server.transport {
                    TransportConfig::Stdio(stdio) => (format!("{:?}", stdio.env), false),
                    TransportConfig::Http(remote) | TransportConfig::Sse(remote) => (
                        format!("{remote:?}"),
                        warden_core::redact::url(&remote.url).contains(CANARY),
                    ),
                };
                assert!(
                    shows_canary || allowed || !shown.contains(CANARY),
                    "Debug of a secret-bearing field shows an expanded host value: {shown}"
                );
            }
            for (_, secret) in &config.expanded_secrets {
                assert!(!format!("{secret:?}").contains(CANARY));
            }
            // The rules as the session compiles them (no Rego: that is
            // its own target).
            let _ = Pipeline::load(PipelineConfig {
                rules: config.rules.clone(),
                policies: Some(Vec::new()),
                workspace: d.workspace.clone(),
                ..PipelineConfig::default()
            });
        }
    }
});
