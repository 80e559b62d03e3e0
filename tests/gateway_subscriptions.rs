//! Resource subscriptions through the real `warden gateway --stdio`, with
//! an rmcp client in front and the fixture server (which records every
//! request it receives, and whose `touch` tool says whether the URI is
//! subscribed on its side) behind:
//!
//! - a client's `resources/unsubscribe` is decided and recorded like its
//!   subscribe: a denied one is refused and never reaches the server;
//! - a subscription whose server connection ended is not silently lost:
//!   it ends, and the client is told;
//! - after a policy reload that denies a subscribed URI, the subscription
//!   ends (upstream too) and the client is told why.
// `resources/(un)subscribe` and `logging` are the session protocol's,
// deprecated by rmcp for 2026-07-28.
#![allow(deprecated)]

mod gateway_support;

use std::path::PathBuf;
use std::time::Duration;

use gateway_support::cli_support::calls_received;
use gateway_support::{World, audit_lines, audit_path, call, gateway_command, text_of};
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, LoggingMessageNotificationParam,
    ResourceUpdatedNotificationParam, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// What the client receives outside its requests.
#[derive(Debug)]
enum Heard {
    Updated(String),
    Log(Value),
}

/// A client that declares nothing and passes on what it hears.
#[derive(Clone)]
struct Listener(mpsc::UnboundedSender<Heard>);

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("subscriptions-test", "0.0.0"),
        )
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(Heard::Updated(params.uri));
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(Heard::Log(
            serde_json::to_value(&params).unwrap_or(Value::Null),
        ));
    }
}

struct Gateway {
    client: RunningService<RoleClient, Listener>,
    heard: mpsc::UnboundedReceiver<Heard>,
    child: tokio::process::Child,
}

impl Gateway {
    async fn start(world: &World) -> Gateway {
        let mut child = gateway_command(world, &["--stdio"])
            .spawn()
            .expect("spawn gateway");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take().expect("stdin");
        // Drained, so the gateway never blocks on a full stderr pipe.
        let mut err = child.stderr.take().expect("stderr");
        tokio::spawn(async move {
            let mut sink = tokio::io::sink();
            let _ = tokio::io::copy(&mut err, &mut sink).await;
        });
        let (tx, heard) = mpsc::unbounded_channel();
        let client =
            tokio::time::timeout(Duration::from_secs(60), Listener(tx).serve((stdout, stdin)))
                .await
                .expect("initialize in time")
                .expect("initialize");
        Gateway {
            client,
            heard,
            child,
        }
    }

    /// Waits for the first thing heard that `wanted` accepts (what comes
    /// before it is dropped).
    async fn hear(&mut self, what: &str, wanted: impl Fn(&Heard) -> bool) -> Heard {
        let wait = async {
            loop {
                match self.heard.recv().await {
                    Some(heard) if wanted(&heard) => return heard,
                    Some(_) => continue,
                    None => panic!("the client stopped before it heard {what}"),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("never heard {what}"))
    }

    /// `fx__touch` of `uri`: the server's answer ("updated sent: BOOL").
    async fn touch(&self, uri: &str) -> Result<String, String> {
        let called = self
            .client
            .call_tool(call("fx__touch", json!({ "uri": uri })));
        match tokio::time::timeout(Duration::from_secs(60), called)
            .await
            .expect("the gateway answers a call")
        {
            Ok(result) if result.is_error != Some(true) => Ok(text_of(&result)),
            Ok(result) => Err(text_of(&result)),
            Err(error) => Err(error.to_string()),
        }
    }

    async fn stop(mut self) {
        let _ = self.client.cancel().await;
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("the gateway exits after its client disconnects")
            .expect("wait");
        assert!(status.success(), "{status:?}");
    }
}

/// The fixture (session protocol, counting what it receives) with rules
/// that deny the secret and put the notes in `notes` (`allow`, `deny`).
fn config(world: &World, notes: &str) -> (Value, PathBuf) {
    let (mut fixture, counter) = world.counting_fixture();
    if let Some(args) = fixture["args"].as_array_mut() {
        args.push("--legacy".into());
    }
    let mut allow = vec![json!("mcp__fx__touch"), json!("mcp__fx__crash")];
    // With a condition, so the notes stay listed when denied.
    let mut deny = vec![json!("resource__fx(uri: fixture://secret/**)")];
    let rule = json!("resource__fx(uri: fixture://notes/**)");
    if notes == "allow" {
        allow.push(rule);
    } else {
        deny.push(rule);
    }
    let config = json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": allow, "deny": deny},
        "audit": {"path": world.path("audit.jsonl")}
    });
    (config, counter)
}

/// `request` records of kind `resource` with `method`, each with its
/// `request_result` as `result`.
fn requests(world: &World, method: &str) -> Vec<Value> {
    let records = audit_lines(&audit_path(world));
    records
        .iter()
        .filter(|r| r["event"] == "request" && r["kind"] == "resource" && r["method"] == method)
        .map(|r| {
            let mut merged = r.clone();
            merged["result"] = records
                .iter()
                .find(|x| x["event"] == "request_result" && x["call_id"] == r["call_id"])
                .cloned()
                .unwrap_or(Value::Null);
            merged
        })
        .collect()
}

fn log_says(heard: &Heard, text: &str) -> bool {
    matches!(heard, Heard::Log(log) if log["logger"] == "warden"
        && log["data"]["message"].as_str().is_some_and(|m| m.contains(text)))
}

