//! Load-time checks: malformed rules, Rego syntax and evaluation errors,
//! data documents, hidden tools, digests, remote `$ref`, and the
//! `warden policy` commands.

mod policy_support;

use std::path::PathBuf;
use std::process::Command;

use policy_support::*;
use serde_json::json;
use warden::config::{Scope, Trust};
use warden_policy::{DataSource, RuleEffect};
use warden_policy::{Effect, Mode, Pipeline, PipelineConfig, PolicyError, Stage};

fn load_rules(rules: Vec<warden_policy::RuleSource>) -> Result<Pipeline, PolicyError> {
    Pipeline::load(PipelineConfig {
        rules,
        policies: Some(vec![]),
        workspace: WS.into(),
        ..PipelineConfig::default()
    })
}

fn rule_error(effect: RuleEffect, text: &str) -> (String, usize) {
    let mut src = rule(effect, text);
    src.index = 3;
    match load_rules(vec![src]) {
        Err(PolicyError::Rule(e)) => (e.to_string(), e.column),
        Err(other) => panic!("`{text}`: expected a rule error, got {other}"),
        Ok(_) => panic!("`{text}` was accepted"),
    }
}

#[test]
fn malformed_rules_name_file_key_text_and_column() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 1, "empty rule"),
        ("mcp__fs__read(", 15, "expected `)`"),
        ("mcp__fs__read()", 14, "empty argument list"),
        ("mcp__fs__read(path)", 15, "expected `ARG: GLOB`"),
        ("mcp__fs__read(path: )", 20, "missing pattern"),
        ("mcp__fs__read(: /x)", 15, "missing argument name"),
        ("mcp__fs__read(path: /a, path: /b)", 25, "named twice"),
        ("mcp__fs__read(path: /a,)", 24, "empty condition"),
        ("mcp__fs__read(path: [a)", 21, "invalid pattern"),
        ("mcp__fs__read)", 14, "without `(`"),
        ("(path: /x)", 1, "missing target name"),
        ("mcp_", 1, "can never match"),
        ("mc", 1, "can never match"),
        ("mcp", 1, "can never match"),
        ("mcp__fs__read(path: src/**)", 21, "can never match"),
        ("mcp__fs__read(path: /srv/../x)", 21, "can never match"),
        ("fs__read", 1, "can never match"),
        ("mcp__fs.read", 8, "can never match"),
        ("mcp__", 1, "can never match"),
        ("mcp__fs__", 1, "can never match"),
        ("mcp__fs__read(/a~2: x)", 15, "invalid JSON pointer"),
    ];
    for (text, column, fragment) in cases {
        let (msg, col) = rule_error(RuleEffect::Deny, text);
        assert_eq!(col, *column, "`{text}`: {msg}");
        assert!(msg.contains(fragment), "`{text}`: {msg}");
        assert!(msg.contains("permissions.deny[3]"), "{msg}");
        assert!(msg.contains("config.json"), "{msg}");
        assert!(msg.contains(text), "{msg}");
    }
}

#[test]
fn project_allow_rules_are_refused_here_too() {
    let src = rule_in(RuleEffect::Allow, "mcp__fs__*", Scope::Project);
    let err = load_rules(vec![src]).unwrap_err().to_string();
    assert!(
        err.contains(".mcp.json") && err.contains("may not add `allow`"),
        "{err}"
    );
}

#[test]
fn rego_syntax_error_has_file_line_col() {
    let dir = tempfile::tempdir().unwrap();
    let file = policy_file(
        dir.path(),
        "bad.rego",
        "package warden\nimport rego.v1\n\ndeny contains msg if {\n  msg := \n}\n",
    );
    let err = Pipeline::load(PipelineConfig {
        policies: Some(vec![source(&file, Scope::User)]),
        ..PipelineConfig::default()
    })
    .unwrap_err()
    .to_string();
    let loc = format!("{}:5:7", file.display());
    assert!(err.contains(&loc), "expected {loc} in: {err}");
}

#[test]
fn unknown_function_is_a_load_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = policy_file(
        dir.path(),
        "p.rego",
        "package warden\nimport rego.v1\ndeny contains x if { x := no_such.function(input.tool.name) }\n",
    );
    let err = Pipeline::load(PipelineConfig {
        policies: Some(vec![source(&file, Scope::User)]),
        ..PipelineConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("no_such.function"), "{err}");
    assert!(err.contains("p.rego:3"), "{err}");
}

