//! A server's own requests (CONTRACT §8) through the real gateway: the
//! official Python SDK client (tests/python/gateway_client.py, answering
//! from its plan) runs `warden gateway --stdio` in front of the Python
//! conformance fixture (tests/python/conformance_fixture_server.py), whose
//! tools send `elicitation/create`, `sampling/createMessage` and
//! `roots/list` to their client.
//!
//! Checked: elicitations reach the client that made the call with message,
//! schema, defaults and enums unchanged, and its answer reaches the server;
//! allowed sampling is passed on; `roots/list` is the workspace only (and
//! recorded, as warden's own answer); with
//! `--ci` elicitation is declined and unruled sampling denied, a sampling
//! request above `sampling.max_tokens` refused, none of them reaching the
//! client; each one recorded (`request` written ahead, `request_result` with
//! the answer's digest and never its content).

mod gateway_support;

use gateway_support::{
    World, audit_lines, audit_path, eventually, interpreter_prefix, python_scripts, python_venv,
    requests, run_gateway_client, stdio_target,
};
use serde_json::{Value, json};

/// The conformance fixture as server `fx`, with `extra` keys merged in.
fn config(world: &World, extra: Value, permissions: Value) -> Value {
    let venv = python_venv();
    let mut fx = json!({
        "command": venv.join("bin/python"),
        "args": [python_scripts().join("conformance_fixture_server.py"), "--marker", world.marker],
        "timeout": 30,
        "sandbox": {"read": [venv, interpreter_prefix(&venv), python_scripts()]}
    });
    if let (Some(fx), Some(extra)) = (fx.as_object_mut(), extra.as_object()) {
        fx.extend(extra.clone());
    }
    json!({
        "mcpServers": {"fx": fx},
        "permissions": permissions,
        "audit": {"path": world.path("audit.jsonl")}
    })
}

/// Runs the Python client with `plan` against `warden GLOBAL… gateway --stdio`.
async fn run_client(world: &World, global: &[&str], plan: &Value) -> Value {
    run_client_with(world, global, &[], plan).await
}

/// [`run_client`] with `gateway --stdio GATEWAY…`.
async fn run_client_with(world: &World, global: &[&str], gateway: &[&str], plan: &Value) -> Value {
    run_gateway_client(world, plan, &stdio_target(world, global, gateway)).await
}

