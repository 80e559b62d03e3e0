//! The audit log's chain: every event kind round-trips and verifies; any
//! single-byte change, deleted, duplicated or reordered record is caught at
//! the right `seq`; a torn tail is reported as torn; HMAC mode; secrets
//! never reach the file; redaction; sessions continue one chain.

use std::path::Path;

use serde_json::{Value, json};
use warden_audit::{
    self as audit, AuditError, AuditLog, AuditOptions, DecisionRecord, Event, FsyncMode, HashMode,
    Outcome, Problem, ToolCallRecord, VerifyReport, verify, verify_reader, verify_reader_with,
};
use warden_policy::{Effect, Mode, Stage};

const KEY: &[u8] = b"an audit key of thirty-two bytes";

fn opts(session: &str) -> AuditOptions {
    AuditOptions {
        session: session.into(),
        fsync: FsyncMode::Never,
        ..AuditOptions::default()
    }
}

/// A `tool_call` record (the chain does not care which outcome it carries).
fn call(i: u64, effect: Effect, outcome: Outcome, args: Value) -> Event {
    Event::ToolCall(ToolCallRecord {
        call_id: format!("call-{i}"),
        server: Some("fs".into()),
        tool: Some("read_text_file".into()),
        qualified: "mcp__fs__read_text_file".into(),
        caller: warden_audit::Caller::Model,
        args_sha256: audit::args_digest(&args),
        arguments: args,
        decision: Some(DecisionRecord {
            effect,
            stage: if effect == Effect::Allow {
                Stage::Rules
            } else {
                Stage::Policy
            },
            reasons: vec![format!("reason {i}")],
            policy_sha256: Some("ab".repeat(32)),
        }),
        outcome,
        error: (!matches!(outcome, Outcome::Ok | Outcome::Pending)).then(|| format!("error {i}")),
    })
}

/// The `tool_result` of call `i`.
fn result(i: u64, outcome: Outcome) -> Event {
    Event::ToolResult(audit::ResultRecord {
        call_id: format!("call-{i}"),
        outcome,
        duration_ms: i,
        result_sha256: (outcome == Outcome::Ok).then(|| audit::result_digest(&json!({"n": i}))),
        error: (outcome != Outcome::Ok).then(|| format!("error {i}")),
    })
}

/// One of every event kind (and every outcome).
fn all_events() -> Vec<Event> {
    let mut events = vec![
        Event::SessionStart {
            warden_version: "0.1.0".into(),
            config_sha256: "cd".repeat(32),
            policy_sha256: None,
            mode: Mode::Ci,
            workspace: "/srv/repo".into(),
        },
        Event::ServerStart {
            server: "fs".into(),
            transport: warden_core::TransportKind::Stdio,
            pid: Some(4242),
            sandbox: json!({"landlock": "fully_enforced", "network": "none", "limits": {"memory_mb": 1024}}),
        },
        Event::Approval {
            server: "fs".into(),
            config_sha256: "ef".repeat(32),
            action: audit::ApprovalAction::Approved,
            subject: "server".into(),
            call_id: None,
        },
    ];
    let outcomes = [
        (Effect::Allow, Outcome::Ok),
        (Effect::Allow, Outcome::ToolError),
        (Effect::Allow, Outcome::RpcError),
        (Effect::Allow, Outcome::Timeout),
        (Effect::Deny, Outcome::Denied),
        (Effect::Ask, Outcome::Cancelled),
    ];
    for (i, (effect, outcome)) in outcomes.into_iter().enumerate() {
        let args =
            json!({"path": format!("/srv/repo/{i}.md"), "n": i, "f": 1.5, "é": [true, null]});
        if outcome == Outcome::Denied {
            events.push(call(i as u64, effect, outcome, args));
        } else {
            events.push(call(i as u64, effect, Outcome::Pending, args));
            events.push(result(i as u64, outcome));
        }
    }
    events.push(Event::AuditGap {
        lost: 2,
        since: "2026-01-01T00:00:00.000000Z".into(),
        error: "No space left on device".into(),
    });
    events.push(Event::Request(audit::RequestRecord {
        method: Some("resources/read".into()),
        call_id: "req-1".into(),
        kind: audit::RequestKind::Resource,
        server: Some("fs".into()),
        target: "resource__fs".into(),
        caller: warden_audit::Caller::Gateway,
        arguments: json!({"uri": "file:///srv/repo/README.md"}),
        args_sha256: "00".repeat(32),
        decision: None,
        outcome: Outcome::Pending,
        error: None,
        capped: Some(json!({"max_tokens": {"asked": 10000, "sent": 4096}})),
    }));
    events.push(Event::RequestResult(audit::RequestResultRecord {
        kind: audit::RequestKind::Resource,
        result: audit::ResultRecord {
            call_id: "req-1".into(),
            outcome: Outcome::Abandoned,
            duration_ms: 5,
            result_sha256: None,
            error: Some("warden is exiting".into()),
        },
        answered_by: Some("file:/tmp/answers.json".into()),
    }));
    events.push(Event::ServerExit {
        server: "fs".into(),
        pid: Some(4242),
        status: None,
        signal: Some(9),
        reason: "stopped".into(),
    });
    events.push(Event::SessionEnd {
        tool_calls: 6,
        denied: 1,
    });
    events
}

