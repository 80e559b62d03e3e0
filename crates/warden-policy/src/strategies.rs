//! Generators shared by the crate's property tests.

use proptest::prelude::*;

/// An argument string: what the shipped policies and `canon` look for
/// (secret paths, `..`, `file:` URIs, percent escapes, key ids, tokens,
/// private keys, Windows paths), path-like text, and any text.
pub(crate) fn argument_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/srv/repo/README.md".to_string()),
        Just("/home/u/.ssh/id_ed25519".to_string()),
        Just("~/.aws/credentials".to_string()),
        Just("//etc/shadow".to_string()),
        Just("../../etc/shadow".to_string()),
        Just("file:///srv/repo/.ssh/key#/../../public/x".to_string()),
        Just("file:///home/u/.ssh/id_rsa".to_string()),
        Just("/proc/self//environ".to_string()),
        Just(".env.local".to_string()),
        Just("key AKIAABCDEFGHIJKLMNOP here".to_string()),
        Just("ghp_abcdefghijklmnopqrstuvwxyz0123456789".to_string()),
        Just("-----BEGIN OPENSSH PRIVATE KEY-----\nabc".to_string()),
        Just("sk-ant-abcdefghijklmnopqrstuvwxyz".to_string()),
        Just("%2e%2e/%2e%2e/etc/passwd".to_string()),
        Just("C:\\Users\\u\\.ssh\\id_rsa".to_string()),
        "[a-z/.~%]{0,24}",
        any::<String>(),
    ]
}

/// An argument value: [`argument_text`], integers, floats (finite, and
/// `2.0`, which `canon` reads as `2`), booleans, null, and arrays and
/// objects of them three deep (keys with `~`, `/` and `.`, which JSON
/// pointers escape or paths mean).
pub(crate) fn argument_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        argument_text().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        Just(serde_json::json!(2.0)),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z~/.]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
