//! Secrets canary: distinct canary values in a server's `env`, in a host
//! variable passed by `env_from`, in an HTTP server's `headers` and URL
//! credentials, in the stored OAuth login of an HTTP server (access token,
//! refresh token, registered client secret), and in an argument the audit
//! log `redact`s. Every command
//! that shows configuration, calls, statuses, the log or errors runs at the
//! default log level, with `-vv` and with `RUST_LOG=debug`; no canary may
//! appear in its stdout, its stderr, the audit log, or (for `run`) in
//! anything the scripted model is sent.

mod cli_support;

use std::process::Output;

use cli_support::*;
use serde_json::json;

struct Canaries {
    env: String,
    env_from: String,
    header: String,
    url_password: String,
    argument: String,
    access_token: String,
    refresh_token: String,
    client_secret: String,
}

impl Canaries {
    fn new(world: &World) -> Canaries {
        let m = &world.marker[1..13];
        Canaries {
            env: format!("envcanary{m}"),
            env_from: format!("fromcanary{m}"),
            header: format!("hdrcanary{m}"),
            url_password: format!("urlcanary{m}"),
            argument: format!("argcanary{m}"),
            access_token: format!("accesscanary{m}"),
            refresh_token: format!("refreshcanary{m}"),
            client_secret: format!("clientcanary{m}"),
        }
    }

    fn all(&self) -> [&str; 8] {
        [
            &self.env,
            &self.env_from,
            &self.header,
            &self.url_password,
            &self.argument,
            &self.access_token,
            &self.refresh_token,
            &self.client_secret,
        ]
    }

    /// Those warden itself knows to be secret (the argument canary is the
    /// caller's own text: only the audit log must drop it).
    fn configured(&self) -> [&str; 7] {
        [
            &self.env,
            &self.env_from,
            &self.header,
            &self.url_password,
            &self.access_token,
            &self.refresh_token,
            &self.client_secret,
        ]
    }
}

const LEVELS: [(&str, Option<&str>, &[&str]); 3] = [
    ("default", None, &[]),
    ("-vv", None, &["-vv"]),
    ("RUST_LOG=debug", Some("debug"), &[]),
];

fn setup(world: &World, c: &Canaries) -> std::path::PathBuf {
    let audit = world.path("audit.jsonl");
    let mut fx = world.fixture();
    fx["env"] = json!({"API_TOKEN": c.env});
    fx["env_from"] = json!(["WARDEN_CANARY_FROM"]);
    let url = format!("http://canary-user:{}@127.0.0.1:1/mcp", c.url_password);
    // A stored OAuth login for `remote` (as `warden mcp login` writes it):
    // connections use it, status and doctor report it.
    let logins = world.config_dir.join("oauth");
    std::fs::create_dir_all(&logins).unwrap();
    std::fs::write(
        logins.join("remote.json"),
        serde_json::to_vec(&json!({
            "url": url,
            "metadata": {
                "authorization_endpoint": "http://127.0.0.1:1/authorize",
                "token_endpoint": "http://127.0.0.1:1/token",
                "registration_endpoint": null, "issuer": null, "jwks_uri": null,
                "scopes_supported": null, "response_types_supported": null,
                "code_challenge_methods_supported": ["S256"]
            },
            "client_secret": c.client_secret,
            "redirect_uri": "http://127.0.0.1:9/callback",
            "credentials": {
                "client_id": "canary-client",
                "token_response": {
                    "access_token": c.access_token, "token_type": "bearer",
                    "expires_in": 3600, "refresh_token": c.refresh_token
                },
                "granted_scopes": [],
                "token_received_at": 4_000_000_000u64
            }
        }))
        .unwrap(),
    )
    .unwrap();
    world.write_config(&json!({
        "mcpServers": {
            "fx": fx,
            // Nothing listens on port 1: every use is a connection error
            // whose message names the URL.
            "remote": {
                "type": "http",
                "url": url,
                "headers": {"Authorization": format!("Bearer {}", c.header)},
                "timeout": 5
            }
        },
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": audit, "redact": ["/password"]},
    }));
    audit
}

