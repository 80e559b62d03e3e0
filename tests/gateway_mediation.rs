//! CONTRACT §8 through the real gateway with a real MCP client: the
//! official Python SDK (PyPI `mcp`, from the venv of
//! tests/python/setup-venv.sh) runs `tests/python/gateway_client.py`
//! against `warden gateway` over stdio and streamable HTTP, in front of
//! the fixture server (which records every request it receives).
//!
//! Checked: resources, templates and prompts listed without what can never
//! be allowed; reads and prompts unchanged when allowed, refused with the
//! reason when a rule denies, and then never reaching the server; each
//! decided request written ahead and its result recorded, the chain
//! verifying; completion passed on; log messages by the client's level;
//! resource updates only to the subscriber; progress in order for the
//! request that asked, under the client's own token; nothing crossing
//! between two clients.

mod gateway_support;

use std::path::PathBuf;

use gateway_support::cli_support::calls_received;
use gateway_support::{
    Listening, World, audit_path, eventually, requests, run_gateway_client, stdio_env, stdio_target,
};
use serde_json::{Value, json};

/// The fixture (session protocol, counting what it receives) and rules
/// for every kind.
fn config(world: &World) -> (Value, PathBuf) {
    let (mut fixture, counter) = world.counting_fixture();
    if let Some(args) = fixture["args"].as_array_mut() {
        args.push("--legacy".into());
    }
    let config = json!({
        "mcpServers": {"fx": fixture},
        "permissions": {
            "allow": [
                "resource__fx(uri: fixture://notes/**)",
                "resource__fx(uri: fixture://items/*)",
                "resource__fx(uri: fixture://slow)",
                "prompt__fx__greet",
                "mcp__fx__count", "mcp__fx__log", "mcp__fx__touch"
            ],
            "deny": [
                "resource__fx(uri: fixture://secret/**)",
                "prompt__fx__review",
                "prompt__fx__greet(name: Mallory)"
            ]
        },
        "audit": {"path": world.path("audit.jsonl")}
    });
    (config, counter)
}

/// Every event after step `n`'s marker (notifications outside a request
/// may arrive after the answer that followed them on the server's side).
fn events_after(out: &Value, n: usize) -> Vec<Value> {
    let events = out["events"].as_array().cloned().unwrap_or_default();
    let start = events
        .iter()
        .position(|e| e["step"] == json!(n))
        .expect("step marker");
    events[start + 1..].to_vec()
}

fn ok(out: &Value, n: usize) -> Value {
    let step = &out["steps"][n];
    assert!(step.get("ok").is_some(), "step {n} failed: {step}");
    step["ok"].clone()
}

fn error(out: &Value, n: usize) -> String {
    let step = &out["steps"][n];
    step["error"]
        .as_str()
        .unwrap_or_else(|| panic!("step {n} should have failed: {step}"))
        .to_string()
}

