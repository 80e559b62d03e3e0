//! Issue 11, classes 7 and 9, end to end with a real server:
//!
//! - class 7: a JSON file beside a policy was loaded as Rego data, and
//!   `{"warden": {"deny": []}}` there overrode the policy's denies. Now a
//!   JSON file is data only when the configuration names it (`policy_data`),
//!   and nothing outside a policy defines `data.warden`;
//! - class 9: `numbers.range(1, 2e8)` ran 15 s and took 4.7 GB inside one
//!   step, and an unknown function passed `policy check`. Both are refused
//!   by `warden policy check` (and at every start), quickly.

mod resolving_support;

use resolving_support::*;
use serde_json::json;

fn with_policy(world: &World, extra: serde_json::Value) {
    let mut config = json!({
        "mcpServers": {"py": server(world, "py")},
        "permissions": {"allow": ["mcp__py__*"]},
        "policy": ["policy/p.rego"],
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            c.insert(k.clone(), v.clone());
        }
    }
    world.write_config(&config);
}

#[test]
fn class7_json_beside_a_policy_never_overrides_it() {
    let world = World::new();
    populate(&world);
    let dir = world.path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("p.rego"),
        "package warden\nimport rego.v1\n\ndeny contains \"note 2 is private\" if input.arguments.id == 2\n\
         deny contains \"blocked\" if input.tool.name in object.get(data, \"lists\", {\"blocked\": []}).blocked\n",
    )
    .unwrap();
    std::fs::write(dir.join("override.json"), r#"{"warden": {"deny": []}}"#).unwrap();
    with_policy(&world, json!({}));
    let (code, report) = call(&world, "py", "read_note", &json!({"id": 2}));
    assert_denied(code, &report, "note 2 is private");
    let out = world.run(&["policy", "check", "--json"]);
    let listed = stdout_json(&out)["policies"].to_string();
    assert!(!listed.contains("override.json"), "{listed}");

    // Named as data, a `warden` key is refused, naming the file.
    with_policy(&world, json!({"policy_data": ["policy/override.json"]}));
    let out = world.run(&["policy", "check"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("override.json") && err.contains("data.warden"),
        "{err}"
    );

    // Named data without such a key reaches the policy.
    std::fs::write(
        dir.join("lists.json"),
        r#"{"lists": {"blocked": ["read_file"]}}"#,
    )
    .unwrap();
    with_policy(&world, json!({"policy_data": ["policy/lists.json"]}));
    let (code, report) = call(&world, "py", "read_file", &json!({"path": "public/x"}));
    assert_denied(code, &report, "blocked");
    let (code, report) = call(&world, "py", "read_note", &json!({"id": 1}));
    assert_eq!(code, Some(0), "{report}");
}

#[test]
fn class9_unbounded_builtins_and_unknown_functions_fail_policy_check() {
    let world = World::new();
    populate(&world);
    let dir = world.path("policy");
    std::fs::create_dir_all(&dir).unwrap();
    for (text, fragment) in [
        (
            "package warden\nimport rego.v1\n\nall_ids := numbers.range(1, 2e8)\ndeny contains \"x\" if input.arguments.id in all_ids\n",
            "p.rego:4",
        ),
        (
            "package warden\nimport rego.v1\n\ndeny contains \"x\" if {\n  input.arguments.rare\n  strings.no_such_function(input.arguments.rare)\n}\n",
            "unknown function `strings.no_such_function`",
        ),
    ] {
        std::fs::write(dir.join("p.rego"), text).unwrap();
        with_policy(&world, json!({}));
        let started = std::time::Instant::now();
        let out = world.run(&["policy", "check"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(fragment), "{}", stderr(&out));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // And nothing starts with such a policy.
        let out = world.run(&["call", "py", "read_note", "--args", r#"{"id": 1}"#]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    }
    // An input-driven range is bounded when it runs: a deny, not 15 s.
    std::fs::write(
        dir.join("p.rego"),
        "package warden\nimport rego.v1\n\ndeny contains \"x\" if count(numbers.range(1, input.arguments.id)) > 5\n",
    )
    .unwrap();
    with_policy(&world, json!({}));
    let started = std::time::Instant::now();
    let (code, report) = call(&world, "py", "read_note", &json!({"id": 200_000_000}));
    assert_denied(code, &report, "at most 100000");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
