//! Every configuration mistake CONTRACT §3 names is rejected with one message
//! naming the file, the key path and (where the parser knows it) the line.
//! Each case is a real file in a temporary directory; the environment and
//! PATH are passed explicitly, so nothing here reads the real HOME or PATH.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use warden::config::{
    Config, ConfigError, ErrorKind, LoadOptions, NetworkSpec, Scope, TransportConfig, Trust,
    load_with_env,
};

struct Fx {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    cfg_dir: PathBuf,
    env: BTreeMap<String, String>,
}

impl Fx {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let ws = root.join("ws");
        let cfg_dir = root.join("cfg");
        let bin = root.join("bin");
        for d in [&ws, &cfg_dir, &bin] {
            std::fs::create_dir_all(d).unwrap();
        }
        for name in ["npx", "uvx", "srv"] {
            make_exe(&bin.join(name));
        }
        let mut env = BTreeMap::new();
        env.insert("PATH".to_string(), bin.to_string_lossy().into_owned());
        env.insert("GITHUB_TOKEN".to_string(), "ghp_SECRETVALUE123".to_string());
        Fx {
            _tmp: tmp,
            root,
            ws,
            cfg_dir,
            env,
        }
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn load_file(&self, path: &Path) -> Result<Config, ConfigError> {
        let opts = LoadOptions {
            config_file: Some(path.to_path_buf()),
            workspace: self.ws.clone(),
            config_dir: self.cfg_dir.clone(),
        };
        let env = self.env.clone();
        load_with_env(&opts, &move |k| env.get(k).cloned())
    }

    /// Loads `text` as an explicit (`--config`) file.
    fn load(&self, text: &str) -> (PathBuf, Result<Config, ConfigError>) {
        let path = self.write("warden.json", text);
        let r = self.load_file(&path);
        (path, r)
    }

    /// Loads `{"mcpServers": {"s": <server>}}`; the server entry starts on line 3.
    fn server(&self, server: &str) -> (PathBuf, Result<Config, ConfigError>) {
        self.load(&format!(
            "{{\n\"mcpServers\": {{\n\"s\": {server}\n}}\n}}\n"
        ))
    }
}

