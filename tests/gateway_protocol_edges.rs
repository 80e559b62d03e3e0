//! The gateway's protocol edges, through the real `warden gateway`
//! driven with raw JSON-RPC (what a client writes, nothing an SDK would
//! tidy): a message the gateway cannot read as a request is answered at
//! once with a JSON-RPC error and recorded (CONTRACT §6: nothing a
//! client asks goes unrecorded), over stdio and HTTP; a server's sampling
//! request is decided and recorded with every field its client receives
//! (tests/python/raw_echo_server.py `--sample`).

mod gateway_support;

use std::time::{Duration, Instant};

use gateway_support::{
    Listening, RawStdio, World, audit_path, python_scripts, requests, standard_config,
};
use serde_json::{Value, json};

/// How long an answer may take: a client must not wait out its timeout.
const PROMPT: Duration = Duration::from_secs(5);

/// Raw JSON-RPC over HTTP to a gateway started with `--listen`.
struct RawHttp<'a> {
    http: reqwest::Client,
    gateway: &'a Listening,
}

impl<'a> RawHttp<'a> {
    fn new(gateway: &'a Listening) -> Self {
        let http = reqwest::Client::builder()
            .timeout(PROMPT)
            .build()
            .expect("reqwest client");
        RawHttp { http, gateway }
    }

    /// POSTs `body` as JSON with the clients' token, a `Host` header of
    /// `host` when given, inside `session` when given.
    fn post(
        &self,
        body: String,
        host: Option<&str>,
        session: Option<&str>,
    ) -> impl Future<Output = reqwest::Result<reqwest::Response>> + use<> {
        let mut request = self
            .http
            .post(&self.gateway.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", self.gateway.bearer()))
            .body(body);
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.send()
    }
}

/// `warden gateway --stdio`, initialized, its stdout read by a thread.
struct Gateway {
    raw: RawStdio,
}

impl Gateway {
    fn start(world: &World) -> Gateway {
        Gateway::start_with(world, json!({}))
    }

    /// Started as a client declaring `capabilities`.
    fn start_with(world: &World, capabilities: Value) -> Gateway {
        Gateway {
            raw: RawStdio::start(world, capabilities),
        }
    }

    fn send(&mut self, line: &str) {
        self.raw.send(line);
    }

    /// The next answer (a message with a `result` or an `error`) within
    /// `within`; notifications are skipped.
    fn answer(&mut self, within: Duration) -> Option<Value> {
        let until = Instant::now() + within;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.raw.lines.recv_timeout(left) {
                Ok(line) if line.get("result").is_some() || line.get("error").is_some() => {
                    return Some(line);
                }
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    }

    /// Calls `name`, answering every sampling request meanwhile (with
    /// "sampled"); the call's answer and the sampling parameters received.
    fn call_sampling(&mut self, id: u64, name: &str) -> (Value, Vec<Value>) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": name, "arguments": {}}})
            .to_string(),
        );
        let mut sampled = Vec::new();
        loop {
            let line = self
                .raw
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no answer to {name}"));
            if line["method"] == "sampling/createMessage" {
                sampled.push(line["params"].clone());
                self.send(
                    &json!({"jsonrpc": "2.0", "id": line["id"], "result": {
                        "role": "assistant", "model": "m",
                        "content": {"type": "text", "text": "sampled"}}})
                    .to_string(),
                );
            } else if line["id"] == json!(id) {
                return (line, sampled);
            }
        }
    }

    /// The list-changed notifications (by method) that arrive within
    /// `window`.
    fn list_changes(&mut self, window: Duration) -> Vec<String> {
        let until = Instant::now() + window;
        let mut seen = Vec::new();
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.raw.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(method) = line["method"].as_str()
                        && method.ends_with("/list_changed")
                    {
                        seen.push(method.to_string());
                    }
                }
                Err(_) => break,
            }
        }
        seen
    }

    fn stop(self) {
        self.raw.stop();
    }
}

/// Arguments nested deeper than serde_json reads (128).
fn deep(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"fixture__echo","arguments":{{"message":{}1{}}}}}}}"#,
        "[".repeat(300),
        "]".repeat(300)
    )
}

