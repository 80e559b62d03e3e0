//! The audit log changed from outside while a real `warden gateway` runs,
//! as the red team did it: cut before a record (a denied call's evidence),
//! or renamed away. The session must refuse every later call (not sent, the
//! server never sees it) instead of writing on, and `warden audit verify`
//! must still fail on the cut log, with the HMAC key too. Before, warden
//! warned "audit log shrank", chained new records from the cut, moved the
//! head past it, and `verify` exited 0 with the evidence gone; a renamed
//! log took the session's records out of sight.

mod gateway_support;

use std::path::Path;
use std::process::Output;

use gateway_support::cli_support::calls_received;
use gateway_support::{
    StdioGateway, World, audit_lines, eventually, gateway_command_with, is_error, text_of,
};
use serde_json::json;

const KEY: &str = "an audit key of at least thirty-two bytes";

/// A gateway whose counting fixture `fx` may be called and whose `leak`
/// rule is a deny (the evidence the attacker wants gone).
fn world(fsync: &str) -> (World, std::path::PathBuf) {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {
            "allow": ["mcp__fx__*"],
            "deny": ["mcp__fx__echo(message: EVIDENCE*)"],
        },
        "audit": {"path": world.path("audit.jsonl"), "fsync": fsync},
    }));
    (world, counter)
}

/// The gateway of `world`, its audit log keyed.
async fn start(world: &World) -> StdioGateway {
    let mut cmd = gateway_command_with(world, &[], &["--stdio"]);
    cmd.env("WARDEN_AUDIT_KEY", KEY);
    StdioGateway::spawn(cmd).await
}

fn verify(world: &World, log: &Path) -> Output {
    let mut cmd = world.warden(&["audit", "verify", log.to_str().unwrap()]);
    cmd.env("WARDEN_AUDIT_KEY", KEY);
    cmd.output().expect("run warden audit verify")
}

/// Byte offset of the first record whose line contains `needle`.
fn offset_of_record_with(log: &Path, needle: &str) -> u64 {
    let text = std::fs::read_to_string(log).unwrap();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.contains(needle) {
            return offset;
        }
        offset += line.len() as u64;
    }
    panic!("no record with {needle:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_cut_while_the_gateway_runs_is_not_written_over_and_verify_fails() {
    for fsync in ["every_record", "batch", "never"] {
        let (world, counter) = world(fsync);
        let log = world.path("audit.jsonl");
        let gateway = start(&world).await;
        for i in 0..3 {
            assert!(!is_error(&gateway.echo(&format!("a{i}")).await));
        }
        assert!(is_error(&gateway.echo("EVIDENCE-denied-call").await));
        assert!(!is_error(&gateway.echo("b0").await));
        let sent = calls_received(&counter).len();
        // All of it in the file and under the head (batch: synced): the
        // four allowed calls' results written (a result record is queued,
        // so the file may not hold the last one yet) and the head at the
        // file's last record. Waiting only for the head to reach the last
        // result then in the file let a queued result land after the
        // snapshot and move the head before the cut.
        assert!(eventually(10.0, || {
            let records = audit_lines(&log);
            let results = records
                .iter()
                .filter(|r| r["event"] == "tool_result")
                .count();
            let head = world.run(&["audit", "head", log.to_str().unwrap()]).stdout;
            results == sent
                && String::from_utf8_lossy(&head).starts_with(&format!("{}:", records.len()))
        }));
        let head_before =
            String::from_utf8(world.run(&["audit", "head", log.to_str().unwrap()]).stdout).unwrap();

        // The cut, from outside, before the denied call's record.
        let at = offset_of_record_with(&log, "EVIDENCE");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .unwrap()
            .set_len(at)
            .unwrap();

        // More calls than were cut: each refused, none sent.
        for i in 0..8 {
            let refused = gateway.echo(&format!("c{i}")).await;
            assert!(is_error(&refused), "{fsync}: call {i} went through");
            let text = text_of(&refused);
            assert!(
                text.contains("audit_failed") && text.contains("not sent"),
                "{fsync}: {text}"
            );
            assert!(text.contains("cut from outside"), "{fsync}: {text}");
        }
        assert_eq!(
            calls_received(&counter).len(),
            sent,
            "{fsync}: the server saw a call"
        );
        let (_, stderr) = gateway.finish().await;
        assert!(stderr.contains("cut from outside"), "{fsync}: {stderr}");
        assert!(!stderr.contains("shrank"), "{fsync}: {stderr}");

        // Nothing was written over the cut; the head still names the end
        // before it, so verify fails and says what is missing.
        assert_eq!(std::fs::metadata(&log).unwrap().len(), at, "{fsync}");
        let head_after = world.run(&["audit", "head", log.to_str().unwrap()]).stdout;
        assert_eq!(String::from_utf8(head_after).unwrap(), head_before);
        let output = verify(&world, &log);
        let text = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{fsync}: {text}");
        assert!(
            text.contains("truncated") && text.contains("missing"),
            "{fsync}: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_renamed_while_the_gateway_runs_refuses_later_calls() {
    let (world, counter) = world("batch");
    let log = world.path("audit.jsonl");
    let aside = world.path("elsewhere.jsonl");
    let gateway = start(&world).await;
    assert!(!is_error(&gateway.echo("a0").await));
    std::fs::rename(&log, &aside).unwrap();
    let refused = gateway.echo("after the rename").await;
    assert!(is_error(&refused));
    let text = text_of(&refused);
    assert!(
        text.contains("audit_failed") && text.contains("moved, removed or replaced"),
        "{text}"
    );
    assert_eq!(
        calls_received(&counter),
        ["echo"],
        "the server saw the call"
    );
    // Removed outright: the same.
    std::fs::remove_file(&aside).unwrap();
    assert!(is_error(&gateway.echo("after the removal").await));
    assert_eq!(calls_received(&counter), ["echo"]);
    let (_, stderr) = gateway.finish().await;
    assert!(stderr.contains("moved, removed or replaced"), "{stderr}");
    assert!(!log.exists(), "no new log appeared at the old path");
}
