//! The log changed from outside while a session writes it: cut, cut and
//! padded back, rewritten under another writer's head, renamed, removed or
//! replaced. Each attack is made the way an attacker would (another open of
//! the file, `rename(2)`, `unlink(2)`), and each must end with the session
//! refusing to write on (so the calls it would record are not made) and
//! `verify` still showing what happened. Before these checks, the session
//! chained its next records onto whatever the file held, moved the head
//! past the cut, and `verify` passed with the cut records gone.
//!
//! Also: a path that is no regular file is refused, a log with records and
//! no head is not appended to until its end is accepted, `verify` lists
//! calls whose outcome is unknown, and a record stays bounded whatever the
//! arguments.

mod support;

use support::{failure, lines, log_in, opts, pending, result};

use std::fs::OpenOptions;
use std::path::Path;

use serde_json::{Value, json};
use warden_audit::{
    AuditError, AuditLog, AuditOptions, Caller, DecisionRecord, Event, FsyncMode, Outcome, Problem,
    RequestKind, RequestRecord, ResultRecord, VerifyReport, accept_head, head_path, read_head,
    verify,
};
use warden_core::digest::{canonical_json, sha256_hex};
use warden_core::{Effect, Stage};

const KEY: &[u8] = b"an audit key of thirty-two bytes";
const MODES: [FsyncMode; 3] = [FsyncMode::EveryRecord, FsyncMode::Batch, FsyncMode::Never];

/// One call as a session records it: pending, then its result.
fn call(log: &AuditLog, id: &str, evidence: &str) -> Result<(), AuditError> {
    log.write_ahead(pending(id, json!({"x": evidence})))?;
    log.append(result(id))
}

/// Byte offset where record `seq` (1-based) starts.
fn offset_of(path: &Path, seq: usize) -> u64 {
    std::fs::read_to_string(path)
        .unwrap()
        .split_inclusive('\n')
        .take(seq - 1)
        .map(|l| l.len() as u64)
        .sum()
}