fn write_log(path: &Path, opts: AuditOptions, events: Vec<Event>) {
    let log = AuditLog::open(path, opts).unwrap();
    for e in events {
        log.append(e).unwrap();
    }
    log.close().unwrap();
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn bad(report: VerifyReport) -> (u64, Problem) {
    match report {
        VerifyReport::Bad(f) => (f.seq, f.problem),
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn every_event_kind_is_written_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/folder/audit.jsonl");
    let events = all_events();
    let n = events.len() as u64;
    write_log(&path, opts("s-1"), events);

    let recs = records(&path);
    let kinds: Vec<&str> = recs.iter().map(|r| r["event"].as_str().unwrap()).collect();
    for kind in [
        "session_start",
        "server_start",
        "server_exit",
        "tool_call",
        "tool_result",
        "request",
        "request_result",
        "audit_gap",
        "approval",
        "session_end",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing");
    }
    let mut prev = audit::ZERO_HASH.to_string();
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r["v"], 1);
        assert_eq!(r["seq"], i as u64 + 1);
        assert_eq!(r["session"], "s-1");
        assert_eq!(r["alg"], "sha256");
        assert_eq!(r["prev"], prev.as_str());
        let ts = r["ts"].as_str().unwrap();
        assert!(
            ts.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(ts).is_ok(),
            "{ts}"
        );
        // hash = SHA-256 of the canonical record without `hash`.
        let mut without = r.clone();
        let hash = without.as_object_mut().unwrap().remove("hash").unwrap();
        assert_eq!(hash, warden_core::digest::sha256_json(&without).as_str());
        prev = hash.as_str().unwrap().to_string();
    }
    let outcomes: Vec<&str> = recs.iter().filter_map(|r| r["outcome"].as_str()).collect();
    assert_eq!(
        outcomes,
        [
            "pending",
            "ok",
            "pending",
            "tool_error",
            "pending",
            "rpc_error",
            "pending",
            "timeout",
            "denied",
            "pending",
            "cancelled",
            "pending",
            "abandoned"
        ]
    );
    // A request_result carries its kind beside the shared result fields.
    let request_result = recs
        .iter()
        .find(|r| r["event"] == "request_result")
        .unwrap();
    assert_eq!(request_result["kind"], "resource");
    assert_eq!(request_result["call_id"], "req-1");
    let denied = recs.iter().find(|r| r["outcome"] == "denied").unwrap();
    assert_eq!(denied["decision"]["effect"], "deny");
    assert_eq!(denied["decision"]["stage"], "policy");
    assert_eq!(denied["decision"]["reasons"][0], "reason 4");

    match verify(&path, None) {
        VerifyReport::Ok {
            count,
            last_hash,
            mode,
            ..
        } => {
            assert_eq!(count, n);
            assert_eq!(last_hash, prev);
            assert_eq!(mode, HashMode::Sha256);
        }
        other => panic!("{other:?}"),
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn every_single_byte_change_is_caught_at_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let events = all_events().into_iter().take(4).collect();
    write_log(&path, opts("s"), events);
    let original = std::fs::read(&path).unwrap();
    assert!(verify_reader(&original[..], None).is_ok());
    // The record (1-based seq) each byte belongs to; a line's `\n` is its own.
    let mut seq_of = Vec::with_capacity(original.len());
    let mut seq = 1u64;
    for &b in &original {
        seq_of.push(seq);
        if b == b'\n' {
            seq += 1;
        }
    }
    let last = seq - 1;
    let mut checked = 0;
    for i in 0..original.len() {
        for flip in [0x01u8, 0x20, 0x80] {
            let mut data = original.clone();
            data[i] ^= flip;
            let (seq, problem) = bad(verify_reader(&data[..], None));
            assert_eq!(
                seq, seq_of[i],
                "byte {i} ^ {flip:#x}: reported seq {seq} ({problem})"
            );
            if i == original.len() - 1 {
                assert!(matches!(problem, Problem::TornTail { .. }));
                assert_eq!(seq, last);
            }
            checked += 1;
        }
    }
    assert!(checked > 3000, "only {checked} variants");
}

#[test]
fn every_single_byte_change_is_caught_in_hmac_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let o = AuditOptions {
        key: Some(KEY.to_vec()),
        ..opts("s")
    };
    write_log(&path, o, all_events().into_iter().take(3).collect());
    let original = std::fs::read(&path).unwrap();
    assert!(verify_reader(&original[..], Some(KEY)).is_ok());
    let mut seq = 1u64;
    for i in 0..original.len() {
        let mut data = original.clone();
        data[i] ^= 0x01;
        assert_eq!(bad(verify_reader(&data[..], Some(KEY))).0, seq, "byte {i}");
        if original[i] == b'\n' {
            seq += 1;
        }
    }
}

