//! Write-ahead records and the head file: a pending record is in the file
//! when `write_ahead` returns (in every fsync mode); the head file follows
//! the log and catches records cut off its end, a rewritten log, and a
//! keyed log recomputed without its key.

mod support;

use support::{failure, lines, log_in, opts, pending, result};

use std::path::Path;

use serde_json::{Value, json};
use warden_audit::{
    AuditError, AuditLog, AuditOptions, Event, ExpectedHead, FsyncMode, HEAD_SLOT_SIZE, HashMode,
    Problem, VerifyOptions, VerifyReport, head_path, read_head, verify, verify_with,
};

fn write(path: &Path, fsync: FsyncMode, key: Option<&[u8]>, n: usize) {
    let log = AuditLog::open(path, opts(fsync, key)).unwrap();
    for i in 0..n {
        let id = format!("c{i}");
        log.write_ahead(pending(&id, json!({"i": i}))).unwrap();
        log.append(result(&id)).unwrap();
    }
    log.close().unwrap();
}

#[test]
fn a_pending_record_is_in_the_file_when_write_ahead_returns_in_every_mode() {
    for fsync in [FsyncMode::Batch, FsyncMode::EveryRecord, FsyncMode::Never] {
        let dir = tempfile::tempdir().unwrap();
        let path = log_in(&dir);
        let log = AuditLog::open(&path, opts(fsync, None)).unwrap();
        // Queued before it (batch): written first, in order.
        log.append(Event::SessionEnd {
            tool_calls: 0,
            denied: 0,
        })
        .unwrap();
        log.write_ahead(pending("c1", json!({}))).unwrap();
        // No wait, no close: the file already holds both, in order.
        let records = lines(&path);
        let events: Vec<_> = records.iter().map(|r| r["event"].clone()).collect();
        assert_eq!(
            events,
            [json!("session_end"), json!("tool_call")],
            "{fsync:?}"
        );
        assert_eq!(records[1]["outcome"], "pending");
        assert_eq!(records[1]["call_id"], "c1");
        log.append(result("c1")).unwrap();
        log.close().unwrap();
        let records = lines(&path);
        assert_eq!(records[2]["event"], "tool_result");
        assert_eq!(records[2]["call_id"], "c1");
        assert!(verify(&path, None).is_ok(), "{fsync:?}");
    }
}