/// Each attack line, the JSON-RPC error code and `id` it must be
/// answered with (`None`: no id), and the `method` its record names.
fn attacks() -> Vec<(String, i64, Option<u64>, Option<&'static str>)> {
    vec![
        // Not JSON: a parse error, which has no id.
        (r#"{"jsonrpc":"2.0","id":10,"method":"tools/call""#.into(), -32700, None, None),
        // A lone surrogate in the arguments: no string can hold it, so
        // the line does not read; the request is still answered under
        // its id.
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"fixture__echo","arguments":{"message":"a\ud800"}}}"#.into(),
            -32602,
            Some(11),
            Some("tools/call"),
        ),
        (deep(12), -32602, Some(12), Some("tools/call")),
        // Well-formed, with parameters that are not the method's: invalid
        // params (was "method not found").
        (
            r#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"fixture__echo","arguments":[1]}}"#.into(),
            -32602,
            Some(13),
            Some("tools/call"),
        ),
        // The next variants: other methods' parameters.
        (
            r#"{"jsonrpc":"2.0","id":14,"method":"resources/read","params":{"uri":5}}"#.into(),
            -32602,
            Some(14),
            Some("resources/read"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":15,"method":"prompts/get","params":{"name":"notes__p","arguments":[1]}}"#.into(),
            -32602,
            Some(15),
            Some("prompts/get"),
        ),
        // JSON that is no request: invalid request under its id.
        (r#"{"jsonrpc":"2.0","id":16,"method":7}"#.into(), -32600, Some(16), None),
    ]
}

/// What the attack's answer must be.
fn check_answer(answer: &Value, code: i64, id: Option<u64>, line: &str) {
    assert_eq!(
        answer["error"]["code"],
        json!(code),
        "{answer} for {line:.120}"
    );
    match id {
        Some(id) => assert_eq!(answer["id"], json!(id), "{answer}"),
        None => assert!(answer["id"].is_null(), "{answer}"),
    }
}

/// A request longer than the gateway reads (`limit`).
fn oversized(limit: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{{"name":"fixture__echo","arguments":{{"message":"{}"}}}}}}"#,
        "A".repeat(limit)
    )
}

/// The `malformed` records, one per attack, in order, with what they say,
/// and last the oversized one, whose record says only that it was longer
/// than `limit`.
fn check_records(
    world: &World,
    expected: &[(String, i64, Option<u64>, Option<&str>)],
    limit: usize,
) {
    let mut records = requests(world, "malformed");
    let last = records.pop().expect("records");
    assert_eq!(last["arguments"], json!({"longer_than": limit}), "{last}");
    assert!(
        last["error"]
            .as_str()
            .is_some_and(|e| e.contains("(-32600)")),
        "{last}"
    );
    assert_eq!(records.len(), expected.len(), "{records:#?}");
    for (record, (line, code, _, method)) in records.iter().zip(expected) {
        assert_eq!(record["outcome"], "invalid_request", "{record}");
        assert_eq!(record["caller"], "gateway", "{record}");
        assert!(record["decision"].is_null(), "{record}");
        assert_eq!(record["method"].as_str(), *method, "{record}");
        assert!(
            record["error"]
                .as_str()
                .is_some_and(|e| e.contains(&format!("({code})"))),
            "{record}"
        );
        // A line that does not read is recorded by size and digest only.
        if serde_json::from_str::<Value>(line).is_err() {
            assert_eq!(record["arguments"]["bytes"], json!(line.len()), "{record}");
        }
    }
}

