//! Nobody cuts the log short unnoticed: logs written by real `warden call`
//! sessions, then cut, rewritten, or recomputed without their key, are
//! caught by `warden audit verify` with the right `seq` or reason; `warden
//! audit head` prints the head to keep elsewhere, and `verify --head`
//! checks against it.

mod cli_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use cli_support::{World, audit_lines, stderr};
use serde_json::{Value, json};

const KEY: &str = "a key of at least sixteen bytes, for tests";

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Three sessions of one call each into one log; `key`: WARDEN_AUDIT_KEY.
fn world_with_log(key: Option<&str>) -> (World, PathBuf) {
    let world = World::new();
    let log = world.path("audit.jsonl");
    world.write_config(&json!({
        "mcpServers": {"fx": world.fixture()},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": log},
    }));
    for i in 0..3 {
        let mut cmd = world.warden(&["call", "fx", "echo", "--args", &json!({"i": i}).to_string()]);
        if let Some(key) = key {
            cmd.env("WARDEN_AUDIT_KEY", key);
        }
        let output = cmd.output().expect("run warden");
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }
    (world, log)
}

fn verify(world: &World, log: &Path, extra: &[&str], key: Option<&str>) -> Output {
    let mut args = vec!["audit", "verify", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut cmd = world.warden(&args);
    if let Some(key) = key {
        cmd.env("WARDEN_AUDIT_KEY", key);
    }
    cmd.output().expect("run warden")
}

fn write_lines(path: &Path, records: &[Value]) {
    let text: String = records
        .iter()
        .map(|r| warden_core::digest::canonical_json(r) + "\n")
        .collect();
    std::fs::write(path, text).unwrap();
}

/// Recomputes every `prev` and `hash` with plain SHA-256: what someone who
/// can write the file, but lacks any key, can do.
fn rechain_plain(records: &mut [Value]) {
    let mut prev = warden_audit::ZERO_HASH.to_string();
    for record in records.iter_mut() {
        let map = record.as_object_mut().unwrap();
        map.remove("hash");
        map.insert("alg".into(), json!("sha256"));
        map.insert("prev".into(), json!(prev));
        let hash = warden_core::digest::sha256_json(&Value::Object(map.clone()));
        map.insert("hash".into(), json!(hash));
        prev = hash;
    }
}

#[test]
fn records_cut_off_the_end_are_caught_with_the_missing_range() {
    let (world, log) = world_with_log(None);
    let records = audit_lines(&log);
    let n = records.len();
    assert!(n >= 12, "{n} records");

    // `audit head`: SEQ:HASH of the last record, to keep elsewhere.
    let head = world.run(&["audit", "head", log.to_str().unwrap()]);
    assert_eq!(head.status.code(), Some(0), "{}", stderr(&head));
    let spec = stdout(&head).trim().to_string();
    assert_eq!(
        spec,
        format!("{n}:{}", records[n - 1]["hash"].as_str().unwrap())
    );
    let head_json = world.run(&["--json", "audit", "head", log.to_str().unwrap()]);
    let value: Value = serde_json::from_slice(&head_json.stdout).expect("one object");
    assert_eq!(value["spec"], spec.as_str());
    assert_eq!(
        (value["seq"].as_u64(), value["keyed"].as_bool()),
        (Some(n as u64), Some(false))
    );
    assert_eq!(value["error"], Value::Null);
    let ok = verify(&world, &log, &[], None);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    assert!(
        stdout(&ok).contains(&format!("head: seq {n} reached")),
        "{}",
        stdout(&ok)
    );

    // Cut the last three records off at record boundaries.
    write_lines(&log, &records[..n - 3]);
    let cut = verify(&world, &log, &[], None);
    assert_eq!(cut.status.code(), Some(1), "{}", stdout(&cut));
    let text = stdout(&cut);
    assert!(
        text.contains(&format!("seq {}", n - 2))
            && text.contains(&format!("records seq {} to {n} are missing", n - 2)),
        "{text}"
    );
    let json_cut = verify(&world, &log, &["--json"], None);
    let value: Value = serde_json::from_slice(&json_cut.stdout).expect("one object");
    assert_eq!(value["problem"], "truncated");
    assert_eq!(value["seq"], n as u64 - 2);
    // No session extends it: the cut stays visible.
    let call = world.run(&["--json", "call", "fx", "echo"]);
    assert_eq!(call.status.code(), Some(1), "{}", stderr(&call));
    let report: Value = serde_json::from_slice(&call.stdout).expect("one object");
    assert_eq!(report["outcome"], "audit_failed");
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("shorter than its head"),
        "{report}"
    );

    // The head file removed too: only a head kept elsewhere shows it.
    std::fs::remove_file(warden_audit::head_path(&log)).unwrap();
    let without = verify(&world, &log, &[], None);
    assert_eq!(without.status.code(), Some(0));
    assert!(
        stdout(&without).contains("no head file"),
        "{}",
        stdout(&without)
    );
    let kept = verify(&world, &log, &["--head", &spec], None);
    assert_eq!(kept.status.code(), Some(1), "{}", stdout(&kept));
    assert!(
        stdout(&kept).contains("--head") && stdout(&kept).contains("are missing"),
        "{}",
        stdout(&kept)
    );
    // A malformed --head is a usage error, as one JSON object with --json.
    let bad = verify(&world, &log, &["--json", "--head", "12:xyz"], None);
    assert_eq!(bad.status.code(), Some(2));
    let value: Value = serde_json::from_slice(&bad.stdout).expect("one object");
    assert_eq!(value["outcome"], "usage_error");
}