/// Cuts the file from outside, through a descriptor of its own.
fn cut(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// Waits until the head file names record `seq` (`batch` moves it after
/// its sync, at most 50 ms later).
fn wait_for_head(path: &Path, key: Option<&[u8]>, seq: u64) {
    for _ in 0..400 {
        if read_head(path, key)
            .ok()
            .flatten()
            .is_some_and(|h| h.head.seq >= seq)
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("the head never reached seq {seq}");
}

#[test]
fn a_log_cut_while_a_session_writes_is_refused_and_never_written_over() {
    for key in [None, Some(KEY)] {
        for fsync in MODES {
            let dir = tempfile::tempdir().unwrap();
            let path = log_in(&dir);
            let log = AuditLog::open(&path, opts(fsync, key)).unwrap();
            for i in 0..3 {
                call(&log, &format!("a{i}"), "before").unwrap();
            }
            call(&log, "evidence", "EVIDENCE").unwrap();
            call(&log, "b0", "after").unwrap();
            // Everything so far is in the file and under the head (batch:
            // once its writer has written and synced the last result).
            let n = 10;
            wait_for_head(&path, key, n as u64);
            assert_eq!(lines(&path).len(), n);
            // The attacker cuts the log before the evidence.
            let evidence = lines(&path)
                .iter()
                .position(|r| r["arguments"]["x"] == "EVIDENCE")
                .unwrap();
            let at = offset_of(&path, evidence + 1);
            cut(&path, at);

            // The next call is refused, and so is every later one: more
            // than were cut, which is what once moved the head past the
            // cut.
            let refused = log
                .write_ahead(pending("c0", json!({"x": "after the cut"})))
                .unwrap_err();
            assert!(matches!(refused, AuditError::Cut { .. }), "{refused:?}");
            let message = refused.to_string();
            assert!(
                message.contains("cut from outside") && message.contains("new log file"),
                "{message}"
            );
            for i in 1..10 {
                let later = call(&log, &format!("c{i}"), "later").unwrap_err();
                assert!(later.to_string().contains("cut from outside"), "{later}");
            }
            assert!(log.close().is_err(), "{fsync:?}: close reports the failure");
            assert_eq!(
                std::fs::metadata(&path).unwrap().len(),
                at,
                "{fsync:?}: nothing was written after the cut"
            );
            // The head still names the last record before the cut.
            let (seq, problem) = failure(verify(&path, key));
            assert_eq!(seq, evidence as u64 + 1, "{fsync:?}");
            assert!(
                matches!(problem, Problem::Truncated { head_seq, .. } if head_seq == n as u64),
                "{fsync:?}: {problem:?}"
            );
        }
    }
}

/// Recomputes `prev` and `hash` of `records` from `prev` on, with plain
/// SHA-256: what someone who can write the file but has no key can do.
fn rechain_plain(records: &mut [Value], mut prev: String) {
    for record in records {
        let map = record.as_object_mut().unwrap();
        map.insert("prev".into(), Value::String(prev.clone()));
        map.remove("hash");
        let hash = sha256_hex(canonical_json(&Value::Object(map.clone())).as_bytes());
        map.insert("hash".into(), Value::String(hash.clone()));
        prev = hash;
    }
}

#[test]
fn a_cut_padded_back_past_the_sessions_end_is_refused_too() {
    for fsync in MODES {
        let dir = tempfile::tempdir().unwrap();
        let path = log_in(&dir);
        let log = AuditLog::open(&path, opts(fsync, None)).unwrap();
        for i in 0..4 {
            call(&log, &format!("a{i}"), "before").unwrap();
        }
        let n = 8;
        wait_for_head(&path, None, n as u64);
        assert_eq!(lines(&path).len(), n);
        // Cut the last two calls and put back forged ones, chained from the
        // cut, and longer than what was cut: the file ends up larger than
        // where the session's last write ended.
        let mut records = lines(&path);
        let mut forged: Vec<Value> = records.split_off(n - 4);
        for record in &mut forged {
            if record["event"] == "tool_call" {
                record["arguments"] = json!({"x": "an innocent call, padded to be longer"});
            }
        }
        let prev = records.last().unwrap()["hash"]
            .as_str()
            .unwrap()
            .to_string();
        rechain_plain(&mut forged, prev);
        let original_len = std::fs::metadata(&path).unwrap().len();
        cut(&path, offset_of(&path, n - 3));
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        for record in &forged {
            std::io::Write::write_all(&mut file, (canonical_json(record) + "\n").as_bytes())
                .unwrap();
        }
        drop(file);
        let forged_len = std::fs::metadata(&path).unwrap().len();
        assert!(forged_len > original_len);

        let refused = call(&log, "next", "next").unwrap_err();
        assert!(
            matches!(&refused, AuditError::Cut { detail, .. } if detail.contains("no longer there")),
            "{fsync:?}: {refused:?}"
        );
        assert!(log.close().is_err());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), forged_len);
        // The forged chain is whole on its own; the head catches it.
        let (seq, problem) = failure(verify(&path, None));
        assert_eq!(seq, n as u64, "{fsync:?}");
        assert!(
            matches!(problem, Problem::HeadMismatch { .. }),
            "{problem:?}"
        );
    }
}