/// A line the gateway could not read was dropped inside its transport:
/// the client waited out its timeout for an answer that never came, and
/// the audit log had nothing of it. A request whose parameters were not
/// its method's got "method not found". Now every one is answered at once
/// (parse error without id; invalid params or invalid request under the
/// request's id) and recorded as a refused `malformed` request, and the
/// session goes on.
#[test]
fn stdio_answers_and_records_every_request_it_cannot_read() {
    let world = World::new();
    world.write_config(&standard_config(&world));
    let mut gateway = Gateway::start(&world);
    let attacks = attacks();
    for (line, code, id, _) in &attacks {
        gateway.send(line);
        let answer = gateway
            .answer(PROMPT)
            .unwrap_or_else(|| panic!("no answer within {PROMPT:?} to {line:.120}"));
        check_answer(&answer, *code, *id, line);
    }
    // The next variant: a line longer than the gateway reads (16 MiB),
    // whose id is not read either.
    let limit = 16 << 20;
    gateway.send(&oversized(limit));
    let answer = gateway
        .answer(Duration::from_secs(30))
        .expect("an answer to an oversized line");
    check_answer(&answer, -32600, None, "the oversized line");
    // The session goes on.
    gateway.send(r#"{"jsonrpc":"2.0","id":99,"method":"tools/list"}"#);
    let listed = gateway.answer(PROMPT).expect("an answer to tools/list");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    gateway.stop();
    check_records(&world, &attacks, limit);
}

/// The same over `--listen`: rmcp answered a body it could not read with
/// a bare 415 and the log had nothing; a request with parameters not its
/// method's got "method not found". Now the client gets the JSON-RPC error
/// and the log the record. A request refused for its Host is still
/// refused as before (403), and not recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_answers_and_records_every_request_it_cannot_read() {
    let (world, gateway) = standard_listening().await;
    let raw = RawHttp::new(&gateway);
    let post =
        |body: String, host: Option<&str>, session: Option<&str>| raw.post(body, host, session);
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string(),
        None,
        None,
    )
    .await
    .expect("initialize");
    assert_eq!(init.status().as_u16(), 200);
    let session = init
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    drop(init);
    let initialized = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        None,
        session.as_deref(),
    )
    .await
    .expect("initialized");
    assert!(initialized.status().is_success(), "{initialized:?}");

    let refused = post(attacks()[0].0.clone(), Some("evil.example"), None)
        .await
        .expect("send");
    assert_eq!(refused.status().as_u16(), 403);

    let attacks = attacks();
    for (line, code, id, _) in &attacks {
        let response = post(line.clone(), None, session.as_deref())
            .await
            .unwrap_or_else(|e| panic!("no answer to {line:.120}: {e}"));
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        // An in-band error is JSON, or one SSE event carrying it.
        let json_text = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:").map(str::trim))
            .find(|d| !d.is_empty())
            .unwrap_or(text.trim());
        let answer: Value = serde_json::from_str(json_text)
            .unwrap_or_else(|_| panic!("{status}: {text:.200} for {line:.120}"));
        check_answer(&answer, *code, *id, line);
    }
    // A body longer than the gateway reads (4 MiB): 413 as before, now
    // with the JSON-RPC error; refused for its Host, it is not recorded.
    let limit = 4 << 20;
    let refused = post(oversized(limit), Some("evil.example"), None)
        .await
        .expect("send");
    assert_eq!(refused.status().as_u16(), 403);
    let response = post(oversized(limit), None, session.as_deref())
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 413);
    let answer: Value = response.json().await.expect("a JSON-RPC error");
    check_answer(&answer, -32600, None, "the oversized body");
    gateway.stop(&world).await;
    check_records(&world, &attacks, limit);
}

/// An `initialize` whose parameters are not initialize's was answered by
/// rmcp with an error about a missing `_meta` and left no record. Now it
/// is answered invalid params under its id and recorded `malformed`,
/// before the session and inside it; a well-formed one still opens it.
#[test]
fn stdio_answers_and_records_an_initialize_it_cannot_read() {
    let world = World::new();
    world.write_config(&standard_config(&world));
    let mut gateway = Gateway {
        raw: RawStdio::spawn(&world),
    };
    let bad = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
               "params": {"protocolVersion": 2025, "clientInfo": "me"}})
        .to_string()
    };
    gateway.send(&bad(7));
    let answer = gateway
        .answer(PROMPT)
        .expect("an answer to a bad initialize");
    check_answer(&answer, -32602, Some(7), "initialize");
    gateway.raw.initialize(json!({}));
    gateway.send(&bad(8));
    let answer = gateway
        .answer(PROMPT)
        .expect("an answer inside the session");
    check_answer(&answer, -32602, Some(8), "initialize");
    gateway.send(r#"{"jsonrpc":"2.0","id":99,"method":"tools/list"}"#);
    let listed = gateway.answer(PROMPT).expect("an answer to tools/list");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    gateway.raw.stop();
    let records = requests(&world, "malformed");
    assert_eq!(records.len(), 2, "{records:#?}");
    for record in &records {
        assert_eq!(record["method"], "initialize", "{record}");
        assert_eq!(record["outcome"], "invalid_request", "{record}");
        assert_eq!(record["arguments"]["protocolVersion"], 2025, "{record}");
    }
}

