//! The first command of the README, `warden demo`, runs to the end with
//! every check held: servers really sandboxed, calls really decided, the
//! audit log really verified. Run as warden would be: its own HOME and
//! TMPDIR, nothing left behind.

use std::process::Command;

use serde_json::Value;

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

#[test]
fn the_demo_holds_every_check() {
    let dir = tempfile::Builder::new()
        .prefix("warden-demo-test-")
        .tempdir()
        .expect("tempdir");
    let out = Command::new(WARDEN)
        .args(["--json", "demo"])
        .env("HOME", dir.path())
        .env("TMPDIR", dir.path())
        .env("WARDEN_CONFIG_DIR", dir.path().join("config"))
        .env_remove("RUST_LOG")
        .env_remove("WARDEN_AUDIT_KEY")
        .output()
        .expect("run the demo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["ok"], true, "{report}\n{stderr}");
    assert!(
        report["checks"].as_u64().is_some_and(|n| n >= 20),
        "{report}"
    );
    assert_eq!(report["failed"], serde_json::json!([]), "{report}");
    // The sandbox's own proof, as the person watching reads it.
    for claim in [
        "the sandbox refused to read the file behind it",
        "the sandbox hid the audit log there",
        "audit chain verified",
    ] {
        assert!(stderr.contains(claim), "missing `{claim}`:\n{stderr}");
    }
    // The demo's folder and the session's runtime folder are gone with it.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("warden-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