fn assert_chain_verifies(world: &World) {
    let out = world.run(&["audit", "verify", &audit_path(world).display().to_string()]);
    assert!(
        out.status.success(),
        "audit verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsubscribe_is_decided_and_recorded_and_a_denied_one_never_reaches_the_server() {
    let world = World::new();
    let (config, counter) = config(&world, "allow");
    world.write_config(&config);
    let gateway = Gateway::start(&world).await;

    gateway
        .client
        .subscribe(SubscribeRequestParams::new("fixture://notes/1"))
        .await
        .expect("subscribe to an allowed URI");
    gateway
        .client
        .unsubscribe(UnsubscribeRequestParams::new("fixture://notes/1"))
        .await
        .expect("unsubscribe from it");
    // The attack: an unsubscribe carrying a URI the rules deny, sent to
    // the server undecided and unrecorded.
    let denied = gateway
        .client
        .unsubscribe(UnsubscribeRequestParams::new("fixture://secret/key"))
        .await
        .expect_err("an unsubscribe the rules deny is refused");
    assert!(denied.to_string().contains("Denied"), "{denied}");
    gateway.stop().await;

    let received = calls_received(&counter);
    assert!(
        received
            .iter()
            .any(|r| r == "resources/unsubscribe fixture://notes/1"),
        "{received:?}"
    );
    assert!(
        !received.iter().any(|r| r.contains("fixture://secret")),
        "a denied unsubscribe reached the server: {received:?}"
    );

    let unsubscribes = requests(&world, "resources/unsubscribe");
    let allowed: Vec<&Value> = unsubscribes
        .iter()
        .filter(|r| r["arguments"]["uri"] == "fixture://notes/1")
        .collect();
    assert_eq!(allowed.len(), 1, "{unsubscribes:?}");
    assert_eq!(allowed[0]["decision"]["effect"], "allow", "{allowed:?}");
    assert_eq!(allowed[0]["outcome"], "pending", "{allowed:?}");
    assert_eq!(allowed[0]["caller"], "gateway", "{allowed:?}");
    assert_eq!(allowed[0]["target"], "resource__fx", "{allowed:?}");
    assert_eq!(allowed[0]["result"]["outcome"], "ok", "{allowed:?}");
    let refused: Vec<&Value> = unsubscribes
        .iter()
        .filter(|r| r["arguments"]["uri"] == "fixture://secret/key")
        .collect();
    assert_eq!(refused.len(), 1, "{unsubscribes:?}");
    assert_eq!(refused[0]["decision"]["effect"], "deny", "{refused:?}");
    assert_eq!(refused[0]["decision"]["stage"], "rules", "{refused:?}");
    assert_eq!(refused[0]["outcome"], "denied", "{refused:?}");
    assert_chain_verifies(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_that_ends_with_its_server_connection_ends_visibly() {
    let world = World::new();
    let (config, _counter) = config(&world, "allow");
    world.write_config(&config);
    let mut gateway = Gateway::start(&world).await;
    let uri = "fixture://notes/1";

    gateway
        .client
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .expect("subscribe");
    assert_eq!(
        gateway.touch(uri).await.as_deref(),
        Ok("updated sent: true")
    );
    gateway
        .hear("the update", |h| matches!(h, Heard::Updated(u) if u == uri))
        .await;

    // The server dies, and the subscription with its connection: the
    // client must not be left waiting for updates that never come.
    let crashed = tokio::time::timeout(
        Duration::from_secs(60),
        gateway.client.call_tool(call("fx__crash", json!({}))),
    )
    .await
    .expect("the gateway answers the crashing call");
    assert!(
        crashed.map_or(true, |r| r.is_error == Some(true)),
        "the crash answered"
    );
    let heard = gateway
        .hear("that the subscription ended", |h| log_says(h, "ended"))
        .await;
    let Heard::Log(log) = heard else {
        unreachable!()
    };
    assert_eq!(log["level"], "warning", "{log}");
    assert_eq!(log["data"]["uri"], uri, "{log}");
    assert_eq!(log["data"]["server"], "fx", "{log}");
    gateway.stop().await;
    assert_chain_verifies(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_denies_a_subscribed_uri_ends_the_subscription_visibly() {
    let world = World::new();
    let (allowing, _counter) = config(&world, "allow");
    world.write_config(&allowing);
    let mut gateway = Gateway::start(&world).await;
    let uri = "fixture://notes/1";

    gateway
        .client
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .expect("subscribe");
    assert_eq!(
        gateway.touch(uri).await.as_deref(),
        Ok("updated sent: true")
    );

    // The operator denies the notes and reloads: updates of them must no
    // longer reach the client, and it is told.
    let (denying, _) = config(&world, "deny");
    world.write_config(&denying);
    let pid = nix::unistd::Pid::from_raw(gateway.child.id().expect("running") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    let heard = gateway
        .hear("that the subscription ended", |h| log_says(h, "ended"))
        .await;
    let Heard::Log(log) = heard else {
        unreachable!()
    };
    assert_eq!(log["level"], "warning", "{log}");
    assert_eq!(log["data"]["uri"], uri, "{log}");
    assert!(
        log["data"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("rules")),
        "{log}"
    );
    assert_eq!(
        gateway.touch(uri).await.as_deref(),
        Ok("updated sent: false"),
        "the server is still subscribed"
    );
    gateway.stop().await;

    let subscribes = requests(&world, "resources/subscribe");
    assert!(
        subscribes
            .iter()
            .any(|r| r["decision"]["effect"] == "deny" && r["outcome"] == "denied"),
        "{subscribes:?}"
    );
    let released = requests(&world, "resources/unsubscribe");
    assert!(
        released
            .iter()
            .any(|r| r["decision"].is_null() && r["result"]["outcome"] == "ok"),
        "{released:?}"
    );
    assert_chain_verifies(&world);
}