#[test]
fn the_head_is_never_moved_past_a_record_that_was_replaced() {
    // Two writers share the log (two opens, as two warden processes).
    // `b` writes last and moves the head to its record; the file is cut
    // back to exactly where `a` last wrote, so `a` sees no change in size
    // and goes on writing where `b`'s records were.
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let a = AuditLog::open(&path, opts(FsyncMode::Never, None)).unwrap();
    call(&a, "a0", "a").unwrap();
    let a_end = std::fs::metadata(&path).unwrap().len();
    let b = AuditLog::open(&path, opts(FsyncMode::Never, None)).unwrap();
    for i in 0..3 {
        call(&b, &format!("b{i}"), "EVIDENCE").unwrap();
    }
    b.close().unwrap();
    let head = read_head(&path, None).unwrap().unwrap().head;
    assert_eq!(head.seq, 8);
    cut(&path, a_end);

    // `a` writes records 3..=8 over the cut: once it reaches the head's
    // seq with another record, the head stays and the log refuses more.
    let mut refused = None;
    for i in 1..10 {
        if let Err(e) = call(&a, &format!("a{i}"), "a") {
            refused = Some(e);
            break;
        }
    }
    let refused = refused.expect("the log refused to go on");
    assert!(
        refused
            .to_string()
            .contains("is not the one its head file names"),
        "{refused}"
    );
    assert_eq!(read_head(&path, None).unwrap().unwrap().head, head);
    let (seq, problem) = failure(verify(&path, None));
    assert_eq!(seq, 8);
    assert!(
        matches!(problem, Problem::HeadMismatch { .. }),
        "{problem:?}"
    );
    assert!(a.close().is_err());
}

#[test]
fn a_log_renamed_removed_or_replaced_while_a_session_writes_is_refused() {
    type Attack = fn(&Path, &Path);
    let attacks: [(&str, Attack); 4] = [
        ("renamed", |log, aside| std::fs::rename(log, aside).unwrap()),
        ("removed", |log, _| std::fs::remove_file(log).unwrap()),
        ("replaced by another file", |log, aside| {
            std::fs::write(aside, "").unwrap();
            std::fs::rename(aside, log).unwrap();
        }),
        ("hard-linked elsewhere, then removed", |log, aside| {
            std::fs::hard_link(log, aside).unwrap();
            std::fs::remove_file(log).unwrap();
        }),
    ];
    for (what, attack) in attacks {
        for fsync in MODES {
            let dir = tempfile::tempdir().unwrap();
            let path = log_in(&dir);
            let aside = dir.path().join("aside.jsonl");
            let log = AuditLog::open(&path, opts(fsync, None)).unwrap();
            call(&log, "a0", "before").unwrap();
            log.write_ahead(pending("a1", json!({}))).unwrap();
            attack(&path, &aside);
            let refused = call(&log, "a2", "after").unwrap_err();
            assert!(
                matches!(refused, AuditError::Moved { .. }),
                "{what}, {fsync:?}: {refused:?}"
            );
            assert!(
                refused.to_string().contains("moved, removed or replaced"),
                "{refused}"
            );
            assert!(call(&log, "a3", "later").is_err(), "{what}, {fsync:?}");
            let _ = log.close();
            // Nothing went to the file out of sight after the attack.
            for file in [&path, &aside] {
                if let Ok(text) = std::fs::read_to_string(file) {
                    assert!(!text.contains("\"a2\""), "{what}, {fsync:?}: {text}");
                }
            }
        }
    }
}

#[test]
fn a_log_reached_through_a_symlink_is_written_and_a_repointed_link_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.jsonl");
    let link = dir.path().join("audit.jsonl");
    // The target exists (warden creates no file through a link).
    std::fs::write(&real, "").unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    // As before: the link is followed, the records go to its target.
    let log = AuditLog::open(&link, opts(FsyncMode::Never, None)).unwrap();
    call(&log, "a0", "x").unwrap();
    assert_eq!(lines(&real).len(), 2);
    assert!(verify(&link, None).is_ok());
    // The link now points elsewhere: not the file the session writes.
    let decoy = dir.path().join("decoy.jsonl");
    std::fs::write(&decoy, "").unwrap();
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&decoy, &link).unwrap();
    let refused = call(&log, "a1", "x").unwrap_err();
    assert!(matches!(refused, AuditError::Moved { .. }), "{refused:?}");
    assert_eq!(std::fs::read_to_string(&decoy).unwrap(), "");
}