fn make_exe(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Asserts the error's kind, and that its message names the file, the key
/// and, when given, the line (as `file:LINE:`).
fn check(
    r: Result<Config, ConfigError>,
    kind: ErrorKind,
    file: &Path,
    key: &str,
    line: Option<usize>,
) -> String {
    let err = r.expect_err("configuration should be rejected");
    let msg = err.to_string();
    eprintln!("{msg}");
    let d = err
        .diagnostic()
        .unwrap_or_else(|| panic!("no diagnostic: {msg}"));
    assert_eq!(d.kind, kind, "{msg}");
    assert!(
        msg.contains(&file.display().to_string()),
        "file missing: {msg}"
    );
    if !key.is_empty() {
        assert!(
            msg.contains(&format!("`{key}`")),
            "key `{key}` missing: {msg}"
        );
        assert_eq!(d.key, key, "{msg}");
    }
    if let Some(line) = line {
        assert_eq!(d.line, Some(line), "{msg}");
        assert!(msg.contains(&format!(":{line}:")), "line missing: {msg}");
    }
    msg
}

fn stdio(cfg: &Config, name: &str) -> warden::config::StdioConfig {
    match &cfg.servers[name].transport {
        TransportConfig::Stdio(s) => s.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn syntax_error_names_file_line_and_column() {
    let fx = Fx::new();
    let (f, r) = fx.load("{\n  \"mcpServers\": {\n    \"s\": {\"command\": \"srv\",}\n  }\n}");
    let msg = check(r, ErrorKind::Syntax, &f, "", Some(3));
    assert!(msg.contains("trailing comma"), "{msg}");
    assert!(msg.contains(":3:"), "{msg}");
}

#[test]
fn duplicate_server_names_are_rejected_not_overwritten() {
    let fx = Fx::new();
    let (f, r) = fx.load(
        "{\"mcpServers\": {\n  \"s\": {\"command\": \"srv\"},\n  \"s\": {\"command\": \"npx\"}\n}}",
    );
    let msg = check(r, ErrorKind::DuplicateKey, &f, "mcpServers.s", Some(3));
    assert!(msg.contains("first defined at line 2"), "{msg}");
}

#[test]
fn duplicate_keys_inside_env_headers_and_top_level() {
    let fx = Fx::new();
    let (f, r) = fx.server("{\"command\": \"srv\", \"env\": {\"A\": \"1\",\n \"A\": \"2\"}}");
    check(
        r,
        ErrorKind::DuplicateKey,
        &f,
        "mcpServers.s.env.A",
        Some(4),
    );
    let (f, r) = fx.server(
        "{\"type\": \"http\", \"url\": \"https://x.test/mcp\",\n \"headers\": {\"X\": \"1\", \"X\": \"2\"}}",
    );
    check(
        r,
        ErrorKind::DuplicateKey,
        &f,
        "mcpServers.s.headers.X",
        Some(4),
    );
    let (f, r) = fx.load("{\"policy\": [],\n\"policy\": []}");
    check(r, ErrorKind::DuplicateKey, &f, "policy", Some(2));
}

#[test]
fn unknown_keys_at_every_level_with_a_suggestion() {
    let fx = Fx::new();
    let (f, r) = fx.load("{\n\"mcpServer\": {}}");
    let msg = check(r, ErrorKind::UnknownKey, &f, "mcpServer", Some(2));
    assert!(msg.contains("did you mean `mcpServers`"), "{msg}");
    let (f, r) = fx.server("{\"command\": \"srv\",\n \"timout\": 3}");
    let msg = check(r, ErrorKind::UnknownKey, &f, "mcpServers.s.timout", Some(4));
    assert!(msg.contains("`timeout`"), "{msg}");
    let (f, r) = fx.server("{\"command\": \"srv\", \"sandbox\": {\"netwrk\": \"none\"}}");
    check(
        r,
        ErrorKind::UnknownKey,
        &f,
        "mcpServers.s.sandbox.netwrk",
        Some(3),
    );
    let (f, r) = fx.load("{\"permissions\": {\"alow\": []}}");
    check(r, ErrorKind::UnknownKey, &f, "permissions.alow", Some(1));
    let (f, r) = fx.server("{\"command\": \"srv\", \"sandbox\": {\"limits\": {\"memory\": 5}}}");
    check(
        r,
        ErrorKind::UnknownKey,
        &f,
        "mcpServers.s.sandbox.limits.memory",
        None,
    );
    // A key that belongs to the other transport.
    let (f, r) = fx.server("{\"command\": \"srv\", \"url\": \"https://x.test\"}");
    check(r, ErrorKind::UnknownKey, &f, "mcpServers.s.url", Some(3));
    let (f, r) = fx.server("{\"type\": \"http\", \"url\": \"https://x.test\", \"args\": []}");
    check(r, ErrorKind::UnknownKey, &f, "mcpServers.s.args", Some(3));
}

#[test]
fn wrong_types_name_expected_and_found() {
    let fx = Fx::new();
    let (f, r) = fx.server("{\"command\": \"srv\",\n \"timeout\": \"30\"}");
    let msg = check(r, ErrorKind::WrongType, &f, "mcpServers.s.timeout", Some(4));
    assert!(
        msg.contains("expected a number of seconds, found a string"),
        "{msg}"
    );
    let (f, r) = fx.server("{\"command\": \"srv\", \"args\": \"-v\"}");
    check(r, ErrorKind::WrongType, &f, "mcpServers.s.args", Some(3));
    let (f, r) = fx.server("{\"command\": \"srv\", \"args\": [\"a\", 1]}");
    check(r, ErrorKind::WrongType, &f, "mcpServers.s.args[1]", Some(3));
    let (f, r) = fx.server("{\"command\": \"srv\", \"disabled\": \"no\"}");
    check(
        r,
        ErrorKind::WrongType,
        &f,
        "mcpServers.s.disabled",
        Some(3),
    );
    let (f, r) = fx.load("{\"mcpServers\": []}");
    check(r, ErrorKind::WrongType, &f, "mcpServers", Some(1));
    let (f, r) = fx.server("{\"command\": \"srv\", \"env\": {\"A\": 1}}");
    check(r, ErrorKind::WrongType, &f, "mcpServers.s.env.A", Some(3));
    let (f, r) = fx.load("[]");
    check(r, ErrorKind::WrongType, &f, "", Some(1));
}

#[test]
fn missing_executables_are_errors_with_the_lookup_explained() {
    let fx = Fx::new();
    let (f, r) = fx.server("{\"command\": \"no-such-server\"}");
    let msg = check(
        r,
        ErrorKind::MissingExecutable,
        &f,
        "mcpServers.s.command",
        Some(3),
    );
    assert!(msg.contains("not found on PATH"), "{msg}");
    let (f, r) = fx.server("{\"command\": \"./tools/missing.sh\"}");
    let msg = check(
        r,
        ErrorKind::MissingExecutable,
        &f,
        "mcpServers.s.command",
        Some(3),
    );
    assert!(
        msg.contains("relative to the config file's folder"),
        "{msg}"
    );
    // Present but not executable.
    fx.write("tools/plain.sh", "echo");
    let (f, r) = fx.server("{\"command\": \"./tools/plain.sh\"}");
    let msg = check(
        r,
        ErrorKind::MissingExecutable,
        &f,
        "mcpServers.s.command",
        Some(3),
    );
    assert!(msg.contains("not executable"), "{msg}");
}

#[test]
fn commands_resolve_on_path_or_relative_to_the_config_file() {
    let fx = Fx::new();
    make_exe(&fx.root.join("local-server"));
    let (_, r) = fx.load(
        "{\"mcpServers\": {\"a\": {\"command\": \"npx\"}, \"b\": {\"command\": \"./local-server\"},\n\
         \"c\": {\"command\": \"not-installed\", \"disabled\": true}}}",
    );
    let cfg = r.unwrap();
    assert_eq!(stdio(&cfg, "a").program, fx.root.join("bin/npx"));
    assert_eq!(stdio(&cfg, "b").program, fx.root.join("local-server"));
    assert!(stdio(&cfg, "b").program.is_absolute());
    // A disabled server may name a program that is not installed.
    assert!(cfg.servers["c"].disabled);

    // Symlinks are kept as found (the sandbox resolves them when granting
    // the install prefix).
    std::os::unix::fs::symlink(fx.root.join("bin/srv"), fx.root.join("bin/link")).unwrap();
    let (_, r) = fx.server("{\"command\": \"link\"}");
    assert_eq!(stdio(&r.unwrap(), "s").program, fx.root.join("bin/link"));
}

#[test]
fn relative_path_entries_are_not_searched() {
    let mut fx = Fx::new();
    // A relative PATH entry would resolve inside the current directory,
    // i.e. files a repository controls.
    make_exe(&fx.ws.join("evil"));
    fx.env.insert(
        "PATH".into(),
        format!(".:ws:{}", fx.root.join("bin").display()),
    );
    let (f, r) = fx.server("{\"command\": \"evil\"}");
    check(
        r,
        ErrorKind::MissingExecutable,
        &f,
        "mcpServers.s.command",
        Some(3),
    );
}

#[test]
fn cwd_must_exist_and_is_relative_to_the_workspace() {
    let fx = Fx::new();
    let (f, r) = fx.server("{\"command\": \"srv\", \"cwd\": \"nope\"}");
    let msg = check(r, ErrorKind::MissingCwd, &f, "mcpServers.s.cwd", Some(3));
    assert!(
        msg.contains(&fx.ws.join("nope").display().to_string()),
        "{msg}"
    );
    std::fs::create_dir(fx.ws.join("sub")).unwrap();
    let (_, r) = fx.server("{\"command\": \"srv\", \"cwd\": \"./sub/../sub\"}");
    assert_eq!(stdio(&r.unwrap(), "s").cwd, Some(fx.ws.join("sub")));
}

#[test]
fn timeouts_outside_the_range_are_rejected() {
    let fx = Fx::new();
    for bad in ["0.01", "0", "-5", "601", "1e9"] {
        let (f, r) = fx.server(&format!("{{\"command\": \"srv\", \"timeout\": {bad}}}"));
        let msg = check(
            r,
            ErrorKind::TimeoutOutOfRange,
            &f,
            "mcpServers.s.timeout",
            Some(3),
        );
        assert!(msg.contains("0.05–600"), "{msg}");
    }
    for (ok, want) in [("0.05", 0.05), ("600", 600.0), ("1.5", 1.5)] {
        let (_, r) = fx.server(&format!("{{\"command\": \"srv\", \"timeout\": {ok}}}"));
        assert_eq!(
            r.unwrap().servers["s"].timeout,
            Duration::from_secs_f64(want)
        );
    }
    let (_, r) = fx.server("{\"command\": \"srv\"}");
    assert_eq!(r.unwrap().servers["s"].timeout, Duration::from_secs(60));
}

#[test]
fn server_names_are_restricted() {
    let fx = Fx::new();
    for bad in ["a.b", "a__b", "", "ü", "a b", "a/b"] {
        let text = format!(
            "{{\"mcpServers\": {{\n{}: {{\"command\": \"srv\"}}}}}}",
            serde_json::to_string(bad).unwrap()
        );
        let (f, r) = fx.load(&text);
        let err = r.expect_err(bad);
        assert_eq!(err.kind(), Some(ErrorKind::InvalidServerName), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&f.display().to_string()) && msg.contains(":2:"),
            "{msg}"
        );
        assert!(msg.contains("mcpServers"), "{msg}");
    }
    let (_, r) = fx.load("{\"mcpServers\": {\"Ok-name_1\": {\"command\": \"srv\"}}}");
    assert!(r.unwrap().servers.contains_key("Ok-name_1"));
}

#[test]
fn variables_expand_with_defaults_and_unset_ones_are_errors() {
    let fx = Fx::new();
    let (f, r) = fx.server("{\"command\": \"srv\", \"args\": [\"--t\", \"${NOT_SET_ANYWHERE}\"]}");
    let msg = check(
        r,
        ErrorKind::UnsetVariable,
        &f,
        "mcpServers.s.args[1]",
        Some(3),
    );
    assert!(msg.contains("NOT_SET_ANYWHERE"), "{msg}");
    assert!(msg.contains(":-default"), "{msg}");
    let (f, r) = fx.server("{\"command\": \"srv\", \"env\": {\"K\": \"${NOPE}\"}}");
    check(
        r,
        ErrorKind::UnsetVariable,
        &f,
        "mcpServers.s.env.K",
        Some(3),
    );
    let (f, r) = fx.load("{\"permissions\": {\"deny\": [\"mcp__x__${NOPE}\"]}}");
    check(
        r,
        ErrorKind::UnsetVariable,
        &f,
        "permissions.deny[0]",
        Some(1),
    );
    let (f, r) = fx.load("{\"audit\": {\"path\": \"${NOPE}/a\"}}");
    check(r, ErrorKind::UnsetVariable, &f, "audit.path", Some(1));

    let (_, r) = fx.server(
        "{\"command\": \"srv\", \"args\": [\"${MISSING:-fallback}\", \"${WORKSPACE}/x\"],\n\
         \"env\": {\"TOKEN\": \"${GITHUB_TOKEN}\"}, \"sandbox\": {\"write\": [\"${WORKSPACE}/a/../b//c/.\"]}}",
    );
    let cfg = r.unwrap();
    let s = stdio(&cfg, "s");
    assert_eq!(
        s.args,
        vec!["fallback".to_string(), format!("{}/x", fx.ws.display())]
    );
    assert_eq!(s.env["TOKEN"].expose(), "ghp_SECRETVALUE123");
    assert_eq!(cfg.servers["s"].sandbox.write, vec![fx.ws.join("b/c")]);
}

#[test]
fn remote_servers_need_a_valid_url() {
    let fx = Fx::new();
    let (f, r) = fx.server("{\"type\": \"http\", \"url\": \"not a url\"}");
    check(r, ErrorKind::InvalidUrl, &f, "mcpServers.s.url", Some(3));
    let (f, r) = fx.server("{\"type\": \"sse\", \"url\": \"ftp://x.test/sse\"}");
    check(r, ErrorKind::InvalidUrl, &f, "mcpServers.s.url", Some(3));
    let (f, r) = fx.server("{\"type\": \"http\"}");
    check(r, ErrorKind::MissingKey, &f, "mcpServers.s", Some(3));
    let (f, r) = fx.server("{\"args\": []}");
    check(r, ErrorKind::MissingKey, &f, "mcpServers.s", Some(3));
    let (f, r) = fx.server("{\"type\": \"websocket\", \"url\": \"https://x.test\"}");
    check(r, ErrorKind::InvalidValue, &f, "mcpServers.s.type", Some(3));
}

#[test]
fn sandbox_values_are_checked() {
    let fx = Fx::new();
    let (f, r) = fx.server("{\"command\": \"srv\", \"sandbox\": {\"limits\": {\"processes\": 0}}}");
    check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.sandbox.limits.processes",
        Some(3),
    );
    let (f, r) = fx.server(
        "{\"command\": \"srv\", \"sandbox\": {\"limits\": {\"memory_mb\": 18446744073709551615}}}",
    );
    check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.sandbox.limits.memory_mb",
        Some(3),
    );
    let (f, r) = fx.server("{\"command\": \"srv\", \"sandbox\": {\"network\": \"lan\"}}");
    let msg = check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.sandbox.network",
        Some(3),
    );
    assert!(msg.contains("\"none\""), "{msg}");
    for bad in ["0", "65536", "-1", "8.5"] {
        let (f, r) = fx.server(&format!(
            "{{\"command\": \"srv\", \"sandbox\": {{\"network\": {{\"connect_tcp\": [443, {bad}]}}}}}}"
        ));
        check(
            r,
            ErrorKind::InvalidValue,
            &f,
            "mcpServers.s.sandbox.network.connect_tcp[1]",
            Some(3),
        );
    }
    let (f, r) =
        fx.server("{\"command\": \"srv\", \"sandbox\": {\"network\": {\"bind_tcp\": [\"80\"]}}}");
    check(
        r,
        ErrorKind::WrongType,
        &f,
        "mcpServers.s.sandbox.network.bind_tcp[0]",
        Some(3),
    );
    let (f, r) = fx.server("{\"command\": \"srv\", \"sandbox\": {\"read\": [\"~/.npm\"]}}");
    check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.sandbox.read[0]",
        Some(3),
    );
    let (f, r) = fx.server("{\"command\": \"srv\", \"sandbox\": \"off\"}");
    check(r, ErrorKind::WrongType, &f, "mcpServers.s.sandbox", Some(3));

    let (_, r) = fx.server(
        "{\"command\": \"srv\", \"sandbox\": {\"network\": {\"connect_tcp\": [443], \"bind_tcp\": [8080]},\n\
         \"limits\": {\"memory_mb\": 4096}, \"best_effort\": true, \"read\": [\"/opt//node/\"]}}",
    );
    let cfg = r.unwrap();
    let sb = &cfg.servers["s"].sandbox;
    assert_eq!(
        sb.network,
        NetworkSpec::Ports {
            connect_tcp: vec![443],
            bind_tcp: vec![8080]
        }
    );
    assert_eq!(sb.limits.memory_mb, 4096);
    assert_eq!(sb.limits.processes, 64);
    assert!(sb.best_effort && sb.enabled);
    assert_eq!(sb.read, vec![PathBuf::from("/opt/node")]);
}