fn text_contents(read: &Value) -> Vec<String> {
    read["contents"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|x| x["text"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn assert_chain_verifies(world: &World) {
    let out = world.run(&["audit", "verify", &audit_path(world).display().to_string()]);
    assert!(
        out.status.success(),
        "audit verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_over_stdio_gets_mediated_resources_prompts_logs_and_progress() {
    let world = World::new();
    let (config, counter) = config(&world);
    world.write_config(&config);
    let plan = json!({
        "env": stdio_env(&world),
        "steps": [
            {"list": "resources"},                                      // 0
            {"list": "templates"},                                      // 1
            {"list": "prompts"},                                        // 2
            {"read": "fixture://notes/1"},                              // 3
            {"read": "fixture://items/7"},                              // 4
            {"read": "fixture://secret/key"},                           // 5
            {"read": "fixture://notes/../secret/key"},                  // 6
            {"prompt": "fx__greet", "arguments": {"name": "Ada"}},      // 7
            {"prompt": "fx__review", "arguments": {"file": "x"}},       // 8
            {"prompt": "fx__greet", "arguments": {"name": "Mallory"}},  // 9
            {"complete_prompt": "fx__greet", "argument": "name", "value": "A"}, // 10
            {"set_level": "info"},                                      // 11
            {"call": "fx__log", "arguments": {"level": "debug", "message": "quiet"}}, // 12
            {"call": "fx__log", "arguments": {"level": "warning", "message": "loud"}}, // 13
            {"subscribe": "fixture://notes/1"},                         // 14
            {"call": "fx__touch", "arguments": {"uri": "fixture://notes/1"}}, // 15
            {"call": "fx__touch", "arguments": {"uri": "fixture://notes/2"}}, // 16
            {"call": "fx__count", "arguments": {"steps": 5}, "progress": true}, // 17
            {"read": "fixture://slow", "progress": "r-1"},              // 18
            {"sleep": 0.3}                                              // 19
        ]
    });
    let out = run_gateway_client(&world, &plan, &stdio_target(&world, &[], &[])).await;

    // Capabilities: what the upstream offers and warden mediates.
    let caps = &out["capabilities"];
    assert!(caps["resources"].is_object(), "{caps}");
    assert_eq!(caps["resources"]["subscribe"], true, "{caps}");
    assert!(caps["prompts"].is_object(), "{caps}");
    assert!(caps["completions"].is_object(), "{caps}");
    assert!(caps["logging"].is_object(), "{caps}");

    // Listing: what a deny rule forbids outright is not shown.
    let resources = ok(&out, 0);
    let resources: Vec<&str> = resources
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(resources.contains(&"fixture://notes/1"), "{resources:?}");
    assert!(resources.contains(&"fixture://slow"), "{resources:?}");
    assert!(
        !resources.contains(&"fixture://secret/key"),
        "{resources:?}"
    );
    assert_eq!(
        ok(&out, 1),
        json!(["fixture://items/{id}", "fixture://wait/{ms}"])
    );
    let prompts: Vec<String> = ok(&out, 2)
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        prompts,
        vec!["fx__greet".to_string()],
        "review is denied outright"
    );
    assert_eq!(ok(&out, 2)[0]["arguments"][0]["name"], "name");

    // Allowed reads come back as the server sent them.
    assert_eq!(text_contents(&ok(&out, 3)), vec!["note one"]);
    assert_eq!(ok(&out, 3)["contents"][0]["uri"], "fixture://notes/1");
    assert_eq!(text_contents(&ok(&out, 4)), vec!["item 7"]);

    // Denied reads: an error naming the stage and the rule.
    let denied = error(&out, 5);
    assert!(
        denied.contains("Denied by warden's rules stage"),
        "{denied}"
    );
    assert!(denied.contains("fixture://secret/**"), "{denied}");
    // A URI the server never listed (here a traversal towards the secret)
    // is not sent to it on a guess, though it is the only server.
    let traversal = error(&out, 6);
    assert!(traversal.contains("no connected server"), "{traversal}");

    // Prompts: allowed unchanged; hidden, unknown or denied refused.
    let greet = ok(&out, 7);
    assert_eq!(greet["messages"][0]["content"]["text"], "Hello, Ada!");
    assert_eq!(greet["description"], "a greeting");
    assert!(
        error(&out, 8).contains("unknown prompt"),
        "{}",
        error(&out, 8)
    );
    let mallory = error(&out, 9);
    assert!(
        mallory.contains("Denied by warden's rules stage") && mallory.contains("Mallory"),
        "{mallory}"
    );

    // Completion is passed on with the server's own prompt name.
    assert_eq!(ok(&out, 10)["completion"]["values"], json!(["Ada", "Alan"]));

    // Logging: the client's level filters.
    let all = events_after(&out, 0);
    assert!(!all.iter().any(|e| e["log"]["data"] == "quiet"), "{all:?}");
    let loud = events_after(&out, 13);
    assert!(
        loud.iter()
            .any(|e| e["log"]["data"] == "loud" && e["log"]["level"] == "warning"),
        "{loud:?}"
    );

    // Resource updates: only for the subscribed URI.
    let updated = events_after(&out, 15);
    assert!(
        updated.iter().any(|e| e["notification"]
            .as_str()
            .is_some_and(|n| n.contains("ResourceUpdated"))
            && e["params"]["uri"] == "fixture://notes/1"),
        "{updated:?}"
    );
    assert!(
        !all.iter().any(|e| e["notification"]
            .as_str()
            .is_some_and(|n| n.contains("ResourceUpdated"))
            && e["params"]["uri"] == "fixture://notes/2"),
        "{all:?}"
    );

    // Progress: in order, for the call that asked (the gateway sends it
    // before the answer; tests/mcp_mediated.rs checks that order).
    let counted: Vec<f64> = events_after(&out, 17)
        .iter()
        .filter(|e| e["progress"] == "fx__count")
        .filter_map(|e| e["value"].as_f64())
        .collect();
    assert_eq!(counted, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    let slow = events_after(&out, 18);
    let slow_progress: Vec<&Value> = slow
        .iter()
        .filter(|e| {
            e["notification"]
                .as_str()
                .is_some_and(|n| n.contains("Progress"))
        })
        .collect();
    assert_eq!(slow_progress.len(), 3, "{slow:?}");
    assert!(
        slow_progress
            .iter()
            .all(|e| e["params"]["progressToken"] == "r-1"),
        "the client's own token: {slow:?}"
    );
    let steps: Vec<f64> = slow_progress
        .iter()
        .filter_map(|e| e["params"]["progress"].as_f64())
        .collect();
    assert_eq!(steps, vec![1.0, 2.0, 3.0]);
    assert_eq!(text_contents(&ok(&out, 18)), vec!["slow but done"]);

    // The server received what was allowed, never what was refused.
    let received = calls_received(&counter);
    for expected in [
        "resources/read fixture://notes/1",
        "resources/read fixture://items/7",
        "prompts/get greet",
        "completion/complete",
        "logging/setlevel info",
        "resources/subscribe fixture://notes/1",
        "resources/read fixture://slow",
    ] {
        assert!(
            received.iter().any(|r| r == expected),
            "{expected} missing from {received:?}"
        );
    }
    for refused in ["secret", "prompts/get review"] {
        assert!(
            !received.iter().any(|r| r.contains(refused)),
            "{refused} reached the server: {received:?}"
        );
    }
    assert!(
        received
            .iter()
            .filter(|r| r.as_str() == "prompts/get greet")
            .count()
            == 1,
        "Mallory's prompt reached the server: {received:?}"
    );

    // Audit: every decided request written ahead, its result recorded.
    let reads = requests(&world, "resource");
    let note = reads
        .iter()
        .find(|r| r["arguments"]["uri"] == "fixture://notes/1" && r["outcome"] == "pending")
        .unwrap_or_else(|| panic!("no pending record for notes/1: {reads:?}"));
    assert_eq!(note["target"], "resource__fx");
    assert_eq!(note["method"], "resources/read");
    assert_eq!(note["server"], "fx");
    assert_eq!(note["decision"]["effect"], "allow");
    assert_eq!(note["result"]["outcome"], "ok");
    assert!(note["result"]["result_sha256"].is_string());
    let secret = reads
        .iter()
        .find(|r| r["arguments"]["uri"] == "fixture://secret/key")
        .expect("the denied read is recorded");
    assert_eq!(secret["outcome"], "denied");
    assert_eq!(secret["decision"]["stage"], "rules");
    assert!(secret["result"].is_null());
    assert!(
        reads
            .iter()
            .any(|r| r["arguments"]["uri"] == "fixture://notes/1"
                && r["method"] == "resources/subscribe"
                && r["result"]["outcome"] == "ok"
                && r["outcome"] == "pending"),
        "subscribe recorded: {reads:?}"
    );
    let prompts = requests(&world, "prompt");
    assert!(
        prompts
            .iter()
            .any(|r| r["target"] == "prompt__fx__greet" && r["result"]["outcome"] == "ok"),
        "{prompts:?}"
    );
    assert!(
        prompts
            .iter()
            .any(|r| r["outcome"] == "unknown_prompt" && r["target"] == "fx__review"),
        "{prompts:?}"
    );
    assert!(
        prompts
            .iter()
            .any(|r| r["outcome"] == "denied" && r["arguments"]["name"] == "Mallory"),
        "{prompts:?}"
    );
    assert_chain_verifies(&world);
    assert!(
        eventually(10.0, || world.leftover_processes().is_empty()),
        "left behind: {:?}",
        world.leftover_processes()
    );
}

async fn listen(world: &World) -> Listening {
    listen_with(world, &[]).await
}

async fn listen_with(world: &World, extra: &[&str]) -> Listening {
    Listening::start(world, extra).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_python_sdk_clients_over_http_get_only_their_own_notifications() {
    let world = World::new();
    let (config, counter) = config(&world);
    world.write_config(&config);
    let gateway = listen(&world).await;
    let target = vec![gateway.url.clone(), gateway.bearer()];
    // A: wants warnings, subscribes to notes/1, then waits while B acts.
    let plan_a = json!({"steps": [
        {"set_level": "warning"},                       // 0
        {"subscribe": "fixture://notes/1"},             // 1
        {"read": "fixture://notes/2"},                  // 2
        {"read": "fixture://secret/key"},               // 3
        {"sleep": 10}                                   // 4
    ]});
    // B: wants everything, is not subscribed; touches A's resource, logs
    // and counts with progress.
    let plan_b = json!({"steps": [
        {"sleep": 4},                                   // 0
        {"set_level": "debug"},                         // 1
        {"call": "fx__touch", "arguments": {"uri": "fixture://notes/1"}}, // 2
        {"call": "fx__log", "arguments": {"level": "warning", "message": "for everyone"}}, // 3
        {"call": "fx__log", "arguments": {"level": "info", "message": "for B only"}}, // 4
        {"call": "fx__count", "arguments": {"steps": 3}, "progress": true}, // 5
        {"prompt": "fx__greet", "arguments": {"name": "Grace"}} // 6
    ]});
    let (a, b) = tokio::join!(
        run_gateway_client(&world, &plan_a, &target),
        run_gateway_client(&world, &plan_b, &target)
    );
    // A left: its subscription ends upstream too (it was the only one).
    assert!(
        eventually(15.0, || calls_received(&counter)
            .iter()
            .any(|r| r == "resources/unsubscribe fixture://notes/1")),
        "{:?}",
        calls_received(&counter)
    );
    gateway.stop(&world).await;

    assert_eq!(text_contents(&ok(&a, 2)), vec!["note two"]);
    assert!(error(&a, 3).contains("Denied by warden's rules stage"));
    assert_eq!(ok(&b, 6)["messages"][0]["content"]["text"], "Hello, Grace!");

    let a_events = a["events"].as_array().cloned().unwrap_or_default();
    let b_events = b["events"].as_array().cloned().unwrap_or_default();
    let updates = |events: &[Value]| {
        events
            .iter()
            .filter(|e| {
                e["notification"]
                    .as_str()
                    .is_some_and(|n| n.contains("ResourceUpdated"))
            })
            .count()
    };
    let logs = |events: &[Value]| -> Vec<String> {
        events
            .iter()
            .filter_map(|e| e["log"]["data"].as_str().map(str::to_string))
            .collect()
    };
    // (the SDK hands progress to the call's callback and, again, to the
    // message handler)
    let progress = |events: &[Value]| {
        events
            .iter()
            .filter(|e| e.get("progress").is_some())
            .count()
    };
    let any_progress = |events: &[Value]| {
        events
            .iter()
            .filter(|e| {
                e["notification"]
                    .as_str()
                    .is_some_and(|n| n.contains("Progress"))
            })
            .count()
    };
    assert_eq!(
        any_progress(&a_events),
        0,
        "B's progress reached A: {a_events:?}"
    );
    assert_eq!(updates(&a_events), 1, "A subscribed: {a_events:?}");
    assert_eq!(updates(&b_events), 0, "B did not subscribe: {b_events:?}");
    assert_eq!(logs(&a_events), vec!["for everyone"], "{a_events:?}");
    assert_eq!(
        logs(&b_events),
        vec!["for everyone", "for B only"],
        "{b_events:?}"
    );
    assert_eq!(
        progress(&a_events),
        0,
        "B's progress reached A: {a_events:?}"
    );
    assert_eq!(progress(&b_events), 3, "{b_events:?}");

    let received = calls_received(&counter);
    assert!(
        !received.iter().any(|r| r.contains("secret")),
        "{received:?}"
    );
    // The upstream was asked for the lowest level any client wants.
    assert!(
        received.iter().any(|r| r == "logging/setlevel debug"),
        "{received:?}"
    );
    assert_chain_verifies(&world);
}

/// Two upstream servers: a resource URI goes to the one server that lists
/// it; a URI both list is refused as ambiguous (and not listed), one no
/// server claims as unknown; neither reaches a server, both are recorded.
/// Prompts are told apart by their gateway names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_uris_go_to_the_server_that_owns_them_and_never_a_guess() {
    let world = World::new();
    let (mut fa, counter_a) = world.counting_fixture();
    let mut fb = world.fixture();
    for (server, own) in [
        (&mut fa, "fixture://fa/only"),
        (&mut fb, "fixture://fb/only"),
    ] {
        if let Some(args) = server["args"].as_array_mut() {
            args.extend(["--legacy".into(), "--own-resource".into(), own.into()]);
        }
    }
    world.write_config(&json!({
        "mcpServers": {"fa": fa, "fb": fb},
        "permissions": {
            "allow": [
                "resource__fa(uri: fixture://**)", "resource__fb(uri: fixture://**)",
                "prompt__fa__greet", "prompt__fb__greet"
            ]
        },
        "audit": {"path": world.path("audit.jsonl")}
    }));
    let plan = json!({
        "env": stdio_env(&world),
        "steps": [
            {"list": "resources"},                                  // 0
            {"read": "fixture://fa/only"},                          // 1
            {"read": "fixture://fb/only"},                          // 2
            {"read": "fixture://notes/1"},                          // 3
            {"read": "fixture://nowhere"},                          // 4
            {"list": "prompts"},                                    // 5
            {"prompt": "fb__greet", "arguments": {"name": "Lin"}}   // 6
        ]
    });
    let out = run_gateway_client(&world, &plan, &stdio_target(&world, &[], &[])).await;

    let listed = ok(&out, 0);
    let listed: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(listed.contains(&"fixture://fa/only") && listed.contains(&"fixture://fb/only"));
    assert!(
        !listed.contains(&"fixture://notes/1"),
        "claimed twice: {listed:?}"
    );
    assert_eq!(text_contents(&ok(&out, 1)), vec!["own"]);
    assert_eq!(text_contents(&ok(&out, 2)), vec!["own"]);
    let ambiguous = error(&out, 3);
    assert!(ambiguous.contains("several servers"), "{ambiguous}");
    assert_eq!(out["steps"][3]["code"], -32602);
    let unknown = error(&out, 4);
    assert!(unknown.contains("no connected server"), "{unknown}");
    let prompts: Vec<String> = ok(&out, 5)
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    assert!(prompts.contains(&"fa__greet".into()) && prompts.contains(&"fb__greet".into()));
    assert_eq!(ok(&out, 6)["messages"][0]["content"]["text"], "Hello, Lin!");

    let received = calls_received(&counter_a);
    assert!(
        received
            .iter()
            .any(|r| r == "resources/read fixture://fa/only"),
        "{received:?}"
    );
    assert!(
        !received.iter().any(|r| r.contains("fb/only")),
        "{received:?}"
    );
    assert!(
        !received
            .iter()
            .any(|r| r.contains("notes/1") || r.contains("nowhere")),
        "{received:?}"
    );
    assert!(
        !received.iter().any(|r| r.starts_with("prompts/get")),
        "{received:?}"
    );
    let reads = requests(&world, "resource");
    let outcome = |uri: &str| {
        reads
            .iter()
            .find(|r| r["arguments"]["uri"] == uri)
            .map(|r| r["outcome"].clone())
    };
    assert_eq!(
        outcome("fixture://notes/1"),
        Some(json!("ambiguous_resource"))
    );
    assert_eq!(
        outcome("fixture://nowhere"),
        Some(json!("unknown_resource"))
    );
    let fb_read = reads
        .iter()
        .find(|r| r["arguments"]["uri"] == "fixture://fb/only")
        .expect("fb's read");
    assert_eq!(fb_read["server"], "fb");
    assert_eq!(fb_read["target"], "resource__fb");
    assert_chain_verifies(&world);
}

/// Resources denied outright: the gateway does not offer resources at all;
/// a read is still decided (and denied) and recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_denied_outright_are_not_offered() {
    let world = World::new();
    let (mut fixture, counter) = world.counting_fixture();
    if let Some(args) = fixture["args"].as_array_mut() {
        args.push("--legacy".into());
    }
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"deny": ["resource__fx"]},
        "audit": {"path": world.path("audit.jsonl")}
    }));
    let plan = json!({
        "env": stdio_env(&world),
        "steps": [{"read": "fixture://notes/1"}]
    });
    let out = run_gateway_client(&world, &plan, &stdio_target(&world, &[], &[])).await;
    assert!(out["capabilities"].get("resources").is_none(), "{out}");
    assert!(out["capabilities"]["prompts"].is_object(), "{out}");
    assert!(error(&out, 0).contains("Denied by warden's rules stage"));
    assert!(
        !calls_received(&counter)
            .iter()
            .any(|r| r.starts_with("resources/")),
        "{:?}",
        calls_received(&counter)
    );
    assert_eq!(requests(&world, "resource")[0]["outcome"], "denied");
}