#[test]
fn a_rewritten_unkeyed_log_with_its_head_kept_is_caught_at_the_head() {
    let (world, log) = world_with_log(None);
    let mut records = audit_lines(&log);
    let n = records.len();
    // Rewrite the first call's arguments and recompute the whole chain:
    // a chain that is whole on its own.
    let first = records
        .iter()
        .position(|r| r["event"] == "tool_call")
        .unwrap();
    records[first]["arguments"] = json!({"i": "rewritten"});
    rechain_plain(&mut records);
    write_lines(&log, &records);
    let copy = world.path("copy.jsonl");
    std::fs::copy(&log, &copy).unwrap();
    assert_eq!(verify(&world, &copy, &[], None).status.code(), Some(0));

    let output = verify(&world, &log, &[], None);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let text = stdout(&output);
    assert!(
        text.contains(&format!("seq {n}")) && text.contains("rewritten"),
        "{text}"
    );
    let output = verify(&world, &log, &["--json"], None);
    let value: Value = serde_json::from_slice(&output.stdout).expect("one object");
    assert_eq!(
        (value["seq"].as_u64(), value["problem"].as_str()),
        (Some(n as u64), Some("head_mismatch"))
    );
}

#[test]
fn a_keyed_log_recomputed_without_its_key_is_caught() {
    let (world, log) = world_with_log(Some(KEY));
    assert_eq!(verify(&world, &log, &[], Some(KEY)).status.code(), Some(0));
    let head = world.run(&["--json", "audit", "head", log.to_str().unwrap()]);
    let value: Value = serde_json::from_slice(&head.stdout).expect("one object");
    assert_eq!(value["keyed"], true);
    assert_eq!(value["authenticated"], false, "no key given");

    let mut records = audit_lines(&log);
    rechain_plain(&mut records);
    write_lines(&log, &records);
    // The head says keyed: plain records are a downgrade, without the key...
    let output = verify(&world, &log, &[], None);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let text = stdout(&output);
    assert!(
        text.contains("seq 1") && text.contains("without the key"),
        "{text}"
    );
    let output = verify(&world, &log, &["--json"], None);
    let value: Value = serde_json::from_slice(&output.stdout).expect("one object");
    assert_eq!(
        (value["seq"].as_u64(), value["problem"].as_str()),
        (Some(1), Some("mode_mismatch"))
    );
    // ...and with WARDEN_AUDIT_KEY set, even without the head file.
    std::fs::remove_file(warden_audit::head_path(&log)).unwrap();
    let output = verify(&world, &log, &[], Some(KEY));
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(stdout(&output).contains("seq 1"), "{}", stdout(&output));
}

