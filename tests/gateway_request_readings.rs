//! Requests that move data besides tool calls, decided on what the server
//! will do with them (CONTRACT §8), through the real gateway: the official
//! Python SDK client (tests/python/gateway_client.py) runs `warden gateway
//! --stdio` in front of tests/python/mediation_server.py, a server that
//! percent-decodes resource URIs until they stop changing, completes a
//! template's argument, and asks its client to sample with the
//! `includeContext` it is given.
//!
//! Attacks tried: reading a denied resource by another spelling of its URI
//! (escapes, double escapes, an encoded `/` or `..`, case); probing a
//! denied resource's name by completing the template towards it; a
//! sampling request that asks the client to add every server's context.

mod gateway_support;

use gateway_support::cli_support::WARDEN;
use gateway_support::{
    World, audit_path, eventually, interpreter_prefix, python_scripts, python_venv, requests,
    run_gateway_client, stdio_target,
};
use serde_json::{Value, json};

/// tests/python/mediation_server.py as server `vx`, with `permissions`.
fn config(world: &World, permissions: Value) -> Value {
    let venv = python_venv();
    json!({
        "mcpServers": {"vx": {
            "command": venv.join("bin/python"),
            "args": [python_scripts().join("mediation_server.py"), "--marker", world.marker],
            "timeout": 30,
            "sandbox": {"read": [venv, interpreter_prefix(&venv), python_scripts()]}
        }},
        "permissions": permissions,
        "audit": {"path": world.path("audit.jsonl")}
    })
}

/// Runs the Python client with `plan` against `warden gateway --stdio`.
async fn run_client(world: &World, plan: &Value) -> Value {
    run_gateway_client(world, plan, &stdio_target(world, &[], &["--ask-client"])).await
}

fn finish(world: &World) {
    assert!(
        eventually(10.0, || world.leftover_processes().is_empty()),
        "left behind: {:?}",
        world.leftover_processes()
    );
    let verify = std::process::Command::new(WARDEN)
        .args(["audit", "verify"])
        .arg(audit_path(world))
        .output()
        .expect("audit verify");
    assert!(verify.status.success(), "{verify:?}");
}

const SPELLINGS: [&str; 8] = [
    "vault://box/%6Bey",
    "vault://box/%6bey",
    "vault://box/%256Bey",
    "vault://box/%25256Bey",
    "vault://box/pub/%2e%2e/key",
    "vault://box/pub/%252e%252e/key",
    "vault://box/pub%2F..%2Fkey",
    "vault://BOX/%6Bey",
];

/// A deny on `vault://box/key*` holds for every spelling of that URI the
/// server decodes to it; the allow on the rest of the vault still holds
/// for a plain read (the server works, and is asked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_resource_is_not_read_by_another_spelling_of_its_uri() {
    let world = World::new();
    world.write_config(&config(
        &world,
        json!({
            "allow": ["resource__vx(uri: vault://**)"],
            "deny": ["resource__vx(uri: vault://box/key*)"]
        }),
    ));
    let mut steps = vec![json!({"read": "vault://box/readme"})];
    steps.extend(SPELLINGS.iter().map(|uri| json!({ "read": uri })));
    let out = run_client(&world, &json!({ "steps": steps })).await;
    let text = out.to_string();
    assert!(
        out["steps"][0]["ok"]["contents"][0]["text"] == "readme text",
        "{text}"
    );
    assert!(!text.contains("THE VAULT KEY"), "a secret was read: {text}");
    for (n, uri) in SPELLINGS.iter().enumerate() {
        let step = &out["steps"][n + 1];
        assert!(step.get("error").is_some(), "{uri}: {step}");
    }
    // Each spelling was decided and recorded as a denial, never sent.
    let reads = requests(&world, "resource");
    for uri in SPELLINGS {
        let record = reads
            .iter()
            .find(|r| r["arguments"]["uri"] == uri)
            .unwrap_or_else(|| panic!("no record of {uri}: {reads:?}"));
        assert!(
            record["outcome"] == "denied" || record["outcome"] == "unknown_resource",
            "{uri}: {record}"
        );
        assert!(record["result"].is_null(), "{uri} was sent: {record}");
    }
    finish(&world);
}