#[test]
fn only_trusted_servers_may_drop_the_sandbox_or_use_host_network() {
    let fx = Fx::new();
    let (f, r) = fx.server("{\"command\": \"srv\", \"sandbox\": false}");
    let msg = check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.sandbox",
        Some(3),
    );
    assert!(msg.contains("trusted"), "{msg}");
    let (f, r) = fx.server("{\"command\": \"srv\", \"sandbox\": {\"network\": \"host\"}}");
    check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.sandbox.network",
        Some(3),
    );
    let (_, r) = fx.server("{\"command\": \"srv\", \"trust\": \"trusted\", \"sandbox\": false}");
    let cfg = r.unwrap();
    assert!(!cfg.servers["s"].sandbox.enabled);
    assert_eq!(cfg.servers["s"].trust, Trust::Trusted);
    let (_, r) = fx.server(
        "{\"command\": \"srv\", \"trust\": \"trusted\", \"sandbox\": {\"network\": \"host\"}}",
    );
    assert_eq!(r.unwrap().servers["s"].sandbox.network, NetworkSpec::Host);
    let (f, r) = fx.server("{\"command\": \"srv\", \"trust\": \"sure\"}");
    check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.trust",
        Some(3),
    );
}

#[test]
fn audit_and_policy_are_checked() {
    let fx = Fx::new();
    let (f, r) = fx.load("{\"audit\": {\"fsync\": \"always\"}}");
    check(r, ErrorKind::InvalidValue, &f, "audit.fsync", Some(1));
    let (f, r) = fx.load("{\"audit\": {\"redact\": [\"password\"]}}");
    check(r, ErrorKind::InvalidValue, &f, "audit.redact[0]", Some(1));
    let (f, r) = fx.load("{\"policy\": [\"policies/none.rego\"]}");
    let msg = check(r, ErrorKind::MissingPath, &f, "policy[0]", Some(1));
    assert!(
        msg.contains(&fx.root.join("policies/none.rego").display().to_string()),
        "{msg}"
    );

    // Policy paths are relative to the file naming them; audit paths to the workspace.
    fx.write("policies/a.rego", "package warden\n");
    let (_, r) = fx.load(
        "{\"policy\": [\"policies/a.rego\"], \"audit\": {\"path\": \".warden/audit.jsonl\", \"fsync\": \"batch\"}}",
    );
    let cfg = r.unwrap();
    let policies = cfg.policies.unwrap();
    assert_eq!(policies[0].path, fx.root.join("policies/a.rego"));
    assert_eq!(policies[0].scope, Scope::Explicit);
    assert!(!cfg.default_policy);
    assert_eq!(cfg.audit.path, Some(fx.ws.join(".warden/audit.jsonl")));

    let (_, r) = fx.load("{\"policy\": []}");
    assert_eq!(r.unwrap().policies, Some(vec![]));
    let (_, r) = fx.load("{}");
    let cfg = r.unwrap();
    assert_eq!(cfg.policies, None);
    assert!(cfg.default_policy);
}