/// One upstream server offering resources: a URI it neither lists nor
/// matches with a template is still refused as unknown, not sent to it on a
/// guess; what it lists is read as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sole_resource_server_is_not_sent_a_uri_it_never_claimed() {
    let world = World::new();
    let (fa, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fa": fa},
        "permissions": {"allow": ["resource__fa(uri: **)"]},
        "audit": {"path": world.path("audit.jsonl")}
    }));
    let plan = json!({
        "env": stdio_env(&world),
        "steps": [
            {"read": "fixture://notes/1"},        // 0: listed
            {"read": "file:///etc/passwd"},       // 1: claimed by nobody
            {"read": "fixture://nowhere"}         // 2: the fixture's scheme, unlisted
        ]
    });
    let out = run_gateway_client(&world, &plan, &stdio_target(&world, &[], &[])).await;
    assert!(!text_contents(&ok(&out, 0)).is_empty());
    for step in [1, 2] {
        let e = error(&out, step);
        assert!(e.contains("no connected server"), "step {step}: {e}");
    }
    let received = calls_received(&counter);
    assert!(
        received
            .iter()
            .any(|r| r == "resources/read fixture://notes/1"),
        "{received:?}"
    );
    assert!(
        !received
            .iter()
            .any(|r| r.contains("passwd") || r.contains("nowhere")),
        "{received:?}"
    );
    let reads = requests(&world, "resource");
    for uri in ["file:///etc/passwd", "fixture://nowhere"] {
        let record = reads
            .iter()
            .find(|r| r["arguments"]["uri"] == uri)
            .unwrap_or_else(|| panic!("no record of {uri}: {reads:?}"));
        assert_eq!(record["outcome"], "unknown_resource", "{record}");
    }
    assert_chain_verifies(&world);
}