/// An `initialize` whose parameters are not initialize's, sent over
/// `--listen` without a session, was refused by rmcp with a bare 400
/// ("session id required"), before any handler ran: the client was told
/// something else than what was wrong, and the log had nothing. Now it is
/// answered invalid params under its id and recorded as `malformed`; a
/// well-formed `initialize` after it still opens a session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_answers_and_records_an_initialize_it_cannot_read() {
    let (world, gateway) = standard_listening().await;
    let raw = RawHttp::new(&gateway);
    let post = |body: Value| raw.post(body.to_string(), None, None);
    for (id, params) in [
        (7, json!({"protocolVersion": 2025, "capabilities": {}})),
        (
            8,
            json!({"clientInfo": "me", "secret": "sk-ant-aaaaaaaaaaaaaaaaaaaaaaaa"}),
        ),
    ] {
        let response =
            post(json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params}))
                .await
                .expect("an answer");
        assert_eq!(response.status().as_u16(), 200, "{response:?}");
        assert!(response.headers().get("mcp-session-id").is_none());
        let answer: Value = response.json().await.expect("a JSON-RPC error");
        check_answer(&answer, -32602, Some(id), "initialize");
    }
    let init = post(json!({"jsonrpc": "2.0", "id": 9, "method": "initialize",
           "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "raw", "version": "0"}}}))
    .await
    .expect("initialize");
    assert_eq!(init.status().as_u16(), 200);
    assert!(init.headers().get("mcp-session-id").is_some());
    drop(init);
    gateway.stop(&world).await;
    let records = requests(&world, "malformed");
    assert_eq!(records.len(), 2, "{records:#?}");
    for record in &records {
        assert_eq!(record["method"], "initialize", "{record}");
        assert_eq!(record["outcome"], "invalid_request", "{record}");
        assert_eq!(record["caller"], "gateway", "{record}");
    }
    assert_eq!(records[0]["arguments"]["protocolVersion"], 2025);
    assert_eq!(records[1]["arguments"]["clientInfo"], "me");
}

/// A request for a method the gateway does not serve was answered
/// "method not found" (-32601) and left no record, whether the gateway's
/// handler answered it (a made-up method, `server/discover`) or rmcp did
/// before any handler ran (`tasks/get` without the tasks capability); a
/// notification for a client's method whose parameters were not that
/// method's was ignored without a record. Now each is recorded
/// (`malformed`, the method named, bounded however long the client made
/// it), and the answers are unchanged.
#[test]
fn requests_for_methods_not_served_and_unreadable_notifications_are_recorded() {
    let world = World::new();
    world.write_config(&standard_config(&world));
    let mut gateway = Gateway::start(&world);
    let long = format!("x/{}", "y".repeat(200_000));
    let unserved = [
        (30, "made/up".to_string(), json!({"secret": "nope"})),
        (
            31,
            "server/discover".to_string(),
            json!({"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}}),
        ),
        (32, "tasks/get".to_string(), json!({"taskId": "t1"})),
        (33, long.clone(), json!({})),
    ];
    for (id, method, params) in &unserved {
        gateway.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        let answer = gateway
            .answer(PROMPT)
            .unwrap_or_else(|| panic!("no answer to {method:.40}"));
        check_answer(&answer, -32601, Some(*id), method);
    }
    // The next variant: a `tools/call` rmcp refuses before the gateway's
    // handler runs, for its `_meta`: a revision the gateway does not
    // speak, or 2026-07-28 without the fields that revision requires.
    let early = [
        (
            34,
            json!({"io.modelcontextprotocol/protocolVersion": "1999-01-01"}),
        ),
        (
            35,
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
        ),
    ];
    for (id, meta) in &early {
        gateway.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "fixture__echo", "arguments": {"message": "early"},
                               "_meta": meta}})
            .to_string(),
        );
        let answer = gateway.answer(PROMPT).expect("an answer");
        assert!(answer["error"]["code"].is_i64(), "{answer}");
        assert_eq!(answer["id"], json!(id), "{answer}");
    }
    // Notifications of a client's methods with parameters not theirs.
    gateway.send(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"x":1}}}"#,
    );
    gateway.send(
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":[1],"progress":"a"}}"#,
    );
    // The session goes on.
    gateway.send(r#"{"jsonrpc":"2.0","id":99,"method":"tools/list"}"#);
    let listed = gateway.answer(PROMPT).expect("an answer to tools/list");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    gateway.stop();
    let records = requests(&world, "malformed");
    let methods: Vec<String> = records
        .iter()
        .map(|r| {
            r["method"]
                .as_str()
                .unwrap_or("")
                .chars()
                .take(40)
                .collect()
        })
        .collect();
    assert_eq!(records.len(), 8, "{methods:?}");
    for (record, (_, method, params)) in records.iter().zip(&unserved) {
        let shown: String = record.to_string().chars().take(300).collect();
        assert_eq!(record["outcome"], "invalid_request", "{shown}");
        assert_eq!(record["caller"], "gateway");
        assert!(record["decision"].is_null());
        assert!(
            record["error"]
                .as_str()
                .is_some_and(
                    |e| (e.contains("(-32601)") || method.len() > 1000) && e.len() < 16 * 1024
                ),
            "{shown}"
        );
        let recorded = record["method"].as_str().expect("a method");
        if method.len() > 1000 {
            assert!(recorded.len() < 16 * 1024, "the method is kept whole");
            assert!(recorded.starts_with("x/yyy"), "{recorded:.100}");
        } else {
            assert_eq!(recorded, method);
            assert_eq!(&record["arguments"], params);
        }
    }
    for record in &records[4..6] {
        assert_eq!(record["method"], "tools/call", "{record}");
        assert_eq!(
            record["arguments"]["arguments"],
            json!({"message": "early"})
        );
    }
    // Never sent: no tool_call, no call to the server.
    let log = std::fs::read_to_string(audit_path(&world)).expect("the log");
    assert!(!log.contains(r#""event":"tool_call""#), "{log:.2000}");
    // The two notifications are handled concurrently: their records come
    // in either order.
    let note = |method: &str| {
        records[6..]
            .iter()
            .find(|r| r["method"] == method)
            .unwrap_or_else(|| panic!("no record of {method}: {methods:?}"))
    };
    let cancelled = note("notifications/cancelled");
    note("notifications/progress");
    assert_eq!(cancelled["arguments"], json!({"requestId": {"x": 1}}));
    assert!(
        cancelled["error"]
            .as_str()
            .is_some_and(|e| e.contains("(-32602)")),
        "{cancelled}"
    );
    // The whole log line of the long method stays bounded.
    assert!(
        log.lines().all(|l| l.len() < 64 * 1024),
        "a record is unbounded"
    );
}

/// The same over `--listen`, where rmcp's HTTP service runs the handler
/// itself: a made-up method, `tasks/get` (refused by rmcp before the
/// handler) and a notification with parameters not its method's are
/// recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_records_requests_for_methods_not_served() {
    let (world, gateway) = standard_listening().await;
    let raw = RawHttp::new(&gateway);
    let post = |body: Value, session: Option<&str>| raw.post(body.to_string(), None, session);
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "raw", "version": "0"}}}),
        None,
    )
    .await
    .expect("initialize");
    let session = init
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    drop(init);
    let session = session.as_deref();
    post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        session,
    )
    .await
    .expect("initialized");
    for (id, method, params) in [
        (2, "made/up", json!({"a": 1})),
        (3, "tasks/get", json!({"taskId": "t"})),
    ] {
        let response = post(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            session,
        )
        .await
        .expect("an answer");
        let text = response.text().await.expect("body");
        assert!(text.contains("-32601"), "{text:.300}");
    }
    // The next variant: a `tools/call` rmcp refuses for the revision its
    // `_meta` names, before the handler (and the host) sees it.
    let response = post(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "fixture__echo", "arguments": {"message": "early"},
                          "_meta": {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}}}),
        session,
    )
    .await
    .expect("an answer");
    let text = response.text().await.expect("body");
    assert!(text.contains("error"), "{text:.300}");
    post(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": {"x": 1}}}),
        session,
    )
    .await
    .expect("sent");
    gateway.stop(&world).await;
    let records = requests(&world, "malformed");
    let methods: Vec<&str> = records
        .iter()
        .filter_map(|r| r["method"].as_str())
        .collect();
    assert_eq!(
        methods,
        [
            "made/up",
            "tasks/get",
            "tools/call",
            "notifications/cancelled"
        ],
        "{records:#?}"
    );
    assert_eq!(records[1]["arguments"], json!({"taskId": "t"}));
    assert_eq!(
        records[2]["arguments"]["arguments"],
        json!({"message": "early"})
    );
    let log = std::fs::read_to_string(audit_path(&world)).expect("the log");
    assert!(!log.contains(r#""event":"tool_call""#), "{log:.2000}");
}

/// tests/python/raw_echo_server.py whose tool `sample` asks its client to
/// sample with `params`.
fn sampling_server(world: &World, params: &Value) -> Value {
    json!({
        "command": "/usr/bin/python3",
        "args": [
            python_scripts().join("raw_echo_server.py"),
            "--marker", world.marker,
            "--sample", params.to_string()
        ],
        "sandbox": {"read": [python_scripts()]}
    })
}

/// `fooBar` → `foo_bar`: the spec's names as `input.sampling` keys.
fn snake(key: &str) -> String {
    key.chars()
        .flat_map(|c| {
            if c.is_ascii_uppercase() {
                vec!['_', c.to_ascii_lowercase()]
            } else {
                vec![c]
            }
        })
        .collect()
}

/// A server's sampling request reached the gateway's client with fields
/// no decision or record covered: `tools` (tools the client's model may
/// call while sampling), `toolChoice`, `metadata`, `stopSequences`,
/// `temperature`, `modelPreferences`. Rego saw only `max_tokens`,
/// `messages`, `system_prompt` and `include_context`, so a policy could
/// not refuse a request offering tools, and the log did not show them.
/// Now every field the client receives is in `input.sampling` (snake_case)
/// and in the record: a deny on `input.sampling.tools` refuses the
/// request before the client sees it, recorded with what it offered; a
/// request without tools is passed on, and each field the client got is
/// in its record with the value received.
#[test]
fn a_policy_sees_and_the_log_keeps_every_field_of_a_sampling_request() {
    let world = World::new();
    let message = json!([{"role": "user", "content": {"type": "text", "text": "hi"}}]);
    let tooled = json!({
        "messages": message, "maxTokens": 50,
        "tools": [{"name": "run_shell", "inputSchema": {"type": "object",
                   "properties": {"command": {"type": "string"}}}}],
        "toolChoice": {"mode": "required"}
    });
    let plain = json!({
        "messages": message, "maxTokens": 50, "systemPrompt": "be brief",
        "temperature": 0.7, "stopSequences": ["END"], "metadata": {"trace": "t-1"},
        "modelPreferences": {"hints": [{"name": "claude"}], "intelligencePriority": 0.5}
    });
    let policy = world.path("sampling.rego");
    std::fs::write(
        &policy,
        "package warden\n\ndeny contains \"sampling that offers tools\" if count(input.sampling.tools) > 0\n",
    )
    .expect("write policy");
    world.write_config(&json!({
        "mcpServers": {
            "tooled": sampling_server(&world, &tooled),
            "plain": sampling_server(&world, &plain)
        },
        "permissions": {"allow": ["mcp__tooled__*", "mcp__plain__*", "sampling__tooled", "sampling__plain"]},
        "policy": [policy],
        "audit": {"path": audit_path(&world)}
    }));
    // A client that takes tools in sampling (rmcp sends tools only to one).
    let mut gateway = Gateway::start_with(&world, json!({"sampling": {"tools": {}}}));

    let (answer, sampled) = gateway.call_sampling(1, "tooled__sample");
    assert!(
        sampled.is_empty(),
        "the client was asked to sample with tools: {sampled:?}"
    );
    assert!(
        answer.to_string().contains("sampling that offers tools"),
        "the server was told why: {answer}"
    );
    let (answer, sampled) = gateway.call_sampling(2, "plain__sample");
    assert_eq!(sampled.len(), 1, "{answer}");
    gateway.stop();

    let records = requests(&world, "sampling");
    assert_eq!(records.len(), 2, "{records:#?}");
    let refused = &records[0];
    assert_eq!(refused["server"], "tooled");
    assert_eq!(refused["outcome"], "denied", "{refused}");
    assert_eq!(refused["decision"]["stage"], "policy", "{refused}");
    assert_eq!(refused["arguments"]["tools"], tooled["tools"], "{refused}");
    assert_eq!(refused["arguments"]["tool_choice"], tooled["toolChoice"]);

    let passed = &records[1];
    assert_eq!(passed["result"]["outcome"], "ok", "{passed}");
    let received = sampled[0].as_object().expect("params");
    for (key, value) in received {
        if key == "_meta" {
            continue;
        }
        assert_eq!(
            &passed["arguments"][snake(key)],
            value,
            "{key} as the client received it is not in the record: {passed}"
        );
    }
}

/// tests/python/raw_echo_server.py with `args`.
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

/// A server says its tools, resources and prompts changed five times a
/// second. One whose every tool, resource and prompt the rules deny (so
/// that none of it is ever listed to a client) still had its resource and
/// prompt list changes passed to every client: a signal from a server the
/// client can see nothing of, as often as it liked, and a client that
/// follows it lists again each time. Now a list change is passed on only
/// when the client's listing could change: the server offers that kind
/// and not all of it is denied. A server with something visible still
/// has its changes passed on (the next variant: it must not be cut off).
#[test]
fn list_changes_reach_a_client_only_from_a_server_it_can_see_something_of() {
    let world = World::new();
    let config = |two: &[&str]| {
        json!({
            "mcpServers": {
                "one": raw_server(&world, &["--resource", "note://one/a"]),
                "two": raw_server(&world, two)
            },
            "permissions": {
                "allow": ["mcp__one__*", "resource__one", "prompt__one__*"],
                "deny": ["mcp__two__*", "resource__two", "prompt__two__*"]
            },
            "policy": [],
            "audit": {"path": audit_path(&world)}
        })
    };
    world.write_config(&config(&["--changes"]));
    let mut gateway = Gateway::start(&world);
    gateway.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    assert!(gateway.answer(PROMPT).is_some());
    let changes = gateway.list_changes(Duration::from_secs(3));
    gateway.stop();
    assert!(
        changes.is_empty(),
        "a server the client sees nothing of signalled it: {changes:?}"
    );

    // `one` (visible) changes: its list changes reach the client.
    world.write_config(&json!({
        "mcpServers": {"one": raw_server(&world, &["--resource", "note://one/a", "--changes"])},
        "permissions": {"allow": ["mcp__one__*", "resource__one", "prompt__one__*"]},
        "policy": [],
        "audit": {"path": audit_path(&world)}
    }));
    let mut gateway = Gateway::start(&world);
    let changes = gateway.list_changes(Duration::from_secs(3));
    gateway.stop();
    for kind in ["resources", "prompts"] {
        assert!(
            changes.contains(&format!("notifications/{kind}/list_changed")),
            "{kind} changes of a visible server: {changes:?}"
        );
    }
}

/// A `--listen` gateway over the standard configuration, in a world of
/// its own.
async fn standard_listening() -> (World, Listening) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let world = World::new();
    world.write_config(&standard_config(&world));
    let gateway = Listening::start(&world, &[]).await;
    (world, gateway)
}
