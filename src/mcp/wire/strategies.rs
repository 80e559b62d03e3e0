//! Generated messages for the wire tests: JSON values, tool results and
//! whole lines, each part usually well-formed but sometimes not.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::decode::CALL_TOOL_RESULT_KEYS;

pub(crate) fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z\"\\\\/\n\u{0}\u{1f}\u{e9}\u{1F600}]{0,12}".prop_map(Value::String),
    ]
}

pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A key of a result object: `CallToolResult`'s, another variant's, or
/// none of rmcp's.
pub(crate) fn result_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(CALL_TOOL_RESULT_KEYS.to_vec()).prop_map(str::to_string),
        1 => prop::sample::select(vec![
            "tools", "contents", "messages", "action", "task", "completion", "nextCursor",
            "protocolVersion", "prompts", "resources", "resourceTemplates", "x",
        ])
        .prop_map(str::to_string),
    ]
}

pub(crate) fn content_block() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-z ]{0,10}".prop_map(|t| json!({"type": "text", "text": t})),
        json_value(),
    ]
}

pub(crate) fn result_value(key: &str) -> BoxedStrategy<Value> {
    match key {
        "content" => prop_oneof![
            3 => prop::collection::vec(content_block(), 0..3).prop_map(Value::Array),
            1 => json_value(),
        ]
        .boxed(),
        "isError" => prop_oneof![any::<bool>().prop_map(Value::Bool), json_value()].boxed(),
        "resultType" => prop_oneof![
            Just(json!("complete")),
            Just(json!("incomplete")),
            json_value()
        ]
        .boxed(),
        _ => json_value().boxed(),
    }
}

pub(crate) fn result_object() -> impl Strategy<Value = Value> {
    prop::collection::vec(result_key(), 0..5).prop_flat_map(|keys| {
        let values: Vec<BoxedStrategy<Value>> = keys.iter().map(|k| result_value(k)).collect();
        (Just(keys), values)
            .prop_map(|(keys, values)| Value::Object(keys.into_iter().zip(values).collect()))
    })
}

/// Present (and usually well-formed) most of the time, sometimes absent.
pub(crate) fn mostly<T: std::fmt::Debug + Clone + 'static>(
    value: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    prop_oneof![6 => value.prop_map(Some), 1 => Just(None)].boxed()
}

pub(crate) fn params_object() -> impl Strategy<Value = Value> {
    (
        mostly(prop_oneof![6 => "[a-z_]{1,8}".prop_map(Value::from), 1 => json_leaf()]),
        prop::option::of(prop::collection::btree_map(
            "[a-z]{1,4}",
            json_value(),
            0..3,
        )),
        prop::option::of(prop_oneof![
            3 => prop::collection::btree_map("[a-zA-Z]{1,13}", json_value(), 0..3)
                .prop_map(|m| json!(m)),
            1 => json_value(),
        ]),
        prop::option::of(json_value()),
    )
        .prop_map(|(name, arguments, meta, extra)| {
            let mut params = serde_json::Map::new();
            if let Some(name) = name {
                params.insert("name".into(), name);
            }
            if let Some(arguments) = arguments {
                params.insert("arguments".into(), json!(arguments));
            }
            if let Some(meta) = meta {
                params.insert("_meta".into(), meta);
            }
            if let Some(extra) = extra {
                params.insert("task".into(), extra);
            }
            Value::Object(params)
        })
}

/// A message as it may come over the wire: a request or a response, each
/// envelope key usually present and well-formed, but sometimes absent,
/// of another type, or one that the other kind has.
pub(crate) fn message_line() -> impl Strategy<Value = String> {
    let jsonrpc = mostly(prop_oneof![8 => Just(json!("2.0")), 1 => json_leaf()]);
    let id = mostly(prop_oneof![
        3 => any::<u32>().prop_map(Value::from),
        3 => "[a-z0-9]{1,4}".prop_map(Value::String),
        1 => json_leaf()
    ]);
    let method = prop_oneof![
        6 => Just(Some(json!("tools/call"))),
        1 => prop::sample::select(vec!["tools/list", "ping", "notifications/progress", "x"])
            .prop_map(|m| Some(Value::from(m))),
        2 => Just(None),
    ];
    let params = prop_oneof![6 => params_object().prop_map(Some), 1 => json_value().prop_map(Some), 1 => Just(None)];
    let result = prop_oneof![1 => result_object().prop_map(Some), 4 => Just(None)];
    let error = prop_oneof![1 => json_value().prop_map(Some), 8 => Just(None)];
    (jsonrpc, id, method, params, result, error, any::<bool>()).prop_map(
        |(jsonrpc, id, method, params, result, error, reversed)| {
            let mut entries = vec![
                ("jsonrpc", jsonrpc),
                ("id", id),
                ("method", method),
                ("params", params),
                ("result", result),
                ("error", error),
            ];
            if reversed {
                entries.reverse();
            }
            // Written by hand so that the keys keep this order.
            let fields: Vec<String> = entries
                .into_iter()
                .filter_map(|(key, value)| value.map(|v| format!("{}:{v}", json!(key))))
                .collect();
            format!("{{{}}}", fields.join(","))
        },
    )
}