/// Every client's `resources/subscribe` is decided and recorded, not only
/// the first's: the agent's client (no one may be asked for it) is refused
/// the read and the subscription of a URI the person's client subscribed
/// to with the person's approval, gets none of its updates, and its
/// unsubscribe, decided and refused alike, does not end the person's
/// subscription upstream. (A second
/// subscriber used to join the first's upstream subscription undecided,
/// unrecorded, and receive every update.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_clients_subscription_is_decided_and_recorded_like_the_first() {
    let world = World::new();
    let (mut fixture, counter) = world.counting_fixture();
    if let Some(args) = fixture["args"].as_array_mut() {
        args.push("--legacy".into());
    }
    // No rule for the notes: the shipped policy asks (an untrusted
    // server's resources), and only the person's client can be asked.
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__touch"]},
        "audit": {"path": world.path("audit.jsonl")}
    }));
    let gateway = listen_with(&world, &["--ask-client"]).await;
    let person = vec![
        gateway.url.clone(),
        gateway.ask_token.clone().expect("ask-client token"),
    ];
    let agent = vec![gateway.url.clone(), gateway.bearer()];
    let plan_person = json!({
        "answers": {"elicitation": {"action": "accept", "content": {"decision": "allow_once"}}},
        "steps": [
            {"subscribe": "fixture://notes/1"},                             // 0
            {"sleep": 9}                                                    // 1
        ]
    });
    let plan_agent = json!({"steps": [
        {"sleep": 3},                                                       // 0
        {"read": "fixture://notes/1"},                                      // 1
        {"subscribe": "fixture://notes/1"},                                 // 2
        {"unsubscribe": "fixture://notes/1"},                               // 3
        {"call": "fx__touch", "arguments": {"uri": "fixture://notes/1"}},   // 4
        {"sleep": 1}                                                        // 5
    ]});
    let (p, a) = tokio::join!(
        run_gateway_client(&world, &plan_person, &person),
        run_gateway_client(&world, &plan_agent, &agent)
    );
    // Both gone: the one upstream subscription ends with the person's.
    assert!(
        eventually(15.0, || calls_received(&counter)
            .iter()
            .any(|r| r == "resources/unsubscribe fixture://notes/1")),
        "{:?}",
        calls_received(&counter)
    );
    gateway.stop(&world).await;

    ok(&p, 0);
    // Its unsubscribe is decided like its subscribe (and refused alike).
    for step in [1, 2, 3] {
        let refused = error(&a, step);
        assert!(
            refused.contains("Denied by warden's") && refused.contains("no one could be asked"),
            "step {step}: {refused}"
        );
    }
    // The person's subscription outlived the agent's unsubscribe.
    assert!(
        ok(&a, 4).to_string().contains("updated sent: true"),
        "{}",
        ok(&a, 4)
    );
    let updates = |out: &Value| {
        out["events"]
            .as_array()
            .map(|events| {
                events
                    .iter()
                    .filter(|e| {
                        e["notification"]
                            .as_str()
                            .is_some_and(|n| n.contains("ResourceUpdated"))
                    })
                    .count()
            })
            .unwrap_or_default()
    };
    assert_eq!(updates(&p), 1, "the person's client subscribed: {p}");
    assert_eq!(updates(&a), 0, "the agent's client was refused: {a}");

    let received = calls_received(&counter);
    let count = |what: &str| received.iter().filter(|r| r.as_str() == what).count();
    assert_eq!(
        count("resources/subscribe fixture://notes/1"),
        1,
        "{received:?}"
    );
    assert_eq!(
        count("resources/unsubscribe fixture://notes/1"),
        1,
        "{received:?}"
    );
    assert!(
        !received.iter().any(|r| r.starts_with("resources/read")),
        "{received:?}"
    );

    // Each client's subscribe is on record with its own decision.
    let subscribes: Vec<Value> = requests(&world, "resource")
        .into_iter()
        .filter(|r| r["method"] == "resources/subscribe")
        .collect();
    assert_eq!(subscribes.len(), 2, "{subscribes:?}");
    assert!(
        subscribes.iter().any(|r| r["outcome"] == "pending"
            && r["decision"]["effect"] == "allow"
            && r["result"]["outcome"] == "ok"),
        "{subscribes:?}"
    );
    assert!(
        subscribes
            .iter()
            .any(|r| r["outcome"] == "denied" && r["decision"]["effect"] == "deny"),
        "{subscribes:?}"
    );
    // The agent's unsubscribe is on record, refused; warden's own release
    // of the person's share when it left, undecided.
    let unsubscribes: Vec<Value> = requests(&world, "resource")
        .into_iter()
        .filter(|r| r["method"] == "resources/unsubscribe")
        .collect();
    assert_eq!(unsubscribes.len(), 2, "{unsubscribes:?}");
    assert!(
        unsubscribes
            .iter()
            .any(|r| r["outcome"] == "denied" && r["decision"]["effect"] == "deny"),
        "{unsubscribes:?}"
    );
    assert!(
        unsubscribes
            .iter()
            .any(|r| r["decision"].is_null() && r["result"]["outcome"] == "ok"),
        "{unsubscribes:?}"
    );
    assert_chain_verifies(&world);
}

