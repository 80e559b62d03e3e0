//! Requests whose parts mean one thing to the pipeline and another to the
//! server, through the real `warden gateway --stdio` driven line by line
//! (JSON-RPC as a client writes it, nothing an SDK would tidy), in front
//! of tests/python/raw_echo_server.py, which answers with each request
//! exactly as it received it: what a test reads back is what warden sent.

mod gateway_support;

use std::time::Duration;

use gateway_support::{RawStdio, World, audit_path, python_scripts, requests};
use serde_json::{Value, json};

/// The raw echo server started with `args`.
fn raw_server(world: &World, args: &[&str]) -> Value {
    let mut command = vec![
        python_scripts()
            .join("raw_echo_server.py")
            .display()
            .to_string(),
        "--marker".into(),
        world.marker.clone(),
    ];
    command.extend(args.iter().map(|a| a.to_string()));
    json!({
        "command": "/usr/bin/python3",
        "args": command,
        "sandbox": {"read": [python_scripts()]}
    })
}

/// The raw echo server as `raw`, with `permissions`.
fn config(world: &World, permissions: Value) -> Value {
    config_of(world, json!({"raw": raw_server(world, &[])}), permissions)
}

fn config_of(world: &World, servers: Value, permissions: Value) -> Value {
    json!({
        "mcpServers": servers,
        "permissions": permissions,
        "policy": [],
        "audit": {"path": audit_path(world)}
    })
}

/// `warden gateway --stdio`, initialized, read by a thread.
struct Gateway {
    raw: RawStdio,
    /// Notifications read while waiting for an answer.
    seen: Vec<Value>,
    next_id: u64,
}

impl Gateway {
    fn start(world: &World) -> Gateway {
        Gateway {
            raw: RawStdio::start(world, json!({})),
            seen: Vec::new(),
            next_id: 0,
        }
    }

    fn send(&mut self, message: &Value) {
        self.raw.send(&message.to_string());
    }

    /// Sends a request and returns its answer (notifications skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .raw
                .lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            if line["id"] == json!(id) {
                return line;
            }
            if line.get("id").is_none() {
                self.seen.push(line);
            }
        }
    }

    /// The notifications not taken yet and those that arrive within
    /// `window`.
    fn notifications(&mut self, window: Duration) -> Vec<Value> {
        let until = std::time::Instant::now() + window;
        let mut seen = std::mem::take(&mut self.seen);
        while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
            match self.raw.lines.recv_timeout(left) {
                Ok(line) if line.get("id").is_none() => seen.push(line),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        seen
    }

    /// Closes stdin and waits for the gateway to end.
    fn stop(self) {
        self.raw.stop();
    }
}

