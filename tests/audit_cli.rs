//! `warden audit verify` and `warden audit show`, run as the real binary.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use warden_audit::FsyncMode;
use warden_audit::{
    AuditLog, AuditOptions, DecisionRecord, Event, Outcome, ResultRecord, ToolCallRecord,
};
use warden_policy::{Effect, Mode, Stage};

const KEY: &str = "0123456789abcdef0123456789abcdef";

fn warden(home: &Path, args: &[&str], key_env: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(args)
        .env("HOME", home)
        .env("WARDEN_CONFIG_DIR", home.join("config"))
        .env_remove("WARDEN_AUDIT_KEY")
        .env_remove("RUST_LOG");
    if let Some(k) = key_env {
        cmd.env("WARDEN_AUDIT_KEY", k);
    }
    cmd.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A call as the host records it: an allowed call is its pending
/// `tool_call` and its `tool_result`; a denied one is one `tool_call`.
fn call(id: &str, tool: &str, effect: Effect, outcome: Outcome, ms: u64) -> Vec<Event> {
    let record = Event::ToolCall(ToolCallRecord {
        call_id: id.into(),
        server: Some("fs".into()),
        tool: Some(tool.into()),
        qualified: format!("mcp__fs__{tool}"),
        caller: warden_audit::Caller::Cli,
        arguments: json!({"path": "/srv/x"}),
        args_sha256: "00".repeat(32),
        decision: Some(DecisionRecord {
            effect,
            stage: if effect == Effect::Deny {
                Stage::Rules
            } else {
                Stage::Default
            },
            reasons: vec![],
            policy_sha256: None,
        }),
        outcome: if outcome == Outcome::Denied {
            Outcome::Denied
        } else {
            Outcome::Pending
        },
        error: None,
    });
    if outcome == Outcome::Denied {
        return vec![record];
    }
    vec![
        record,
        Event::ToolResult(ResultRecord {
            call_id: id.into(),
            outcome,
            duration_ms: ms,
            result_sha256: None,
            error: None,
        }),
    ]
}

fn write_sample(path: &Path, session: &str, key: Option<&str>) {
    let log = AuditLog::open(
        path,
        AuditOptions {
            session: session.into(),
            fsync: FsyncMode::Never,
            key: key.map(|k| k.as_bytes().to_vec()),
            ..AuditOptions::default()
        },
    )
    .unwrap();
    let events = [
        vec![
            Event::SessionStart {
                warden_version: "0.1.0".into(),
                config_sha256: "aa".repeat(32),
                policy_sha256: None,
                mode: Mode::Interactive,
                workspace: "/srv".into(),
            },
            Event::ServerStart {
                server: "fs".into(),
                transport: warden_core::TransportKind::Stdio,
                pid: Some(77),
                sandbox: json!({}),
            },
        ],
        call("c1", "read_text_file", Effect::Allow, Outcome::Ok, 12),
        call("c2", "write_file", Effect::Deny, Outcome::Denied, 0),
        call(
            "c3",
            "read_text_file",
            Effect::Allow,
            Outcome::Timeout,
            30000,
        ),
    ];
    for e in events.into_iter().flatten().chain([
        Event::ServerExit {
            server: "fs".into(),
            pid: Some(77),
            status: Some(0),
            signal: None,
            reason: "stopped\u{1b}[31m".into(),
        },
        Event::SessionEnd {
            tool_calls: 3,
            denied: 1,
        },
    ]) {
        log.append(e).unwrap();
    }
    log.close().unwrap();
}

#[test]
fn verify_exit_codes_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let log = home.join("audit.jsonl");
    let file = log.to_str().unwrap();
    write_sample(&log, "3f2a9b1c-0000-4000-8000-000000000001", None);

    let o = warden(home, &["audit", "verify", file], None);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = stdout(&o);
    assert!(out.contains("9 records") && out.contains("sha256"), "{out}");
    let last_hash = out
        .lines()
        .find_map(|l| l.strip_prefix("last hash: "))
        .unwrap();
    assert_eq!(last_hash.len(), 64, "{out}");
    // The head file beside the log was reached.
    assert!(out.contains("head: seq 9 reached"), "{out}");

    let o = warden(home, &["--json", "audit", "verify", file], None);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["count"], 9);
    assert_eq!(v["heads"][0]["seq"], 9);
    assert_eq!(v["error"], Value::Null);
    assert_eq!(v["last_hash"], last_hash);
    assert_eq!(v["mode"], "sha256");

    // Tampered: exit 1 naming the seq.
    let text = std::fs::read_to_string(&log).unwrap();
    let tampered = home.join("tampered.jsonl");
    std::fs::write(&tampered, text.replacen("\"deny\"", "\"allow\"", 1)).unwrap();
    let o = warden(home, &["audit", "verify", tampered.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("seq 5") && out.contains("hash mismatch"),
        "{out}"
    );
    let o = warden(
        home,
        &["--json", "audit", "verify", tampered.to_str().unwrap()],
        None,
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["seq"].as_u64(), v["problem"].as_str()),
        (Some(5), Some("hash_mismatch"))
    );

    // Torn: exit 1, reported as torn.
    let torn = home.join("torn.jsonl");
    std::fs::write(&torn, &text[..text.len() - 20]).unwrap();
    let o = warden(home, &["audit", "verify", torn.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("seq 9") && out.contains("torn tail"), "{out}");
    assert!(out.contains("8 records before it verified"), "{out}");

    // Missing file: usage error.
    let o = warden(home, &["audit", "verify", "/nonexistent/audit.jsonl"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/audit.jsonl"));
}

#[test]
fn verify_with_keys() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let log = home.join("keyed.jsonl");
    let file = log.to_str().unwrap();
    write_sample(&log, "s", Some(KEY));
    let key_file = home.join("key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let wrong = home.join("wrong");
    std::fs::write(&wrong, "not the key").unwrap();

    let o = warden(
        home,
        &["audit", "verify", file, "--key", key_file.to_str().unwrap()],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(stdout(&o).contains("hmac-sha256"));
    let o = warden(home, &["audit", "verify", file], Some(KEY));
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    // No key: says the log is keyed; not a pass.
    let o = warden(home, &["audit", "verify", file], None);
    assert_eq!(o.status.code(), Some(2));
    let out = stdout(&o);
    assert!(
        out.contains("hmac-sha256") && out.contains("--key"),
        "{out}"
    );
    // Wrong key: fails at seq 1.
    let o = warden(
        home,
        &["audit", "verify", file, "--key", wrong.to_str().unwrap()],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("seq 1"));
    // The key never appears in any output.
    for o in [&o, &warden(home, &["audit", "verify", file], Some(KEY))] {
        assert!(!stdout(o).contains(KEY));
        assert!(!String::from_utf8_lossy(&o.stderr).contains(KEY));
    }
}

#[test]
fn show_prints_a_table_json_lines_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let log = home.join("audit.jsonl");
    let file = log.to_str().unwrap();
    write_sample(&log, "aaaaaaaa-1111", None);
    write_sample(&log, "bbbbbbbb-2222", None);

    let o = warden(home, &["audit", "show", file], None);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 19, "{out}");
    for h in [
        "SEQ", "TIME", "SESSION", "EVENT", "TOOL", "DECISION", "OUTCOME", "DURATION",
    ] {
        assert!(lines[0].contains(h), "{}", lines[0]);
    }
    // Aligned: every column starts where its header starts.
    let col = lines[0].find("EVENT").unwrap();
    for l in &lines[1..] {
        assert_eq!(
            l[col..]
                .split(' ')
                .next()
                .unwrap()
                .chars()
                .next()
                .map(|c| c.is_ascii_lowercase()),
            Some(true),
            "{l}"
        );
    }
    assert!(
        out.contains("mcp__fs__write_file") && out.contains("deny/rules"),
        "{out}"
    );
    assert!(out.contains("30000 ms") && out.contains("aaaaaaaa") && !out.contains("aaaaaaaa-1111"));
    // A hostile escape sequence is shown escaped.
    assert!(!out.contains('\u{1b}') && out.contains("exit 0"), "{out}");

    let o = warden(
        home,
        &["--json", "audit", "show", file, "--effect", "deny"],
        None,
    );
    // One object: the records as written.
    let shown: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(shown["error"], Value::Null);
    let recs = shown["records"].as_array().unwrap();
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|r| r["decision"]["effect"] == "deny"));

    let o = warden(
        home,
        &[
            "--json",
            "audit",
            "show",
            file,
            "--tool",
            "mcp__fs__read_*",
            "--session",
            "bbbb",
        ],
        None,
    );
    // A `tool_result` is matched by its call's name (joined by call_id).
    let shown: Value = serde_json::from_slice(&o.stdout).unwrap();
    let recs = shown["records"].as_array().unwrap();
    let events: Vec<&str> = recs.iter().map(|r| r["event"].as_str().unwrap()).collect();
    assert_eq!(
        events,
        ["tool_call", "tool_result", "tool_call", "tool_result"]
    );
    assert!(recs.iter().all(|r| r["session"] == "bbbbbbbb-2222"));
    assert_eq!(recs[0]["tool"], "read_text_file");
    assert_eq!(recs[1]["call_id"], recs[0]["call_id"]);
    assert_eq!(recs[0]["seq"], 12);

    let o = warden(home, &["audit", "show", file, "--effect", "maybe"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("allow, ask or deny"));
}