#[test]
fn a_log_path_that_is_no_regular_file_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.jsonl");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let to_null = dir.path().join("null.jsonl");
    std::os::unix::fs::symlink("/dev/null", &to_null).unwrap();
    let cases: [(&Path, &str); 4] = [
        (Path::new("/dev/null"), "character device"),
        (Path::new("/dev/full"), "character device"),
        (&fifo, "FIFO"),
        (&to_null, "character device"),
    ];
    for (path, kind) in cases {
        for fsync in MODES {
            let error = AuditLog::open(path, opts(fsync, None)).unwrap_err();
            assert!(
                matches!(error, AuditError::NotRegular { .. }),
                "{}: {error:?}",
                path.display()
            );
            let message = error.to_string();
            assert!(
                message.contains(&path.display().to_string())
                    && message.contains(kind)
                    && message.contains("not a regular file"),
                "{message}"
            );
        }
    }
    assert!(!head_path(&fifo).exists() && !head_path(&to_null).exists());
}

/// A link left in the log's or head's place pointing at nothing (by
/// whoever could write the folder: a server whose write grant held a
/// configured `audit.path`, in an earlier session) made warden create the
/// link's target and fill it with records, lines of text servers choose:
/// `~/.bash_profile`, say. The log and head are created only where their
/// path says.
#[test]
fn no_log_or_head_is_created_where_a_link_points() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("bash_profile");
    let log = dir.path().join("audit.jsonl");
    std::os::unix::fs::symlink(&target, &log).unwrap();
    for fsync in MODES {
        let error = AuditLog::open(&log, opts(fsync, None)).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert!(!target.exists(), "the log was created through the link");
    }
    // The head's place: the log itself is new and regular.
    let log = dir.path().join("other.jsonl");
    std::os::unix::fs::symlink(&target, head_path(&log)).unwrap();
    let error = AuditLog::open(&log, opts(FsyncMode::Never, None)).unwrap_err();
    assert!(error.to_string().contains("symbolic link"), "{error}");
    assert!(!target.exists(), "the head was created through the link");
    // A link to a log that exists is still followed.
    let real = dir.path().join("kept.jsonl");
    let link = dir.path().join("link.jsonl");
    AuditLog::open(&real, opts(FsyncMode::Never, None)).unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let opened = AuditLog::open(&link, opts(FsyncMode::Never, None)).unwrap();
    call(&opened, "a0", "x").unwrap();
    assert!(lines(&real).len() >= 2);
}

