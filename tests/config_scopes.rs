//! Scopes and the trust boundary (CONTRACT §3): the user file plus the
//! nearest project `.mcp.json` (found walking up from the workspace), or
//! `--config` alone; what a project file may not do; approvals recorded
//! against a server's exact configuration. Temporary directories only: the
//! config dir is passed explicitly, never the real HOME.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use warden::config::{
    Approvals, Config, ConfigError, ErrorKind, LoadOptions, Scope, TransportConfig, Trust,
    load_with_env,
};
use warden_policy::RuleEffect;

struct Fx {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    /// The repository root (holds `.mcp.json`).
    repo: PathBuf,
    /// The workspace: a subdirectory of the repository.
    ws: PathBuf,
    cfg_dir: PathBuf,
    env: BTreeMap<String, String>,
}

impl Fx {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let repo = root.join("repo");
        let ws = repo.join("pkg/app");
        let cfg_dir = root.join("home/.config/warden");
        let bin = root.join("bin");
        for d in [&ws, &cfg_dir, &bin] {
            std::fs::create_dir_all(d).unwrap();
        }
        for name in ["npx", "uvx", "srv"] {
            make_exe(&bin.join(name));
        }
        let mut env = BTreeMap::new();
        env.insert("PATH".into(), bin.to_string_lossy().into_owned());
        env.insert(
            "HOME".into(),
            root.join("home").to_string_lossy().into_owned(),
        );
        Fx {
            _tmp: tmp,
            root,
            repo,
            ws,
            cfg_dir,
            env,
        }
    }

    fn user(&self, text: &str) -> PathBuf {
        let p = self.cfg_dir.join("config.json");
        std::fs::write(&p, text).unwrap();
        p
    }

    fn project(&self, text: &str) -> PathBuf {
        let p = self.repo.join(".mcp.json");
        std::fs::write(&p, text).unwrap();
        p
    }

    fn opts(&self, config_file: Option<PathBuf>) -> LoadOptions {
        LoadOptions {
            config_file,
            workspace: self.ws.clone(),
            config_dir: self.cfg_dir.clone(),
        }
    }

    fn load(&self) -> Result<Config, ConfigError> {
        let env = self.env.clone();
        load_with_env(&self.opts(None), &move |k| env.get(k).cloned())
    }

    fn load_explicit(&self, file: &Path) -> Result<Config, ConfigError> {
        let env = self.env.clone();
        load_with_env(&self.opts(Some(file.to_path_buf())), &move |k| {
            env.get(k).cloned()
        })
    }
}

fn make_exe(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A project-scope violation: rejected as a trust-boundary error naming the
/// project file and the key, and saying why.
fn boundary(fx: &Fx, project: &str, key: &str) -> String {
    let file = fx.project(project);
    let err = fx.load().expect_err(project);
    let msg = err.to_string();
    assert_eq!(err.kind(), Some(ErrorKind::TrustBoundary), "{msg}");
    assert!(msg.contains(&file.display().to_string()), "{msg}");
    assert!(msg.contains(&format!("`{key}`")), "{msg}");
    assert!(msg.contains("shipped by the repository"), "{msg}");
    msg
}

#[test]
fn user_and_project_files_are_found_and_merged() {
    let fx = Fx::new();
    let user = fx.user(
        r#"{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"], "trust": "trusted"},
            "shared": {"command": "srv", "args": ["user"]}},
           "permissions": {"allow": ["mcp__time__*"]},
           "audit": {"path": "${HOME}/audit.jsonl"}}"#,
    );
    let project = fx.project(
        r#"{"mcpServers": {"notes": {"command": "npx", "args": ["notes"]},
            "shared": {"command": "srv", "args": ["project"]}},
           "permissions": {"ask": ["mcp__notes__*"], "deny": ["mcp__notes__rm"]}}"#,
    );
    let cfg = fx.load().unwrap();
    assert_eq!(cfg.sources, vec![user.clone(), project.clone()]);
    assert_eq!(cfg.workspace, fx.ws);
    assert_eq!(cfg.servers["time"].scope, Scope::User);
    assert_eq!(cfg.servers["notes"].scope, Scope::Project);
    assert_eq!(cfg.servers["notes"].source, project);
    assert_eq!(cfg.servers["notes"].trust, Trust::Untrusted);
    // Same name in both: the user's definition wins.
    assert_eq!(cfg.servers["shared"].scope, Scope::User);
    match &cfg.servers["shared"].transport {
        TransportConfig::Stdio(s) => assert_eq!(s.args, vec!["user".to_string()]),
        other => panic!("{other:?}"),
    }
    let rules: Vec<(RuleEffect, Scope)> = cfg.rules.iter().map(|r| (r.effect, r.scope)).collect();
    assert_eq!(
        rules,
        vec![
            (RuleEffect::Allow, Scope::User),
            (RuleEffect::Ask, Scope::Project),
            (RuleEffect::Deny, Scope::Project)
        ]
    );
    assert_eq!(cfg.rules[2].index, 0);
    assert_eq!(cfg.rules[2].file, project);
    assert_eq!(cfg.audit.path, Some(fx.root.join("home/audit.jsonl")));
    assert_eq!(cfg.config_dir, fx.cfg_dir);
}