#[test]
fn deleted_duplicated_and_reordered_records_fail_at_the_right_seq() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write_log(&path, opts("s"), all_events());
    let lines = lines_of(&path);
    let n = lines.len();
    let check = |ls: &[String]| verify_reader(ls.concat().as_bytes(), None);

    for k in 0..n {
        let seq = k as u64 + 1;
        // Deleted.
        let mut ls = lines.clone();
        ls.remove(k);
        if k + 1 == n {
            // Cutting the last record off at a boundary leaves a valid,
            // shorter chain on its own: only a head shows it (the head
            // file, or one kept elsewhere; see write_ahead_and_head.rs).
            assert_eq!(
                check(&ls),
                VerifyReport::Ok {
                    count: seq - 1,
                    last_hash: records(&path)[k - 1]["hash"].as_str().unwrap().into(),
                    mode: HashMode::Sha256,
                    heads: vec![],
                    unfinished: vec![],
                }
            );
            let with_head = verify_reader_with(
                ls.concat().as_bytes(),
                &audit::VerifyOptions {
                    heads: vec![
                        audit::ExpectedHead::parse(
                            &format!("{seq}:{}", records(&path)[k]["hash"].as_str().unwrap()),
                            "--head",
                        )
                        .unwrap(),
                    ],
                    ..Default::default()
                },
            );
            assert!(
                matches!(bad(with_head), (s, Problem::Truncated { head_seq, .. }) if s == seq && head_seq == seq)
            );
        } else {
            assert_eq!(
                bad(check(&ls)),
                (seq, Problem::Gap { found: seq + 1 }),
                "delete {seq}"
            );
        }
        // Duplicated.
        let mut ls = lines.clone();
        ls.insert(k + 1, lines[k].clone());
        assert_eq!(
            bad(check(&ls)),
            (seq + 1, Problem::Duplicate { found: seq }),
            "duplicate {seq}"
        );
        // Swapped with the next one.
        if k + 1 < n {
            let mut ls = lines.clone();
            ls.swap(k, k + 1);
            assert_eq!(
                bad(check(&ls)),
                (seq, Problem::Reordered { found: seq + 1 }),
                "swap {seq}"
            );
        }
    }
    // A record moved far away: still caught at the first displaced seq.
    let mut ls = lines.clone();
    let first = ls.remove(1);
    ls.push(first);
    assert_eq!(bad(check(&ls)).0, 2);
    // A record inserted from another log.
    let other = dir.path().join("other.jsonl");
    write_log(&other, opts("x"), all_events());
    let mut ls = lines.clone();
    ls[3] = lines_of(&other)[3].clone();
    assert_eq!(bad(check(&ls)), (4, Problem::PrevMismatch));
}