#[test]
fn secrets_never_appear_in_debug_or_errors() {
    let fx = Fx::new();
    let (_, r) = fx.load(
        "{\"mcpServers\": {\"a\": {\"command\": \"srv\", \"env\": {\"T\": \"${GITHUB_TOKEN}\"}},\n\
         \"b\": {\"type\": \"http\", \"url\": \"https://x.test/mcp\", \"headers\": {\"Authorization\": \"Bearer ${GITHUB_TOKEN}\"}}}}",
    );
    let cfg = r.unwrap();
    let debug = format!("{cfg:?}");
    assert!(!debug.contains("ghp_SECRETVALUE123"), "{debug}");
    assert!(debug.contains("[REDACTED]"));
    // The digest is over the text as written, so it does not change with the secret's value.
    let digest = cfg.servers["b"].digest.clone();
    let mut env_changed = Fx::new();
    env_changed
        .env
        .insert("GITHUB_TOKEN".into(), "different".into());
    let (_, r2) = env_changed.load(
        "{\"mcpServers\": {\"a\": {\"command\": \"srv\", \"env\": {\"T\": \"${GITHUB_TOKEN}\"}},\n\
         \"b\": {\"type\": \"http\", \"url\": \"https://x.test/mcp\", \"headers\": {\"Authorization\": \"Bearer ${GITHUB_TOKEN}\"}}}}",
    );
    assert_eq!(r2.unwrap().servers["b"].digest, digest);

    // An invalid header value is reported without echoing it.
    let mut fx = Fx::new();
    fx.env.insert("BAD".into(), "sk-LEAK\r\nX-Evil: 1".into());
    let (f, r) = fx.server(
        "{\"type\": \"http\", \"url\": \"https://x.test\", \"headers\": {\"Authorization\": \"${BAD}\"}}",
    );
    let msg = check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.headers.Authorization",
        Some(3),
    );
    assert!(!msg.contains("sk-LEAK"), "{msg}");
    // Nor is a URL that carries a token.
    fx.env.insert("URLTOK".into(), "sk-LEAK".into());
    let (_, r) = fx.server("{\"type\": \"http\", \"url\": \"https://x.test:99999/?k=${URLTOK}\"}");
    let msg = r.unwrap_err().to_string();
    assert!(!msg.contains("sk-LEAK"), "{msg}");
}

