//! The registry's name sanitiser and qualified names: server and tool
//! names from the input (lines; `\t` separates a server from its tools).
//! Properties: a sanitised name has the same number of characters and
//! only `[A-Za-z0-9_-]`; every registered qualified name is
//! `mcp__S__T` of the sanitised names, within the length limit, unique,
//! and found again by its server and remote name.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use warden_core::MAX_QUALIFIED_LEN;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for name in text.split(['\n', '\t']) {
        let clean = warden::fuzzing::sanitize(name);
        assert_eq!(clean.chars().count(), name.chars().count());
        assert!(
            clean
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "sanitize({name:?}) = {clean:?}"
        );
    }
    let servers: Vec<(String, Vec<String>)> = text
        .lines()
        .take(8)
        .map(|line| {
            let mut parts = line.split('\t');
            let server = parts.next().unwrap_or_default().to_string();
            (server, parts.take(32).map(str::to_string).collect())
        })
        .collect();
    let (registered, skipped) = warden::fuzzing::register(&servers);
    let total: usize = servers.iter().map(|(_, t)| t.len()).sum();
    assert_eq!(
        registered.len() + skipped,
        total,
        "a tool neither registered nor skipped"
    );
    let mut seen = HashSet::new();
    for r in &registered {
        assert!(r.qualified.len() <= MAX_QUALIFIED_LEN, "{r:?}");
        assert_eq!(
            r.qualified,
            format!(
                "mcp__{}__{}",
                warden::fuzzing::sanitize(&r.server),
                warden::fuzzing::sanitize(&r.remote)
            )
        );
        assert!(seen.insert(r.qualified.clone()), "registered twice: {r:?}");
        assert!(
            servers
                .iter()
                .any(|(s, tools)| s == &r.server && tools.contains(&r.remote)),
            "registered a tool no server listed: {r:?}"
        );
    }
});