#[test]
fn the_head_follows_the_log_in_every_mode() {
    for fsync in [FsyncMode::Batch, FsyncMode::EveryRecord, FsyncMode::Never] {
        let dir = tempfile::tempdir().unwrap();
        let path = log_in(&dir);
        // A new log starts with a head at seq 0.
        let log = AuditLog::open(&path, opts(fsync, None)).unwrap();
        let head = read_head(&path, None).unwrap().unwrap().head;
        assert_eq!(head.seq, 0);
        for i in 0..5 {
            log.write_ahead(pending(&format!("c{i}"), json!({})))
                .unwrap();
        }
        if fsync != FsyncMode::Batch {
            // Moved with each record.
            let (seq, hash) = log.last();
            let head = read_head(&path, None).unwrap().unwrap().head;
            assert_eq!((head.seq, head.hash), (seq, hash), "{fsync:?}");
        }
        log.append(result("c4")).unwrap();
        log.close().unwrap();
        // At close, in every mode, the head is the last record.
        let last = lines(&path).pop().unwrap();
        let read = read_head(&path, None).unwrap().unwrap();
        assert!(read.authenticated);
        assert_eq!(
            (read.head.seq, json!(read.head.hash)),
            (6, last["hash"].clone())
        );
        assert_eq!(read.head.mode, HashMode::Sha256);
        assert_eq!(
            std::fs::metadata(head_path(&path)).unwrap().len(),
            2 * HEAD_SLOT_SIZE as u64
        );
        match verify(&path, None) {
            VerifyReport::Ok { count, heads, .. } => {
                assert_eq!(count, 6);
                assert_eq!(heads.len(), 1);
                assert_eq!(heads[0].seq, 6);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn batch_moves_the_head_after_its_sync_without_a_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let log = AuditLog::open(&path, opts(FsyncMode::Batch, None)).unwrap();
    log.write_ahead(pending("c1", json!({}))).unwrap();
    let (seq, hash) = log.last();
    // The writer thread syncs within BATCH_INTERVAL, then moves the head.
    wait_for_head(&path, seq, &hash);
    drop(log);
}

/// Polls `ready` every 5 ms until it gives a value, failing with what
/// `state` says after a generous deadline.
fn wait_until<T>(mut ready: impl FnMut() -> Result<T, String>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match ready() {
            Ok(value) => return value,
            Err(state) => assert!(std::time::Instant::now() < deadline, "{state}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Waits until the head file names `seq`.
fn wait_for_head(path: &Path, seq: u64, hash: &str) {
    let head = wait_until(|| {
        let head = read_head(path, None).unwrap().unwrap().head;
        if head.seq == seq {
            Ok(head)
        } else {
            Err(format!("head at {} never reached {seq}", head.seq))
        }
    });
    assert_eq!(head.hash, hash);
}

/// The writer thread is woken by the first unsynced write-ahead record
/// only (later ones find it already waiting for the sync's deadline): each
/// record must still be synced, and the head moved, without a close; also
/// after a sync, and past `BATCH_SYNC_RECORDS` written in a row.
#[test]
fn batch_syncs_write_ahead_records_after_each_sync_and_in_bursts() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let log = AuditLog::open(&path, opts(FsyncMode::Batch, None)).unwrap();
    for round in 0..3 {
        log.write_ahead(pending(&format!("c{round}"), json!({})))
            .unwrap();
        let (seq, hash) = log.last();
        wait_for_head(&path, seq, &hash);
    }
    for i in 0..(warden_audit::BATCH_SYNC_RECORDS * 2 + 7) {
        log.write_ahead(pending(&format!("burst{i}"), json!({"i": i})))
            .unwrap();
    }
    let (seq, hash) = log.last();
    wait_for_head(&path, seq, &hash);
    // Queued appends and write-ahead records mixed: one chain, in order.
    log.append(result("burst0")).unwrap();
    log.write_ahead(pending("after", json!({}))).unwrap();
    let (seq, hash) = log.last();
    wait_for_head(&path, seq, &hash);
    log.close().unwrap();
    match verify(&path, None) {
        VerifyReport::Ok { count, .. } => assert_eq!(count, seq),
        other => panic!("{other:?}"),
    }
    let recs = lines(&path);
    assert_eq!(recs[recs.len() - 2]["event"], "tool_result");
    assert_eq!(recs[recs.len() - 1]["call_id"], "after");
}

/// Waits until the file holds `n` records.
fn wait_for_records(path: &Path, n: usize) -> Vec<Value> {
    wait_until(|| {
        let recs = lines(path);
        if recs.len() >= n {
            Ok(recs)
        } else {
            Err(format!("{} records in the file, never {n}", recs.len()))
        }
    })
}

/// In `batch` an `append` made while a sync is pending does not wake the
/// writer (issue 15: a thread switch per call): the record must still
/// reach the file without a close (at that sync), and the next
/// `write_ahead` must write it first, in the caller's thread, before its
/// own record. An `append` with no sync pending still wakes the writer.
#[test]
fn batch_writes_result_records_without_a_wake_up_or_a_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let log = AuditLog::open(&path, opts(FsyncMode::Batch, None)).unwrap();
    // A sync is pending after the write-ahead: the result waits for it.
    log.write_ahead(pending("c1", json!({}))).unwrap();
    log.append(result("c1")).unwrap();
    let recs = wait_for_records(&path, 2);
    assert_eq!(recs[1]["event"], "tool_result");
    assert_eq!(recs[1]["call_id"], "c1");
    // That sync done, nothing is pending: an append alone wakes the writer.
    let (seq, hash) = log.last();
    wait_for_head(&path, seq, &hash);
    log.append(result("lone")).unwrap();
    let recs = wait_for_records(&path, 3);
    assert_eq!(recs[2]["call_id"], "lone");
    // The next call's write-ahead writes the queued result before its own
    // record, by the time it returns.
    for i in 2..40 {
        log.write_ahead(pending(&format!("c{i}"), json!({"i": i})))
            .unwrap();
        log.append(result(&format!("c{i}"))).unwrap();
        log.write_ahead(pending(&format!("d{i}"), json!({})))
            .unwrap();
        let recs = lines(&path);
        let n = recs.len();
        assert_eq!(recs[n - 2]["event"], "tool_result", "round {i}");
        assert_eq!(recs[n - 2]["call_id"], format!("c{i}"));
        assert_eq!(recs[n - 1]["call_id"], format!("d{i}"));
    }
    log.close().unwrap();
    match verify(&path, None) {
        VerifyReport::Ok { count, .. } => assert_eq!(count, 3 + 38 * 3),
        other => panic!("{other:?}"),
    }
}

/// Two handles on one log in one process (two open file descriptions, so
/// two `flock` holders, as two processes would be), alternating: each
/// continues the other's chain.
#[test]
fn two_handles_alternating_write_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let a = AuditLog::open(&path, opts(FsyncMode::Never, None)).unwrap();
    let b = AuditLog::open(&path, opts(FsyncMode::Batch, None)).unwrap();
    for i in 0..20 {
        let (log, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        log.write_ahead(pending(&format!("c{i}"), json!({"i": i})))
            .unwrap();
        assert_eq!(log.last().0, i + 1);
        assert!(other.last().0 < i + 1);
    }
    a.close().unwrap();
    b.close().unwrap();
    match verify(&path, None) {
        VerifyReport::Ok { count, .. } => assert_eq!(count, 20),
        other => panic!("{other:?}"),
    }
}

#[test]
fn records_cut_off_the_end_are_caught_with_the_missing_range() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    write(&path, FsyncMode::EveryRecord, None, 5); // seq 1..=10
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text.lines().take(7).collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();

    let (seq, problem) = failure(verify(&path, None));
    assert_eq!(seq, 8);
    assert!(
        matches!(&problem, Problem::Truncated { head_seq: 10, .. }),
        "{problem:?}"
    );
    let message = problem.to_string();
    assert!(
        message.contains("records seq 8 to 10 are missing"),
        "{message}"
    );
    // A session does not extend it either.
    match AuditLog::open(&path, opts(FsyncMode::EveryRecord, None)) {
        Err(AuditError::Truncated {
            head_seq: 10,
            log_seq: 7,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    // Cut to nothing: every record is missing.
    std::fs::write(&path, "").unwrap();
    let (seq, problem) = failure(verify(&path, None));
    assert_eq!(seq, 1);
    assert!(matches!(problem, Problem::Truncated { head_seq: 10, .. }));
}

#[test]
fn a_log_longer_than_its_head_is_fine_and_a_given_head_is_checked_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    write(&path, FsyncMode::Never, None, 2); // seq 1..=4
    let head = read_head(&path, None).unwrap().unwrap().head;
    let kept = head.clone();
    // The head file lags (a crash before its update): still fine.
    let older = dir.path().join("older.head");
    std::fs::copy(head_path(&path), &older).unwrap();
    write(&path, FsyncMode::Never, None, 1); // seq 5..=6
    std::fs::copy(&older, head_path(&path)).unwrap();
    assert!(verify(&path, None).is_ok());

    // A head kept elsewhere (a CI job's output): reached and matched.
    let given = ExpectedHead::parse(&kept.spec(), "--head").unwrap();
    let check = |heads: Vec<ExpectedHead>| {
        verify_with(
            &path,
            &VerifyOptions {
                head_file: true,
                heads,
                ..VerifyOptions::default()
            },
        )
    };
    assert!(check(vec![given.clone()]).is_ok());
    // A head beyond the log: truncation, named by the given head.
    let beyond = ExpectedHead::parse(&format!("9:{}", kept.hash), "--head").unwrap();
    let (seq, problem) = failure(check(vec![beyond]));
    assert_eq!(seq, 7);
    assert!(
        matches!(&problem, Problem::Truncated { first: 7, head_seq: 9, source } if source == "--head"),
        "{problem:?}"
    );
    // A head whose hash the log does not have at that seq.
    let other = ExpectedHead::parse(&format!("{}:{}", kept.seq, "0".repeat(64)), "--head").unwrap();
    let (seq, problem) = failure(check(vec![other]));
    assert_eq!(seq, kept.seq);
    assert!(
        matches!(problem, Problem::HeadMismatch { .. }),
        "{problem:?}"
    );
    assert!(ExpectedHead::parse("x:y", "--head").is_err());
    assert!(ExpectedHead::parse("3:abc", "--head").is_err());
}

/// Re-chains `lines` with plain SHA-256 (what someone without the key, or
/// rewriting an unkeyed log, can do).
fn rechain_plain(records: &mut [Value]) {
    let mut prev = warden_audit::ZERO_HASH.to_string();
    for record in records.iter_mut() {
        let map = record.as_object_mut().unwrap();
        map.remove("hash");
        map.insert("alg".into(), json!("sha256"));
        map.insert("prev".into(), json!(prev));
        let hash = warden_core::digest::sha256_hex(
            warden_core::digest::canonical_json(&Value::Object(map.clone())).as_bytes(),
        );
        map.insert("hash".into(), json!(hash));
        prev = hash;
    }
}

fn write_lines(path: &Path, records: &[Value]) {
    let text: String = records
        .iter()
        .map(|r| warden_core::digest::canonical_json(r) + "\n")
        .collect();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_rewritten_unkeyed_log_with_its_head_kept_is_caught_at_the_head() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    write(&path, FsyncMode::EveryRecord, None, 3); // seq 1..=6
    let mut records = lines(&path);
    // Change an argument and recompute every hash: the chain is whole...
    records[2]["arguments"] = json!({"i": 99});
    rechain_plain(&mut records);
    write_lines(&path, &records);
    assert!(warden_audit::verify_reader(&std::fs::read(&path).unwrap()[..], None).is_ok());
    // ...but the head still names the old last record.
    let (seq, problem) = failure(verify(&path, None));
    assert_eq!(seq, 6);
    assert!(
        matches!(problem, Problem::HeadMismatch { .. }),
        "{problem:?}"
    );
    assert!(matches!(
        AuditLog::open(&path, opts(FsyncMode::EveryRecord, None)),
        Err(AuditError::HeadMismatch { seq: 6, .. })
    ));
}

#[test]
fn a_keyed_log_recomputed_without_its_key_is_caught_by_the_head_or_the_key() {
    let key: &[u8] = b"a key of at least sixteen bytes";
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    write(&path, FsyncMode::EveryRecord, Some(key), 2);
    let read = read_head(&path, None).unwrap().unwrap();
    assert_eq!(read.head.mode, HashMode::HmacSha256);
    assert!(!read.authenticated, "a keyed head without the key");
    assert!(read_head(&path, Some(key)).unwrap().unwrap().authenticated);
    assert!(read_head(&path, Some(b"another key, sixteen+")).is_err());
    assert!(matches!(
        verify(&path, None),
        VerifyReport::KeyRequired { count: 4, .. }
    ));
    assert!(verify(&path, Some(key)).is_ok());

    // Recomputed as plain SHA-256: a valid unkeyed chain on its own.
    let mut records = lines(&path);
    rechain_plain(&mut records);
    write_lines(&path, &records);
    assert!(warden_audit::verify_reader(&std::fs::read(&path).unwrap()[..], None).is_ok());
    // The head says keyed: exit 1 at the first record, without the key...
    let (seq, problem) = failure(verify(&path, None));
    assert_eq!(seq, 1);
    assert!(
        matches!(
            &problem,
            Problem::ModeMismatch { expected: HashMode::HmacSha256, found } if found == "sha256"
        ),
        "{problem:?}"
    );
    // ...and with it.
    let (seq, problem) = failure(verify(&path, Some(key)));
    assert_eq!(seq, 1);
    assert!(matches!(problem, Problem::ModeMismatch { .. }));
    // With the head file gone too, only the key catches it.
    std::fs::remove_file(head_path(&path)).unwrap();
    assert!(verify(&path, None).is_ok());
    assert!(matches!(
        failure(verify(&path, Some(key))).1,
        Problem::ModeMismatch { .. }
    ));
}

#[test]
fn a_damaged_or_replaced_head_file_is_reported_and_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    write(&path, FsyncMode::Never, None, 2);
    let head_file = head_path(&path);
    let original = std::fs::read(&head_file).unwrap();
    // One slot torn: the other still holds a (one update older) head.
    let current = read_head(&path, None).unwrap().unwrap().head;
    let mut torn = original.clone();
    let slot = if current.generation % 2 == 1 { 0 } else { 1 };
    torn[slot * HEAD_SLOT_SIZE + 30] ^= 0x20;
    std::fs::write(&head_file, &torn).unwrap();
    let older = read_head(&path, None).unwrap().unwrap().head;
    assert_eq!(older.generation + 1, current.generation);
    assert!(verify(&path, None).is_ok());
    // Both slots damaged: exit-1 material, and no session extends it.
    let mut both = torn.clone();
    both[(1 - slot) * HEAD_SLOT_SIZE + 30] ^= 0x20;
    std::fs::write(&head_file, &both).unwrap();
    let (_, problem) = failure(verify(&path, None));
    assert!(
        matches!(problem, Problem::HeadInvalid { .. }),
        "{problem:?}"
    );
    assert!(matches!(
        AuditLog::open(&path, opts(FsyncMode::Never, None)),
        Err(AuditError::HeadInvalid { .. })
    ));
    // A keyed session on an unkeyed log's head.
    std::fs::write(&head_file, &original).unwrap();
    std::fs::write(&path, "").unwrap();
    let key: &[u8] = b"a key of at least sixteen bytes";
    std::fs::remove_file(&head_file).unwrap();
    write(&path, FsyncMode::Never, Some(key), 1);
    std::fs::write(&path, "").unwrap();
    match AuditLog::open(&path, opts(FsyncMode::Never, None)) {
        Err(AuditError::HeadMode {
            head_mode: HashMode::HmacSha256,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn two_handles_keep_one_head_that_never_moves_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let a = AuditLog::open(&path, opts(FsyncMode::EveryRecord, None)).unwrap();
    let b = AuditLog::open(&path, opts(FsyncMode::Batch, None)).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..50 {
                a.write_ahead(pending(&format!("a{i}"), json!({}))).unwrap();
            }
        });
        s.spawn(|| {
            for i in 0..50 {
                b.write_ahead(pending(&format!("b{i}"), json!({}))).unwrap();
                b.append(result(&format!("b{i}"))).unwrap();
            }
        });
    });
    a.close().unwrap();
    b.close().unwrap();
    let records = lines(&path);
    assert_eq!(records.len(), 150);
    let head = read_head(&path, None).unwrap().unwrap().head;
    assert_eq!(head.seq, 150);
    assert_eq!(head.hash, records[149]["hash"]);
    assert!(verify(&path, None).is_ok());
}

#[test]
fn long_argument_strings_are_stored_shortened_with_the_digest_of_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_in(&dir);
    let log = AuditLog::open(
        &path,
        AuditOptions {
            max_value_bytes: 100,
            redact: vec!["/token".into()],
            ..opts(FsyncMode::Never, None)
        },
    )
    .unwrap();
    let big = "x".repeat(5000);
    let args = json!({"body": big, "nested": {"list": ["short", big]}, "token": "y".repeat(500)});
    log.write_ahead(pending("c1", args.clone())).unwrap();
    log.close().unwrap();
    let record = &lines(&path)[0];
    let shortened = json!({
        "prefix": "x".repeat(100),
        "bytes": 5000,
        "sha256": warden_core::digest::sha256_hex(big.as_bytes()),
    });
    assert_eq!(record["arguments"]["body"], shortened);
    assert_eq!(record["arguments"]["nested"]["list"][0], "short");
    assert_eq!(record["arguments"]["nested"]["list"][1], shortened);
    assert_eq!(record["arguments"]["token"], "[REDACTED]");
    assert_eq!(record["args_sha256"], warden_audit::args_digest(&args));
    assert!(verify(&path, None).is_ok());
}

#[test]
fn a_log_that_is_no_regular_file_is_refused_and_gets_no_head() {
    // `/dev/full` once opened and failed at the first write; `/dev/null`
    // took every record and kept none. Both are refused when opened now
    // (tampering_while_writing.rs has the other kinds).
    for path in [Path::new("/dev/full"), Path::new("/dev/null")] {
        let error = AuditLog::open(path, opts(FsyncMode::EveryRecord, None)).unwrap_err();
        assert!(matches!(error, AuditError::NotRegular { .. }), "{error:?}");
        assert!(!head_path(path).exists());
    }
}