#[test]
fn digest_changes_with_the_configuration() {
    let fx = Fx::new();
    let (_, a) = fx.server("{\"command\": \"npx\", \"args\": [\"-y\", \"pkg@1\"]}");
    let (_, b) = fx.server("{\"command\": \"npx\", \"args\": [\"-y\", \"pkg@2\"]}");
    let (_, a2) = fx.server("{\"args\": [\"-y\", \"pkg@1\"],   \"command\": \"npx\"}");
    let (a, b, a2) = (a.unwrap(), b.unwrap(), a2.unwrap());
    assert_ne!(a.servers["s"].digest, b.servers["s"].digest);
    assert_eq!(
        a.servers["s"].digest, a2.servers["s"].digest,
        "key order and spacing do not matter"
    );
    assert_ne!(a.digest, b.digest);
    assert_eq!(a.digest.len(), 64);
}

#[test]
fn example_operator_config_loads() {
    let mut fx = Fx::new();
    fx.env.insert("NODE_OPTIONS".into(), String::new());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/warden.json");
    let cfg = fx.load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.sources, vec![path.clone()]);
    assert_eq!(cfg.servers.len(), 4);
    assert!(cfg.servers.values().all(|s| s.scope == Scope::Explicit));
    assert_eq!(cfg.servers["time"].trust, Trust::Trusted);
    assert_eq!(stdio(&cfg, "time").args[1], "--local-timezone=UTC");
    assert_eq!(cfg.servers["fs"].sandbox.write, vec![fx.ws.clone()]);
    assert_eq!(cfg.servers["fs"].timeout, Duration::from_secs(30));
    assert!(matches!(
        cfg.servers["github"].transport,
        TransportConfig::Http(_)
    ));
    assert!(matches!(
        cfg.servers["legacy"].transport,
        TransportConfig::Sse(_)
    ));
    assert_eq!(cfg.rules.len(), 5);
    assert_eq!(cfg.audit.redact, vec!["/password", "/token"]);
    assert_eq!(
        cfg.rules[0].text,
        format!("mcp__fs__read_text_file(path: {}/**)", fx.ws.display())
    );
}

