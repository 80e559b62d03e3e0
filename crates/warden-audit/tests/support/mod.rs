//! What the audit crate's integration tests share: a session's options,
//! the records of one call, and reading a log back.

use std::path::{Path, PathBuf};

use serde_json::Value;
use warden_audit::{
    AuditOptions, Caller, DecisionRecord, Event, FsyncMode, Outcome, Problem, ResultRecord,
    ToolCallRecord, VerifyReport,
};
use warden_core::{Effect, Stage};

pub fn opts(fsync: FsyncMode, key: Option<&[u8]>) -> AuditOptions {
    AuditOptions {
        session: "s-1".into(),
        fsync,
        key: key.map(<[u8]>::to_vec),
        ..AuditOptions::default()
    }
}

pub fn pending(call_id: &str, args: Value) -> Event {
    Event::ToolCall(ToolCallRecord {
        call_id: call_id.into(),
        server: Some("fs".into()),
        tool: Some("read".into()),
        qualified: "mcp__fs__read".into(),
        caller: Caller::Cli,
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

pub fn result(call_id: &str) -> Event {
    Event::ToolResult(ResultRecord {
        call_id: call_id.into(),
        outcome: Outcome::Ok,
        duration_ms: 1,
        result_sha256: Some("ab".repeat(32)),
        error: None,
    })
}

pub fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn failure(report: VerifyReport) -> (u64, Problem) {
    match report {
        VerifyReport::Bad(f) => (f.seq, f.problem),
        other => panic!("expected a failure, got {other:?}"),
    }
}

pub fn log_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("audit.jsonl")
}