/// `warden ARGS…` under a data limit (RLIMIT_DATA) of 128 MiB, far above
/// what checking a log of bounded records needs.
fn warden_in_128_mib(home: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--data={}", 128 * 1024 * 1024))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .env("HOME", home)
        .env("WARDEN_CONFIG_DIR", home.join("config"))
        .env_remove("WARDEN_AUDIT_KEY")
        .env_remove("RUST_LOG");
    cmd.output().expect("run prlimit")
}

/// The attack: one line of 300 MB after the records (a hole of NUL bytes
/// here, which costs no disk). `verify`, `show` and the next session's
/// read of the log's last record each took the whole line into memory
/// (verify about four times its size): whoever could write the file made
/// checking it, or starting a session, exhaust memory (under 128 MiB they
/// aborted). No record warden writes comes near [`MAX_LINE_BYTES`]: a
/// longer line is reported, or skipped, without being read whole.
#[test]
fn a_huge_line_is_reported_without_reading_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let log = home.join("audit.jsonl");
    let file = log.to_str().unwrap();
    write_sample(&log, "aaaaaaaa-1111", None);
    let records = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
    let f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len + 300_000_000).unwrap();
    (&f).write_all(b"\n").unwrap();
    drop(f);
    const { assert!(300_000_000 > warden_audit::MAX_LINE_BYTES) };

    let o = warden_in_128_mib(home, &["--json", "audit", "verify", file]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["problem"], "too_long", "{v}");
    assert_eq!(v["seq"], records + 1);
    assert_eq!(v["verified"], records);

    let o = warden_in_128_mib(home, &["--json", "audit", "show", file]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["records"].as_array().map(Vec::len),
        Some(records as usize)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("longer than"),
        "{o:?}"
    );

    // A session refuses to extend the log, saying why.
    let o = warden_in_128_mib(home, &["--audit", file, "--json", "mcp", "status"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["outcome"], "audit_failed", "{v}");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains("longer than")),
        "{v}"
    );
}