#[test]
fn an_edited_record_with_a_recomputed_hash_breaks_the_next_link() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write_log(&path, opts("s"), all_events());
    let mut recs = records(&path);
    // The forger flips the deny to an allow and fixes its hash.
    let at = recs.iter().position(|r| r["outcome"] == "denied").unwrap();
    let r = recs[at].as_object_mut().unwrap();
    r["decision"]["effect"] = json!("allow");
    r.remove("hash");
    let hash = warden_core::digest::sha256_json(&Value::Object(r.clone()));
    r.insert("hash".into(), hash.into());
    let text: String = recs
        .iter()
        .map(|r| warden_core::digest::canonical_json(r) + "\n")
        .collect();
    assert_eq!(
        bad(verify_reader(text.as_bytes(), None)),
        (at as u64 + 2, Problem::PrevMismatch)
    );
}

#[test]
fn non_canonical_but_equivalent_lines_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write_log(&path, opts("s"), all_events().into_iter().take(3).collect());
    let lines = lines_of(&path);
    // Pretty-printed, reordered keys, escaped characters: same value.
    let value: Value = serde_json::from_str(&lines[1]).unwrap();
    for variant in [
        serde_json::to_string_pretty(&value)
            .unwrap()
            .replace('\n', " "),
        lines[1].trim_end().replacen("{", "{ ", 1),
        lines[1].trim_end().replace("fs", "\\u0066s"),
    ] {
        let mut ls = lines.clone();
        ls[1] = format!("{variant}\n");
        assert_eq!(
            bad(verify_reader(ls.concat().as_bytes(), None)),
            (2, Problem::NotCanonical)
        );
    }
}

