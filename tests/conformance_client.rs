//! The official MCP conformance suite's client scenarios
//! (npm `@modelcontextprotocol/conformance`, `conformance client`) with
//! warden as the client: the suite starts its test server and runs
//! tests/conformance/client-adapter.sh with the server's URL as the last
//! argument and the scenario in `MCP_CONFORMANCE_SCENARIO`; the adapter
//! writes a warden configuration for that URL and runs the real `warden`
//! binary (`warden call`, with `--answers` where the scenario needs a
//! person's answer).
//!
//! The suite is the one scripts/test-deps.sh installs in tests/conformance
//! (with a Node 22 binary beside it), or the `conformance` executable
//! `WARDEN_CONFORMANCE_BIN` names; where neither is there, or no Node ≥ 22
//! is found, this prints SKIPPED and passes. `KNOWN_FAILURES` lists the
//! scenarios expected to fail (none today), checked both ways so that a
//! change shows up. The `auth/*` scenarios are for the OAuth work (the
//! adapter has a case for them).

mod conformance_support;
mod gateway_support;

use std::path::Path;
use std::time::Duration;

use gateway_support::cli_support::WARDEN;
use gateway_support::{World, audit_lines};
use serde_json::Value;

/// The scenarios run, all of spec 2025-11-25.
const SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
];

/// Scenarios that do not pass today, and why.
const KNOWN_FAILURES: &[&str] = &[];

/// One scenario's result: passed, and what the suite said otherwise.
async fn run_scenario(world: &World, suite: &Path, path: &str, scenario: &str) -> (bool, String) {
    let adapter = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/client-adapter.sh");
    let out = world.path(&format!("out-{}", scenario.replace('/', "_")));
    let audit = world.path(&format!("audit-{}.jsonl", scenario.replace('/', "_")));
    let run = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("setsid")
            .arg(suite)
            .args(["client", "--command"])
            .arg(&adapter)
            .args(["--scenario", scenario, "-o"])
            .arg(&out)
            .env("PATH", path)
            .env("HOME", &world.home)
            .env("WARDEN_CONFIG_DIR", &world.config_dir)
            .env("TMPDIR", world.dir.path())
            .env("WARDEN_BIN", WARDEN)
            .env("WARDEN_CONFORMANCE_AUDIT", &audit)
            .env_remove("RUST_LOG")
            .env_remove("WARDEN_AUDIT_KEY")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the suite finishes in time")
    .expect("run the suite");
    let checks: Vec<Value> = std::fs::read_dir(&out)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("checks.json")).ok())
        .flat_map(|text| serde_json::from_str::<Vec<Value>>(&text).unwrap_or_default())
        .collect();
    let bad: Vec<String> = checks
        .iter()
        .filter(|c| c["status"] == "FAILURE" || c["status"] == "WARNING")
        .map(|c| format!("{}: {}", c["id"], c["errorMessage"]))
        .collect();
    let passed = run.status.success() && !checks.is_empty() && bad.is_empty();
    let said = format!(
        "{}\n{}\n{}",
        bad.join("\n"),
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    (passed, said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_conformance_client_scenarios_against_warden() {
    let Some((suite, path)) = conformance_support::suite() else {
        eprintln!("{}", conformance_support::NOT_INSTALLED);
        return;
    };
    let world = World::new();
    let mut unexpected = Vec::new();
    for scenario in SCENARIOS {
        let (passed, said) = run_scenario(&world, &suite, &path, scenario).await;
        eprintln!("{scenario}: {}", if passed { "passed" } else { "FAILED" });
        let known = KNOWN_FAILURES.contains(scenario);
        if passed == known {
            unexpected.push(format!(
                "{scenario}: {} ({})",
                if passed {
                    "passes now: take it off KNOWN_FAILURES"
                } else {
                    "fails"
                },
                said
            ));
        }
    }
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n\n"));

    // The elicitation was answered by the answers file the adapter gave,
    // and recorded as such (digest, never the content).
    let records = audit_lines(&world.path("audit-elicitation-sep1034-client-defaults.jsonl"));
    let answered = records
        .iter()
        .find(|r| r["event"] == "request_result" && r["kind"] == "elicitation")
        .unwrap_or_else(|| panic!("no elicitation result recorded: {records:#?}"));
    assert_eq!(answered["outcome"], "ok");
    assert!(
        answered["answered_by"]
            .as_str()
            .is_some_and(|by| by.starts_with("file:/") && by.ends_with("/answers.json")),
        "{answered}"
    );
    assert_eq!(answered["result_sha256"].as_str().map(str::len), Some(64));
}