#[test]
fn protocol_and_sampling_limits_per_server() {
    use warden::config::{ProtocolChoice, SamplingLimits};
    let fx = Fx::new();
    let (_, r) = fx.server("{\"command\": \"srv\"}");
    let cfg = r.expect("valid");
    assert_eq!(cfg.servers["s"].protocol, ProtocolChoice::Session);
    assert_eq!(cfg.servers["s"].sampling, SamplingLimits::default());
    assert_eq!(cfg.servers["s"].sampling.max_tokens, 4096);
    let (_, r) = fx.server(
        "{\"command\": \"srv\", \"protocol\": \"2026-07-28\", \"sampling\": {\"max_tokens\": 512, \"max_requests\": 3}}",
    );
    let cfg = r.expect("valid");
    assert_eq!(cfg.servers["s"].protocol, ProtocolChoice::Stateless);
    assert_eq!(
        cfg.servers["s"].sampling,
        SamplingLimits {
            max_tokens: 512,
            max_requests: 3
        }
    );
    let (f, r) = fx.server("{\"command\": \"srv\", \"protocol\": \"2024-11-05\"}");
    check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.protocol",
        Some(3),
    );
    let (f, r) = fx.server("{\"command\": \"srv\", \"sampling\": {\"max_tokens\": 0}}");
    check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.sampling.max_tokens",
        Some(3),
    );
    let (_, r) = fx.server("{\"command\": \"srv\", \"elicitation\": {\"max_requests\": 2}}");
    assert_eq!(r.expect("valid").servers["s"].elicitation.max_requests, 2);
    let (_, r) = fx.server("{\"command\": \"srv\"}");
    assert_eq!(r.expect("valid").servers["s"].elicitation.max_requests, 20);
    let (f, r) = fx.server("{\"command\": \"srv\", \"elicitation\": {\"max_requests\": 0}}");
    check(
        r,
        ErrorKind::InvalidValue,
        &f,
        "mcpServers.s.elicitation.max_requests",
        Some(3),
    );
    let (f, r) = fx.server("{\"command\": \"srv\", \"elicitation\": {\"max\": 1}}");
    check(
        r,
        ErrorKind::UnknownKey,
        &f,
        "mcpServers.s.elicitation.max",
        Some(3),
    );
    let (f, r) = fx.server("{\"command\": \"srv\", \"sampling\": {\"max_token\": 5}}");
    check(
        r,
        ErrorKind::UnknownKey,
        &f,
        "mcpServers.s.sampling.max_token",
        Some(3),
    );
}

