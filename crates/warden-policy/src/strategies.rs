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