#[test]
fn policy_outside_package_warden_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = policy_file(
        dir.path(),
        "p.rego",
        "package other\nimport rego.v1\nallow := true\n",
    );
    let err = Pipeline::load(PipelineConfig {
        policies: Some(vec![source(&file, Scope::User)]),
        ..PipelineConfig::default()
    })
    .unwrap_err();
    assert!(matches!(err, PolicyError::Package { .. }), "{err}");
}

#[test]
fn data_comes_only_from_named_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("blocked.json"),
        r#"{"blocked_tools": ["delete_file"]}"#,
    )
    .unwrap();
    policy_file(
        dir.path(),
        "p.rego",
        "package warden\nimport rego.v1\ndeny contains \"tool is on the block list\" if input.tool.name in data.blocked_tools\n",
    );
    policy_file(
        dir.path(),
        "p_test.rego",
        "package warden_test\nimport rego.v1\ntest_x if true\n",
    );
    let call = facts(Trust::Untrusted, "delete_file", json!({}), json!({}));
    // Beside the policy, the JSON file is not data.
    let beside = Pipeline::load(PipelineConfig {
        policies: Some(vec![source(dir.path(), Scope::User)]),
        workspace: WS.into(),
        ..PipelineConfig::default()
    })
    .unwrap();
    assert_eq!(beside.decide(&call).stage, Stage::Default);
    // Named as data (`policy_data`), it is.
    let p = Pipeline::load(PipelineConfig {
        policies: Some(vec![source(dir.path(), Scope::User)]),
        data: vec![DataSource {
            path: dir.path().join("blocked.json"),
            scope: Scope::User,
        }],
        workspace: WS.into(),
        ..PipelineConfig::default()
    })
    .unwrap();
    let d = p.decide(&call);
    assert_eq!((d.effect, d.stage), (Effect::Deny, Stage::Policy), "{d:?}");
    let names: Vec<String> = p
        .loaded_policies()
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["p.rego", "blocked.json"],
        "test files are not loaded"
    );
}