#[test]
fn a_truncated_last_line_is_a_torn_tail_and_open_refuses_it_until_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    // The head as a crash in the middle of the last write leaves it: at
    // the record before (the head moves only to whole records).
    let mut events = all_events();
    let last = events.split_off(events.len() - 1);
    write_log(&path, opts("s"), events);
    let head_before_last = std::fs::read(audit::head_path(&path)).unwrap();
    write_log(&path, opts("s"), last);
    let full = std::fs::read(&path).unwrap();
    let n = lines_of(&path).len() as u64;
    let last_start = full[..full.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap() as u64
        + 1;
    // Every cut inside the last record, including just its newline.
    for cut in (last_start + 1..full.len() as u64)
        .step_by(17)
        .chain([full.len() as u64 - 1])
    {
        match verify_reader(&full[..cut as usize], None) {
            VerifyReport::Bad(f) => {
                assert_eq!(f.seq, n);
                assert_eq!(f.verified, n - 1);
                assert_eq!(
                    f.problem,
                    Problem::TornTail {
                        bytes: cut - last_start
                    }
                );
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    std::fs::write(&path, &full[..full.len() - 10]).unwrap();
    let err = AuditLog::open(&path, opts("next")).unwrap_err();
    match &err {
        AuditError::TornTail { offset, len, .. } => {
            assert_eq!(*offset, last_start);
            assert_eq!(*len, full.len() as u64 - 10 - last_start);
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("torn") && msg.contains(&format!("truncate -s {last_start}")),
        "{msg}"
    );
    // This test tore a whole record (its head moved to it): put the head
    // back where a crash would have left it. (Removing the head instead
    // is no fix: warden does not append to a log with records and no
    // head until its end is accepted, `warden audit verify --accept-head`.)
    std::fs::write(audit::head_path(&path), &head_before_last).unwrap();
    // The documented fix: cut the torn bytes, continue the chain.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(last_start)
        .unwrap();
    write_log(
        &path,
        opts("next"),
        all_events().into_iter().take(2).collect(),
    );
    assert!(matches!(verify(&path, None), VerifyReport::Ok { count, .. } if count == n + 1));
}

#[test]
fn hmac_mode_needs_the_right_key_and_rejects_a_plain_forgery() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let keyed = || AuditOptions {
        key: Some(KEY.to_vec()),
        ..opts("s")
    };
    write_log(&path, keyed(), all_events());
    let n = records(&path).len() as u64;
    assert!(matches!(
        verify(&path, Some(KEY)),
        VerifyReport::Ok { count, mode: HashMode::HmacSha256, .. } if count == n
    ));
    // Without the key: says it is keyed, checks only structure and links.
    assert!(matches!(
        verify(&path, None),
        VerifyReport::KeyRequired { count, .. } if count == n
    ));
    // Wrong key.
    assert_eq!(
        bad(verify(&path, Some(b"wrong key"))),
        (1, Problem::HashMismatch)
    );

    // A forger without the key edits a record and recomputes the whole chain
    // with plain SHA-256 (marking it sha256, or leaving the hmac mark).
    for relabel in [true, false] {
        let mut prev = audit::ZERO_HASH.to_string();
        let mut text = String::new();
        for (i, mut r) in records(&path).into_iter().enumerate() {
            let m = r.as_object_mut().unwrap();
            if i == 4 {
                m.insert("error".into(), json!(null));
            }
            if relabel {
                m.insert("alg".into(), json!("sha256"));
            }
            m.insert("prev".into(), json!(prev));
            m.remove("hash");
            prev = warden_core::digest::sha256_json(&r);
            r.as_object_mut()
                .unwrap()
                .insert("hash".into(), json!(prev));
            text += &(warden_core::digest::canonical_json(&r) + "\n");
        }
        let (seq, problem) = bad(verify_reader(text.as_bytes(), Some(KEY)));
        assert_eq!(seq, 1);
        if relabel {
            assert!(matches!(
                problem,
                Problem::ModeMismatch {
                    expected: HashMode::HmacSha256,
                    ..
                }
            ));
            // Without the key such a forgery is, unavoidably, a valid sha256 log.
            assert!(matches!(
                verify_reader(text.as_bytes(), None),
                VerifyReport::Ok {
                    mode: HashMode::Sha256,
                    ..
                }
            ));
        } else {
            assert_eq!(problem, Problem::HashMismatch);
        }
    }
    // A plain log checked with a key: every record must be keyed.
    let plain = dir.path().join("plain.jsonl");
    write_log(&plain, opts("s"), all_events());
    assert!(matches!(
        bad(verify(&plain, Some(KEY))),
        (1, Problem::ModeMismatch { .. })
    ));
}

#[test]
fn open_refuses_to_extend_a_chain_under_another_key_or_mode() {
    let dir = tempfile::tempdir().unwrap();
    let keyed = dir.path().join("keyed.jsonl");
    let plain = dir.path().join("plain.jsonl");
    let with_key = |k: &[u8]| AuditOptions {
        key: Some(k.to_vec()),
        ..opts("s")
    };
    write_log(&keyed, with_key(KEY), all_events());
    write_log(&plain, opts("s"), all_events());
    let n = all_events().len() as u64;
    assert!(matches!(
        AuditLog::open(&keyed, with_key(b"another key")),
        Err(AuditError::TailMismatch { seq, .. }) if seq == n
    ));
    let err = AuditLog::open(&keyed, opts("s")).unwrap_err();
    assert!(matches!(err, AuditError::ModeMismatch { .. }));
    assert!(err.to_string().contains("WARDEN_AUDIT_KEY"), "{err}");
    assert!(matches!(
        AuditLog::open(&plain, with_key(KEY)),
        Err(AuditError::ModeMismatch { .. })
    ));
    // A tampered last record is not extended either.
    let text = std::fs::read_to_string(&plain)
        .unwrap()
        .replace("\"denied\":1", "\"denied\":0");
    std::fs::write(&plain, text).unwrap();
    assert!(matches!(
        AuditLog::open(&plain, opts("s")),
        Err(AuditError::TailMismatch { .. })
    ));
    // Garbage as the last line.
    let junk = dir.path().join("junk.jsonl");
    std::fs::write(&junk, "not json\n").unwrap();
    assert!(matches!(
        AuditLog::open(&junk, opts("s")),
        Err(AuditError::CorruptTail { offset: 0, .. })
    ));
    // Nothing was appended to any of them.
    assert!(matches!(
        verify(&keyed, Some(KEY)),
        VerifyReport::Ok { count, .. } if count == n
    ));
}

#[test]
fn later_sessions_continue_the_same_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    for (i, fsync) in [FsyncMode::EveryRecord, FsyncMode::Batch, FsyncMode::Never]
        .into_iter()
        .enumerate()
    {
        let o = AuditOptions {
            fsync,
            ..opts(&format!("session-{i}"))
        };
        write_log(&path, o, all_events());
    }
    let recs = records(&path);
    let n = all_events().len();
    assert_eq!(recs.len(), 3 * n);
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r["seq"], i as u64 + 1);
        assert_eq!(r["session"], format!("session-{}", i / n));
    }
    assert_eq!(recs[n]["prev"], recs[n - 1]["hash"]);
    assert!(matches!(
        verify(&path, None),
        VerifyReport::Ok { count, .. } if count == 3 * n as u64
    ));
    let log = AuditLog::open(&path, opts("s")).unwrap();
    assert_eq!(
        log.last(),
        (
            3 * n as u64,
            recs[3 * n - 1]["hash"].as_str().unwrap().to_string()
        )
    );
}