fn step_text(out: &Value, n: usize) -> String {
    let step = &out["steps"][n];
    let ok = step
        .get("ok")
        .unwrap_or_else(|| panic!("step {n} failed: {step}"));
    ok["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("step {n} has no text: {step}"))
        .to_string()
}

/// What the client was asked, in order.
fn asked(out: &Value) -> Vec<Value> {
    out["events"]
        .as_array()
        .map(|e| e.iter().filter_map(|e| e.get("asked").cloned()).collect())
        .unwrap_or_default()
}

fn no_leftovers(world: &World) {
    assert!(
        eventually(10.0, || world.leftover_processes().is_empty()),
        "left behind: {:?}",
        world.leftover_processes()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_sampling_and_roots_reach_the_client_that_made_the_call() {
    let world = World::new();
    world.write_config(&config(
        &world,
        json!({}),
        json!({"allow": ["mcp__fx__*", "sampling__fx"]}),
    ));
    let plan = json!({
        "answers": {
            "elicitation": {"action": "accept", "content": {"name": "Ada Secretvalue", "age": 36}},
            "sampling": {"text": "sampled-answer"}
        },
        "steps": [
            {"call": "fx__test_elicitation_sep1034_defaults"},   // 0
            {"call": "fx__test_elicitation_sep1330_enums"},      // 1
            {"call": "fx__test_sampling", "arguments": {"prompt": "say hi"}}, // 2
            {"call": "fx__test_roots"}                           // 3
        ]
    });
    let out = run_client(&world, &[], &plan).await;
    let asked = asked(&out);
    assert_eq!(asked.len(), 3, "{asked:?}");

    // The schema as the server sent it: defaults and enums unchanged.
    let first = &asked[0]["elicitation"];
    assert_eq!(
        first["message"],
        "Please provide user information (defaults given)"
    );
    let props = &first["requestedSchema"]["properties"];
    assert_eq!(props["name"]["default"], "John Doe", "{first}");
    assert_eq!(props["age"]["default"], 30, "{first}");
    assert_eq!(props["score"]["default"], 95.5, "{first}");
    assert_eq!(props["status"]["default"], "active", "{first}");
    assert_eq!(
        props["status"]["enum"],
        json!(["active", "inactive", "pending"])
    );
    assert_eq!(props["verified"]["default"], true, "{first}");
    let enums = &asked[1]["elicitation"]["requestedSchema"]["properties"];
    assert_eq!(
        enums["untitledSingle"]["enum"],
        json!(["option1", "option2", "option3"])
    );
    assert_eq!(
        enums["titledSingle"]["oneOf"][1]["const"], "value2",
        "{enums}"
    );
    assert_eq!(
        enums["legacyEnum"]["enumNames"],
        json!(["Option One", "Option Two", "Option Three"])
    );
    assert_eq!(
        enums["untitledMulti"]["items"]["enum"],
        json!(["option1", "option2", "option3"])
    );
    assert_eq!(
        enums["titledMulti"]["items"]["anyOf"][2]["title"],
        "Third Choice"
    );

    // The client's answer reached the server unchanged.
    let answered = step_text(&out, 0);
    assert!(answered.contains("action=accept"), "{answered}");
    assert!(answered.contains("Ada Secretvalue"), "{answered}");
    assert!(answered.contains("36"), "{answered}");

    // Sampling, allowed by the rule, went to the client.
    assert_eq!(asked[2]["sampling"]["maxTokens"], 100);
    assert!(
        step_text(&out, 2).contains("sampled-answer"),
        "{}",
        step_text(&out, 2)
    );

    // roots/list: the workspace and nothing else.
    let roots: Value = serde_json::from_str(&step_text(&out, 3)).expect("roots JSON");
    let roots = roots["roots"].as_array().cloned().unwrap_or_default();
    assert_eq!(roots.len(), 1, "{roots:?}");
    let workspace = std::fs::canonicalize(&world.workspace).unwrap_or(world.workspace.clone());
    let uri = roots[0]["uri"].as_str().unwrap_or_default();
    assert!(
        uri.trim_end_matches('/')
            .ends_with(&workspace.display().to_string())
            || uri
                .trim_end_matches('/')
                .ends_with(&world.workspace.display().to_string()),
        "{uri} is not the workspace {}",
        world.workspace.display()
    );

    // Recorded: written ahead, answered, the answer's digest only.
    let elicitations = requests(&world, "elicitation");
    assert_eq!(elicitations.len(), 2, "{elicitations:?}");
    for r in &elicitations {
        assert_eq!(r["target"], "elicitation__fx", "{r}");
        assert_eq!(r["outcome"], "pending", "{r}");
        assert_eq!(r["result"]["outcome"], "ok", "{r}");
        assert!(r["result"]["result_sha256"].is_string(), "{r}");
    }
    let samplings = requests(&world, "sampling");
    assert_eq!(samplings.len(), 1, "{samplings:?}");
    assert_eq!(samplings[0]["target"], "sampling__fx");
    assert_eq!(samplings[0]["result"]["outcome"], "ok");
    // roots/list is warden's own answer, recorded all the same (the
    // workspace's path left warden), undecided.
    let roots = requests(&world, "roots");
    assert_eq!(roots.len(), 1, "{roots:?}");
    assert_eq!(roots[0]["target"], "roots__fx");
    assert_eq!(roots[0]["method"], "roots/list");
    assert_eq!(roots[0]["outcome"], "pending");
    assert!(roots[0]["decision"].is_null(), "{}", roots[0]);
    assert_eq!(roots[0]["result"]["outcome"], "ok");
    assert_eq!(roots[0]["result"]["answered_by"], "warden");
    assert!(roots[0]["result"]["result_sha256"].is_string());
    let log = std::fs::read_to_string(audit_path(&world)).expect("audit log");
    assert!(
        !log.contains("Secretvalue"),
        "an answer's content is in the log"
    );
    assert!(
        !log.contains("sampled-answer"),
        "a sampled answer is in the log"
    );
    no_leftovers(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_ci_elicitation_is_declined_and_sampling_denied_or_capped_never_reaching_the_client() {
    let world = World::new();
    world.write_config(&config(
        &world,
        json!({"sampling": {"max_tokens": 50}}),
        json!({"allow": ["mcp__fx__*"]}),
    ));
    let plan = json!({
        "answers": {
            "elicitation": {"action": "accept", "content": {"username": "u", "email": "e"}},
            "sampling": {"text": "never"}
        },
        "steps": [
            {"call": "fx__test_elicitation", "arguments": {"message": "who are you?"}}, // 0
            {"call": "fx__test_sampling", "arguments": {"prompt": "say hi"}}             // 1
        ]
    });
    let out = run_client(&world, &["--ci"], &plan).await;
    assert!(asked(&out).is_empty(), "{:?}", asked(&out));
    let declined = step_text(&out, 0);
    assert!(declined.contains("action=decline"), "{declined}");
    let elicitations = requests(&world, "elicitation");
    assert_eq!(
        elicitations.len(),
        1,
        "{:?}",
        audit_lines(&audit_path(&world))
    );
    assert_eq!(elicitations[0]["outcome"], "denied");
    assert_eq!(elicitations[0]["decision"]["effect"], "deny");
    let why = elicitations[0]["error"].as_str().unwrap_or_default();
    assert!(why.contains("--ci"), "{why}");
    // Sampling: no rule, so ask, and with --ci a deny.
    let samplings = requests(&world, "sampling");
    assert_eq!(samplings.len(), 1, "{samplings:?}");
    assert_eq!(samplings[0]["outcome"], "denied");
    assert!(samplings[0]["result"].is_null(), "never sent");
    no_leftovers(&world);

    // Allowed by a rule, but above sampling.max_tokens (50 < 100): refused.
    let world = World::new();
    world.write_config(&config(
        &world,
        json!({"sampling": {"max_tokens": 50}}),
        json!({"allow": ["mcp__fx__*", "sampling__fx"]}),
    ));
    let plan = json!({
        "answers": {"sampling": {"text": "never"}},
        "steps": [{"call": "fx__test_sampling", "arguments": {"prompt": "say hi"}}]
    });
    let out = run_client(&world, &["--ci"], &plan).await;
    assert!(asked(&out).is_empty(), "{:?}", asked(&out));
    let samplings = requests(&world, "sampling");
    assert_eq!(samplings.len(), 1, "{samplings:?}");
    assert_eq!(samplings[0]["outcome"], "denied");
    assert_eq!(samplings[0]["decision"]["effect"], "allow");
    let why = samplings[0]["error"].as_str().unwrap_or_default();
    assert!(why.contains("sampling.max_tokens 50"), "{why}");
    no_leftovers(&world);
}

/// `warden run`: allowed sampling is answered by the session's own model
/// (here a scripted one), and recorded like the gateway's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warden_run_answers_allowed_sampling_with_its_own_model() {
    let world = World::new();
    world.write_config(&config(
        &world,
        json!({}),
        json!({"allow": ["mcp__fx__*", "sampling__fx"]}),
    ));
    let script = world.path("model.json");
    std::fs::write(
        &script,
        json!([
            {"tool_calls": [{"name": "mcp__fx__test_sampling", "arguments": {"prompt": "say hi"}}]},
            {"text": "sampled-by-model"},
            {"expect": "sampled-by-model", "text": "done"}
        ])
        .to_string(),
    )
    .expect("write script");
    let model = format!("scripted:{}", script.display());
    let out = tokio::task::spawn_blocking({
        let mut cmd = world.warden(&[
            "--ci",
            "--json",
            "--model",
            &model,
            "run",
            "--task",
            "sample once",
        ]);
        move || cmd.output()
    })
    .await
    .expect("join")
    .expect("run warden");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let samplings = requests(&world, "sampling");
    assert_eq!(samplings.len(), 1, "{samplings:?}");
    assert_eq!(samplings[0]["outcome"], "pending");
    assert_eq!(samplings[0]["caller"], "model");
    assert_eq!(samplings[0]["result"]["outcome"], "ok");
    assert!(
        stdout.contains("LLM response: sampled-by-model"),
        "{stdout}"
    );
    no_leftovers(&world);
}

/// Sampling with no rule is `ask`: with `--ask-client` the gateway puts it
/// to the client (the person's) as an elicitation first, records the answer
/// as an `approval`, then passes the request on; without `--ask-client` it
/// is refused unasked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_ask_goes_to_the_persons_client_first() {
    let world = World::new();
    world.write_config(&config(&world, json!({}), json!({"allow": ["mcp__fx__*"]})));
    let plan = json!({
        "answers": {
            "elicitation": {"action": "accept", "content": {"decision": "allow_once"}},
            "sampling": {"text": "sampled-after-asking"}
        },
        "steps": [{"call": "fx__test_sampling", "arguments": {"prompt": "say hi"}}]
    });
    let out = run_client_with(&world, &[], &["--ask-client"], &plan).await;
    let questions = asked(&out);
    assert_eq!(questions.len(), 2, "{questions:?}");
    let question = questions[0]["elicitation"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        question.contains("sampling request") && question.contains("sampling/createMessage"),
        "{question}"
    );
    assert_eq!(questions[1]["sampling"]["maxTokens"], 100, "{questions:?}");
    assert!(step_text(&out, 0).contains("sampled-after-asking"));
    let sampled = requests(&world, "sampling");
    assert_eq!(sampled.len(), 1, "{sampled:?}");
    assert_eq!(sampled[0]["decision"]["effect"], "ask");
    assert_eq!(sampled[0]["result"]["answered_by"], "client");
    let approval = audit_lines(&audit_path(&world))
        .into_iter()
        .find(|r| r["event"] == "approval" && r["subject"] == "sampling__fx")
        .expect("the answer recorded");
    assert_eq!(approval["action"], "allow_once");
    assert_eq!(approval["call_id"], sampled[0]["call_id"]);

    // Without --ask-client nobody may be asked: refused, the client never
    // sees the request.
    let world = World::new();
    world.write_config(&config(&world, json!({}), json!({"allow": ["mcp__fx__*"]})));
    let out = run_client(&world, &[], &plan).await;
    assert!(asked(&out).is_empty(), "{out}");
    let sampled = requests(&world, "sampling");
    assert_eq!(sampled[0]["outcome"], "denied");
    assert!(
        sampled[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("--ask-client")),
        "{}",
        sampled[0]
    );
    no_leftovers(&world);
}