/// Class 7 of issue 11: `{"warden": {"deny": []}}` beside a policy used to
/// override its denies. Beside a policy it is ignored; named as data it is
/// refused; nothing outside a policy defines `data.warden`.
#[test]
fn data_can_never_define_the_policy_decision() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(
        dir.path(),
        "p.rego",
        "package warden\nimport rego.v1\ndeny contains \"always\" if true\n",
    );
    for (name, doc) in [
        ("override.json", r#"{"warden": {"deny": []}}"#),
        ("internal.json", r#"{"warden__internal": {"decision": {}}}"#),
    ] {
        std::fs::write(dir.path().join(name), doc).unwrap();
        let beside = Pipeline::load(PipelineConfig {
            policies: Some(vec![source(&policy, Scope::User)]),
            workspace: WS.into(),
            ..PipelineConfig::default()
        })
        .unwrap();
        let d = beside.decide(&facts(Trust::Untrusted, "x", json!({}), json!({})));
        assert_eq!((d.effect, d.stage), (Effect::Deny, Stage::Policy), "{d:?}");
        let err = Pipeline::load(PipelineConfig {
            policies: Some(vec![source(&policy, Scope::User)]),
            data: vec![DataSource {
                path: dir.path().join(name),
                scope: Scope::User,
            }],
            workspace: WS.into(),
            ..PipelineConfig::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains(name) && err.contains("warden"), "{err}");
    }
    // Nor may data shadow another package's rules.
    let lib = policy_file(
        dir.path(),
        "lib.rego",
        "package lib\nimport rego.v1\nblocked := {\"a\"}\n",
    );
    std::fs::write(dir.path().join("lib.json"), r#"{"lib": {"blocked": []}}"#).unwrap();
    let err = Pipeline::load(PipelineConfig {
        policies: Some(vec![
            source(&policy, Scope::User),
            source(&lib, Scope::User),
        ]),
        data: vec![DataSource {
            path: dir.path().join("lib.json"),
            scope: Scope::User,
        }],
        workspace: WS.into(),
        ..PipelineConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("shadow"), "{err}");
}

/// Class 9 of issue 11: an unknown function is a load error (so `warden
/// policy check` fails), even in a branch no probe reaches; a builtin that
/// could allocate without bound is refused when its literal arguments
/// exceed the cap.
#[test]
fn unknown_functions_and_unbounded_builtins_fail_at_load() {
    let dir = tempfile::tempdir().unwrap();
    for (text, fragment) in [
        (
            "package warden\nimport rego.v1\ndeny contains \"x\" if {\n  input.arguments.rare\n  strings.nope(input.arguments.rare)\n}\n",
            "p.rego:5: unknown function `strings.nope`",
        ),
        (
            "package warden\nimport rego.v1\nbig := numbers.range(1, 2e8)\ndeny contains \"x\" if count(big) == 0\n",
            "p.rego:3",
        ),
    ] {
        let file = policy_file(dir.path(), "p.rego", text);
        let started = std::time::Instant::now();
        let err = Pipeline::load(PipelineConfig {
            policies: Some(vec![source(&file, Scope::User)]),
            workspace: WS.into(),
            ..PipelineConfig::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains(fragment), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}

#[test]
fn bad_data_document_is_a_load_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.json"), "[1,").unwrap();
    let file = policy_file(dir.path(), "p.rego", "package warden\nimport rego.v1\n");
    let err = Pipeline::load(PipelineConfig {
        policies: Some(vec![source(&file, Scope::User)]),
        data: vec![DataSource {
            path: dir.path().join("d.json"),
            scope: Scope::User,
        }],
        ..PipelineConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("d.json"), "{err}");
}

#[test]
fn policies_none_means_shipped_default_and_empty_means_none() {
    let default = Pipeline::load(PipelineConfig::default()).unwrap();
    let files = default.loaded_policies();
    assert_eq!(files.len(), 1);
    assert!(files[0].0.to_string_lossy().contains("default.rego"));
    assert_eq!(default.policy_sha256().map(str::len), Some(64));
    let none = Pipeline::load(PipelineConfig {
        policies: Some(vec![]),
        ..PipelineConfig::default()
    })
    .unwrap();
    assert!(none.policy_sha256().is_none());
    assert!(none.loaded_policies().is_empty());
    let d = none.decide(&facts(Trust::Untrusted, "x", json!({}), json!({})));
    assert!(d.stages.iter().all(|s| s.stage != Stage::Policy));
    assert!(d.policy_sha256.is_none());
}

#[test]
fn extra_policies_add_to_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let file = policy_file(
        dir.path(),
        "extra.rego",
        "package warden\nimport rego.v1\nask contains \"extra\" if false\n",
    );
    let p = Pipeline::load(PipelineConfig {
        extra_policies: vec![file],
        ..PipelineConfig::default()
    })
    .unwrap();
    assert_eq!(p.loaded_policies().len(), 2);
    let other = Pipeline::load(PipelineConfig::default()).unwrap();
    assert_ne!(p.policy_sha256(), other.policy_sha256());
}

#[test]
fn hidden_only_for_unconditional_deny() {
    let p = load_rules(vec![
        deny("mcp__fs__delete_*"),
        deny("mcp__fs__read_text_file(path: **/.ssh/**)"),
        ask("mcp__fs__write_file"),
        deny("mcp__evil"),
    ])
    .unwrap();
    assert!(p.hidden("mcp__fs__delete_file"));
    assert!(p.hidden("mcp__evil__anything"));
    assert!(!p.hidden("mcp__fs__read_text_file"));
    assert!(!p.hidden("mcp__fs__write_file"));
    assert!(!p.hidden("mcp__fsx__delete_file"));
}

#[test]
fn remote_ref_is_never_fetched() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let p = load_rules(vec![allow("mcp__fs__*")]).unwrap();
    let mut f = facts(
        Trust::Untrusted,
        "read_text_file",
        json!({}),
        json!({"path": "x"}),
    );
    for url in [
        format!("http://127.0.0.1:{port}/schema.json"),
        format!("file://{}/Cargo.toml", env!("CARGO_MANIFEST_DIR")),
    ] {
        f.tool.input_schema = json!({"$ref": url}).into();
        let d = p.decide(&f);
        assert_eq!((d.effect, d.stage), (Effect::Deny, Stage::Schema), "{d:?}");
        assert!(d.reasons[0].contains("invalid inputSchema"), "{d:?}");
    }
    // `decide` is synchronous and a loopback connect completes in the
    // kernel: a connection made while deciding is queued by now.
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "warden connected to the $ref URL"
    );
}

#[test]
fn local_refs_still_work() {
    let p = load_rules(vec![allow("mcp__fs__*")]).unwrap();
    let mut f = facts(Trust::Untrusted, "t", json!({}), json!({"a": {"n": "x"}}));
    f.tool.input_schema = json!({
        "type": "object",
        "$defs": {"inner": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        "properties": {"a": {"$ref": "#/$defs/inner"}}
    })
    .into();
    let d = p.decide(&f);
    assert_eq!((d.effect, d.stage), (Effect::Deny, Stage::Schema), "{d:?}");
}

#[test]
fn changed_schema_is_recompiled() {
    let p = load_rules(vec![allow("mcp__fs__*")]).unwrap();
    let mut f = facts(Trust::Untrusted, "t", json!({}), json!({"n": "x"}));
    f.tool.input_schema = json!({"type": "object", "properties": {"n": {"type": "string"}}}).into();
    assert_eq!(p.decide(&f).effect, Effect::Allow);
    f.tool.input_schema =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}}).into();
    assert_eq!(p.decide(&f).effect, Effect::Deny);
}

fn warden(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .env("WARDEN_CONFIG_DIR", "/nonexistent")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_policy_test_runs_the_shipped_tests() {
    let (code, out, err) = warden(&["policy", "test"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("PASS") && out.contains(" passed, 0 failed"),
        "{out}"
    );
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies");
    let (code, out, err) = warden(&["policy", "test", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn cli_policy_test_reports_failures() {
    let dir = tempfile::tempdir().unwrap();
    policy_file(
        dir.path(),
        "p.rego",
        "package warden\nimport rego.v1\ndeny contains \"x\" if input.a == 1\n",
    );
    policy_file(
        dir.path(),
        "p_test.rego",
        "package warden_test\nimport rego.v1\ntest_ok if { data.warden.deny[\"x\"] with input as {\"a\": 1} }\ntest_bad if { data.warden.deny[\"x\"] with input as {\"a\": 2} }\n",
    );
    let (code, out, _) = warden(&["policy", "test", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("test_ok: PASS") && out.contains("test_bad: FAIL"),
        "{out}"
    );
    assert!(out.contains("1 passed, 1 failed"), "{out}");
}

#[test]
fn cli_policy_check_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    let bad = policy_file(
        dir.path(),
        "bad.rego",
        "package warden\n\ndeny contains x if {\n",
    );
    let (code, _, err) = warden(&["policy", "check", "--policy", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.rego:"), "{err}");
    let (code, out, _) = warden(&["policy", "check"]);
    assert_eq!(code, 0);
    assert!(out.contains("default.rego"), "{out}");

    let input = dir.path().join("input.json");
    std::fs::write(
        &input,
        json!({
            "server": {"name": "fs", "trust": "untrusted", "transport": "stdio", "scope": "project"},
            "tool": {"name": "read_text_file", "qualified": "mcp__fs__read_text_file",
                     "annotations": {"readOnlyHint": true}, "pinned": true},
            "arguments": {"path": "/srv/repo/../../root/.ssh/id_rsa"},
            "context": {"mode": "interactive", "session": "x", "workspace": "/srv/repo", "call_index": 3},
            "stages": {"trust": null, "schema": null, "rules": "allow", "annotations": null}
        })
        .to_string(),
    )
    .unwrap();
    let (code, out, err) = warden(&[
        "policy",
        "eval",
        "--input",
        input.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["effect"], "deny");
    assert_eq!(v["stage"], "policy");
    assert_eq!(v["stages"].as_array().unwrap().len(), 6);
    let (_, text, _) = warden(&["policy", "eval", "--input", input.to_str().unwrap()]);
    assert!(
        text.contains("decision: deny") && text.contains("rules        allow"),
        "{text}"
    );
}

/// `policy eval` understands the other kinds of CONTRACT §8: a resource's
/// `file:` URI is read as its path (a secret path is denied), and only the
/// stages a resource has are shown.
#[test]
fn cli_policy_eval_of_a_resource_and_a_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("resource.json");
    let context =
        json!({"mode": "interactive", "session": "x", "workspace": "/srv/repo", "call_index": 1});
    std::fs::write(
        &input,
        json!({
            "kind": "resource",
            "server": {"name": "fs", "trust": "trusted", "transport": "stdio", "scope": "user"},
            "resource": {"uri": "file:///srv/repo/../../home/u/.ssh/id_rsa", "server": "fs"},
            "arguments": {"uri": "file:///srv/repo/../../home/u/.ssh/id_rsa"},
            "context": context,
            "stages": {"trust": null, "rules": null}
        })
        .to_string(),
    )
    .unwrap();
    let (code, out, err) = warden(&[
        "policy",
        "eval",
        "--input",
        input.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["effect"], "deny", "{v}");
    assert_eq!(v["stage"], "policy", "{v}");
    assert!(
        v["reasons"][0]
            .as_str()
            .unwrap()
            .contains("/home/u/.ssh/id_rsa"),
        "{v}"
    );
    let stages: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["trust", "rules", "policy"]);

    let prompt = dir.path().join("prompt.json");
    std::fs::write(
        &prompt,
        json!({
            "kind": "prompt",
            "server": {"name": "fs", "trust": "untrusted", "transport": "stdio", "scope": "user"},
            "prompt": {"name": "review", "qualified": "prompt__fs__review"},
            "arguments": {"file": "/srv/repo/README.md"},
            "context": context,
            "stages": {"trust": null, "rules": null}
        })
        .to_string(),
    )
    .unwrap();
    let (code, out, err) = warden(&[
        "policy",
        "eval",
        "--input",
        prompt.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["effect"], "ask", "{v}");
    assert!(v["reasons"][0].as_str().unwrap().contains("prompt"), "{v}");
}

/// The whole pipeline for a resource: trust, rules on the canonical URI,
/// the policy; no schema, pinning or annotations stage.
#[test]
fn resources_are_decided_by_trust_rules_and_policy() {
    let rules = vec![warden_policy::RuleSource {
        effect: RuleEffect::Allow,
        text: "resource__fs(uri: /srv/repo/**)".into(),
        scope: Scope::User,
        file: "/c.json".into(),
        index: 0,
    }];
    let p = pipeline(rules, None, Mode::Interactive);
    let resource = |trust, uri: &str| {
        let mut f = facts(trust, "x", json!(null), json!({ "uri": uri }));
        f.kind = warden_policy::RequestKind::Resource;
        f.tool.name = uri.to_string();
        f.tool.qualified = "resource__fs".into();
        f.tool.input_schema = serde_json::Value::Null.into();
        f
    };
    let d = p.decide(&resource(Trust::Untrusted, "file:///srv/repo/a.md"));
    assert_eq!(d.effect, Effect::Allow, "{d:?}");
    let stages: Vec<Stage> = d.stages.iter().map(|s| s.stage).collect();
    assert_eq!(stages, [Stage::Trust, Stage::Rules, Stage::Policy]);
    // Outside the allowed folder: the default policy asks.
    let d = p.decide(&resource(Trust::Untrusted, "file:///srv/other/a.md"));
    assert_eq!((d.effect, d.stage), (Effect::Ask, Stage::Policy), "{d:?}");
    // A secret path: denied, even for a trusted server.
    let d = p.decide(&resource(
        Trust::Trusted,
        "file:///srv/repo/../../root/.ssh/id_rsa",
    ));
    assert_eq!((d.effect, d.stage), (Effect::Deny, Stage::Policy), "{d:?}");
    // Blocked: the trust stage.
    let d = p.decide(&resource(Trust::Blocked, "file:///srv/repo/a.md"));
    assert_eq!((d.effect, d.stage), (Effect::Deny, Stage::Trust), "{d:?}");
}

#[test]
fn mode_is_part_of_rego_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = policy_file(
        dir.path(),
        "p.rego",
        "package warden\nimport rego.v1\ndeny contains \"ci\" if input.context.mode == \"ci\"\nallow if input.context.workspace == \"/srv/repo\"\n",
    );
    let p = pipeline(vec![], Some(vec![source(&file, Scope::User)]), Mode::Ci);
    let d = p.decide(&facts(Trust::Untrusted, "x", json!({}), json!({})));
    assert_eq!((d.effect, d.stage), (Effect::Deny, Stage::Policy));
    let p = pipeline(
        vec![],
        Some(vec![source(&file, Scope::User)]),
        Mode::Interactive,
    );
    let d = p.decide(&facts(Trust::Untrusted, "x", json!({}), json!({})));
    assert_eq!((d.effect, d.stage), (Effect::Allow, Stage::Policy));
}

#[test]
fn runaway_policy_is_stopped_and_denies() {
    let dir = tempfile::tempdir().unwrap();
    let file = policy_file(
        dir.path(),
        "slow.rego",
        "package warden\nimport rego.v1\nallow if {\n  input.arguments.slow\n  count([1 | some x in numbers.range(1, 5000); some y in numbers.range(1, 5000); x != y]) > 0\n}\n",
    );
    let p = pipeline(
        vec![],
        Some(vec![source(&file, Scope::User)]),
        Mode::Interactive,
    );
    let start = std::time::Instant::now();
    let d = p.decide(&facts(
        Trust::Untrusted,
        "x",
        json!({}),
        json!({"slow": true}),
    ));
    assert_eq!((d.effect, d.stage), (Effect::Deny, Stage::Policy), "{d:?}");
    assert!(d.reasons[0].contains("fail closed"), "{d:?}");
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn non_path_values_are_not_echoed_in_reasons() {
    let p = load_rules(vec![deny("mcp__fs__*(token: ghp_*)")]).unwrap();
    let d = p.decide(&facts(
        Trust::Untrusted,
        "t",
        json!({}),
        json!({"token": "ghp_secret123"}),
    ));
    assert_eq!(d.effect, Effect::Deny);
    let all = d.reasons.join(" ");
    assert!(!all.contains("secret123") && all.contains("ghp_*"), "{all}");
}

#[test]
fn cli_policy_flag_adds_to_the_default_policy() {
    // `--policy` adds to what is configured (here: nothing, so the shipped
    // default): a flag can never silently drop a protection.
    let dir = tempfile::tempdir().unwrap();
    let good = policy_file(
        dir.path(),
        "mine.rego",
        "package warden\nimport rego.v1\nallow if true\n",
    );
    let (code, out, err) = warden(&["policy", "check", "--policy", good.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("mine.rego") && out.contains("default.rego"),
        "{out}"
    );
}

#[test]
fn rules_naming_missing_arguments_are_reported_per_tool() {
    let p = load_rules(vec![
        allow("mcp__fs__read_text_file(pth: ${WORKSPACE}/**)"),
        deny("mcp__*__*(path: **/.ssh/**)"),
        allow("mcp__fs__*(/options/cwd: ${WORKSPACE}/**)"),
    ])
    .unwrap();
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let warnings = p.check_tool("mcp__fs__read_text_file", &schema);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("`pth`") && warnings[0].contains("permissions.allow[0]"),
        "{warnings:?}"
    );
    assert!(warnings[1].contains("/options/cwd"), "{warnings:?}");
    assert!(p.check_tool("mcp__git__log", &schema).is_empty());
    assert!(
        p.check_tool("mcp__fs__x", &json!({"type": "object"}))
            .is_empty()
    );
}

/// `policy check` says which Rego engine runs: the shipped policies on
/// the bytecode VM; any other policy on the interpreter (with the default
/// in its group), one the VM could run as well as one it could not; the
/// shipped ones too when `WARDEN_REGO_ENGINE=interpreter`.
#[test]
fn cli_policy_check_names_the_rego_engine() {
    let dir = tempfile::tempdir().unwrap();
    let walks = policy_file(
        dir.path(),
        "walks.rego",
        "package warden\nimport rego.v1\ndeny contains \"x\" if {\n\twalk(input.arguments, [_, v])\n\tv == \"x\"\n}\n",
    );
    let plain = policy_file(
        dir.path(),
        "plain.rego",
        "package warden\nimport rego.v1\ndeny contains \"x\" if input.arguments.x\n",
    );
    let engine = |args: &[&str], env: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.args(["--json", "policy", "check"])
            .args(args)
            .env("WARDEN_CONFIG_DIR", "/nonexistent")
            .env_remove("WARDEN_REGO_ENGINE");
        if let Some(value) = env {
            cmd.env("WARDEN_REGO_ENGINE", value);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["engine"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(engine(&[], None), "vm");
    assert_eq!(
        engine(&["--policy", walks.to_str().unwrap()], None),
        "interpreter"
    );
    assert_eq!(
        engine(&["--policy", plain.to_str().unwrap()], None),
        "interpreter"
    );
    let ci = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/ci.rego");
    assert_eq!(engine(&["--policy", ci], None), "vm");
    assert_eq!(engine(&[], Some("interpreter")), "interpreter");
}