#[test]
fn secret_canaries_never_reach_the_file() {
    const CANARY: &str = "sk-CANARY-7f3a9c";
    const NUMERIC: &str = "98765432";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let o = AuditOptions {
        session: format!("sess-{CANARY}"),
        fsync: FsyncMode::EveryRecord,
        key: Some(KEY.to_vec()),
        redact: vec!["/password".into()],
        secrets: vec![CANARY.into(), NUMERIC.into()],
        ..AuditOptions::default()
    };
    let log = AuditLog::open(&path, o).unwrap();
    let args = json!({
        "password": CANARY,
        "query": format!("token={CANARY}&x=1"),
        "nested": [{"deep": [CANARY]}, {CANARY: "as a key"}],
        "pin": 98765432u64,
    });
    let redacted = log.redact_arguments(&args);
    assert!(!redacted.to_string().contains(CANARY));
    let mut ev = call(1, Effect::Allow, Outcome::ToolError, args);
    if let Event::ToolCall(c) = &mut ev {
        c.error = Some(format!("server said: bad token {CANARY}"));
        if let Some(decision) = &mut c.decision {
            decision.reasons.push(format!("Bearer {CANARY}"));
        }
    }
    log.append(ev).unwrap();
    log.append(Event::ServerStart {
        server: "fs".into(),
        transport: warden_core::TransportKind::Http,
        pid: None,
        sandbox: json!({"headers": {"Authorization": format!("Bearer {CANARY}")}}),
    })
    .unwrap();
    log.append(Event::ServerExit {
        server: "fs".into(),
        pid: Some(1),
        status: Some(1),
        signal: None,
        reason: format!("crashed printing env {CANARY}"),
    })
    .unwrap();
    log.close().unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(CANARY), "canary in the log:\n{text}");
    assert!(
        !text.contains(NUMERIC),
        "numeric canary in the log:\n{text}"
    );
    assert!(!text.contains("CANARY"));
    let recs = records(&path);
    assert_eq!(recs[0]["arguments"]["password"], "[REDACTED]");
    assert_eq!(recs[0]["arguments"]["query"], "token=[REDACTED]&x=1");
    assert_eq!(recs[0]["arguments"]["pin"], "[REDACTED]");
    assert_eq!(recs[0]["session"], "sess-[REDACTED]");
    assert_eq!(recs[0]["event"], "tool_call");
    assert!(matches!(
        verify(&path, Some(KEY)),
        VerifyReport::Ok { count: 3, .. }
    ));
}

/// A secret that becomes known during the session (an OAuth token
/// refreshed mid-session) is removed from every record written after it is
/// added, in every fsync mode; the
/// configured ones stay removed and the chain verifies.
#[test]
fn secrets_added_during_the_session_never_reach_the_file_after() {
    const CONFIGURED: &str = "sk-CONFIGURED-51d2";
    const REFRESHED: &str = "tok-REFRESHED-8e0b4c";
    for fsync in [FsyncMode::EveryRecord, FsyncMode::Batch, FsyncMode::Never] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let o = AuditOptions {
            fsync,
            secrets: vec![CONFIGURED.into()],
            ..opts("s")
        };
        let log = AuditLog::open(&path, o).unwrap();
        let failing = |id: u64, text: &str| {
            let mut ev = call(id, Effect::Allow, Outcome::RpcError, json!({"q": text}));
            if let Event::ToolCall(c) = &mut ev {
                c.error = Some(format!("server said: bad token {text}"));
            }
            ev
        };
        // Not known yet: recorded as it is (what the fix cannot change).
        log.write_ahead(failing(1, REFRESHED)).unwrap();
        log.add_secrets(&[REFRESHED.to_string(), CONFIGURED.to_string()]);
        log.append(failing(2, REFRESHED)).unwrap();
        log.append(failing(3, &format!("Bearer {REFRESHED} and {CONFIGURED}")))
            .unwrap();
        // Adding what is already known changes nothing.
        log.add_secrets(&[REFRESHED.to_string(), String::new()]);
        log.append(failing(4, REFRESHED)).unwrap();
        log.close().unwrap();
        let recs = records(&path);
        assert_eq!(recs.len(), 4, "{fsync:?}");
        assert!(recs[0].to_string().contains(REFRESHED));
        for rec in &recs[1..] {
            let text = rec.to_string();
            assert!(!text.contains(REFRESHED), "{fsync:?}: {text}");
            assert!(!text.contains(CONFIGURED), "{fsync:?}: {text}");
            assert!(text.contains("[REDACTED]"), "{fsync:?}: {text}");
        }
        assert!(matches!(
            verify(&path, None),
            VerifyReport::Ok { count: 4, .. }
        ));
    }
}