/// `completion/complete` is the server's data: decided like the request
/// it prepares (a prompt argument's like `prompts/get` on the arguments
/// known so far, a template's like a read of the template) and recorded,
/// never passed on undecided; a template every expansion of which a deny
/// rule covers is not listed, and completing it is refused like reading
/// an unknown URI; an `ask` on a completion is a deny, never a question.
/// `logging/setLevel` is recorded (kind `logging`), and a log message
/// names its server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_is_decided_and_recorded_and_set_level_is_recorded() {
    let world = World::new();
    let (mut fixture, counter) = world.counting_fixture();
    if let Some(args) = fixture["args"].as_array_mut() {
        args.push("--legacy".into());
    }
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {
            "allow": [
                "prompt__fx__greet",
                "resource__fx(uri: fixture://items/**)",
                "mcp__fx__log"
            ],
            "deny": [
                "prompt__fx__greet(name: Mal*)",
                "resource__fx(uri: fixture://wait/**)"
            ]
        },
        "audit": {"path": world.path("audit.jsonl")}
    }));
    let plan = json!({
        "env": stdio_env(&world),
        "steps": [
            {"list": "templates"},                                                        // 0
            {"complete_prompt": "fx__greet", "argument": "name", "value": "A"},           // 1
            {"complete_prompt": "fx__greet", "argument": "name", "value": "Mal"},         // 2
            {"complete_resource": "fixture://wait/{ms}", "argument": "ms", "value": "1"}, // 3
            {"complete_resource": "fixture://items/{id}", "argument": "id", "value": "7"}, // 4
            {"set_level": "info"},                                                        // 5
            {"call": "fx__log", "arguments": {"level": "warning", "message": "loud"}},    // 6
            {"sleep": 0.3},                                                               // 7
            {"complete_prompt": "fx__review", "argument": "file", "value": "a"}           // 8
        ]
    });
    let out = run_gateway_client(&world, &plan, &stdio_target(&world, &[], &[])).await;

    assert_eq!(
        ok(&out, 0),
        json!(["fixture://items/{id}"]),
        "wait is denied"
    );
    assert_eq!(ok(&out, 1)["completion"]["values"], json!(["Ada", "Alan"]));
    let mallory = error(&out, 2);
    assert!(
        mallory.contains("Denied by warden's rules stage") && mallory.contains("Mal*"),
        "{mallory}"
    );
    let hidden = error(&out, 3);
    assert!(hidden.contains("no connected server lists"), "{hidden}");
    assert_eq!(out["steps"][3]["code"], -32602);
    assert_eq!(ok(&out, 4)["completion"]["values"], json!([]));
    // No rule for `review`: the shipped policy asks, and a completion is
    // never put to anyone.
    let unruled = error(&out, 8);
    assert!(
        unruled.contains("never put to the person") && unruled.contains("allow"),
        "{unruled}"
    );
    let loud: Vec<Value> = events_after(&out, 6)
        .into_iter()
        .filter_map(|e| e.get("log").cloned())
        .filter(|log| log["data"] == "loud")
        .collect();
    assert_eq!(loud.len(), 1, "{out}");
    assert_eq!(loud[0]["logger"], "fx/fixture", "the server named first");

    // Only the two allowed completions reached the server.
    let received = calls_received(&counter);
    assert_eq!(
        received
            .iter()
            .filter(|r| r.as_str() == "completion/complete")
            .count(),
        2,
        "{received:?}"
    );
    assert!(
        received.iter().any(|r| r == "logging/setlevel info"),
        "{received:?}"
    );

    // Each completion on record, decided as its kind.
    let completions = |kind: &str| -> Vec<Value> {
        requests(&world, kind)
            .into_iter()
            .filter(|r| r["method"] == "completion/complete")
            .collect()
    };
    let prompts = completions("prompt");
    assert_eq!(prompts.len(), 3, "{prompts:?}");
    let allowed = prompts
        .iter()
        .find(|r| r["arguments"] == json!({"name": "A"}))
        .expect("the allowed completion");
    assert_eq!(allowed["target"], "prompt__fx__greet");
    assert_eq!(allowed["outcome"], "pending");
    assert_eq!(allowed["decision"]["effect"], "allow");
    assert_eq!(allowed["result"]["outcome"], "ok");
    assert!(allowed["result"]["result_sha256"].is_string());
    let denied = prompts
        .iter()
        .find(|r| r["arguments"] == json!({"name": "Mal"}))
        .expect("the denied completion");
    assert_eq!(denied["outcome"], "denied");
    assert_eq!(denied["decision"]["stage"], "rules");
    let templates = completions("resource");
    assert_eq!(templates.len(), 2, "{templates:?}");
    let unknown = templates
        .iter()
        .find(|r| r["arguments"]["template"] == "fixture://wait/{ms}")
        .expect("the hidden template's completion");
    assert_eq!(unknown["outcome"], "unknown_resource");
    let items = templates
        .iter()
        .find(|r| r["arguments"]["template"] == "fixture://items/{id}")
        .expect("the template's completion");
    // Decided on the URI the completion prepares.
    assert_eq!(items["arguments"]["uri"], "fixture://items/7");
    assert_eq!(items["target"], "resource__fx");
    assert_eq!(
        items["arguments"]["argument"],
        json!({"name": "id", "value": "7"})
    );
    assert_eq!(items["result"]["outcome"], "ok");

    // logging/setLevel: written ahead, undecided, with its result.
    let levels = requests(&world, "logging");
    assert_eq!(levels.len(), 1, "{levels:?}");
    let level = &levels[0];
    assert_eq!(level["method"], "logging/setLevel");
    assert_eq!(level["target"], "logging__fx");
    assert_eq!(level["server"], "fx");
    assert_eq!(level["caller"], "gateway");
    assert_eq!(level["arguments"], json!({"level": "info"}));
    assert!(level["decision"].is_null(), "{level}");
    assert_eq!(level["outcome"], "pending");
    assert_eq!(level["result"]["outcome"], "ok");
    assert_chain_verifies(&world);
}

