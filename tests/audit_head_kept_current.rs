//! The head file `FILE.head` made unusable while a real `warden gateway`
//! runs, as a same-user server or tool with write access to the log's
//! folder could: replaced by a directory, by a link to `/dev/full`, or
//! removed. warden writes the head through the descriptor it opened, so
//! every update "succeeded" into a file no longer at the path, and a later
//! cut of the log's end went unnoticed by `verify`. Before, the gateway
//! went on sending calls (a failed update was only logged once). Now a
//! head that could not be kept current fails the session closed, like a
//! record that cannot be written: later calls are refused (`audit_failed`)
//! and the gateway exits 1 saying why, unless `on_failure: continue`.

mod gateway_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use gateway_support::cli_support::calls_received;
use gateway_support::{StdioGateway, World, gateway_command_with, is_error, text_of};
use serde_json::{Value, json};

fn world(audit: Value) -> (World, PathBuf) {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    let mut audit = audit;
    audit["path"] = json!(world.path("audit.jsonl"));
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": audit,
    }));
    (world, counter)
}

async fn start(world: &World) -> StdioGateway {
    StdioGateway::spawn(gateway_command_with(world, &[], &["--stdio"])).await
}

/// A way to take the head's path away, and its name.
type Tamper = (&'static str, fn(&Path));

/// The ways a same-user process can take the head's path away.
fn tampers() -> [Tamper; 3] {
    [
        ("a directory", |head| {
            std::fs::remove_file(head).unwrap();
            std::fs::create_dir(head).unwrap();
        }),
        ("a link to /dev/full", |head| {
            std::fs::remove_file(head).unwrap();
            std::os::unix::fs::symlink("/dev/full", head).unwrap();
        }),
        ("removed", |head| std::fs::remove_file(head).unwrap()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_that_cannot_be_kept_current_refuses_later_calls() {
    for fsync in ["never", "every_record", "batch"] {
        for (how, tamper) in tampers() {
            let (world, counter) = world(json!({"fsync": fsync}));
            let head = world.path("audit.jsonl.head");
            let gateway = start(&world).await;
            assert!(!is_error(&gateway.echo("a0").await));
            // `batch`: a0's records synced and the head moved first.
            tokio::time::sleep(Duration::from_millis(300)).await;
            tamper(&head);
            // The records of this call are written; the head's update
            // after them fails (in `batch`, at the writer's next sync).
            assert!(!is_error(&gateway.echo("a1").await), "{fsync}, {how}");
            tokio::time::sleep(Duration::from_millis(300)).await;
            let refused = gateway.echo("a2").await;
            let text = text_of(&refused);
            assert!(
                is_error(&refused) && text.contains("audit_failed") && text.contains("head file"),
                "{fsync}, head {how}: {text}"
            );
            assert_eq!(
                calls_received(&counter),
                ["echo", "echo"],
                "{fsync}, head {how}: the server saw the call"
            );
            let (status, stderr) = gateway.finish().await;
            assert_eq!(status.code(), Some(1), "{fsync}, {how}: {stderr}");
            assert!(
                stderr.contains("the audit log lost") && stderr.contains("head file"),
                "{fsync}, {how}: {stderr}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_failure_continue_goes_on_with_a_head_that_fell_behind_loudly() {
    let (world, counter) = world(json!({"fsync": "never", "on_failure": "continue"}));
    let head = world.path("audit.jsonl.head");
    let gateway = start(&world).await;
    assert!(!is_error(&gateway.echo("a0").await));
    tampers()[0].1(&head);
    assert!(!is_error(&gateway.echo("a1").await));
    assert!(!is_error(&gateway.echo("a2").await));
    assert_eq!(calls_received(&counter), ["echo", "echo", "echo"]);
    let (status, stderr) = gateway.finish().await;
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("head file could not be updated"),
        "{stderr}"
    );
}

/// Another process holding the head's lock: each update waited for it
/// (`LOCK_WAIT`, 10 s) and gave up, leaving the head where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_whose_lock_is_held_refuses_later_calls() {
    let (world, counter) = world(json!({"fsync": "never"}));
    let head = world.path("audit.jsonl.head");
    let gateway = start(&world).await;
    assert!(!is_error(&gateway.echo("a0").await));
    let held = world.path("held");
    // One process (the shell becomes `sleep`) holds the lock, so killing
    // it leaves nothing behind.
    let mut holder = std::process::Command::new("sh")
        .args([
            "-c",
            r#"exec 9<>"$0"; flock -x 9; touch "$1"; exec sleep 60"#,
        ])
        .args([&head, &held])
        .spawn()
        .expect("run flock");
    for _ in 0..100 {
        if held.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(held.exists(), "flock did not take the lock");
    // Sent; its head update waits for the lock and gives up.
    assert!(!is_error(&gateway.echo("a1").await));
    let refused = gateway.echo("a2").await;
    holder.kill().unwrap();
    holder.wait().unwrap();
    let text = text_of(&refused);
    assert!(
        is_error(&refused) && text.contains("audit_failed") && text.contains("head file"),
        "{text}"
    );
    assert_eq!(calls_received(&counter), ["echo", "echo"]);
    let (status, stderr) = gateway.finish().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
}

/// No call after the head fell behind: the session still does not end as
/// a success (the records since could be cut unnoticed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_head_fell_behind_exits_1_without_a_later_call() {
    let (world, _counter) = world(json!({"fsync": "never"}));
    let gateway = start(&world).await;
    assert!(!is_error(&gateway.echo("a0").await));
    tampers()[0].1(&world.path("audit.jsonl.head"));
    assert!(!is_error(&gateway.echo("a1").await));
    let (status, stderr) = gateway.finish().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("head file"), "{stderr}");
}
