//! The official MCP conformance suite's OAuth client scenarios
//! (npm `@modelcontextprotocol/conformance`, `conformance client`) with
//! warden as the client, through tests/conformance/client-adapter.sh (which
//! hands these to tests/conformance/auth-adapter.sh): a
//! configuration for the suite's server, `warden mcp login` with `BROWSER`
//! set to a script that follows the authorization URL, then `warden call`.
//! The suite's servers are real loopback HTTP servers (its own protected
//! MCP server and authorization server, which approves at once); it
//! records what warden sent and judges it.
//!
//! Every `auth/*` scenario of spec 2025-11-25 runs, plus the two 2025-03-26
//! back-compat ones and `auth/resource-mismatch` (draft: a protected
//! resource whose metadata names another resource must be refused before
//! any authorization request). A scenario passes when the suite exits 0
//! (no failure, no warning). `KNOWN_FAILURES` lists those that do not, with
//! the reason, and is checked both ways.
//!
//! The suite is the one scripts/test-deps.sh installs in tests/conformance
//! (with a Node 22 binary), or the `conformance` executable
//! `WARDEN_CONFORMANCE_BIN` names; without it (or Node ≥ 22) the test
//! prints SKIPPED and passes.

mod conformance_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

const SCENARIOS: &[&str] = &[
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
];

/// Scenarios that do not pass today, and why.
const KNOWN_FAILURES: &[(&str, &str)] = &[(
    "auth/2025-03-26-oauth-metadata-backcompat",
    "the scenario serves authorization-server metadata at the server's root \
     `/.well-known/oauth-authorization-server` whose `issuer` is `<origin>/oauth`; RFC 8414 \
     §3.3 requires the issuer to be the one the well-known URL was built from (the origin), \
     rmcp enforces that (it guards against authorization-server mix-up) and warden does not \
     relax it. The other 2025-03-26 scenario (no metadata, default endpoints) passes.",
)];

/// The first check the suite counted against the client, if any.
fn first_problem(dir: &Path) -> Option<String> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()?.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "checks.json") {
                let checks: Vec<Value> =
                    serde_json::from_str(&std::fs::read_to_string(&p).ok()?).ok()?;
                return checks
                    .iter()
                    .find(|c| c["status"] == "FAILURE" || c["status"] == "WARNING")
                    .map(|c| {
                        format!(
                            "{} {}: {}",
                            c["status"].as_str().unwrap_or("?"),
                            c["id"].as_str().unwrap_or("?"),
                            c["description"].as_str().unwrap_or("?")
                        )
                    });
            }
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_conformance_auth_scenarios_with_warden_as_the_client() {
    let Some((suite, path)) = conformance_support::suite() else {
        eprintln!("{}", conformance_support::NOT_INSTALLED);
        return;
    };
    // The one adapter every client scenario goes through; it hands the
    // `auth/*` ones to auth-adapter.sh.
    let adapter = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/client-adapter.sh");
    let scratch = tempfile::tempdir().expect("tempdir");
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).expect("home");

    // scenario → (passed, why not)
    let mut results: BTreeMap<&str, (bool, String)> = BTreeMap::new();
    for (i, scenario) in SCENARIOS.iter().enumerate() {
        let out = scratch.path().join(format!("out-{i}"));
        let run = tokio::time::timeout(
            Duration::from_secs(120),
            tokio::process::Command::new(&suite)
                .arg("client")
                .arg("--command")
                .arg(format!("bash {}", adapter.display()))
                .args(["--scenario", scenario, "--timeout", "60000", "-o"])
                .arg(&out)
                .env("PATH", &path)
                .env("HOME", &home)
                .env("WARDEN_BIN", env!("CARGO_BIN_EXE_warden"))
                .env_remove("BROWSER")
                .env_remove("WARDEN_CONFIG_DIR")
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("the scenario finishes")
        .expect("run the suite");
        let passed = run.status.success();
        let why = if passed {
            String::new()
        } else {
            first_problem(&out).unwrap_or_else(|| {
                let stderr = String::from_utf8_lossy(&run.stderr);
                stderr
                    .lines()
                    .rev()
                    .take(15)
                    .collect::<Vec<_>>()
                    .join(" | ")
            })
        };
        eprintln!(
            "{scenario}: {}{}",
            if passed { "pass" } else { "FAIL" },
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        );
        results.insert(scenario, (passed, why));
    }

    let known = |name: &str| KNOWN_FAILURES.iter().any(|(n, _)| *n == name);
    let unexpected: Vec<_> = results
        .iter()
        .filter(|(name, (passed, _))| !passed && !known(name))
        .collect();
    assert!(unexpected.is_empty(), "failed: {unexpected:#?}");
    let fixed: Vec<_> = results
        .iter()
        .filter(|(name, (passed, _))| *passed && known(name))
        .map(|(name, _)| name)
        .collect();
    assert!(
        fixed.is_empty(),
        "now passing, take them off KNOWN_FAILURES: {fixed:?}"
    );
    for (name, _) in KNOWN_FAILURES {
        assert!(results.contains_key(name), "{name} is not run");
    }
}
