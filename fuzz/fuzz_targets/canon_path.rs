//! The argument canonicaliser, through the rule that depends on it most:
//! `allow mcp__s__t(path: P/**)`. Property: whenever the rules stage
//! allows a value, every way a server could resolve it lexically (as a
//! plain path, absolute or relative to the workspace; as the path a
//! `file:` URI names, percent-decoded) is `P` or inside `P`, computed here
//! by an independent normaliser. A value starting with `~` is never
//! allowed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use warden_core::{Effect, Scope};
use warden_policy::{Pipeline, PipelineConfig, RequestKind, RuleEffect, RuleSource};

const WORKSPACE: &str = "/ws";
const ROOTS: [&str; 4] = ["/ws", "/ws/allowed", "/other/dir", "/ws/a b/c"];

fn pipelines() -> &'static [Pipeline] {
    static P: std::sync::OnceLock<Vec<Pipeline>> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        ROOTS
            .iter()
            .map(|root| {
                let text = format!("mcp__s__t(path: {root}/**)");
                Pipeline::load(PipelineConfig {
                    rules: vec![RuleSource {
                        effect: RuleEffect::Allow,
                        text,
                        scope: Scope::User,
                        file: "fuzz.json".into(),
                        index: 0,
                    }],
                    policies: Some(Vec::new()),
                    workspace: WORKSPACE.into(),
                    ..PipelineConfig::default()
                })
                .expect("the rule loads")
            })
            .collect()
    })
}

/// `/`-separated lexical normalisation: `.` and empty segments dropped,
/// `..` removes the previous segment (and stays at `/`).
fn lexical(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

fn resolve(value: &str) -> String {
    if value.starts_with('/') {
        lexical(value)
    } else {
        lexical(&format!("{WORKSPACE}/{value}"))
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The path a `file:` URI names, decoded, as a URL library would give it.
fn file_uri_path(value: &str) -> Option<String> {
    let lower = value.get(..7)?.to_ascii_lowercase();
    if lower != "file://" {
        return None;
    }
    let rest = &value[7..];
    let path = &rest[rest.find('/')?..];
    let path = path.split(['?', '#']).next().unwrap_or(path);
    percent_decode(path).map(|p| lexical(&p))
}

fn inside(path: &str, root: &str) -> bool {
    path == root || path.starts_with(&format!("{root}/"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let index = usize::from(selector) % ROOTS.len();
    let root = ROOTS[index];
    let text = String::from_utf8_lossy(rest);
    // One value, or (selector bit 7) several, one per line, as an array.
    let values: Vec<&str> = if selector & 0x80 != 0 {
        text.split('\n').collect()
    } else {
        vec![&text]
    };
    let args = if selector & 0x80 != 0 {
        json!({ "path": values })
    } else {
        json!({ "path": values[0] })
    };
    let verdict = pipelines()[index].decide_rules(RequestKind::Tool, "mcp__s__t", &args);
    if verdict.effect != Some(Effect::Allow) {
        return;
    }
    for value in values {
        assert!(
            !value.starts_with('~'),
            "`{value}` (a `~` path) was allowed"
        );
        let plain = resolve(value);
        assert!(
            inside(&plain, root),
            "`{value}` was allowed under {root}/** but resolves to {plain}"
        );
        if let Some(named) = file_uri_path(value) {
            assert!(
                inside(&named, root),
                "`{value}` was allowed under {root}/** but names {named}"
            );
        }
    }
    let _: &Value = &args;
});