/// A server whose every tool, resource and prompt the rules deny has
/// nothing a client may see, its log messages included (they carry its
/// data to the model, in or outside a call): they are dropped, while
/// another server's pass, named. What no client could use is not
/// offered: prompts and completion when every prompt and resource is
/// denied, logging when no server that logs has anything allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fully_denied_servers_log_messages_are_dropped_and_its_capabilities_not_offered() {
    let world = World::new();
    let server = |name: &str| {
        let mut fixture = world.fixture();
        if let Some(args) = fixture["args"].as_array_mut() {
            args.extend(["--legacy".into(), "--announce-level".into()]);
        }
        (name.to_string(), fixture)
    };
    let (fx, fy) = (server("fx"), server("fy"));
    world.write_config(&json!({
        "mcpServers": {fx.0: fx.1, fy.0: fy.1},
        "permissions": {
            "allow": ["mcp__fy__log"],
            "deny": [
                "mcp__fx__*", "resource__fx", "prompt__fx",
                "resource__fy", "prompt__fy__*"
            ]
        },
        "audit": {"path": world.path("audit.jsonl")}
    }));
    let plan = json!({
        "env": stdio_env(&world),
        "steps": [
            {"list": "tools"},                                                         // 0
            {"set_level": "debug"},                                                    // 1
            {"sleep": 0.5},                                                            // 2
            {"call": "fy__log", "arguments": {"level": "info", "message": "from fy"}}, // 3
            {"sleep": 0.3}                                                             // 4
        ]
    });
    let out = run_gateway_client(&world, &plan, &stdio_target(&world, &[], &[])).await;

    let caps = &out["capabilities"];
    for absent in ["resources", "prompts", "completions"] {
        assert!(caps.get(absent).is_none(), "{absent} offered: {caps}");
    }
    assert!(caps["logging"].is_object(), "fy logs: {caps}");
    let tools = ok(&out, 0);
    let tools: Vec<&str> = tools
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(tools.contains(&"fy__log"), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("fx__")), "{tools:?}");

    let logs: Vec<Value> = out["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter_map(|e| e.get("log").cloned())
                .collect()
        })
        .unwrap_or_default();
    let announced: Vec<&Value> = logs
        .iter()
        .filter(|l| {
            l["data"]
                .as_str()
                .is_some_and(|d| d.ends_with("set the level"))
        })
        .collect();
    assert_eq!(
        announced.len(),
        1,
        "only fy's announcement passes: {logs:?}"
    );
    assert_eq!(announced[0]["logger"], "fy/fixture");
    assert!(
        logs.iter()
            .any(|l| l["data"] == "from fy" && l["logger"] == "fy/fixture"),
        "{logs:?}"
    );
    assert!(
        !logs
            .iter()
            .any(|l| l["logger"].as_str().is_some_and(|n| n.starts_with("fx"))),
        "{logs:?}"
    );
    // Both servers were asked for the level, and both asks recorded.
    let levels = requests(&world, "logging");
    let targets: Vec<&str> = levels.iter().filter_map(|r| r["target"].as_str()).collect();
    assert!(
        targets.contains(&"logging__fx") && targets.contains(&"logging__fy"),
        "{levels:?}"
    );
    assert_chain_verifies(&world);
}