/// What the server received for a completion (its one value), parsed.
fn received(answer: &Value) -> Value {
    let line = answer["result"]["completion"]["values"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no completion value: {answer}"));
    serde_json::from_str(line).expect("the server's request line")
}

/// A prompt completion carries the value being completed twice: as
/// `argument.value` and, again, under the same name in
/// `context.arguments` (which the protocol means for the *other*,
/// already resolved arguments). The decision was made on one; a server
/// that reads the argument from the context completed (listed) a folder
/// a deny rule covers. Now the server receives only what was decided:
/// the context's copy of the completed argument is not sent (nor, for a
/// template, a context value for a name it does not have), and the
/// record keeps what the client asked.
#[test]
fn a_completion_context_cannot_carry_another_value_for_the_completed_argument() {
    let world = World::new();
    let ws = world.workspace.display().to_string();
    world.write_config(&config(
        &world,
        json!({
            "allow": [format!("prompt__raw__p(path: {ws}/**)"), format!("resource__raw(uri: {ws}/**)")],
            "deny": ["prompt__raw__p(path: /etc/**)", "resource__raw(uri: /etc/**)"]
        }),
    ));
    let mut gateway = Gateway::start(&world);

    // The completed value alone, denied: the rule holds.
    let denied = gateway.request(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "raw__p"},
               "argument": {"name": "path", "value": "/etc/"}}),
    );
    assert!(
        denied["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("/etc/**")),
        "{denied}"
    );

    // The attack: an allowed value, and the denied one in the context.
    let prompt = gateway.request(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "raw__p"},
               "argument": {"name": "path", "value": format!("{ws}/")},
               "context": {"arguments": {"path": "/etc/", "dir": format!("{ws}/sub")}}}),
    );
    let sent = received(&prompt);
    let context = &sent["params"]["context"]["arguments"];
    assert!(
        context.get("path").is_none(),
        "the server was sent a value no decision covered: {sent}"
    );
    assert_eq!(
        sent["params"]["argument"],
        json!({"name": "path", "value": format!("{ws}/")})
    );
    assert_eq!(
        context["dir"],
        json!(format!("{ws}/sub")),
        "other context arguments are decided and sent: {sent}"
    );

    // The same through a template: the decided URI is the template filled
    // with the completed value; the context's copy is not sent, nor a
    // context value for a variable the template does not have.
    let template = gateway.request(
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "file:///{+path}"},
               "argument": {"name": "path", "value": ws.trim_start_matches('/')},
               "context": {"arguments": {"path": "etc/", "root": "/etc"}}}),
    );
    let sent = received(&template);
    let context = &sent["params"]["context"]["arguments"];
    assert!(
        context.get("path").is_none() && context.get("root").is_none(),
        "the server was sent values no decision covered: {sent}"
    );
    gateway.stop();

    // The record keeps what the client asked, context included.
    let records = requests(&world, "resource");
    let asked = records
        .iter()
        .find(|r| r["method"] == "completion/complete")
        .expect("the template completion on record");
    assert_eq!(asked["arguments"]["context"]["path"], "etc/", "{asked}");
    assert_eq!(asked["arguments"]["uri"], format!("file://{ws}"));
}

/// A resource update names only a URI, so the gateway passed a client
/// every update for a URI it had subscribed to, whichever server sent
/// it: a server whose every tool, resource and prompt the rules deny
/// (its log messages dropped for that reason) signalled the client as
/// often as it liked, under the URI of another server's resource the
/// client was allowed to follow (CONTRACT §8: notifications never cross
/// between servers). An update now reaches a client only from the server
/// its subscription was allowed on.
#[test]
fn a_resource_update_reaches_a_subscriber_only_from_the_server_it_subscribed_on() {
    let world = World::new();
    let uri = "note://shared/a";
    world.write_config(&config_of(
        &world,
        json!({
            "one": raw_server(&world, &["--resource", uri]),
            "two": raw_server(&world, &["--updates", uri, "from two"])
        }),
        json!({
            "allow": ["resource__one(uri: note://shared/**)", "mcp__one__touch"],
            "deny": ["mcp__two__*", "resource__two", "prompt__two__*"]
        }),
    ));
    let mut gateway = Gateway::start(&world);
    let subscribed = gateway.request("resources/subscribe", json!({"uri": uri}));
    assert!(subscribed.get("result").is_some(), "{subscribed}");
    let updates = |gateway: &mut Gateway| -> usize {
        gateway
            .notifications(Duration::from_secs(2))
            .into_iter()
            .filter(|n| n["method"] == "notifications/resources/updated")
            .count()
    };
    // `two` says the URI changed five times a second; `one` did not.
    assert_eq!(
        updates(&mut gateway),
        0,
        "another server's updates reached the subscriber"
    );
    // `one` says so once: that one passes.
    let touched = gateway.request(
        "tools/call",
        json!({"name": "one__touch", "arguments": {"uri": uri}}),
    );
    assert!(
        touched.get("result").is_some() && touched["result"]["isError"] != json!(true),
        "{touched}"
    );
    assert_eq!(updates(&mut gateway), 1, "the subscribed server's update");
    gateway.stop();
}
