//! The readings of an argument a server may expand, parse or resolve
//! otherwise than as a plain path, end to end: `warden call` against the
//! resolving fixture server (Python's official SDK, `pathlib`, `urllib`,
//! `os.path.expandvars`, `glob`; `tests/python/resolving_server.py`) and
//! npm's `@modelcontextprotocol/server-filesystem`, each launched in
//! warden's sandbox. For each class a control run (everything allowed)
//! shows the server really opens the protected file for the value; the
//! protected run, whose rules an earlier warden read as allowing the
//! value, refuses it (a deny rule or the shipped policy, or an `ask` that
//! `--ci` turns into a deny).

mod resolving_support;

use std::path::{Path, PathBuf};

use resolving_support::*;
use serde_json::{Value, json};

/// The Python fixture server, reading the world and `extra` folders,
/// with `more` keys merged into its entry (`cwd`).
fn py(world: &World, extra: &[&Path], more: Value) -> Value {
    let mut entry = server(world, "py");
    if let Some(read) = entry["sandbox"]["read"].as_array_mut() {
        read.extend(extra.iter().map(|p| json!(p)));
    }
    if let (Some(entry), Value::Object(more)) = (entry.as_object_mut(), more) {
        entry.extend(more);
    }
    entry
}

/// Everything allowed, no policy: the server opens what it opens.
fn control(world: &World, entry: &Value, tool: &str, args: &Value, expect: &str) {
    world.write_config(&json!({
        "mcpServers": {"s": entry},
        "permissions": {"allow": ["mcp__s__*"]},
        "policy": [],
    }));
    let (code, report) = call(world, "s", tool, args);
    assert_eq!(code, Some(0), "{report}");
    let answer = answer(&report);
    assert!(
        answer.to_string().contains(expect),
        "control: {tool} {args} should read `{expect}`, got {answer}"
    );
}

/// `warden --ci call s TOOL` with these rules (and `policy` unless
/// `Value::Null`, which leaves the shipped policy in force).
fn protected(
    world: &World,
    entry: &Value,
    allow: &[String],
    deny: &[String],
    policy: Value,
    tool: &str,
    args: &Value,
) -> (Option<i32>, Value) {
    let mut config = json!({
        "mcpServers": {"s": entry},
        "permissions": {"allow": allow, "deny": deny},
    });
    if !policy.is_null() {
        config["policy"] = policy;
    }
    world.write_config(&config);
    let out = world.run(&[
        "--ci",
        "call",
        "s",
        tool,
        "--json",
        "--args",
        &args.to_string(),
    ]);
    (out.status.code(), stdout_json(&out))
}

/// A folder directly under `/tmp` with a secret in it: the sandbox's
/// private HOME is `/tmp/home`, so `~/../NAME` and `$HOME/../NAME` reach
/// it, where no reading an earlier warden made did.
fn tmp_secret() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("warden-readings-")
        .tempdir_in("/tmp")
        .expect("tempdir in /tmp");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, OUTSIDE).expect("write");
    (dir, secret)
}

/// Class 1: a URI of another scheme: Python servers open
/// `url2pathname(urlparse(uri).path)` whatever the scheme, so a deny on
/// the path, and the shipped policy's secret paths, hold for it.
#[test]
fn other_scheme_uris_are_read_as_their_path() {
    let world = World::new();
    populate(&world);
    let root = root(&world);
    let entry = py(&world, &[], json!({}));
    let args = json!({"uri": format!("x://{root}/outside/secret")});
    control(&world, &entry, "read_uri", &args, OUTSIDE);
    let (code, report) = protected(
        &world,
        &entry,
        &["mcp__s__read_uri".into()],
        &[format!("mcp__s__read_uri(uri: {root}/outside/**)")],
        json!([]),
        "read_uri",
        &args,
    );
    assert_denied(code, &report, "deny rule");
    // The shipped policy, even with the tool allowed by a rule.
    let args = json!({"uri": "http://localhost/proc/self/environ"});
    control(&world, &entry, "read_uri", &args, "PATH=");
    let (code, report) = protected(
        &world,
        &entry,
        &["mcp__s__read_uri".into()],
        &[],
        Value::Null,
        "read_uri",
        &args,
    );
    assert_denied(
        code,
        &report,
        "points at a secret file (/proc/self/environ)",
    );
    assert!(world.leftover_processes().is_empty());
}

