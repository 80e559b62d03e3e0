//! Rego input building and the whole decision: JSON arguments (and a few
//! facts chosen by the first byte, the request kind among them) through `Pipeline::rego_input_json`,
//! `complete_input` and `decide` with the shipped default policy.
//! Properties: no panic; the input's `raw_arguments` are the arguments as
//! sent (numbers by value); `decide` always names an effect; regorus's
//! bytecode VM answers as its interpreter does, and a call decided in
//! place (`inline_agrees`) as on the pool, for the default policy alone and
//! with `ci.rego` beside it.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use warden_core::{Mode, RequestKind, Scope, TransportKind, Trust};
use warden_policy::{
    CallContext, CallFacts, PinState, Pipeline, PipelineConfig, ServerFacts, ToolFacts,
};

/// Equal JSON, numbers compared by value: regorus writes an integral
/// float beyond 2^53 as its shortest decimal, which reads back as an
/// integer of the same f64 value (found by this target; see warden-policy's
/// `large_floats_keep_their_value_in_the_rego_input`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || (x.is_f64() || y.is_f64()) && x.as_f64() == y.as_f64()
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn pipeline() -> &'static Pipeline {
    static P: OnceLock<Pipeline> = OnceLock::new();
    P.get_or_init(|| {
        Pipeline::load(PipelineConfig {
            workspace: "/ws".into(),
            mode: Mode::Ci,
            ..PipelineConfig::default()
        })
        .expect("default policy loads")
    })
}

/// The shipped default and `ci.rego` in one group.
fn with_ci() -> &'static Pipeline {
    static P: OnceLock<Pipeline> = OnceLock::new();
    P.get_or_init(|| {
        Pipeline::load(PipelineConfig {
            workspace: "/ws".into(),
            mode: Mode::Ci,
            policies: Some(vec![warden_policy::PolicySource {
                path: concat!(env!("CARGO_MANIFEST_DIR"), "/../policies/ci.rego").into(),
                scope: Scope::User,
            }]),
            with_default: true,
            ..PipelineConfig::default()
        })
        .expect("default and ci policies load")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(arguments) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let trust = match selector % 3 {
        0 => Trust::Trusted,
        1 => Trust::Untrusted,
        _ => Trust::Blocked,
    };
    let annotations = if selector & 4 != 0 {
        json!({"readOnlyHint": true, "destructiveHint": false})
    } else {
        Value::Null
    };
    let pin = if selector & 8 != 0 {
        PinState::Pinned
    } else {
        PinState::Changed {
            changes: vec!["description".into()],
        }
    };
    // Mostly tool calls; the other request kinds of CONTRACT §8 too (their
    // targets as the host names them).
    let (kind, qualified) = match selector >> 5 {
        4 => (RequestKind::Resource, "resource__s"),
        5 => (RequestKind::Prompt, "prompt__s__t"),
        6 => (RequestKind::Sampling, "sampling__s"),
        7 => (RequestKind::Elicitation, "elicitation__s"),
        _ => (RequestKind::Tool, "mcp__s__t"),
    };
    let facts = CallFacts {
        kind,
        server: ServerFacts {
            name: "s".into(),
            trust,
            transport: TransportKind::Stdio,
            scope: if selector & 16 != 0 {
                Scope::Project
            } else {
                Scope::User
            },
            dirs: Default::default(),
        },
        tool: ToolFacts {
            name: "t".into(),
            qualified: qualified.into(),
            annotations,
            input_schema: json!({"type": "object"}).into(),
            pin,
        },
        arguments: arguments.clone(),
        context: CallContext {
            mode: Mode::Ci,
            session: "fuzz".into(),
            call_index: 1,
        },
    };
    let p = pipeline();
    let input = p.rego_input_json(&facts, Mode::Ci, &[]);
    assert!(
        input.is_object(),
        "the Rego input is not an object: {input}"
    );
    if let Some(raw) = input.get("raw_arguments") {
        assert!(
            same(raw, &arguments),
            "raw_arguments differ from what was sent: {raw} vs {arguments}"
        );
    }
    let _ = p.complete_input(&json!({ "arguments": arguments }));
    let decision = p.decide(&facts);
    let _ = format!("{decision:?}");
    for p in [p, with_ci()] {
        if let Err(e) = p.engines_agree(&facts) {
            panic!("{e}");
        }
        // The schema was compiled by the decision above, so a small call
        // is now decided in place: it must be decided as the pool does.
        let _ = p.decide(&facts);
        if let Err(e) = p.inline_agrees(&facts) {
            panic!("{e}");
        }
    }
});
