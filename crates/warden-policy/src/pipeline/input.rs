//! The Rego `input` document of CONTRACT §5, built in one place: directly
//! as a regorus value (no serde round trip on the hot path). Its JSON form
//! ([`Pipeline::rego_input_json`]) is that same value serialised.

use regorus::Value as R;
use serde_json::{Value, json};
use warden_core::{Mode, Scope, TransportKind, Trust};

use super::Pipeline;
use crate::decision::StageVerdict;
use crate::facts::{CallContext, CallFacts, PinState, ServerFacts, ToolFacts};
use crate::rego::{rego_object, to_rego};

impl Pipeline {
    /// The `input` the Rego stage sees for one call, given the verdicts of
    /// the stages before it.
    pub fn rego_input(&self, facts: &CallFacts, mode: Mode, stages: &[StageVerdict]) -> R {
        build(facts, mode, stages, &self.workspace)
    }

    /// [`Pipeline::rego_input`] as JSON.
    pub fn rego_input_json(&self, facts: &CallFacts, mode: Mode, stages: &[StageVerdict]) -> Value {
        serde_json::to_value(self.rego_input(facts, mode, stages)).unwrap_or(Value::Null)
    }
}

fn build(facts: &CallFacts, mode: Mode, stages: &[StageVerdict], workspace: &str) -> R {
    let stages = rego_object(stages.iter().map(|s| {
        (
            s.stage.as_str(),
            s.effect.map_or(R::Null, |e| R::from(e.as_str())),
        )
    }));
    rego_object([
        (
            "server",
            rego_object([
                ("name", R::from(facts.server.name.as_str())),
                ("trust", R::from(facts.server.trust.as_str())),
                ("transport", R::from(facts.server.transport.as_str())),
                ("scope", R::from(facts.server.scope.as_str())),
            ]),
        ),
        (
            "tool",
            rego_object([
                ("name", R::from(facts.tool.name.as_str())),
                ("qualified", R::from(facts.tool.qualified.as_str())),
                ("annotations", to_rego(&facts.tool.annotations)),
                (
                    "pinned",
                    R::from(matches!(facts.tool.pin, PinState::Pinned)),
                ),
            ]),
        ),
        ("arguments", to_rego(&facts.arguments)),
        (
            "context",
            rego_object([
                ("mode", R::from(mode.as_str())),
                ("session", R::from(facts.context.session.as_str())),
                ("workspace", R::from(workspace)),
                ("call_index", R::from(facts.context.call_index)),
            ]),
        ),
        ("stages", stages),
    ])
}

/// The input evaluated once at load, so that an unknown function or an
/// evaluation error is a startup error: a plain call on an untrusted stdio
/// server, before any stage has spoken.
pub(super) fn probe(workspace: &str) -> R {
    let facts = CallFacts {
        server: ServerFacts {
            name: "probe".into(),
            trust: Trust::Untrusted,
            transport: TransportKind::Stdio,
            scope: Scope::User,
        },
        tool: ToolFacts {
            name: "probe".into(),
            qualified: "mcp__probe__probe".into(),
            annotations: json!({}),
            input_schema: Value::Null,
            pin: PinState::Pinned,
        },
        arguments: json!({"path": format!("{workspace}/README.md")}),
        context: CallContext {
            mode: Mode::Interactive,
            session: "probe".into(),
            call_index: 0,
        },
    };
    let before_policy: Vec<StageVerdict> = [
        warden_core::Stage::Trust,
        warden_core::Stage::Schema,
        warden_core::Stage::Pinning,
        warden_core::Stage::Annotations,
        warden_core::Stage::Rules,
    ]
    .into_iter()
    .map(|stage| StageVerdict::new(stage, None, vec![]))
    .collect();
    build(&facts, Mode::Interactive, &before_policy, workspace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::PipelineConfig;
    use warden_core::{Effect, Stage};

    /// The one builder produces exactly the document of CONTRACT §5.
    #[test]
    fn rego_input_is_the_contract_document() {
        let p = Pipeline::load(PipelineConfig {
            policies: Some(vec![]),
            workspace: "/srv/repo".into(),
            ..PipelineConfig::default()
        })
        .expect("load");
        let facts = CallFacts {
            server: ServerFacts {
                name: "fs".into(),
                trust: Trust::Trusted,
                transport: TransportKind::Sse,
                scope: Scope::Project,
            },
            tool: ToolFacts {
                name: "t".into(),
                qualified: "mcp__fs__t".into(),
                annotations: json!({"readOnlyHint": true}),
                input_schema: json!({}),
                pin: PinState::Unpinned,
            },
            arguments: json!({"a": [1, -2, 2.5, null, true, {"b": "c"}], "big": u64::MAX}),
            context: CallContext {
                mode: Mode::Gateway,
                session: "s".into(),
                call_index: 7,
            },
        };
        let stages = vec![
            super::super::stages::trust(&facts),
            StageVerdict::new(Stage::Rules, Some(Effect::Ask), vec![]),
        ];
        let expected = json!({
            "server": {"name": "fs", "trust": "trusted", "transport": "sse", "scope": "project"},
            "tool": {"name": "t", "qualified": "mcp__fs__t",
                     "annotations": {"readOnlyHint": true}, "pinned": false},
            "arguments": {"a": [1, -2, 2.5, null, true, {"b": "c"}], "big": u64::MAX},
            "context": {"mode": "gateway", "session": "s", "workspace": "/srv/repo", "call_index": 7},
            "stages": {"trust": null, "rules": "ask"},
        });
        assert_eq!(p.rego_input_json(&facts, Mode::Gateway, &stages), expected);
        // The regorus value is the same document (what the policy sees).
        assert_eq!(
            p.rego_input(&facts, Mode::Gateway, &stages),
            to_rego(&expected)
        );
    }
}