#[test]
fn nearest_project_file_wins_and_both_files_are_optional() {
    let fx = Fx::new();
    let cfg = fx.load().unwrap();
    assert!(cfg.servers.is_empty());
    assert_eq!(cfg.policies, None);

    fx.project(r#"{"mcpServers": {"far": {"command": "srv"}}}"#);
    let near = fx.repo.join("pkg/.mcp.json");
    std::fs::write(&near, r#"{"mcpServers": {"near": {"command": "srv"}}}"#).unwrap();
    let cfg = fx.load().unwrap();
    assert_eq!(cfg.sources, vec![near]);
    assert!(cfg.servers.contains_key("near") && !cfg.servers.contains_key("far"));
}

#[test]
fn explicit_config_replaces_both_and_is_fully_trusted() {
    let fx = Fx::new();
    fx.user(r#"{"mcpServers": {"u": {"command": "srv"}}}"#);
    fx.project(r#"{"mcpServers": {"p": {"command": "srv"}}}"#);
    let file = fx.root.join("ci.json");
    std::fs::write(
        &file,
        r#"{"mcpServers": {"ci": {"command": "srv", "trust": "trusted", "sandbox": false}},
           "permissions": {"allow": ["mcp__ci__*"]}, "policy": []}"#,
    )
    .unwrap();
    let cfg = fx.load_explicit(&file).unwrap();
    assert_eq!(cfg.sources, vec![file]);
    assert_eq!(cfg.servers.keys().collect::<Vec<_>>(), vec!["ci"]);
    assert_eq!(cfg.servers["ci"].scope, Scope::Explicit);
    assert!(!cfg.servers["ci"].sandbox.enabled);
    assert_eq!(cfg.rules[0].scope, Scope::Explicit);
    assert_eq!(cfg.policies, Some(vec![]));
    assert!(!cfg.default_policy);
    // An explicit file that does not exist is an error, not "no config".
    let missing = fx.root.join("missing.json");
    let err = fx.load_explicit(&missing).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err}");
    assert!(err.to_string().contains("missing.json"));
}

#[test]
fn claude_code_mcp_json_loads_unchanged() {
    let mut fx = Fx::new();
    fx.env.insert("SENTRY_TOKEN".into(), "s3cr3t".into());
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/claude-code.mcp.json"),
    )
    .unwrap();
    let file = fx.project(&text);
    let cfg = fx.load().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.servers.len(), 4);
    assert!(
        cfg.servers
            .values()
            .all(|s| s.scope == Scope::Project && s.source == file)
    );
    assert!(cfg.servers.values().all(|s| s.trust == Trust::Untrusted));
    assert_eq!(cfg.servers["filesystem"].transport.kind().as_str(), "stdio");
    assert_eq!(cfg.servers["everything"].transport.kind().as_str(), "stdio");
    assert_eq!(cfg.servers["sentry"].transport.kind().as_str(), "http");
    assert_eq!(cfg.servers["linear"].transport.kind().as_str(), "sse");
    match &cfg.servers["everything"].transport {
        TransportConfig::Stdio(s) => assert_eq!(s.env["API_KEY"].expose(), "none"),
        other => panic!("{other:?}"),
    }
    match &cfg.servers["sentry"].transport {
        TransportConfig::Http(r) => {
            assert_eq!(r.headers["Authorization"].expose(), "Bearer s3cr3t")
        }
        other => panic!("{other:?}"),
    }
    assert!(!format!("{cfg:?}").contains("s3cr3t"));
}

