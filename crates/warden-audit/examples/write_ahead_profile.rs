//! Writes pending records with `write_ahead`, for instruction counts that
//! do not depend on the machine's load:
//!
//! ```text
//! cargo build --release -p warden-audit --example write_ahead_profile
//! valgrind --tool=callgrind --toggle-collect='*AuditLog*write_ahead*' \
//!     target/release/examples/write_ahead_profile batch 1000
//! ```
//!
//! The total of `Ir` divided by the count is the caller's instructions per
//! pending record (the writer thread's sync is not counted). Arguments:
//! the fsync mode (`batch`, `never`, `every_record`) and how many records.

use serde_json::json;
use warden_audit::{
    AuditLog, AuditOptions, Caller, DecisionRecord, Event, FsyncMode, Outcome, ToolCallRecord,
};
use warden_core::{Effect, Stage};

/// The same record and options as `benches/audit.rs`.
fn event() -> Event {
    let args = json!({"path": "/srv/repo/src/main.rs", "head": 40, "encoding": "utf-8"});
    Event::ToolCall(ToolCallRecord {
        call_id: "5d0c9f5e-7a1b-4c3d-9e8f-0a1b2c3d4e5f".into(),
        server: Some("fs".into()),
        tool: Some("read_text_file".into()),
        qualified: "mcp__fs__read_text_file".into(),
        caller: Caller::Model,
        args_sha256: warden_audit::args_digest(&args),
        arguments: args,
        decision: Some(DecisionRecord {
            effect: Effect::Allow,
            stage: Stage::Rules,
            reasons: vec!["allow: mcp__fs__read_text_file(path: /srv/repo/**)".into()],
            policy_sha256: Some("ab".repeat(32)),
        }),
        outcome: Outcome::Pending,
        error: None,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let fsync = match args.next().as_deref().unwrap_or("batch") {
        "batch" => FsyncMode::Batch,
        "never" => FsyncMode::Never,
        "every_record" => FsyncMode::EveryRecord,
        other => return Err(format!("unknown fsync mode {other}").into()),
    };
    let count: usize = args.next().as_deref().unwrap_or("1000").parse()?;
    let dir = tempfile::tempdir()?;
    let log = AuditLog::open(
        &dir.path().join("audit.jsonl"),
        AuditOptions {
            session: "2b1f4c3e-9a8d-4e5f-8a7b-6c5d4e3f2a1b".into(),
            fsync,
            redact: vec!["/password".into(), "/token".into()],
            secrets: vec![
                "ghp_000000000000000000000000000000000000".into(),
                "sk-bench-secret".into(),
            ],
            ..AuditOptions::default()
        },
    )?;
    let template = event();
    for _ in 0..count {
        log.write_ahead(template.clone())?;
    }
    log.close()?;
    Ok(())
}
