//! Shared builders for the policy tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use warden::config::{Scope, Trust};
use warden_policy::{
    CallContext, CallFacts, Mode, PinState, Pipeline, PipelineConfig, ServerFacts, ToolFacts,
};
use warden_policy::{PolicySource, RuleEffect, RuleSource};

pub const WS: &str = "/srv/repo";

pub fn rule(effect: RuleEffect, text: &str) -> RuleSource {
    rule_in(effect, text, Scope::User)
}

pub fn rule_in(effect: RuleEffect, text: &str, scope: Scope) -> RuleSource {
    RuleSource {
        effect,
        text: text.replace("${WORKSPACE}", WS),
        scope,
        file: PathBuf::from(if scope == Scope::Project {
            "/srv/repo/.mcp.json"
        } else {
            "/home/u/.config/warden/config.json"
        }),
        index: 0,
    }
}

pub fn allow(text: &str) -> RuleSource {
    rule(RuleEffect::Allow, text)
}
pub fn ask(text: &str) -> RuleSource {
    rule(RuleEffect::Ask, text)
}
pub fn deny(text: &str) -> RuleSource {
    rule(RuleEffect::Deny, text)
}

/// Writes `text` as `NAME.rego` in a fresh folder; returns (guard, path).
pub fn policy_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

pub fn source(path: &Path, scope: Scope) -> PolicySource {
    PolicySource {
        path: path.to_path_buf(),
        scope,
    }
}

pub fn pipeline(
    rules: Vec<RuleSource>,
    policies: Option<Vec<PolicySource>>,
    mode: Mode,
) -> Pipeline {
    Pipeline::load(PipelineConfig {
        rules,
        policies,
        extra_policies: vec![],
        workspace: PathBuf::from(WS),
        mode,
        locked: false,
        with_default: false,
        ..PipelineConfig::default()
    })
    .unwrap()
}

pub fn schema_path() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "paths": {"type": "array", "items": {"type": "string"}},
            "content": {"type": "string"},
        },
        "additionalProperties": true
    })
}

/// A call to `mcp__fs__TOOL` with permissive schema, pinned, interactive.
pub fn facts(trust: Trust, tool: &str, annotations: Value, args: Value) -> CallFacts {
    CallFacts {
        kind: warden_core::RequestKind::Tool,
        server: ServerFacts {
            name: "fs".into(),
            trust,
            transport: warden_core::TransportKind::Stdio,
            scope: Scope::User,
            dirs: Default::default(),
        },
        tool: ToolFacts {
            name: tool.into(),
            qualified: format!("mcp__fs__{tool}"),
            annotations,
            input_schema: json!({"type": "object"}).into(),
            pin: PinState::Pinned,
        },
        arguments: args,
        context: CallContext {
            mode: Mode::Interactive,
            session: "session-1".into(),
            call_index: 1,
        },
    }
}