#[test]
fn example_project_file_loads_as_project_scope() {
    let fx = Fx::new();
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/project.mcp.json"),
    )
    .unwrap();
    fx.project(&text);
    let cfg = fx.load().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.servers.len(), 2);
    assert!(cfg.servers.values().all(|s| s.needs_approval()));
    assert_eq!(
        cfg.servers["notes"].sandbox.write,
        vec![fx.ws.join(".notes")]
    );
    assert_eq!(cfg.servers["notes"].sandbox.limits.processes, 16);
    assert!(cfg.rules.iter().all(|r| r.effect != RuleEffect::Allow));
}

#[test]
fn project_files_cannot_widen_anything() {
    let fx = Fx::new();
    boundary(
        &fx,
        r#"{"permissions": {"allow": ["mcp__x__*"]}}"#,
        "permissions.allow",
    );
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "trust": "trusted"}}}"#,
        "mcpServers.s.trust",
    );
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sandbox": false}}}"#,
        "mcpServers.s.sandbox",
    );
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sandbox": {"network": "host"}}}}"#,
        "mcpServers.s.sandbox.network",
    );
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sandbox": {"network": {"connect_tcp": [443]}}}}}"#,
        "mcpServers.s.sandbox.network.connect_tcp",
    );
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sandbox": {"read": ["/etc"]}}}}"#,
        "mcpServers.s.sandbox.read[0]",
    );
    let msg = boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sandbox": {"write": ["${WORKSPACE}/../../.."]}}}}"#,
        "mcpServers.s.sandbox.write[0]",
    );
    assert!(msg.contains(&fx.root.display().to_string()), "{msg}");
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sandbox": {"best_effort": true}}}}"#,
        "mcpServers.s.sandbox.best_effort",
    );
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sandbox": {"limits": {"memory_mb": 1025}}}}}"#,
        "mcpServers.s.sandbox.limits.memory_mb",
    );
    boundary(&fx, r#"{"audit": {"path": "/tmp/x"}}"#, "audit");
    std::fs::write(fx.root.join("outside.rego"), "package warden\n").unwrap();
    boundary(&fx, r#"{"policy": ["../outside.rego"]}"#, "policy[0]");
}

/// A repository's server must not raise its own sampling caps (the
/// person's model and token budget): `sampling.max_tokens`,
/// `sampling.max_requests` and CONTRACT §8's `sandbox.limits.sampling_tokens`
/// above their defaults are refused like any other raised limit; lower
/// values restrict and load. `elicitation.max_requests` (the person's
/// attention) likewise.
#[test]
fn project_files_cannot_raise_sampling_limits() {
    let fx = Fx::new();
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sampling": {"max_tokens": 1000000}}}}"#,
        "mcpServers.s.sampling.max_tokens",
    );
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sampling": {"max_requests": 21}}}}"#,
        "mcpServers.s.sampling.max_requests",
    );
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sandbox": {"limits": {"sampling_tokens": 4097}}}}}"#,
        "mcpServers.s.sandbox.limits.sampling_tokens",
    );
    boundary(
        &fx,
        r#"{"mcpServers": {"r": {"type": "http", "url": "https://example.com/mcp", "sampling": {"max_tokens": 8192}}}}"#,
        "mcpServers.r.sampling.max_tokens",
    );
    // The same for the questions a server may put to the person.
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "elicitation": {"max_requests": 21}}}}"#,
        "mcpServers.s.elicitation.max_requests",
    );
    fx.project(
        r#"{"mcpServers": {"s": {"command": "srv", "sampling": {"max_tokens": 100, "max_requests": 2},
                                 "sandbox": {"limits": {"sampling_tokens": 50}}}}}"#,
    );
    let cfg = fx.load().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.servers["s"].sampling.max_tokens, 50);
    assert_eq!(cfg.servers["s"].sampling.max_requests, 2);
    // The user's own file may raise them.
    fx.project("{}");
    fx.user(
        r#"{"mcpServers": {"s": {"command": "srv", "sampling": {"max_tokens": 100000, "max_requests": 500}}}}"#,
    );
    let cfg = fx.load().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.servers["s"].sampling.max_tokens, 100_000);
    assert_eq!(cfg.servers["s"].sampling.max_requests, 500);
}