/// Class 2: JSON text, which the official Python SDK parses into a list
/// for an argument typed `str | list[str]`.
#[test]
fn json_text_is_read_inside() {
    let world = World::new();
    populate(&world);
    let ws = ws(&world);
    let entry = py(&world, &[], json!({}));
    let args = json!({"paths": "[\"secrets/key\"]"});
    control(&world, &entry, "read_paths", &args, SECRET);
    let (code, report) = protected(
        &world,
        &entry,
        &[format!("mcp__s__read_paths(paths: {ws}/**)")],
        &[format!("mcp__s__read_paths(paths: {ws}/secrets/**)")],
        json!([]),
        "read_paths",
        &args,
    );
    assert_denied(code, &report, "deny rule");
    // Without the deny the allow does not hold either (`--ci`: a deny).
    let (code, report) = protected(
        &world,
        &entry,
        &[format!("mcp__s__read_paths(paths: {ws}/**)")],
        &[],
        json!([]),
        "read_paths",
        &args,
    );
    assert_denied(code, &report, "JSON text");
    assert!(world.leftover_processes().is_empty());
}

/// Class 3: a decomposed (NFD) name: npm's server-filesystem opens the
/// composed (NFC) file it is equivalent to.
#[test]
fn decomposed_names_meet_composed_patterns() {
    if !npm_ready() {
        panic!("run scripts/test-deps.sh first (tests/npm)");
    }
    let world = World::new();
    populate(&world);
    let ws = ws(&world);
    let composed = "donn\u{e9}es";
    std::fs::create_dir_all(world.workspace.join(composed)).expect("mkdir");
    std::fs::write(world.workspace.join(composed).join("key"), SECRET).expect("write");
    let entry = json!({
        "command": manifest().join("tests/npm/node_modules/.bin/mcp-server-filesystem"),
        "args": [ws],
        "sandbox": {"read": [ws]},
    });
    let args = json!({"path": format!("{ws}/donne\u{301}es/key")});
    control(&world, &entry, "read_text_file", &args, SECRET);
    let (code, report) = protected(
        &world,
        &entry,
        &[format!("mcp__s__read_text_file(path: {ws}/**)")],
        &[format!("mcp__s__read_text_file(path: {ws}/{composed}/**)")],
        json!([]),
        "read_text_file",
        &args,
    );
    assert_denied(code, &report, "deny rule");
}

/// Class 4: a relative path is opened from the server's `cwd`, not the
/// workspace.
#[test]
fn relative_paths_are_read_from_the_server_cwd() {
    let world = World::new();
    populate(&world);
    let ws = ws(&world);
    let entry = py(&world, &[], json!({"cwd": format!("{ws}/secrets")}));
    let args = json!({"path": "key"});
    control(&world, &entry, "read_file", &args, SECRET);
    let (code, report) = protected(
        &world,
        &entry,
        &[format!("mcp__s__read_file(path: {ws}/**)")],
        &[format!("mcp__s__read_file(path: {ws}/secrets/**)")],
        json!([]),
        "read_file",
        &args,
    );
    assert_denied(code, &report, "read as");
    assert!(world.leftover_processes().is_empty());
}

/// Class 5: `~/..` climbs from the HOME the sandboxed server has
/// (`/tmp/home`), not the host's.
#[test]
fn tilde_is_read_at_the_sandbox_home() {
    let world = World::new();
    populate(&world);
    let (dir, _) = tmp_secret();
    let name = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let entry = py(&world, &[dir.path()], json!({}));
    let args = json!({"path": format!("~/../{name}/secret")});
    control(&world, &entry, "read_file", &args, OUTSIDE);
    let (code, report) = protected(
        &world,
        &entry,
        &["mcp__s__read_file".into()],
        &[format!(
            "mcp__s__read_file(path: {}/**)",
            dir.path().display()
        )],
        json!([]),
        "read_file",
        &args,
    );
    assert_denied(code, &report, "deny rule");
    assert!(world.leftover_processes().is_empty());
}

