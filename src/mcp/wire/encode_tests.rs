//! The fast `tools/call` form against rmcp's serialiser.

use proptest::prelude::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, NumberOrString,
    ServerJsonRpcMessage, ServerResult,
};
use serde_json::{Value, json};

use super::*;
use crate::mcp::wire::strategies::json_value;

fn call(
    arguments: Option<JsonObject>,
    params_meta: Option<JsonObject>,
    extension_meta: Option<JsonObject>,
    legacy_meta: Option<JsonObject>,
) -> ClientJsonRpcMessage {
    let mut params = CallToolRequestParams::new("echo");
    params.arguments = arguments;
    params.meta = params_meta.map(RequestMetaObject::from);
    let mut request = CallToolRequest::new(params);
    if let Some(meta) = extension_meta {
        request.extensions.insert(RequestMetaObject::from(meta));
    }
    if let Some(meta) = legacy_meta {
        request.extensions.insert(MetaObject::from(meta));
    }
    ClientJsonRpcMessage::request(
        ClientRequest::CallToolRequest(request),
        NumberOrString::Number(41),
    )
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// The line's JSON value, and whether the fast form wrote it.
fn written(item: &ClientJsonRpcMessage) -> (Value, bool) {
    let frame = encode::<RoleClient>(item).unwrap();
    assert_eq!(frame.last(), Some(&b'\n'));
    assert_eq!(frame.iter().filter(|b| **b == b'\n').count(), 1, "one line");
    let mut probe = Vec::new();
    let fast = RoleClient::write_fast(item, &mut probe).unwrap();
    (serde_json::from_slice(&frame).unwrap(), fast)
}

fn rmcps(item: &ClientJsonRpcMessage) -> Value {
    serde_json::to_value(item).unwrap()
}

#[test]
fn a_tools_call_with_progress_meta_is_written_fast_as_rmcp_writes_it() {
    let item = call(
        Some(object(json!({"message": "x\"y\n", "n": 1}))),
        None,
        Some(object(json!({"progressToken": 7}))),
        None,
    );
    let (value, fast) = written(&item);
    assert!(fast);
    assert_eq!(value, rmcps(&item));
    assert_eq!(value["params"]["_meta"], json!({"progressToken": 7}));
}

#[test]
fn a_tools_call_without_meta_is_written_fast_as_rmcp_writes_it() {
    let item = call(
        Some(object(json!({"a": [1, 2, {"b": null}]}))),
        None,
        None,
        None,
    );
    let (value, fast) = written(&item);
    assert!(fast);
    assert_eq!(value, rmcps(&item));
    assert!(value["params"].get("_meta").is_none());
}

#[test]
fn a_meta_rmcp_must_merge_is_left_to_rmcp() {
    let params_meta = call(
        None,
        Some(object(json!({"a": 1}))),
        Some(object(json!({"a": 2, "b": 3}))),
        None,
    );
    let legacy = call(
        None,
        None,
        Some(object(json!({"a": 1}))),
        Some(object(json!({"c": 4}))),
    );
    for item in [params_meta, legacy] {
        let (value, fast) = written(&item);
        assert!(!fast);
        assert_eq!(value, rmcps(&item));
    }
}

#[test]
fn a_server_message_is_rmcps_bytes() {
    let item = ServerJsonRpcMessage::response(
        ServerResult::CallToolResult(CallToolResult::success(vec![ContentBlock::text("hi")])),
        NumberOrString::Number(3),
    );
    let mut expected = serde_json::to_vec(&item).unwrap();
    expected.push(b'\n');
    assert_eq!(encode::<RoleServer>(&item).unwrap(), expected);
}

fn json_object() -> impl Strategy<Value = JsonObject> {
    prop::collection::btree_map("[a-z_]{1,6}", json_value(), 0..4)
        .prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn fast_tools_call_is_rmcps_value(
        arguments in prop::option::of(json_object()),
        params_meta in prop::option::of(json_object()),
        extension_meta in prop::option::of(json_object()),
        legacy_meta in prop::option::of(json_object()),
    ) {
        let item = call(arguments, params_meta, extension_meta, legacy_meta);
        let (value, _) = written(&item);
        prop_assert_eq!(value, rmcps(&item));
    }
}