#[test]
fn redact_pointers_replace_values_and_keep_the_digest_of_what_was_sent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let o = AuditOptions {
        redact: vec![
            "/password".into(),
            "/auth/token".into(),
            "/items/*/secret".into(),
            "/absent".into(),
        ],
        ..opts("s")
    };
    let log = AuditLog::open(&path, o).unwrap();
    let args = json!({
        "password": "hunter2", "auth": {"token": "t0k", "user": "ann"},
        "items": [{"secret": 1, "id": "a"}, {"secret": [2], "id": "b"}], "path": "/x"
    });
    let digest = audit::args_digest(&args);
    let expected = json!({
        "password": "[REDACTED]", "auth": {"token": "[REDACTED]", "user": "ann"},
        "items": [{"secret": "[REDACTED]", "id": "a"}, {"secret": "[REDACTED]", "id": "b"}], "path": "/x"
    });
    assert_eq!(log.redact_arguments(&args), expected);
    // Unredacted arguments handed to append are redacted there too.
    log.append(call(1, Effect::Allow, Outcome::Ok, args))
        .unwrap();
    log.close().unwrap();
    let recs = records(&path);
    assert_eq!(recs[0]["arguments"], expected);
    assert_eq!(recs[0]["args_sha256"], digest.as_str());
    assert!(matches!(
        AuditLog::open(
            &path,
            AuditOptions {
                redact: vec!["password".into()],
                ..opts("s")
            }
        ),
        Err(AuditError::BadPointer { .. })
    ));
}

#[test]
fn many_threads_share_one_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let o = AuditOptions {
        fsync: FsyncMode::Batch,
        ..opts("threads")
    };
    let log = std::sync::Arc::new(AuditLog::open(&path, o).unwrap());
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let log = std::sync::Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..150 {
                    log.append(call(
                        t * 1000 + i,
                        Effect::Allow,
                        Outcome::Ok,
                        json!({"t": t}),
                    ))
                    .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    std::sync::Arc::into_inner(log).unwrap().close().unwrap();
    assert!(matches!(
        verify(&path, None),
        VerifyReport::Ok { count: 1200, .. }
    ));
}

#[test]
fn two_handles_in_one_process_keep_one_chain() {
    // Two independent opens of one file behave like two processes: the
    // file lock and the tail re-read keep the chain single.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let a = AuditLog::open(&path, opts("a")).unwrap();
    let b = AuditLog::open(&path, opts("b")).unwrap();
    for i in 0..20 {
        let log = if i % 3 == 0 { &a } else { &b };
        log.append(call(i, Effect::Allow, Outcome::Ok, json!({})))
            .unwrap();
    }
    a.close().unwrap();
    b.close().unwrap();
    assert!(matches!(
        verify(&path, None),
        VerifyReport::Ok { count: 20, .. }
    ));
}

#[test]
fn empty_and_missing_logs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.jsonl");
    std::fs::write(&path, "").unwrap();
    assert_eq!(
        verify(&path, None),
        VerifyReport::Ok {
            count: 0,
            last_hash: audit::ZERO_HASH.into(),
            mode: HashMode::Sha256,
            heads: vec![],
            unfinished: vec![],
        }
    );
    assert!(matches!(
        verify(&dir.path().join("missing"), None),
        VerifyReport::Unreadable { .. }
    ));
    let (seq, problem) = bad(verify_reader(&b"\n"[..], None));
    assert_eq!(seq, 1);
    assert!(matches!(problem, Problem::Unparseable { .. }));
}