/// CONTRACT §8 names the sampling cap `limits.sampling_tokens`: accepted in
/// a server's `sandbox.limits` (not a limit of the process), alone or with
/// `sampling.max_tokens` (then the lower holds), checked like the others.
#[test]
fn sandbox_limits_sampling_tokens_is_the_sampling_cap() {
    let fx = Fx::new();
    let tokens = |text: &str| {
        let (_, r) = fx.server(text);
        r.expect("valid").servers["s"].sampling.max_tokens
    };
    assert_eq!(
        tokens(r#"{"command": "srv", "sandbox": {"limits": {"sampling_tokens": 100}}}"#),
        100
    );
    assert_eq!(
        tokens(
            r#"{"command": "srv", "sandbox": {"limits": {"sampling_tokens": 9000, "memory_mb": 512}}}"#
        ),
        9000
    );
    assert_eq!(
        tokens(
            r#"{"command": "srv", "sampling": {"max_tokens": 50}, "sandbox": {"limits": {"sampling_tokens": 100}}}"#
        ),
        50
    );
    assert_eq!(
        tokens(
            r#"{"command": "srv", "sampling": {"max_tokens": 500}, "sandbox": {"limits": {"sampling_tokens": 100}}}"#
        ),
        100
    );
    // The process limits are untouched by it.
    let (_, r) =
        fx.server(r#"{"command": "srv", "sandbox": {"limits": {"sampling_tokens": 100}}}"#);
    let cfg = r.expect("valid");
    assert!(!cfg.servers["s"].sandbox.limits.explicit.memory_mb);
    for bad in ["0", "-1", "1.5", "\"100\"", "2000000"] {
        let (f, r) = fx.server(&format!(
            r#"{{"command": "srv", "sandbox": {{"limits": {{"sampling_tokens": {bad}}}}}}}"#
        ));
        let err = r.expect_err(bad);
        assert!(
            err.to_string()
                .contains("mcpServers.s.sandbox.limits.sampling_tokens"),
            "{bad}: {err}"
        );
        assert!(err.to_string().contains(&f.display().to_string()), "{err}");
    }
}

/// A permission rule that does not compile fails the file when it loads,
/// with the file, key and line (CONTRACT §3), so no command starts from it
/// (`mcp list` and `mcp approve` included).
#[test]
fn a_malformed_rule_fails_the_file_with_its_key() {
    let fx = Fx::new();
    for rule in ["mcp__x__y(path: ", "mcp__x__y(: a)", "mcp__x__y)"] {
        let text =
            serde_json::json!({"mcpServers": {}, "permissions": {"deny": ["mcp__ok__ok", rule]}})
                .to_string();
        let (f, r) = fx.load(&text);
        let err = r.expect_err(rule);
        let message = err.to_string();
        assert!(message.contains("permissions.deny[1]"), "{rule}: {message}");
        assert!(
            message.contains(&f.display().to_string()),
            "{rule}: {message}"
        );
        assert!(message.contains("invalid rule"), "{rule}: {message}");
    }
}