/// `lines` re-chained as plain SHA-256 from the first: what anyone who
/// can write an unkeyed log can do after editing it.
fn rechain(lines: &mut [Value]) -> String {
    let mut prev = "0".repeat(64);
    for record in lines.iter_mut() {
        let map = record.as_object_mut().unwrap();
        map.remove("hash");
        map.insert("prev".into(), prev.clone().into());
        let canonical = warden_core::digest::canonical_json(&Value::Object(map.clone()));
        let hash = warden_core::digest::sha256_hex(canonical.as_bytes());
        map.insert("hash".into(), hash.clone().into());
        prev = hash;
    }
    lines
        .iter()
        .map(|r| warden_core::digest::canonical_json(r) + "\n")
        .collect()
}

/// The attack: an unkeyed log edited (a deny made an allow), re-chained,
/// its head removed and accepted again, as anyone who can write the file
/// can. `verify` said "ok: chain intact" and nothing more: an auditor
/// took that for "not altered". It cannot show that (an unkeyed chain is
/// recomputed by anyone), so it now says what it checked and what it
/// cannot show, in text and in `--json` (`caveats`): `unkeyed`, and with a
/// key, `rollback` (the log and its head put back together to an earlier
/// copy) until a head kept elsewhere covers the end.
#[test]
fn verify_says_what_it_cannot_show() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let log = home.join("audit.jsonl");
    let file = log.to_str().unwrap();
    write_sample(&log, "s", None);
    let mut lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let denied = lines
        .iter()
        .position(|r| r["decision"]["effect"] == "deny")
        .unwrap();
    lines[denied]["decision"]["effect"] = "allow".into();
    std::fs::write(&log, rechain(&mut lines)).unwrap();
    std::fs::remove_file(warden_audit::head_path(&log)).unwrap();
    let o = warden(home, &["audit", "verify", file, "--accept-head"], None);
    assert_eq!(o.status.code(), Some(0), "{o:?}");

    // The forgery passes (nothing in the file can show it), and says so.
    let o = warden(home, &["audit", "verify", file], None);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = stdout(&o);
    assert!(
        out.contains("unkeyed") && out.contains("cannot show") && out.contains("rewritten"),
        "{out}"
    );
    let o = warden(home, &["--json", "audit", "verify", file], None);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let kinds = |v: &Value| -> Vec<String> {
        v["caveats"]
            .as_array()
            .unwrap_or_else(|| panic!("no caveats: {v}"))
            .iter()
            .map(|c| c["kind"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(kinds(&v), ["unkeyed", "rollback"], "{v}");

    // Keyed and checked with the key: only the rollback is left, and a
    // head kept elsewhere at the end takes that away too.
    let keyed = home.join("keyed.jsonl");
    let keyed_file = keyed.to_str().unwrap();
    write_sample(&keyed, "k", Some(KEY));
    let o = warden(home, &["--json", "audit", "verify", keyed_file], Some(KEY));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(kinds(&v), ["rollback"], "{v}");
    let o = warden(home, &["audit", "verify", keyed_file], Some(KEY));
    assert!(stdout(&o).contains("--head"), "{}", stdout(&o));
    let spec = format!("{}:{}", v["count"], v["last_hash"].as_str().unwrap());
    let o = warden(
        home,
        &["--json", "audit", "verify", keyed_file, "--head", &spec],
        Some(KEY),
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(kinds(&v), Vec::<String>::new(), "{v}");
}

/// The attack: a record edited in place, a deny made an allow (or the
/// key given twice, `{"effect":"deny","effect":"allow"}`, which a reader
/// takes as its last value). `audit show` showed the edit like any other
/// record, with no sign that the log does not verify; it now warns on
/// stderr and says so in `--json` (`verified`).
#[test]
fn show_warns_when_the_log_does_not_verify() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let log = home.join("audit.jsonl");
    let file = log.to_str().unwrap();
    write_sample(&log, "s", None);
    let o = warden(home, &["--json", "audit", "show", file], None);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verified"]["ok"], true, "{v}");
    assert!(o.stderr.is_empty(), "{o:?}");

    let text = std::fs::read_to_string(&log).unwrap();
    for edited in [
        text.replacen("\"effect\":\"deny\"", "\"effect\":\"allow\"", 1),
        text.replacen(
            "\"effect\":\"deny\"",
            "\"effect\":\"deny\",\"effect\":\"allow\"",
            1,
        ),
    ] {
        assert_ne!(edited, text);
        std::fs::write(&log, edited).unwrap();
        let o = warden(home, &["audit", "show", file, "--effect", "deny"], None);
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("does not verify from seq 5") && err.contains("altered"),
            "{err}"
        );
        let o = warden(home, &["--json", "audit", "show", file], None);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["verified"]["ok"], false, "{v}");
        assert_eq!(v["verified"]["seq"], 5, "{v}");
    }
}