#[test]
fn a_log_with_records_and_no_usable_head_is_not_appended_to_until_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let log = AuditLog::open(&path, opts(FsyncMode::Never, None)).unwrap();
    for i in 0..4 {
        call(&log, &format!("a{i}"), "x").unwrap();
    }
    log.close().unwrap();
    let n = lines(&path).len() as u64;

    // The attack: cut the tail and remove the head. Appending used to
    // create a fresh head at the cut, and the cut was gone for good.
    cut(&path, offset_of(&path, n as usize - 1));
    std::fs::remove_file(head_path(&path)).unwrap();
    let refused = AuditLog::open(&path, opts(FsyncMode::Never, None)).unwrap_err();
    assert!(matches!(refused, AuditError::NoHead { .. }), "{refused:?}");
    let message = refused.to_string();
    assert!(
        message.contains("no head file")
            && message.contains(&format!(
                "warden audit verify {} --accept-head",
                path.display()
            )),
        "{message}"
    );
    assert!(!head_path(&path).exists(), "a refused open creates no head");
    // Verify says there is no head (the end cannot be vouched for).
    assert!(matches!(verify(&path, None), VerifyReport::Ok { ref heads, .. } if heads.is_empty()));

    // An emptied head file is damaged, not "no head".
    std::fs::write(head_path(&path), "").unwrap();
    let (_, problem) = failure(verify(&path, None));
    assert!(
        matches!(&problem, Problem::HeadInvalid { detail } if detail.contains("empty")),
        "{problem:?}"
    );
    let refused = AuditLog::open(&path, opts(FsyncMode::Never, None)).unwrap_err();
    assert!(
        matches!(&refused, AuditError::NoHead { why, .. } if why.contains("empty head file")),
        "{refused:?}"
    );
    // A zeroed one too (as before).
    std::fs::write(head_path(&path), vec![0u8; 1024]).unwrap();
    assert!(matches!(
        failure(verify(&path, None)).1,
        Problem::HeadInvalid { .. }
    ));

    // Someone who knows the log is as it should be accepts its end.
    let accepted = accept_head(&path, None).unwrap();
    assert_eq!(
        accepted.head.seq,
        n - 2,
        "the last call (two records) was cut"
    );
    assert!(accepted.replaced.unwrap().contains("no valid head"));
    assert!(matches!(verify(&path, None), VerifyReport::Ok { ref heads, .. } if heads.len() == 1));
    let log = AuditLog::open(&path, opts(FsyncMode::Never, None)).unwrap();
    call(&log, "b0", "x").unwrap();
    log.close().unwrap();
    assert!(verify(&path, None).is_ok());

    // A log cut under a valid head is not accepted: that is the head's
    // whole point.
    cut(&path, offset_of(&path, lines(&path).len()));
    let refused = accept_head(&path, None).unwrap_err();
    assert!(
        refused.to_string().contains("accepting it would hide"),
        "{refused}"
    );
    // A keyed log needs its key.
    let keyed = dir.path().join("keyed.jsonl");
    let log = AuditLog::open(&keyed, opts(FsyncMode::Never, Some(KEY))).unwrap();
    call(&log, "k0", "x").unwrap();
    log.close().unwrap();
    std::fs::remove_file(head_path(&keyed)).unwrap();
    assert!(
        accept_head(&keyed, None)
            .unwrap_err()
            .to_string()
            .contains("give its key")
    );
    accept_head(&keyed, Some(KEY)).unwrap();
    let log = AuditLog::open(&keyed, opts(FsyncMode::Never, Some(KEY))).unwrap();
    log.close().unwrap();

    // A new log, and an empty one with an empty head file (creation
    // interrupted), start as before.
    let fresh = dir.path().join("fresh.jsonl");
    AuditLog::open(&fresh, opts(FsyncMode::Never, None))
        .unwrap()
        .close()
        .unwrap();
    std::fs::write(head_path(&fresh), "").unwrap();
    let log = AuditLog::open(&fresh, opts(FsyncMode::Never, None)).unwrap();
    call(&log, "f0", "x").unwrap();
    log.close().unwrap();
    assert!(verify(&fresh, None).is_ok());
}

fn request(call_id: &str) -> Event {
    Event::Request(RequestRecord {
        call_id: call_id.into(),
        kind: RequestKind::Resource,
        server: Some("notes".into()),
        target: "resource__notes".into(),
        method: Some("resources/read".into()),
        caller: Caller::Gateway,
        arguments: json!({"uri": "notes://a"}),
        args_sha256: warden_audit::args_digest(&json!({"uri": "notes://a"})),
        decision: None,
        outcome: Outcome::Pending,
        error: None,
        capped: None,
    })
}

