//! The transport against rmcp's `AsyncRwTransport` on the same bytes, and
//! a real rmcp client and server talking through it.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ServerCapabilities, ServerConfig,
};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const MAX: usize = 64 * 1024;

/// What a transport makes of `input`: the messages it receives (as JSON)
/// and the bytes it writes back on its own.
async fn run<T: Transport<RoleServer>>(
    make: impl FnOnce(tokio::io::DuplexStream, tokio::io::DuplexStream) -> T,
    input: Vec<u8>,
) -> (Vec<Value>, Vec<u8>) {
    let (mut feed, read) = tokio::io::duplex(4096);
    let (write, mut answers) = tokio::io::duplex(1 << 20);
    let mut transport = make(read, write);
    let feeder = tokio::spawn(async move {
        feed.write_all(&input).await.unwrap();
    });
    let mut received = Vec::new();
    while let Some(message) = transport.receive().await {
        received.push(serde_json::to_value(&message).unwrap());
    }
    feeder.await.unwrap();
    transport.close().await.unwrap();
    drop(transport);
    let mut written = Vec::new();
    answers.read_to_end(&mut written).await.unwrap();
    (received, written)
}

#[tokio::test]
async fn reads_and_answers_the_same_lines_as_rmcps_transport() {
    let long_ok = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"echo","arguments":{{"m":"{}"}}}}}}"#,
        "y".repeat(40_000)
    );
    let too_long = format!(
        r#"{{"jsonrpc":"2.0","method":"x","params":{{"p":"{}"}}}}"#,
        "z".repeat(MAX)
    );
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"m":"x"},"_meta":{"progressToken":2}}}"#,
        "",
        "not json at all",
        r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{}}"#,
        r#"{"valid":"json","but":"no message"}"#,
        &too_long,
        &long_ok,
        "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\r",
        r#"{"jsonrpc":"2.0","id":4,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"arguments":{}}}"#,
    ];
    let mut input = lines.join("\n").into_bytes();
    input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}");
    let ours = run(
        |r, w| WireTransport::<RoleServer, _, _>::new(r, w, MAX),
        input.clone(),
    )
    .await;
    let rmcps = run(
        |r, w| AsyncRwTransport::<RoleServer, _, _>::new(r, w).with_max_line_length(MAX),
        input,
    )
    .await;
    assert_eq!(ours.0, rmcps.0);
    let ids: Vec<&Value> = ours.0.iter().map(|m| &m["id"]).collect();
    assert_eq!(
        ids,
        [
            &json!(1),
            &Value::Null,
            &json!(2),
            &Value::Null,
            &json!(9),
            &json!(3),
            &json!(4),
            &json!(5)
        ],
        "{:#?}",
        ours.0
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&ours.1).unwrap(),
        serde_json::from_slice::<Value>(&rmcps.1).unwrap(),
        "the Invalid Request answer"
    );
    assert_eq!(ours.1.iter().filter(|b| **b == b'\n').count(), 1);
}

#[derive(Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: rmcp::service::RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let text = serde_json::to_string(&request.arguments).unwrap_or_default();
        Ok(rmcp::model::CallToolResponse::Complete(
            CallToolResult::success(vec![ContentBlock::text(text)]),
        ))
    }
}

#[tokio::test]
async fn an_rmcp_client_and_server_talk_through_it_with_large_and_concurrent_calls() {
    let (client_io, server_io) = tokio::io::duplex(8192);
    let (server_read, server_write) = tokio::io::split(server_io);
    let (client_read, client_write) = tokio::io::split(client_io);
    let server = tokio::spawn(async move {
        let transport = WireTransport::<RoleServer, _, _>::new(server_read, server_write, 16 << 20);
        Echo.serve(transport)
            .await
            .unwrap()
            .waiting()
            .await
            .unwrap();
    });
    let transport = WireTransport::<RoleClient, _, _>::new(client_read, client_write, 16 << 20);
    let client = ().serve(transport).await.unwrap();
    let big = "\u{e9}\"\\\n".repeat(300_000);
    let mut calls = Vec::new();
    for i in 0..16 {
        let peer = client.peer().clone();
        let message = if i % 4 == 0 {
            big.clone()
        } else {
            format!("call {i}")
        };
        calls.push(tokio::spawn(async move {
            let arguments = json!({"message": message, "i": i});
            let result = peer
                .call_tool(
                    CallToolRequestParams::new("echo")
                        .with_arguments(arguments.as_object().unwrap().clone()),
                )
                .await
                .unwrap();
            let text = result.content[0].as_text().unwrap().text.clone();
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), arguments);
        }));
    }
    for call in calls {
        tokio::time::timeout(Duration::from_secs(30), call)
            .await
            .unwrap()
            .unwrap();
    }
    client.cancel().await.unwrap();
    server.await.unwrap();
}

/// What the `server_message` fuzz target found (reduced): a `tools/call`
/// with an unknown parameter holding invalid UTF-8, which rmcp drops as
/// unparsable and an earlier fast reading passed on to the server.
#[tokio::test]
async fn the_fuzzers_findings_are_read_as_rmcp_reads_them() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let findings: [Vec<u8>; 2] = [
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"argummnts\":{\"message\":\"hi \xa4\xde\"}}}".to_vec(),
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","x":{deep}}}}}"#).into_bytes(),
    ];
    for mut stream in findings {
        stream.push(b'\n');
        super::compare::assert_same_as_rmcp(&stream, MAX).await;
        let (received, _) = run(
            |r, w| WireTransport::<RoleServer, _, _>::new(r, w, MAX),
            stream,
        )
        .await;
        assert!(received.is_empty(), "{received:?}");
    }
}

/// A byte stream a peer might write: messages, junk, blank and overlong
/// lines, `\n` or `\r\n` between them, perhaps no newline at the end.
fn stream() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let line = prop_oneof![
        8 => crate::mcp::wire::strategies::message_line().prop_map(String::into_bytes),
        1 => Just(b"not json".to_vec()),
        1 => Just(br#"{"valid":"json","no":"message"}"#.to_vec()),
        1 => Just(Vec::new()),
        1 => prop::collection::vec(any::<u8>(), 0..40),
        1 => Just(vec![b'x'; 5000]),
        // A message with a few bytes of anything spliced in (invalid
        // UTF-8 inside a string, a stray bracket, a control character).
        2 => (
            crate::mcp::wire::strategies::message_line(),
            any::<prop::sample::Index>(),
            prop::collection::vec(any::<u8>(), 1..4),
        )
            .prop_map(|(line, at, junk)| {
                let mut bytes = line.into_bytes();
                let at = at.index(bytes.len() + 1);
                bytes.splice(at..at, junk);
                bytes
            }),
    ];
    (
        prop::collection::vec((line, any::<bool>()), 0..10),
        any::<bool>(),
    )
        .prop_map(|(lines, last_newline)| {
            let mut data = Vec::new();
            for (line, crlf) in lines {
                data.extend_from_slice(&line);
                data.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            }
            if !last_newline {
                data.pop();
            }
            data
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    /// The fuzz target `server_message`'s property, on generated streams.
    #[test]
    fn any_stream_is_read_as_rmcp_reads_it(data in stream(), max_line in 64usize..8192) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(super::compare::assert_same_as_rmcp(&data, max_line));
    }
}
