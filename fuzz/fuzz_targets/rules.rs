//! The permission-rule parser and matcher: a rule text (each effect and
//! scope), then a request name and JSON arguments, matched for every
//! request kind. Property: no panic (the parser is total), and a
//! project-scope `allow` never loads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use warden_core::Scope;
use warden_policy::{Pipeline, PipelineConfig, RequestKind, RuleEffect, RuleSource};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut parts = text.splitn(3, '\n');
    let rule = parts.next().unwrap_or_default();
    let name = parts.next().unwrap_or("mcp__s__t");
    let args: Value = parts
        .next()
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or_else(|| json!({}));
    let effect = match selector % 3 {
        0 => RuleEffect::Allow,
        1 => RuleEffect::Ask,
        _ => RuleEffect::Deny,
    };
    let scope = if selector & 0x80 != 0 {
        Scope::Project
    } else {
        Scope::User
    };
    let loaded = Pipeline::load(PipelineConfig {
        rules: vec![RuleSource {
            effect,
            text: rule.to_string(),
            scope,
            file: "fuzz.json".into(),
            index: 0,
        }],
        policies: Some(Vec::new()),
        workspace: "/ws".into(),
        ..PipelineConfig::default()
    });
    let pipeline = match loaded {
        Ok(p) => p,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    assert!(
        !(scope == Scope::Project && effect == RuleEffect::Allow),
        "a project-scope allow rule loaded"
    );
    for kind in [
        RequestKind::Tool,
        RequestKind::Resource,
        RequestKind::Prompt,
        RequestKind::Sampling,
        RequestKind::Elicitation,
    ] {
        let _ = pipeline.decide_rules(kind, name, &args);
    }
    let _ = pipeline.check_tool(name, &json!({"type": "object", "properties": {"path": {}}}));
});