/// The audit log's HMAC key (`WARDEN_AUDIT_KEY`) is what makes a changed
/// log detectable; a server holding it could write a log that verifies.
/// No configuration, a repository's least of all, hands it to a server:
/// not by `${WARDEN_AUDIT_KEY}` (in arguments, env, a URL or headers), nor
/// by `env_from` or `sandbox.env`.
#[test]
fn no_configuration_passes_the_audit_key_to_a_server() {
    let mut fx = Fx::new();
    fx.env
        .insert("WARDEN_AUDIT_KEY".into(), "audit-key-0123456789".into());
    let cases = [
        r#"{"mcpServers": {"s": {"command": "srv", "args": ["--k=${WARDEN_AUDIT_KEY}"]}}}"#,
        r#"{"mcpServers": {"s": {"command": "srv", "env": {"K": "${WARDEN_AUDIT_KEY:-x}"}}}}"#,
        r#"{"mcpServers": {"s": {"command": "srv", "env_from": ["WARDEN_AUDIT_KEY"]}}}"#,
        r#"{"mcpServers": {"s": {"command": "srv", "sandbox": {"env": ["WARDEN_AUDIT_KEY"]}}}}"#,
        r#"{"mcpServers": {"r": {"type": "http", "url": "https://example.com/mcp",
                                 "headers": {"X-K": "${WARDEN_AUDIT_KEY}"}}}}"#,
    ];
    for (i, text) in cases.iter().enumerate() {
        // In a repository's file and in the user's own.
        for user in [false, true] {
            if user {
                fx.project("{}");
                fx.user(text);
            } else {
                let _ = std::fs::remove_file(fx.cfg_dir.join("config.json"));
                fx.project(text);
            }
            let err = fx.load().expect_err(text);
            let msg = err.to_string();
            assert!(msg.contains("WARDEN_AUDIT_KEY"), "case {i}: {msg}");
            assert!(!msg.contains("audit-key-0123456789"), "case {i}: {msg}");
        }
    }
}

/// The nearest `.mcp.json` is searched from the workspace up to `/`, so
/// a file another user could create above it (`/tmp/.mcp.json` for a
/// workspace in /tmp, as git's CVE-2022-24765 with `C:\.git`) became the
/// workspace's project file: its servers offered for approval as the
/// project's, its rules and policies applied. A file above the workspace
/// that belongs to neither this user nor root is passed over; the
/// workspace's own `.mcp.json` and one of this user's above it still load.
#[test]
fn a_project_file_above_the_workspace_owned_by_another_user_is_passed_over() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: giving a file to another user needs root");
        return;
    }
    let fx = Fx::new();
    let planted = fx.project(r#"{"mcpServers": {"planted": {"command": "srv"}}}"#);
    let nobody = nix::unistd::Uid::from_raw(65534);
    nix::unistd::chown(&planted, Some(nobody), None).unwrap();
    let cfg = fx.load().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !cfg.servers.contains_key("planted"),
        "another user's file above the workspace was loaded: {:?}",
        cfg.sources
    );
    assert!(cfg.sources.is_empty(), "{:?}", cfg.sources);

    // This user's (root's) own file above the workspace loads.
    nix::unistd::chown(&planted, Some(nix::unistd::geteuid()), None).unwrap();
    assert!(fx.load().unwrap().servers.contains_key("planted"));

    // The workspace's own file loads whoever owns it (the user chose the
    // workspace).
    std::fs::remove_file(&planted).unwrap();
    let own = fx.ws.join(".mcp.json");
    std::fs::write(&own, r#"{"mcpServers": {"own": {"command": "srv"}}}"#).unwrap();
    nix::unistd::chown(&own, Some(nobody), None).unwrap();
    assert!(fx.load().unwrap().servers.contains_key("own"));
}