/// A completion of the template `vault://box/{name}` is decided on the URI
/// it prepares: completing `name` to `key` is a probe of the denied
/// `vault://box/key` and is denied; completing `k` is allowed, but the
/// server's suggestions that would name a denied resource are not passed
/// on. The record keeps the template, the argument and the context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_resource_cannot_be_probed_by_completing_its_template() {
    let world = World::new();
    world.write_config(&config(
        &world,
        json!({
            "allow": ["resource__vx(uri: vault://**)"],
            "deny": ["resource__vx(uri: vault://box/key*)"]
        }),
    ));
    let plan = json!({"steps": [
        {"complete_resource": "vault://box/{name}", "argument": "name", "value": "key"},
        {"complete_resource": "vault://box/{name}", "argument": "name", "value": "k"},
        {"complete_resource": "vault://box/{name}", "argument": "name", "value": "r"},
    ]});
    let out = run_client(&world, &plan).await;
    assert!(
        out["steps"][0].get("error").is_some(),
        "{}",
        out["steps"][0]
    );
    assert_eq!(
        out["steps"][1]["ok"]["completion"]["values"],
        json!([]),
        "{}",
        out["steps"][1]
    );
    assert_eq!(
        out["steps"][2]["ok"]["completion"]["values"],
        json!(["readme"]),
        "{}",
        out["steps"][2]
    );
    let completions: Vec<Value> = requests(&world, "resource")
        .into_iter()
        .filter(|r| r["method"] == "completion/complete")
        .collect();
    assert_eq!(completions.len(), 3, "{completions:?}");
    assert_eq!(completions[0]["arguments"]["uri"], "vault://box/key");
    assert_eq!(
        completions[0]["arguments"]["template"],
        "vault://box/{name}"
    );
    assert_eq!(completions[0]["arguments"]["argument"]["value"], "key");
    assert_eq!(completions[0]["outcome"], "denied");
    assert!(
        completions[0]["result"].is_null(),
        "sent: {}",
        completions[0]
    );
    assert_eq!(completions[1]["arguments"]["uri"], "vault://box/k");
    assert_eq!(completions[1]["result"]["outcome"], "ok");
    finish(&world);
}

/// A server's sampling request with `includeContext` "allServers" or
/// "thisServer" reaches the gateway's client with "none", and the record
/// says it was capped; Rego sees what the server asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_never_asks_the_client_for_other_servers_context() {
    let world = World::new();
    let policy = world.path("sampling.rego");
    std::fs::write(
        &policy,
        "package warden\n\nask contains \"context asked\" if input.sampling.include_context == \"allServers\"\n",
    )
    .expect("write policy");
    let mut cfg = config(&world, json!({"allow": ["mcp__vx__*", "sampling__vx"]}));
    cfg["policy"] = json!([policy]);
    world.write_config(&cfg);
    let plan = json!({
        "answers": {
            "sampling": {"text": "sampled"},
            "elicitation": {"action": "accept", "content": {"decision": "allow_once"}}
        },
        "steps": [
            {"call": "vx__sample", "arguments": {"include_context": "allServers"}},
            {"call": "vx__sample", "arguments": {"include_context": "thisServer"}},
            {"call": "vx__sample", "arguments": {}},
        ]
    });
    let out = run_client(&world, &plan).await;
    let sampled: Vec<Value> = out["events"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|e| e["asked"].get("sampling").cloned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(sampled.len(), 3, "{out}");
    for s in &sampled {
        assert!(
            s.get("includeContext").is_none_or(|c| c == "none"),
            "the client was asked for context: {s}"
        );
    }
    // The policy's ask on "allServers" was put to the client (a question
    // through elicitation), so Rego saw what the server asked.
    let asked_elicitation = out["events"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter(|e| e["asked"].get("elicitation").is_some())
                .count()
        })
        .unwrap_or_default();
    assert_eq!(asked_elicitation, 1, "{out}");
    let records = requests(&world, "sampling");
    assert_eq!(records.len(), 3, "{records:?}");
    assert_eq!(records[0]["arguments"]["include_context"], "allServers");
    assert_eq!(
        records[0]["capped"]["include_context"],
        json!({"asked": "allServers", "sent": "none"})
    );
    assert_eq!(
        records[1]["capped"]["include_context"],
        json!({"asked": "thisServer", "sent": "none"})
    );
    assert!(records[2]["capped"].is_null(), "{}", records[2]);
    for r in &records {
        assert_eq!(r["result"]["outcome"], "ok", "{r}");
    }
    finish(&world);
}

/// `warden mcp status` and `warden doctor --connect` connect for real: a
/// server that asks for roots, sampling and elicitation while it is listed
/// is answered as in any session (roots the workspace, sampling refused,
/// elicitation declined) and every request is recorded.
#[test]
fn status_and_doctor_record_a_servers_own_requests() {
    for command in [&["mcp", "status"][..], &["doctor", "--connect"][..]] {
        let world = World::new();
        let mut cfg = config(&world, json!({}));
        cfg["mcpServers"]["vx"]["args"]
            .as_array_mut()
            .expect("args")
            .push(json!("--ask-while-listing"));
        world.write_config(&cfg);
        let out = world.run(command);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("vx"), "{command:?}: {stdout}\n{out:?}");
        let kinds = |kind: &str| requests(&world, kind);
        let roots = kinds("roots");
        assert_eq!(roots.len(), 1, "{command:?}: {roots:?}");
        let sampling = kinds("sampling");
        assert_eq!(sampling.len(), 1, "{command:?}: {sampling:?}");
        assert_eq!(sampling[0]["outcome"], "denied", "{}", sampling[0]);
        let elicitation = kinds("elicitation");
        assert_eq!(elicitation.len(), 1, "{command:?}: {elicitation:?}");
        finish(&world);
    }
}