/// Class 6: `$HOME` and other variables a server expands.
#[test]
fn variables_are_read_expanded() {
    let world = World::new();
    populate(&world);
    let (dir, _) = tmp_secret();
    let name = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let entry = py(&world, &[dir.path()], json!({}));
    for path in [
        format!("$HOME/../{name}/secret"),
        format!("${{HOME}}/../{name}/secret"),
    ] {
        let args = json!({ "path": path });
        control(&world, &entry, "read_expand", &args, OUTSIDE);
        let (code, report) = protected(
            &world,
            &entry,
            &["mcp__s__read_expand".into()],
            &[format!(
                "mcp__s__read_expand(path: {}/**)",
                dir.path().display()
            )],
            json!([]),
            "read_expand",
            &args,
        );
        assert_denied(code, &report, "deny rule");
    }
    assert!(world.leftover_processes().is_empty());
}

/// Class 7: glob patterns a server expands.
#[test]
fn globs_are_never_allowed() {
    let world = World::new();
    populate(&world);
    let ws = ws(&world);
    let entry = py(&world, &[], json!({}));
    for path in [format!("{ws}/secret[s]/key"), "secret*/key".to_string()] {
        let args = json!({ "path": path });
        control(&world, &entry, "read_glob", &args, SECRET);
        let (code, report) = protected(
            &world,
            &entry,
            &[format!("mcp__s__read_glob(path: {ws}/**)")],
            &[format!("mcp__s__read_glob(path: {ws}/secrets/**)")],
            json!([]),
            "read_glob",
            &args,
        );
        assert_denied(code, &report, "cannot be read with certainty");
    }
    // A glob in a denied folder is denied outright (the folder holds
    // whatever it matches).
    let args = json!({"path": format!("{ws}/secrets/*")});
    control(&world, &entry, "read_glob", &args, SECRET);
    let (code, report) = protected(
        &world,
        &entry,
        &[format!("mcp__s__read_glob(path: {ws}/**)")],
        &[format!("mcp__s__read_glob(path: {ws}/secrets/**)")],
        json!([]),
        "read_glob",
        &args,
    );
    assert_denied(code, &report, "deny rule");
    assert!(world.leftover_processes().is_empty());
}

/// Class 8: a policy checking `input.strings` sees a relative path as the
/// file it names.
#[test]
fn rego_sees_relative_paths_as_the_files_they_name() {
    let world = World::new();
    populate(&world);
    let ws = ws(&world);
    let policy = world.path("secrets.rego");
    std::fs::write(
        &policy,
        format!(
            "package warden\nimport rego.v1\n\
             deny contains msg if {{\n\
             \tsome value in input.strings\n\
             \tstartswith(value, \"{ws}/secrets/\")\n\
             \tmsg := sprintf(\"secrets folder: %v\", [value])\n}}\n"
        ),
    )
    .expect("write policy");
    let entry = py(&world, &[], json!({}));
    let args = json!({"path": "secrets/key"});
    control(&world, &entry, "read_file", &args, SECRET);
    let (code, report) = protected(
        &world,
        &entry,
        &["mcp__s__read_file".into()],
        &[],
        json!([policy]),
        "read_file",
        &args,
    );
    assert_denied(code, &report, &format!("secrets folder: {ws}/secrets/key"));
    assert!(world.leftover_processes().is_empty());
}

/// Class 9: `;params` of the last segment, which Python's `urlparse` cuts
/// (`public/..;x` lists the workspace).
#[test]
fn params_are_read_cut() {
    let world = World::new();
    populate(&world);
    let ws = ws(&world);
    let entry = py(&world, &[], json!({}));
    let args = json!({"uri": format!("{ws}/public/..;x")});
    control(&world, &entry, "list_uri", &args, "secrets");
    let (code, report) = protected(
        &world,
        &entry,
        &[format!("mcp__s__list_uri(uri: {ws}/public/**)")],
        &[],
        json!([]),
        "list_uri",
        &args,
    );
    assert_denied(code, &report, "`;`");
    assert!(world.leftover_processes().is_empty());
}