/// Approval covers what runs from the repository: files a project
/// server's `env` names run as much as a script in its arguments
/// (`NODE_OPTIONS=--require ./hook.js`, `BASH_ENV`, `PYTHONSTARTUP`,
/// `LD_PRELOAD=lib/x.so`), so a change to one of them asks again. They
/// were not digested: the repository could change what runs after the
/// approval without a question.
#[test]
fn files_a_project_servers_env_names_are_covered_by_its_approval() {
    let fx = Fx::new();
    std::fs::create_dir_all(fx.ws.join("lib")).unwrap();
    std::fs::write(fx.ws.join("hook.js"), "console.log(1)").unwrap();
    std::fs::write(fx.ws.join("lib/x.so"), "elf").unwrap();
    std::fs::write(fx.repo.join("start.sh"), "true").unwrap();
    fx.project(
        r#"{"mcpServers": {"s": {"command": "srv", "env": {
              "NODE_OPTIONS": "--max-old-space-size=100 --require ./hook.js",
              "LD_PRELOAD": "lib/x.so",
              "BASH_ENV": "${WORKSPACE}/../../start.sh",
              "LANG": "C.UTF-8"}}}}"#,
    );
    let cfg = fx.load().unwrap_or_else(|e| panic!("{e}"));
    let server = &cfg.servers["s"];
    let files: Vec<PathBuf> = server.content.keys().cloned().collect();
    for f in [
        fx.ws.join("hook.js"),
        fx.ws.join("lib/x.so"),
        fx.repo.join("start.sh"),
    ] {
        assert!(files.contains(&f), "{} not covered: {files:?}", f.display());
    }
    let before = server.approval_digest.clone();
    std::fs::write(fx.ws.join("hook.js"), "require('child_process')").unwrap();
    let after = fx.load().unwrap().servers["s"].approval_digest.clone();
    assert_ne!(before, after, "a changed hook must ask again");
}

#[test]
fn project_grants_through_a_symlink_out_of_the_workspace_are_refused() {
    let fx = Fx::new();
    let secret_dir = fx.root.join("home/.ssh");
    std::fs::create_dir_all(&secret_dir).unwrap();
    // The repository ships a symlink that looks like a workspace path.
    std::os::unix::fs::symlink(&secret_dir, fx.ws.join("keys")).unwrap();
    boundary(
        &fx,
        r#"{"mcpServers": {"s": {"command": "srv", "sandbox": {"read": ["keys/sub/file"]}}}}"#,
        "mcpServers.s.sandbox.read[0]",
    );
}

#[test]
fn project_files_may_restrict() {
    let fx = Fx::new();
    // A policy shipped next to the project file (the repository root, above
    // the workspace subfolder) is the repository's own: allowed.
    std::fs::create_dir_all(fx.repo.join("policies")).unwrap();
    std::fs::write(fx.repo.join("policies/strict.rego"), "package warden\n").unwrap();
    fx.project(
        r#"{"mcpServers": {
              "b": {"command": "srv", "trust": "blocked"},
              "u": {"command": "srv", "trust": "untrusted",
                    "sandbox": {"read": ["${WORKSPACE}"], "write": ["out"], "network": "none",
                                "limits": {"memory_mb": 256, "processes": 8}, "best_effort": false}}},
            "permissions": {"allow": [], "ask": ["mcp__u__*"], "deny": ["mcp__b__*"]},
            "policy": ["policies/strict.rego"]}"#,
    );
    let cfg = fx.load().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.servers["b"].trust, Trust::Blocked);
    let sb = &cfg.servers["u"].sandbox;
    assert_eq!(sb.read, vec![fx.ws.clone()]);
    assert_eq!(sb.write, vec![fx.ws.join("out")]);
    assert_eq!(sb.limits.memory_mb, 256);
    // The project's policy is added; the shipped default stays on because the
    // user's own file did not choose policies.
    let policies = cfg.policies.clone().unwrap();
    assert_eq!(policies.len(), 1);
    assert_eq!(policies[0].scope, Scope::Project);
    assert!(cfg.default_policy);
}

