//! The fast readings against rmcp's decoder: every line must decode to
//! the value rmcp's gives (or be refused the way rmcp refuses it).

use proptest::prelude::*;
use rmcp::model::{ClientRequest, ServerResult};
use serde_json::{Value, json};

use super::*;
use crate::mcp::wire::strategies::{message_line, result_object};

/// The decoded line as comparable JSON, or the kind of refusal.
fn outcome<T: serde::Serialize>(decoded: Decoded<T>) -> Result<Value, &'static str> {
    match decoded {
        Decoded::Message(message) => Ok(serde_json::to_value(&message).expect("serialises")),
        Decoded::Ignored => Err("ignored"),
        Decoded::Unparsable(_) => Err("unparsable"),
        Decoded::Invalid(_) => Err("invalid"),
    }
}

fn same_as_rmcp(line: &str) {
    same_bytes_as_rmcp(line.as_bytes());
}

fn same_bytes_as_rmcp(bytes: &[u8]) {
    let line = String::from_utf8_lossy(bytes);
    assert_eq!(
        outcome(decode::<RoleServer>(bytes)),
        outcome(decode_with_rmcp::<RoleServer>(bytes)),
        "as a server reads it: {line}"
    );
    assert_eq!(
        outcome(decode::<RoleClient>(bytes)),
        outcome(decode_with_rmcp::<RoleClient>(bytes)),
        "as a client reads it: {line}"
    );
}

#[test]
fn a_tools_call_is_read_fast_and_as_rmcp_reads_it() {
    let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi \"there\"\n","n":[1,2.5,-3,{"k":null}]},"_meta":{"progressToken":"p1"}}}"#;
    let fast = RoleServer::read_fast(line.as_bytes()).expect("a fast reading");
    let JsonRpcMessage::Request(request) = &fast else {
        panic!("{fast:?}")
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        panic!("{fast:?}")
    };
    assert_eq!(call.params.name, "echo");
    // rmcp moves `_meta` into the request's extensions; so does the fast path.
    assert!(
        call.extensions
            .get::<rmcp::model::RequestMetaObject>()
            .is_some()
    );
    same_as_rmcp(line);
}

#[test]
fn a_tool_result_is_read_fast_and_as_rmcp_reads_it() {
    let line = r#"{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"Echo: x"}],"isError":false,"structuredContent":null}}"#;
    let fast = RoleClient::read_fast(line.as_bytes()).expect("a fast reading");
    let JsonRpcMessage::Response(response) = &fast else {
        panic!("{fast:?}")
    };
    assert!(matches!(response.result, ServerResult::CallToolResult(_)));
    same_as_rmcp(line);
}

#[test]
fn keys_in_any_order_are_read_fast() {
    for line in [
        r#"{"params":{"arguments":{"a":1},"name":"t"},"id":"x","method":"tools/call","jsonrpc":"2.0"}"#,
        r#"{"result":{"isError":true,"content":[]},"id":3,"jsonrpc":"2.0"}"#,
    ] {
        assert!(
            RoleServer::read_fast(line.as_bytes()).is_some()
                || RoleClient::read_fast(line.as_bytes()).is_some(),
            "{line}"
        );
        same_as_rmcp(line);
    }
}

#[test]
fn unusual_envelopes_are_left_to_rmcp() {
    let unusual = [
        // a key JSON-RPC does not define
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"x":1}"#,
        // a repeated key
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"a"}}"#,
        // an escaped method, an escaped key
        r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"a"}}"#,
        r#"{"jsonrpc":"2.0","\u0069d":1,"method":"tools/call","params":{"name":"a"}}"#,
        // no version, another version
        r#"{"id":1,"method":"tools/call","params":{"name":"a"}}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"a"}}"#,
        // parameters rmcp's CallToolRequest refuses (rmcp: CustomRequest)
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        // a result with a key of another variant
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"incomplete","content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":null,"result":{"content":[]}}"#,
        // not a message, not JSON, trailing bytes
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":{"code":1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}} x"#,
        r#"[1,2]"#,
        "not json",
        // notifications rmcp ignores or reads
        r#"{"jsonrpc":"2.0","method":"$/lsp"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}"#,
    ];
    for line in unusual {
        let fast_server = RoleServer::read_fast(line.as_bytes());
        let fast_client = RoleClient::read_fast(line.as_bytes());
        assert!(
            fast_server.is_none() && fast_client.is_none(),
            "no fast reading for {line}"
        );
        same_as_rmcp(line);
    }
}

