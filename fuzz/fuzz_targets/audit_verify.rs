//! The audit verifier. The first input byte chooses:
//!
//! - even: the rest is a log; verifying it (with and without a key) never
//!   panics;
//! - odd: a valid log (plain SHA-256, or HMAC with its key, by bit 1) with
//!   one byte changed (offset from bytes 1–4, new value from byte 5, always
//!   different) never verifies.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use warden_audit::{ApprovalAction, AuditLog, AuditOptions, Event, FsyncMode, verify_reader};
use warden_core::{Mode, TransportKind};

const KEY: &[u8] = b"fuzz-audit-key-0123456789";

/// A short valid log, written by the real writer.
fn valid_log(key: Option<&[u8]>) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(
        &path,
        AuditOptions {
            session: "fuzz-session".into(),
            fsync: FsyncMode::Never,
            key: key.map(<[u8]>::to_vec),
            ..AuditOptions::default()
        },
    )
    .expect("open log");
    let events = [
        Event::SessionStart {
            warden_version: "0.0.0".into(),
            config_sha256: "ab".repeat(32),
            policy_sha256: None,
            mode: Mode::Ci,
            workspace: "/ws/ü \"q\"".into(),
        },
        Event::ServerStart {
            server: "notes".into(),
            transport: TransportKind::Stdio,
            pid: Some(42),
            sandbox: json!({"enabled": true, "read": ["/usr", "/é"], "n": 1.5e20}),
        },
        Event::Approval {
            server: "notes".into(),
            config_sha256: "cd".repeat(32),
            action: ApprovalAction::Approved,
            subject: "server\ttab\u{1}".into(),
            call_id: None,
        },
        Event::ServerExit {
            server: "notes".into(),
            pid: Some(42),
            status: Some(0),
            signal: None,
            reason: "done".into(),
        },
    ];
    for e in events {
        log.append(e).expect("append");
    }
    log.close().expect("close");
    std::fs::read(&path).expect("read log")
}

fn logs() -> &'static [Vec<u8>; 2] {
    static LOGS: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = [valid_log(None), valid_log(Some(KEY))];
        assert!(verify_reader(&logs[0][..], None).is_ok());
        assert!(verify_reader(&logs[1][..], Some(KEY)).is_ok());
        logs
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        let _ = verify_reader(rest, None);
        let _ = verify_reader(rest, Some(KEY));
        return;
    }
    let keyed = selector & 2 != 0;
    let log = &logs()[usize::from(keyed)];
    let (Some(offset), Some(&xor)) = (rest.get(..4), rest.get(4)) else {
        return;
    };
    let offset = u32::from_le_bytes([offset[0], offset[1], offset[2], offset[3]]) as usize;
    let mut changed = log.clone();
    let at = offset % changed.len();
    changed[at] ^= xor.max(1);
    let key = keyed.then_some(KEY);
    let report = verify_reader(&changed[..], key);
    assert!(
        !report.is_ok(),
        "byte {at} changed ({:#04x} -> {:#04x}) and the log still verifies: {report:?}",
        log[at],
        changed[at]
    );
});
