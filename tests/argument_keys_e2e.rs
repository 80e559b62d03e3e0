//! A rule names an argument by its key; a server that binds arguments the
//! way Go's `encoding/json` does (`tests/python/folding_server.py`: keys
//! equal with case folded name one parameter, the last in the text wins)
//! reads `PATH` as `path` and `pathſ` as `paths`. For each attack a control
//! run (everything allowed) shows the server really reads the secret; the
//! protected run is refused.

mod resolving_support;

use resolving_support::*;
use serde_json::{Value, json};

fn folding(world: &World) -> Value {
    let fixture = manifest().join("tests/python/folding_server.py");
    json!({
        "command": venv().join("bin/python"),
        "args": [fixture, "--marker", world.marker],
        "sandbox": {"read": [root(world), manifest().join("tests/python").display().to_string()]},
    })
}

fn control(world: &World, tool: &str, args: &Value, expect: &str) {
    world.write_config(&json!({
        "mcpServers": {"go": folding(world)},
        "permissions": {"allow": ["mcp__go__*"]},
        "policy": [],
    }));
    let (code, report) = call(world, "go", tool, args);
    assert_eq!(code, Some(0), "{report}");
    assert!(
        answer(&report).to_string().contains(expect),
        "control: {tool} {args} should read `{expect}`: {report}"
    );
}

fn call_ci(world: &World, tool: &str, args: &Value) -> (Option<i32>, Value) {
    let args = args.to_string();
    let out = world.run(&["--ci", "call", "go", tool, "--json", "--args", &args]);
    (out.status.code(), stdout_json(&out))
}

/// `deny read_file(path: WS/secrets/**)` missed `{"PATH": …}`, `Path`,
/// `pAtH`: the server reads each as `path`. Each is denied.
#[test]
fn a_deny_holds_for_every_spelling_of_its_key() {
    let world = World::new();
    populate(&world);
    let key = format!("{}/secrets/key", ws(&world));
    let attacks = [
        json!({"PATH": key}),
        json!({"Path": key}),
        json!({"pAtH": key}),
        json!({"path": format!("{}/public/x", ws(&world)), "PATH": key}),
    ];
    for args in &attacks[..3] {
        control(&world, "read_file", args, SECRET);
    }
    world.write_config(&json!({
        "mcpServers": {"go": folding(&world)},
        "permissions": {
            "allow": ["mcp__go__read_file"],
            "deny": [format!("mcp__go__read_file(path: {}/secrets/**)", ws(&world))],
        },
        "policy": [],
    }));
    for args in &attacks {
        let (code, report) = call_ci(&world, "read_file", args);
        assert_denied(code, &report, "deny rule");
        assert!(!report.to_string().contains(SECRET), "{report}");
    }
}

/// `allow read_files(paths: WS/public/**)` held for `{"paths": [public],
/// "pathſ": [secret]}`: the server binds `pathſ` (after `paths` in the
/// text warden sends) and reads the secret. An allow needs every spelling
/// of its key to match; the public read alone is still allowed.
#[test]
fn an_allow_needs_every_spelling_of_its_key() {
    let world = World::new();
    populate(&world);
    let public = format!("{}/public/x", ws(&world));
    let outside = world.path("outside/secret").display().to_string();
    let attack = json!({"paths": [public], "path\u{17f}": [outside]});
    control(&world, "read_files", &attack, OUTSIDE);
    world.write_config(&json!({
        "mcpServers": {"go": folding(&world)},
        "permissions": {
            "allow": [format!("mcp__go__read_files(paths: {}/public/**)", ws(&world))],
        },
        "policy": [],
    }));
    let (code, report) = call_ci(&world, "read_files", &json!({"paths": [public]}));
    assert_eq!(code, Some(0), "{report}");
    assert!(answer(&report).to_string().contains(PUBLIC), "{report}");
    let (code, report) = call_ci(&world, "read_files", &attack);
    assert_eq!(code, Some(3), "{report}");
    assert_eq!(report["decision"]["effect"], "deny", "{report}");
    assert!(report["result"].is_null(), "{report}");
    assert!(!report.to_string().contains(OUTSIDE), "{report}");
}