/// `warden ARGS` in `world` at a log level, with the `env_from` canary in
/// warden's environment.
fn warden_at(
    world: &World,
    level: (&str, Option<&str>, &[&str]),
    args: &[&str],
    from: &str,
) -> (String, Output) {
    let (name, rust_log, flags) = level;
    let mut cmd = world.warden(&[]);
    cmd.args(flags).args(args).env("WARDEN_CANARY_FROM", from);
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    let label = format!("`warden {}` at {name}", args.join(" "));
    (label, cmd.output().expect("run warden"))
}

fn assert_clean(label: &str, out: &Output, canaries: &[&str]) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for canary in canaries {
        assert!(
            !stdout.contains(canary),
            "{label}: a canary on stdout:\n{stdout}"
        );
        assert!(
            !stderr.contains(canary),
            "{label}: a canary on stderr:\n{stderr}"
        );
    }
}

#[test]
fn no_canary_in_any_output_at_any_log_level() {
    let world = World::new();
    let c = Canaries::new(&world);
    let audit = setup(&world, &c);
    let audit_arg = audit.to_str().unwrap().to_string();
    // The stored access token as an argument too (a model that learned
    // it, say): the audit log must drop it like a configured secret.
    let call_args = json!({"ms": 1, "password": c.argument, "session": c.access_token}).to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["call", "fx", "sleep", "--args", &call_args],
        vec!["--json", "call", "fx", "sleep", "--args", &call_args],
        // Errors: an unknown tool, a server that cannot be reached.
        vec!["call", "fx", "no_such_tool", "--args", "{}"],
        vec!["--json", "call", "remote", "anything", "--args", "{}"],
        vec!["call", "remote", "anything", "--args", "{}"],
        vec!["mcp", "status"],
        vec!["mcp", "status", "--json"],
        vec!["mcp", "list"],
        vec!["mcp", "list", "--json"],
        vec!["doctor"],
        vec!["doctor", "--json"],
        vec!["audit", "show", &audit_arg],
        vec!["--json", "audit", "show", &audit_arg],
        vec!["audit", "verify", &audit_arg],
    ];
    let mut ran_call = false;
    for level in LEVELS {
        for args in &commands {
            let (label, out) = warden_at(&world, level, args, &c.env_from);
            if args.starts_with(&["call", "fx", "sleep"]) {
                assert_eq!(out.status.code(), Some(0), "{label}: {}", stderr(&out));
                ran_call = true;
            }
            assert_clean(&label, &out, &c.all());
        }
    }
    assert!(ran_call);
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(log.contains("\"tool_call\""), "no call was recorded");
    for canary in c.all() {
        assert!(!log.contains(canary), "a canary in the audit log:\n{log}");
    }
    // The log the canaries were kept out of still verifies.
    let verify = world.run(&["audit", "verify", &audit_arg]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
}