#[test]
fn verify_lists_calls_whose_outcome_is_unknown_without_failing() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let log = AuditLog::open(&path, opts(FsyncMode::Never, None)).unwrap();
    call(&log, "done", "x").unwrap();
    // Written ahead, then warden was killed: no result follows.
    log.write_ahead(pending("killed-1", json!({}))).unwrap();
    log.write_ahead(request("killed-2")).unwrap();
    log.close().unwrap();
    match verify(&path, None) {
        VerifyReport::Ok { unfinished, .. } => {
            let ids: Vec<(&str, u64, &str)> = unfinished
                .iter()
                .map(|u| (u.call_id.as_str(), u.seq, u.event.as_str()))
                .collect();
            assert_eq!(
                ids,
                [("killed-1", 3, "tool_call"), ("killed-2", 4, "request")]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_record_stays_bounded_whatever_the_arguments_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let secret = "s3cr3t-token-value";
    let log = AuditLog::open(
        &path,
        AuditOptions {
            secrets: vec![secret.into()],
            ..opts(FsyncMode::Never, None)
        },
    )
    .unwrap();
    // Many keys, each under the per-string limit (the red team's 6000 x
    // 4000 bytes, scaled down): once 24 MB in one record.
    let many: serde_json::Map<String, Value> = (0..200)
        .map(|i| (format!("k{i}"), Value::String("B".repeat(4000))))
        .collect();
    let many = Value::Object(many);
    let digest = warden_audit::args_digest(&many);
    log.write_ahead(pending("many-keys", many.clone())).unwrap();
    // Many small values.
    let values = json!({"list": vec![0; 200_000]});
    log.write_ahead(pending("many-values", values.clone()))
        .unwrap();
    // A long error from a server, with a secret where the cut would fall.
    let cut_at = warden_audit::TEXT_KEPT - 8;
    let error = format!("{}{secret}{}", "e".repeat(cut_at), "E".repeat(1_000_000));
    log.append(Event::ToolResult(ResultRecord {
        error: Some(error.clone()),
        outcome: Outcome::RpcError,
        ..match result("many-keys") {
            Event::ToolResult(r) => r,
            _ => unreachable!(),
        }
    }))
    .unwrap();
    // Arguments that fit are recorded as they were.
    log.write_ahead(pending("small", json!({"path": "/a"})))
        .unwrap();
    // A policy giving one reason per argument key, the first one long.
    let mut reasons: Vec<String> = (0..1000).map(|i| format!("bad key k{i}")).collect();
    reasons[0] = "R".repeat(20_000);
    let Event::ToolCall(mut denied) = pending("denied", json!({})) else {
        unreachable!()
    };
    denied.outcome = Outcome::Denied;
    denied.decision = Some(DecisionRecord {
        effect: Effect::Deny,
        stage: Stage::Policy,
        reasons: reasons.clone(),
        policy_sha256: None,
    });
    log.append(Event::ToolCall(denied)).unwrap();
    log.close().unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    for line in text.lines() {
        assert!(line.len() < 64 * 1024, "a record of {} bytes", line.len());
    }
    assert!(!text.contains(secret));
    let records = lines(&path);
    assert_eq!(
        records[0]["arguments"],
        json!({
            "omitted": format!(
                "too large to record: more than {} bytes even with long strings shortened",
                warden_audit::MAX_ARGUMENTS_BYTES
            ),
            "bytes": canonical_json(&many).len(),
            "sha256": digest,
        })
    );
    assert_eq!(records[0]["args_sha256"], digest);
    assert_eq!(
        records[1]["arguments"]["bytes"],
        canonical_json(&values).len()
    );
    let recorded = records[2]["error"].as_str().unwrap();
    assert!(
        recorded.starts_with(&format!("{}[REDAC", "e".repeat(cut_at))),
        "{recorded}"
    );
    assert!(recorded.len() < warden_audit::MAX_TEXT_BYTES);
    assert!(
        recorded.ends_with(&format!(
            "… [{} bytes, sha256 {}]",
            error.len(),
            sha256_hex(error.as_bytes())
        )),
        "{recorded}"
    );
    assert_eq!(records[3]["arguments"], json!({"path": "/a"}));
    let recorded = records[4]["decision"]["reasons"].as_array().unwrap();
    assert_eq!(recorded.len(), warden_audit::MAX_REASONS);
    assert!(recorded[0].as_str().unwrap().ends_with(&format!(
        "… [20000 bytes, sha256 {}]",
        sha256_hex("R".repeat(20_000).as_bytes())
    )));
    assert_eq!(recorded[1], "bad key k1");
    assert_eq!(
        recorded[warden_audit::MAX_REASONS - 1],
        format!(
            "… and {} more reasons (sha256 of all: {})",
            1000 - (warden_audit::MAX_REASONS - 1),
            warden_core::digest::sha256_json(&json!(reasons))
        )
    );
    assert!(verify(&path, None).is_ok());
}