#[test]
fn key_files_are_read_raw_with_the_trailing_newline_removed() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "00ff\r\n").unwrap();
    assert_eq!(audit::load_key(Some(&key)).unwrap(), Some(b"00ff".to_vec()));
    std::fs::write(&key, "\n").unwrap();
    let err = audit::load_key(Some(&key)).unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
    assert!(audit::load_key(Some(&dir.path().join("none"))).is_err());
}

#[test]
fn secrets_of_a_config_cover_env_env_from_and_headers() {
    use std::collections::BTreeMap;
    use std::time::Duration;
    use warden::config::{
        Config, RemoteConfig, SandboxSpec, Scope, Secret, ServerConfig, StdioConfig,
        TransportConfig, Trust,
    };
    let server = |name: &str, transport| ServerConfig {
        name: name.into(),
        transport,
        timeout: Duration::from_secs(30),
        protocol: Default::default(),
        sampling: Default::default(),
        elicitation: Default::default(),
        disabled: false,
        trust: Trust::Untrusted,
        sandbox: SandboxSpec::default(),
        scope: Scope::Explicit,
        source: "/cfg.json".into(),
        digest: "00".repeat(32),
        content: Default::default(),
        approval_digest: String::new(),
    };
    let stdio = TransportConfig::Stdio(StdioConfig {
        command: "node".into(),
        program: "/usr/bin/node".into(),
        args: vec![],
        env: BTreeMap::from([("API_KEY".into(), Secret::new("env-canary-123"))]),
        env_from: vec!["PATH".into(), "WARDEN_TEST_SURELY_UNSET_VAR".into()],
        cwd: None,
    });
    let http = TransportConfig::Http(RemoteConfig {
        url: "https://example.com/mcp".into(),
        headers: BTreeMap::from([("Authorization".into(), Secret::new("Bearer hdr-canary-456"))]),
        oauth: Default::default(),
        oauth_store: None,
    });
    let config = Config {
        workspace: "/srv".into(),
        sources: vec![],
        servers: BTreeMap::from([
            ("a".into(), server("a", stdio)),
            ("b".into(), server("b", http)),
        ]),
        rules: vec![],
        policies: None,
        audit: Default::default(),
        digest: "00".repeat(32),
        ..Default::default()
    };
    let secrets = warden::config::secrets_of(&config);
    let path_value = std::env::var("PATH").unwrap();
    for s in [
        "env-canary-123",
        "Bearer hdr-canary-456",
        "hdr-canary-456",
        path_value.as_str(),
    ] {
        assert!(secrets.iter().any(|x| x == s), "{s} missing");
    }

    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(
        &log_path,
        AuditOptions {
            secrets,
            ..opts("s")
        },
    )
    .unwrap();
    log.append(call(
        1,
        Effect::Allow,
        Outcome::Ok,
        json!({"q": "hdr-canary-456 and env-canary-123", "p": path_value}),
    ))
    .unwrap();
    log.close().unwrap();
    let text = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        !text.contains("canary") && !text.contains(&path_value),
        "{text}"
    );
}

#[test]
fn batch_mode_writes_promptly_and_drop_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(
        &path,
        AuditOptions {
            fsync: FsyncMode::Batch,
            ..opts("batch")
        },
    )
    .unwrap();
    log.append(call(1, Effect::Allow, Outcome::Ok, json!({})))
        .unwrap();
    // The writer thread drains the queue without waiting for a sync or close.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::fs::read_to_string(&path).unwrap().lines().count() < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "batch record never written"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(log.last().0, 1);
    for i in 2..=500 {
        log.append(call(i, Effect::Allow, Outcome::Ok, json!({"i": i})))
            .unwrap();
    }
    drop(log); // no close: drop still writes and syncs the rest
    assert!(matches!(
        verify(&path, None),
        VerifyReport::Ok { count: 500, .. }
    ));
    let seqs: Vec<u64> = records(&path)
        .iter()
        .map(|r| {
            r["call_id"].as_str().unwrap()["call-".len()..]
                .parse::<u64>()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (1..=500).collect::<Vec<_>>(), "queue order kept");
}

#[test]
fn records_parse_back_into_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let events = all_events();
    write_log(&path, opts("s"), events.clone());
    let text = std::fs::read_to_string(&path).unwrap();
    let parsed: Vec<Event> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed, events);
}
