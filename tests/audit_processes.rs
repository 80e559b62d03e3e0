//! Real processes on one audit log: two writers appending at once produce
//! one chain; `kill -9` during a burst leaves a log that verifies up to its
//! last whole record, and the next session continues it.
//!
//! The writer is this test binary itself, re-run with the ignored test
//! `child_writer` as the only test and its parameters in
//! `WARDEN_AUDIT_TEST_*` variables. Run any other way, `child_writer`
//! fails; the parents check its exit status and that its records are in
//! the log. Nothing here depends on timing: writers start on a byte written
//! to their stdin, and interleave because each waits, halfway through, for
//! the other's records (a condition polled with a generous deadline).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use warden_audit::FsyncMode;
use warden_audit::{
    AuditError, AuditLog, AuditOptions, DecisionRecord, Event, Outcome, Problem, ToolCallRecord,
    VerifyReport, verify,
};
use warden_policy::{Effect, Stage};

const LOG: &str = "WARDEN_AUDIT_TEST_LOG";
const SESSION: &str = "WARDEN_AUDIT_TEST_SESSION";
const COUNT: &str = "WARDEN_AUDIT_TEST_COUNT";
const FSYNC: &str = "WARDEN_AUDIT_TEST_FSYNC";
/// `1`: wait for one byte on stdin before opening the log.
const GO: &str = "WARDEN_AUDIT_TEST_GO";
/// A session name: halfway through, wait until the log holds one of its
/// records.
const PEER: &str = "WARDEN_AUDIT_TEST_PEER";

fn event(i: u64) -> Event {
    let args = json!({"i": i, "path": format!("/srv/repo/file-{i}.txt"), "pad": "x".repeat(300)});
    Event::ToolCall(ToolCallRecord {
        call_id: format!("c{i}"),
        server: Some("fs".into()),
        tool: Some("read_text_file".into()),
        qualified: "mcp__fs__read_text_file".into(),
        caller: warden_audit::Caller::Model,
        args_sha256: warden_audit::args_digest(&args),
        arguments: args,
        decision: Some(DecisionRecord {
            effect: Effect::Allow,
            stage: Stage::Rules,
            reasons: vec!["allow rule".into()],
            policy_sha256: None,
        }),
        outcome: Outcome::Pending,
        error: None,
    })
}

/// The writer process, run only by the tests below (`--ignored --exact`).
#[test]
#[ignore = "a writer process: the tests below run it with its parameters"]
fn child_writer() {
    let path =
        std::env::var_os(LOG).expect("child_writer runs only as a child of this file's tests");
    let session = std::env::var(SESSION).unwrap();
    let count: u64 = std::env::var(COUNT).unwrap().parse().unwrap();
    let fsync = match std::env::var(FSYNC).unwrap().as_str() {
        "every_record" => FsyncMode::EveryRecord,
        "batch" => FsyncMode::Batch,
        "never" => FsyncMode::Never,
        other => panic!("unknown fsync mode {other}"),
    };
    if std::env::var_os(GO).is_some() {
        let mut byte = [0u8; 1];
        std::io::stdin()
            .read_exact(&mut byte)
            .expect("the go byte on stdin");
    }
    let peer = std::env::var(PEER).ok();
    let log = AuditLog::open(
        Path::new(&path),
        AuditOptions {
            session,
            fsync,
            ..AuditOptions::default()
        },
    )
    .unwrap();
    let mut i = 0;
    while count == 0 || i < count {
        if let Some(peer) = peer.as_deref().filter(|_| i == count / 2) {
            wait_for_session(Path::new(&path), peer);
        }
        // Both ways in: write-ahead (pending records) and plain appends.
        if i % 2 == 0 {
            log.write_ahead(event(i)).unwrap();
        } else {
            log.append(event(i)).unwrap();
        }
        i += 1;
    }
    log.close().unwrap();
}