#[test]
fn a_log_without_a_usable_head_is_not_appended_to_until_its_end_is_accepted() {
    let (world, log) = world_with_log(None);
    let records = audit_lines(&log);
    let n = records.len();
    // The attack: cut the last session off and remove the head. warden
    // used to append, creating a fresh head at the cut: gone for good.
    write_lines(&log, &records[..n - 4]);
    std::fs::remove_file(warden_audit::head_path(&log)).unwrap();
    let before = std::fs::read(&log).unwrap();
    let call = world.run(&["--json", "call", "fx", "echo"]);
    assert_eq!(call.status.code(), Some(1), "{}", stderr(&call));
    let report: Value = serde_json::from_slice(&call.stdout).expect("one object");
    assert_eq!(report["outcome"], "audit_failed");
    let error = report["error"].as_str().unwrap();
    assert!(
        error.contains("no head file")
            && error.contains(&format!(
                "warden audit verify {} --accept-head",
                log.display()
            )),
        "{error}"
    );
    assert_eq!(std::fs::read(&log).unwrap(), before, "the log changed");
    assert!(!warden_audit::head_path(&log).exists());
    // verify: whole, but its end cannot be vouched for, and it says how
    // to go on; `audit head` too.
    let output = verify(&world, &log, &[], None);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(
        stdout(&output).contains("no head file") && stdout(&output).contains("--accept-head"),
        "{}",
        stdout(&output)
    );
    let head = world.run(&["audit", "head", log.to_str().unwrap()]);
    assert_eq!(head.status.code(), Some(1));
    assert!(stderr(&head).contains("--accept-head"), "{}", stderr(&head));

    // An emptied head file is damaged, like a zeroed one (it once read as
    // "no head", and then as a fresh start).
    std::fs::write(warden_audit::head_path(&log), "").unwrap();
    let output = verify(&world, &log, &["--json"], None);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let value: Value = serde_json::from_slice(&output.stdout).expect("one object");
    assert_eq!(value["problem"], "head_invalid", "{value}");
    assert!(
        value["message"].as_str().unwrap().contains("empty"),
        "{value}"
    );
    assert_eq!(
        world.run(&["call", "fx", "echo"]).status.code(),
        Some(1),
        "appended under an empty head"
    );

    // Accepting the end as it is: checked, then a head is written.
    let output = verify(&world, &log, &["--accept-head"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("head accepted")
            && text.contains("an empty head file")
            && text.contains(&format!("head: seq {} reached", n - 4)),
        "{text}"
    );
    let call = world.run(&["call", "fx", "echo"]);
    assert_eq!(call.status.code(), Some(0), "{}", stderr(&call));
    assert_eq!(verify(&world, &log, &[], None).status.code(), Some(0));

    // With --json, the head accepted is in the object.
    std::fs::remove_file(warden_audit::head_path(&log)).unwrap();
    let count = audit_lines(&log).len() as u64;
    let output = verify(&world, &log, &["--json", "--accept-head"], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let value: Value = serde_json::from_slice(&output.stdout).expect("one object");
    assert_eq!(value["accepted_head"]["seq"], count, "{value}");
    assert_eq!(value["accepted_head"]["replaced"], "no head file");
    assert_eq!(value["heads"][0]["seq"], count);

    // A log cut under a valid head is not accepted: that is what the
    // head is for.
    let records = audit_lines(&log);
    write_lines(&log, &records[..records.len() - 1]);
    let head_file = std::fs::read(warden_audit::head_path(&log)).unwrap();
    let output = verify(&world, &log, &["--json", "--accept-head"], None);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let value: Value = serde_json::from_slice(&output.stdout).expect("one object");
    assert_eq!(value["outcome"], "head_not_accepted", "{value}");
    assert!(
        value["error"]
            .as_str()
            .unwrap()
            .contains("accepting it would hide"),
        "{value}"
    );
    assert_eq!(
        std::fs::read(warden_audit::head_path(&log)).unwrap(),
        head_file
    );
}