#[test]
fn project_policies_are_added_after_the_users() {
    let fx = Fx::new();
    std::fs::write(fx.cfg_dir.join("mine.rego"), "package warden\n").unwrap();
    std::fs::write(fx.ws.join("theirs.rego"), "package warden\n").unwrap();
    fx.user(r#"{"policy": ["mine.rego"]}"#);
    fx.project(r#"{"policy": ["pkg/app/theirs.rego"]}"#);
    let cfg = fx.load().unwrap();
    let p = cfg.policies.unwrap();
    assert_eq!(p[0].path, fx.cfg_dir.join("mine.rego"));
    assert_eq!(p[0].scope, Scope::User);
    assert_eq!(p[1].path, fx.ws.join("theirs.rego"));
    assert_eq!(p[1].scope, Scope::Project);
    assert!(!cfg.default_policy);
}

#[test]
fn approvals_persist_and_are_invalidated_by_any_change() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new();
    fx.user(r#"{"mcpServers": {"mine": {"command": "srv"}}}"#);
    fx.project(
        r#"{"mcpServers": {"gh": {"command": "npx", "args": ["-y", "gh-mcp@1"]}, "gh2": {"command": "npx"}}}"#,
    );
    let cfg = fx.load().unwrap();
    let mut approvals = Approvals::load(&fx.cfg_dir).unwrap();
    // User-scope servers need no approval; project ones do.
    assert!(approvals.is_approved(&cfg.servers["mine"]));
    assert!(!approvals.is_approved(&cfg.servers["gh"]));

    approvals.approve(&cfg.servers["gh"]).unwrap();
    assert!(approvals.is_approved(&cfg.servers["gh"]));
    let file = fx.cfg_dir.join("approvals.json");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let reloaded = Approvals::load(&fx.cfg_dir).unwrap();
    assert!(reloaded.is_approved(&cfg.servers["gh"]));
    assert_eq!(reloaded.entries().len(), 1);

    // A different `gh` (another version) is not the approved one.
    fx.project(r#"{"mcpServers": {"gh": {"command": "npx", "args": ["-y", "gh-mcp@2"]}}}"#);
    let changed = fx.load().unwrap();
    assert!(!reloaded.is_approved(&changed.servers["gh"]));
    // Nor is the same text resolving to a different executable.
    std::fs::create_dir_all(fx.root.join("bin2")).unwrap();
    make_exe(&fx.root.join("bin2/npx"));
    let mut fx2_env = fx.env.clone();
    let path = format!("{}:{}", fx.root.join("bin2").display(), fx.env["PATH"]);
    fx2_env.insert("PATH".into(), path);
    fx.project(r#"{"mcpServers": {"gh": {"command": "npx", "args": ["-y", "gh-mcp@1"]}}}"#);
    let other_bin = load_with_env(&fx.opts(None), &move |k| fx2_env.get(k).cloned()).unwrap();
    assert!(!reloaded.is_approved(&other_bin.servers["gh"]));
    // Back to the approved text: approved again.
    assert!(reloaded.is_approved(&fx.load().unwrap().servers["gh"]));

    // A stale in-memory copy does not undo approvals recorded meanwhile.
    let mut stale = Approvals::load(&fx.cfg_dir).unwrap();
    let mut other = Approvals::load(&fx.cfg_dir).unwrap();
    other.approve(&cfg.servers["gh2"]).unwrap();
    stale.approve(&cfg.servers["gh"]).unwrap();
    assert_eq!(Approvals::load(&fx.cfg_dir).unwrap().entries().len(), 2);

    let mut approvals = Approvals::load(&fx.cfg_dir).unwrap();
    assert!(approvals.revoke("gh").unwrap());
    assert!(!approvals.revoke("gh").unwrap());
    assert!(
        !Approvals::load(&fx.cfg_dir)
            .unwrap()
            .is_approved(&cfg.servers["gh"])
    );
}

#[test]
fn approvals_file_that_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new();
    let file = fx.cfg_dir.join("approvals.json");
    std::fs::write(&file, r#"{"version": 1, "approvals": []}"#).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let err = Approvals::load(&fx.cfg_dir).unwrap_err();
    assert!(err.to_string().contains("writable by other users"), "{err}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&file, "{not json").unwrap();
    assert!(
        Approvals::load(&fx.cfg_dir).is_err(),
        "corrupt file must not mean 'no approvals'"
    );
}

#[test]
fn approvals_are_per_project_file() {
    let fx = Fx::new();
    fx.project(r#"{"mcpServers": {"gh": {"command": "npx"}}}"#);
    let a = fx.load().unwrap();
    let mut approvals = Approvals::load(&fx.cfg_dir).unwrap();
    approvals.approve(&a.servers["gh"]).unwrap();
    // The same text shipped by another repository is a separate decision.
    let mut other = Fx {
        cfg_dir: fx.cfg_dir.clone(),
        ..Fx::new()
    };
    // Same executable too, so only the source file differs.
    other.env.insert("PATH".into(), fx.env["PATH"].clone());
    other.project(r#"{"mcpServers": {"gh": {"command": "npx"}}}"#);
    let b = other.load().unwrap();
    assert_eq!(a.servers["gh"].digest, b.servers["gh"].digest);
    assert!(!approvals.is_approved(&b.servers["gh"]));
}

#[test]
fn an_error_in_either_file_fails_the_whole_load() {
    let fx = Fx::new();
    fx.user(r#"{"mcpServers": {"ok": {"command": "srv"}}}"#);
    let project = fx.project(
        "{\"mcpServers\": {\n \"p\": {\"command\": \"srv\", \"args\": [\"${UNSET_IN_TEST}\"]}}}",
    );
    let err = fx.load().unwrap_err();
    let msg = err.to_string();
    assert_eq!(err.kind(), Some(ErrorKind::UnsetVariable), "{msg}");
    assert!(
        msg.starts_with(&format!("{}:2:", project.display())),
        "{msg}"
    );
    assert!(msg.contains("`mcpServers.p.args[0]`"), "{msg}");

    fx.project(r#"{"mcpServers": {"p": {"command": "srv", "args": ["${UNSET_IN_TEST:-x}"]}}}"#);
    let user = fx.user("{\"mcpServers\": {\"ok\": {\"command\": \"srv\", \"timeout\": 0}}}");
    let msg = fx.load().unwrap_err().to_string();
    assert!(msg.starts_with(&format!("{}:1:", user.display())), "{msg}");
}

#[test]
fn a_relative_explicit_path_is_made_absolute() {
    let fx = Fx::new();
    let file = fx.ws.join("ci.json");
    std::fs::write(
        &file,
        r#"{"$schema": "https://example.com/s.json", "mcpServers": {}}"#,
    )
    .unwrap();
    let rel = pathdiff(&file);
    let cfg = fx.load_explicit(&rel).unwrap();
    assert_eq!(cfg.sources, vec![file]);
}

/// `file` relative to the current directory (`../..` up to `/`, then down).
fn pathdiff(file: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap();
    let ups = cwd.components().count() - 1;
    let mut rel = PathBuf::new();
    for _ in 0..ups {
        rel.push("..");
    }
    rel.join(file.strip_prefix("/").unwrap())
}