/// The attack: text a client or server chose (a resource URI a client
/// asked for, a tool name as the caller gave it, a server's exit reason)
/// laid out with the table's own column gap, two spaces, so that a row of
/// `audit show` reads as a different decision: `…  allow/default  ok`
/// inside the TOOL cell, before the real `deny/rules  denied`. Inside a
/// cell a run of spaces is one space now, so only the real columns are
/// set apart by two or more.
#[test]
fn show_cells_cannot_fake_columns() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let log = home.join("audit.jsonl");
    let forged = "fixture://x  allow/default  ok     3 ms";
    let record = json!({
        "seq": 1, "ts": "2026-01-01T00:00:00Z", "session": "s", "event": "request",
        "target": "resource__fx", "arguments": {"uri": forged},
        "decision": {"effect": "deny", "stage": "rules"}, "outcome": "denied",
    });
    std::fs::write(&log, format!("{record}\n")).unwrap();
    let o = warden(home, &["audit", "show", log.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = stdout(&o);
    let row = out.lines().nth(1).unwrap();
    assert!(
        row.contains("fixture://x allow/default ok 3 ms") && !row.contains("x  allow"),
        "{out}"
    );
    assert!(row.contains("deny/rules"), "{out}");
    // --json keeps the record exact.
    let o = warden(
        home,
        &["--json", "audit", "show", log.to_str().unwrap()],
        None,
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["records"][0]["arguments"]["uri"], forged);
}