#[test]
fn no_canary_in_what_the_model_is_sent() {
    let world = World::new();
    let c = Canaries::new(&world);
    let audit = setup(&world, &c);
    let script = world.path("script.json");
    // The server echoes what it is given: the model's `echo` asks it to
    // print the environment-derived secrets it may not know, and the
    // `sleep` carries the redacted argument. Turn 2 checks everything it
    // was sent.
    std::fs::write(
        &script,
        serde_json::to_vec(&json!([
            {"text": "Calling.", "tool_calls": [
                {"name": "mcp__fx__sleep", "arguments": {"ms": 1, "password": c.argument}},
                {"name": "mcp__fx__echo", "arguments": {"message": "hello"}},
                {"name": "mcp__remote__anything", "arguments": {}}
            ]},
            {"expect": ["slept 1 ms", "hello"], "absent": c.configured(), "text": "Done."}
        ]))
        .unwrap(),
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    for level in LEVELS {
        let (label, out) = warden_at(
            &world,
            level,
            &["run", "--ci", "--json", "--model", &model, "--task", "go"],
            &c.env_from,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{label}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
        let report = stdout_json(&out);
        assert_eq!(report["status"], "completed", "{label}: {report}");
        assert_clean(&label, &out, &c.all());
    }
    let log = std::fs::read_to_string(&audit).unwrap();
    for canary in c.all() {
        assert!(!log.contains(canary), "a canary in the audit log:\n{log}");
    }
}

#[test]
fn a_config_error_near_a_secret_does_not_show_it() {
    let world = World::new();
    let c = Canaries::new(&world);
    // Wrong types right beside expanded secrets: the messages name keys
    // and types, never values.
    world.write_config(&json!({
        "mcpServers": {
            "fx": {
                "command": WARDEN,
                "args": ["example-server", "fixture"],
                "env": {"API_TOKEN": "${WARDEN_CANARY_FROM}", "BAD": 5},
            },
            "remote": {
                "type": "http",
                "url": format!("http://u:{}@127.0.0.1:1/mcp", c.url_password),
                "headers": {"Authorization": format!("Bearer {}", c.header), "X": ["not a string"]}
            }
        }
    }));
    for level in LEVELS {
        for args in [&["mcp", "status"][..], &["--json", "mcp", "list"][..]] {
            let (label, out) = warden_at(&world, level, args, &c.env_from);
            assert_ne!(out.status.code(), Some(0), "{label}: the bad config loaded");
            assert_clean(&label, &out, &c.all());
        }
    }
}

/// The attack: a value your own (or a `--config`) file expands from the
/// environment was a secret only in a project file. README sends a token
/// that sits in a URL's path, or on a command line, to a `${VAR}` (and
/// `warden import` writes one there), yet a server that echoed its
/// argument on stderr and died put the token in the audit log (the
/// `server_exit` reason and the refused call's error) and on stderr, and
/// rmcp's error line printed the URL with the token in its path. Every
/// host value a file expands is a secret now (in your own files the
/// variables naming where you are, `HOME`, `PWD`, `TMPDIR`, `XDG_*` and
/// the like, are not: they are paths the log shows anyway).
#[test]
fn a_value_your_own_file_expands_from_the_environment_is_a_secret_too() {
    let world = World::new();
    let m = &world.marker[1..13];
    let (arg, path) = (format!("argvar{m}"), format!("pathvar{m}"));
    let audit = world.path("audit.jsonl");
    world.write_config(&json!({
        "mcpServers": {
            "echoer": {
                "command": "/bin/sh",
                "args": ["-c", "echo token rejected: $0 >&2; exit 3", "${CANARY_ARG}"],
                "trust": "trusted",
                "sandbox": false
            },
            // Nothing listens on port 1: a connection error naming the URL.
            "hook": {"type": "http", "url": "http://127.0.0.1:1/hooks/${CANARY_PATH}/mcp"}
        },
        "audit": {"path": audit},
    }));
    let canaries = [arg.as_str(), path.as_str()];
    for level in LEVELS {
        for args in [
            &["call", "echoer", "x", "--args", "{}"][..],
            &["--json", "call", "echoer", "x", "--args", "{}"],
            &["call", "hook", "x", "--args", "{}"],
            &["--json", "call", "hook", "x", "--args", "{}"],
            &["mcp", "status"],
        ] {
            let (name, rust_log, flags) = level;
            let mut cmd = world.warden(&[]);
            cmd.args(flags)
                .args(args)
                .env("CANARY_ARG", &arg)
                .env("CANARY_PATH", &path);
            if let Some(filter) = rust_log {
                cmd.env("RUST_LOG", filter);
            }
            let out = cmd.output().expect("run warden");
            assert_clean(
                &format!("`warden {}` at {name}", args.join(" ")),
                &out,
                &canaries,
            );
        }
    }
    let log = std::fs::read_to_string(&audit).expect("the audit log");
    assert!(
        log.contains("token rejected"),
        "the server's line is recorded"
    );
    for canary in canaries {
        assert!(!log.contains(canary), "a canary in the audit log:\n{log}");
    }
}