/// serde skips the value of a key a type does not know without checking
/// it (its strings may be invalid UTF-8, its nesting past serde_json's
/// depth limit of 128); rmcp, which buffers the whole line first, refuses
/// such a line. Found by the `server_message` fuzz target: a `tools/call`
/// whose unknown parameter held invalid UTF-8 reached the server through
/// warden and not through rmcp. Every place a fast reading could skip a
/// value is tried here, with both kinds of unchecked value.
#[test]
fn values_a_fast_reading_would_skip_unread_are_left_to_rmcp() {
    let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    let unchecked: [Vec<u8>; 3] = [
        b"\"hi \xa4\xde x\"".to_vec(),
        b"{\"k\":[\"\xff\"]}".to_vec(),
        deep(200).into_bytes(),
    ];
    let places: [(&str, &str); 6] = [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","argummnts":"#,
            "}}",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"m":"#,
            "}}}",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"x":"#,
            "}}}",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"t","zz":"#,
            "}]}}",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":false,"other":"#,
            "}}",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"a":"#,
            "}}}",
        ),
    ];
    for (before, after) in places {
        for value in &unchecked {
            let line = [before.as_bytes(), value, after.as_bytes()].concat();
            same_bytes_as_rmcp(&line);
            assert!(
                matches!(decode::<RoleServer>(&line), Decoded::Unparsable(_))
                    && matches!(decode::<RoleClient>(&line), Decoded::Unparsable(_)),
                "{}",
                String::from_utf8_lossy(&line)
            );
        }
    }
    // At the depth limit and either side of it, in the arguments and in a
    // result's structured content (both read, never skipped).
    for n in 120..=130 {
        same_as_rmcp(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"e","arguments":{{"m":{}}}}}}}"#,
            deep(n)
        ));
        same_as_rmcp(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"structuredContent":{}}}}}"#,
            deep(n)
        ));
    }
}

#[test]
fn a_bom_is_skipped_as_rmcp_skips_it() {
    let line = "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}";
    assert!(matches!(
        decode::<RoleClient>(line.as_bytes()),
        Decoded::Message(_)
    ));
    same_as_rmcp(line);
}

/// The premise of the fast result reading: no `ServerResult` variant rmcp
/// tries before `CallToolResult` can be read from an object whose keys are
/// all `CallToolResult`'s. Checked over every subset of those keys with
/// values of each JSON type, so a new variant or a changed one in a newer
/// rmcp fails here rather than changing what warden reads.
#[test]
fn rmcp_result_variants_before_call_tool_result_need_other_keys() {
    let values = [
        json!(null),
        json!(true),
        json!(3),
        json!("complete"),
        json!([]),
        json!([{"type": "text", "text": "t"}]),
        json!({}),
        json!({"progressToken": 1}),
    ];
    let mut checked = 0;
    for subset in 0u32..(1 << CALL_TOOL_RESULT_KEYS.len()) {
        for value in &values {
            let mut result = serde_json::Map::new();
            for (i, key) in CALL_TOOL_RESULT_KEYS.iter().enumerate() {
                if subset & (1 << i) != 0 {
                    result.insert((*key).to_string(), value.clone());
                }
            }
            let line = json!({"jsonrpc": "2.0", "id": 1, "result": result}).to_string();
            if let Decoded::Message(JsonRpcMessage::Response(response)) =
                decode_with_rmcp::<RoleClient>(line.as_bytes())
            {
                let variant = serde_json::to_value(&response.result).unwrap();
                let read_as_tool_result = matches!(
                    response.result,
                    ServerResult::CallToolResult(_)
                        | ServerResult::TaskAckResult(_)
                        | ServerResult::EmptyResult(_)
                        | ServerResult::CustomResult(_)
                );
                assert!(read_as_tool_result, "{line} read by rmcp as {variant}");
            }
            same_as_rmcp(&line);
            checked += 1;
        }
    }
    assert_eq!(checked, 32 * values.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_line_decodes_as_rmcp_decodes_it(line in message_line()) {
        same_as_rmcp(&line);
    }

    #[test]
    fn every_tool_result_decodes_as_rmcp_decodes_it(result in result_object(), id in any::<u16>()) {
        same_as_rmcp(&json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string());
    }
}

/// The property tests above mean something only if their lines take the
/// fast readings often, and the way to rmcp often too.
#[test]
fn the_generated_lines_take_both_ways() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut fast, mut rmcp) = ([0usize; 2], [0usize; 2]);
    for _ in 0..2000 {
        let line = message_line().new_tree(&mut runner).unwrap().current();
        let result = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{}}}"#,
            result_object().new_tree(&mut runner).unwrap().current()
        );
        for (i, (line, read)) in [
            (&line, RoleServer::read_fast(line.as_bytes()).is_some()),
            (&result, RoleClient::read_fast(result.as_bytes()).is_some()),
        ]
        .into_iter()
        .enumerate()
        {
            let _ = line;
            if read { fast[i] += 1 } else { rmcp[i] += 1 }
        }
    }
    assert!(
        fast.iter().all(|n| *n >= 100),
        "fast: {fast:?}, rmcp: {rmcp:?}"
    );
    assert!(
        rmcp.iter().all(|n| *n >= 100),
        "fast: {fast:?}, rmcp: {rmcp:?}"
    );
}