/// Waits until the log holds a record of `session`.
fn wait_for_session(path: &Path, session: &str) {
    let needle = format!("\"session\":\"{session}\"");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(path).is_ok_and(|text| text.contains(&needle)) {
        assert!(
            Instant::now() < deadline,
            "no record of {session} within 120 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn spawn_writer(log: &Path, session: &str, count: u64, fsync: &str, peer: Option<&str>) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "child_writer",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(LOG, log)
    .env(SESSION, session)
    .env(COUNT, count.to_string())
    .env(FSYNC, fsync)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::inherit());
    if let Some(peer) = peer {
        cmd.env(GO, "1").env(PEER, peer).stdin(Stdio::piped());
    }
    cmd.spawn().unwrap()
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn two_processes_appending_at_once_produce_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.jsonl");
    let n = 1500;
    let mut a = spawn_writer(&path, "writer-a", n, "never", Some("writer-b"));
    let mut b = spawn_writer(&path, "writer-b", n, "batch", Some("writer-a"));
    // Both start appending on the same event.
    for child in [&mut a, &mut b] {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"g").unwrap();
    }
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());

    match verify(&path, None) {
        VerifyReport::Ok { count, .. } => assert_eq!(count, 2 * n),
        other => panic!("{other:?}"),
    }
    let recs = records(&path);
    let per = |s: &str| recs.iter().filter(|r| r["session"] == s).count() as u64;
    assert_eq!((per("writer-a"), per("writer-b")), (n, n));
    // Each writer's own records are in its order, and the two interleave.
    for s in ["writer-a", "writer-b"] {
        let is: Vec<u64> = recs
            .iter()
            .filter(|r| r["session"] == s)
            .map(|r| r["arguments"]["i"].as_u64().unwrap())
            .collect();
        assert!(is.windows(2).all(|w| w[0] + 1 == w[1]), "{s} out of order");
    }
    let switches = recs
        .windows(2)
        .filter(|w| w[0]["session"] != w[1]["session"])
        .count();
    eprintln!("writer switches in the shared log: {switches}");
    // Each writer's second half waits for a record of the other, so the
    // chain switches writers at least twice whatever the scheduling.
    assert!(switches >= 2, "the writers did not interleave");
    // One head for both: it names the last record of the shared log.
    let head = warden_audit::read_head(&path, None).unwrap().unwrap().head;
    assert_eq!(head.seq, 2 * n);
    assert_eq!(head.hash, recs.last().unwrap()["hash"].as_str().unwrap());
}

/// Kills a writer with SIGKILL once the log holds `min_bytes`, then checks
/// the log and continues it.
fn kill_during_burst(fsync: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.jsonl");
    let mut child = spawn_writer(&path, "doomed", 0, fsync, None);
    let min_bytes = if fsync == "every_record" {
        20_000
    } else {
        400_000
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&path).map_or(0, |m| m.len()) < min_bytes {
        assert!(Instant::now() < deadline, "writer too slow");
        assert!(child.try_wait().unwrap().is_none(), "writer exited early");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success());

    let whole = match verify(&path, None) {
        VerifyReport::Ok { count, .. } => {
            // The next session continues the chain.
            let log = AuditLog::open(&path, AuditOptions::default()).unwrap();
            log.append(event(u64::MAX)).unwrap();
            log.close().unwrap();
            assert!(
                matches!(verify(&path, None), VerifyReport::Ok { count: c, .. } if c == count + 1)
            );
            count
        }
        VerifyReport::Bad(f) => {
            // At worst one torn final line, reported as such.
            assert!(matches!(f.problem, Problem::TornTail { .. }), "{f:?}");
            match AuditLog::open(&path, AuditOptions::default()) {
                Err(AuditError::TornTail { offset, .. }) => {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .unwrap()
                        .set_len(offset)
                        .unwrap();
                }
                other => panic!("{other:?}"),
            }
            assert!(
                matches!(verify(&path, None), VerifyReport::Ok { count, .. } if count == f.verified)
            );
            f.verified
        }
        other => panic!("{other:?}"),
    };
    eprintln!("{fsync}: {whole} whole records survived kill -9");
    assert!(whole > 10);
}

#[test]
fn kill_9_during_a_burst_leaves_a_verifiable_log_never() {
    kill_during_burst("never");
}

#[test]
fn kill_9_during_a_burst_leaves_a_verifiable_log_batch() {
    kill_during_burst("batch");
}

#[test]
fn kill_9_during_a_burst_leaves_a_verifiable_log_every_record() {
    kill_during_burst("every_record");
}
