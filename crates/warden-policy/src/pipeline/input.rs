//! The Rego `input` document of CONTRACT §5, built in one place: directly
//! as a regorus value (no serde round trip on the hot path). Its JSON form
//! ([`Pipeline::rego_input_json`]) is that same value serialised.
//!
//! Arguments appear four ways:
//!
//! - `arguments`: canonical ([`crate::canon`]): paths normalised
//!   (`//etc/./shadow` → `/etc/shadow`, relative paths with a `/` resolved
//!   against the workspace: `src/a.rs` → `WORKSPACE/src/a.rs`; a single
//!   word stays as written), `file:` URIs as the path they name,
//!   other URIs in canonical form, numbers by value (`2.0` → `2`); a value
//!   warden cannot read with certainty stays as sent;
//! - `raw_arguments`: exactly as sent (what the server receives; check
//!   text such as credentials here);
//! - `readings`: for each value with more than one meaning or none
//!   certain, by JSON pointer, every plausible path or URI (a deny that
//!   should hold for any meaning checks them all);
//! - `uncertain`: for each value warden cannot read with certainty, by
//!   JSON pointer, why;
//!
//! and every string among them by JSON pointer, so that a policy reaches
//! them without `walk` (which regorus's bytecode VM does not run, see
//! [`crate::vm`]): `strings` (of `arguments`), `raw_strings` (of
//! `raw_arguments`). They share the values' text (no copy).

use regorus::Value as R;
use serde_json::{Value, json};
use warden_core::{Effect, Mode, RequestKind, Scope, Stage, TransportKind, Trust};

use super::Pipeline;
use crate::canon::{CanonValue, Canonical, below, pointer_token};
use crate::decision::StageVerdict;
use crate::facts::{CallContext, CallFacts, PinState, ServerFacts, ToolFacts};
use crate::rego::{rego_object, to_rego};

impl Pipeline {
    /// The `input` the Rego stage sees for one call, given the verdicts of
    /// the stages before it.
    pub fn rego_input(&self, facts: &CallFacts, mode: Mode, stages: &[StageVerdict]) -> R {
        match self.canonical_for(facts.kind, &facts.arguments, &facts.server.dirs) {
            Ok(canonical) => self.rego_input_canonical(facts, &canonical, mode, stages),
            // Refused arguments are never evaluated; shown as sent.
            Err(_) => build(facts, None, mode, stages, &self.workspace),
        }
    }

    pub(super) fn rego_input_canonical(
        &self,
        facts: &CallFacts,
        canonical: &Canonical,
        mode: Mode,
        stages: &[StageVerdict],
    ) -> R {
        build(facts, Some(canonical), mode, stages, &self.workspace)
    }

    /// [`Pipeline::rego_input`] as JSON.
    pub fn rego_input_json(&self, facts: &CallFacts, mode: Mode, stages: &[StageVerdict]) -> Value {
        serde_json::to_value(self.rego_input(facts, mode, stages)).unwrap_or(Value::Null)
    }
}

/// A canonical value as a regorus value (strings by their primary form).
fn canon_to_rego(v: &CanonValue) -> R {
    match v {
        CanonValue::Null => R::Null,
        CanonValue::Bool(b) => R::from(*b),
        CanonValue::Number(n) => to_rego(&Value::Number(n.clone())),
        CanonValue::Str(s) => R::from(s.primary.as_str()),
        CanonValue::Array(items) => R::from(items.iter().map(canon_to_rego).collect::<Vec<_>>()),
        CanonValue::Object(map) => R::from(
            map.iter()
                .map(|(k, v)| (R::from(k.as_str()), canon_to_rego(v)))
                .collect::<std::collections::BTreeMap<_, _>>(),
        ),
    }
}

/// Whether the canonical form of every value is the value as sent, so that
/// [`canon_to_rego`] of it would equal [`to_rego`] of the arguments.
fn reads_as_sent(canonical: &CanonValue, sent: &Value) -> bool {
    match (canonical, sent) {
        (CanonValue::Null, Value::Null) => true,
        (CanonValue::Bool(a), Value::Bool(b)) => a == b,
        // Number equality is by representation: `2.0` made `2` differs.
        (CanonValue::Number(a), Value::Number(b)) => a == b,
        (CanonValue::Str(a), Value::String(b)) => a.primary == *b,
        (CanonValue::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| reads_as_sent(a, b))
        }
        (CanonValue::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, a)| b.get(k).is_some_and(|b| reads_as_sent(a, b)))
        }
        _ => false,
    }
}

fn build(
    facts: &CallFacts,
    canonical: Option<&Canonical>,
    mode: Mode,
    stages: &[StageVerdict],
    workspace: &str,
) -> R {
    let raw = to_rego(&facts.arguments);
    let (arguments, shared, readings, uncertain) = match canonical {
        Some(c) => {
            let notable = c.notable();
            let readings = rego_object(notable.iter().map(|(ptr, s)| {
                (
                    ptr.as_str(),
                    R::from(
                        s.readings
                            .iter()
                            .map(|r| R::from(r.as_str()))
                            .collect::<Vec<_>>(),
                    ),
                )
            }));
            let uncertain = rego_object(notable.iter().filter_map(|(ptr, s)| {
                s.uncertain
                    .as_deref()
                    .map(|why| (ptr.as_str(), R::from(why)))
            }));
            // Most calls' arguments read as sent: then `arguments` is the
            // same value as `raw_arguments` (shared, not built twice).
            let shared = reads_as_sent(&c.value, &facts.arguments);
            let arguments = if shared {
                raw.clone()
            } else {
                canon_to_rego(&c.value)
            };
            (arguments, shared, readings, uncertain)
        }
        None => (raw.clone(), true, rego_object([]), rego_object([])),
    };
    let stages = rego_object(stages.iter().map(|s| {
        (
            s.stage.as_str(),
            s.effect.map_or(R::Null, |e| R::from(e.as_str())),
        )
    }));
    // `input.tool` for tools; `input.resource` / `input.prompt` for the
    // other kinds (CONTRACT §8).
    let (subject, subject_value) = match facts.kind {
        RequestKind::Resource => (
            "resource",
            rego_object([
                ("uri", R::from(facts.tool.name.as_str())),
                ("server", R::from(facts.server.name.as_str())),
            ]),
        ),
        RequestKind::Prompt => (
            "prompt",
            rego_object([
                ("name", R::from(facts.tool.name.as_str())),
                ("qualified", R::from(facts.tool.qualified.as_str())),
            ]),
        ),
        // What the server asks (CONTRACT §8): `{message, schema}`,
        // `{max_tokens, messages, system_prompt, include_context}` and the
        // other fields of a sampling request the server gave (`tools`,
        // `tool_choice`, `metadata`, …: `host::server_requests`).
        RequestKind::Elicitation => ("elicitation", to_rego(&facts.arguments)),
        RequestKind::Sampling => ("sampling", to_rego(&facts.arguments)),
        _ => (
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
    };
    let raw_strings = strings_by_pointer(&raw);
    let strings = if shared {
        raw_strings.clone()
    } else {
        strings_by_pointer(&arguments)
    };
    rego_object([
        ("kind", R::from(facts.kind.as_str())),
        (
            "server",
            rego_object([
                ("name", R::from(facts.server.name.as_str())),
                ("trust", R::from(facts.server.trust.as_str())),
                ("transport", R::from(facts.server.transport.as_str())),
                ("scope", R::from(facts.server.scope.as_str())),
            ]),
        ),
        (subject, subject_value),
        ("arguments", arguments),
        ("raw_arguments", raw),
        ("strings", strings),
        ("raw_strings", raw_strings),
        ("readings", readings),
        ("uncertain", uncertain),
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

/// Every string in `value` (not object keys) by JSON pointer: `input.strings`
/// and `input.raw_strings`. The strings are shared, not copied.
pub(crate) fn strings_by_pointer(value: &R) -> R {
    fn walk(v: &R, at: &mut String, out: &mut std::collections::BTreeMap<R, R>) {
        match v {
            R::String(_) => {
                out.insert(R::from(at.as_str()), v.clone());
            }
            R::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    below(at, &i.to_string(), |at| walk(item, at, out));
                }
            }
            R::Object(map) => {
                for (k, item) in map.iter() {
                    match k {
                        R::String(k) => below(at, &pointer_token(k), |at| walk(item, at, out)),
                        other => below(at, &other.to_string(), |at| walk(item, at, out)),
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(value, &mut String::new(), &mut out);
    R::from(out)
}

/// The inputs evaluated at load: the first so that an unknown function or
/// an evaluation error is a startup error (a plain call on an untrusted
/// stdio server, before any stage has spoken); all of them to check that
/// regorus's bytecode VM answers as the interpreter does before a policy
/// runs on it ([`crate::vm`]): a secret path, a credential, an uncertain
/// `file:` URI, a trusted read-only tool allowed by a rule, a resource and
/// a prompt.
pub(super) fn probes(workspace: &str) -> Vec<R> {
    let calls = [
        (
            RequestKind::Tool,
            Trust::Untrusted,
            json!({}),
            json!({"path": format!("{workspace}/README.md")}),
            None,
        ),
        (
            RequestKind::Tool,
            Trust::Untrusted,
            json!({"readOnlyHint": true}),
            json!({"path": "~/.ssh/id_rsa", "body": {"key": "AKIAABCDEFGHIJKLMNOP"},
                   "uri": format!("file://{workspace}/a#/../../.env"), "n": [1, 2.5, null, true]}),
            Some(Effect::Ask),
        ),
        (
            RequestKind::Tool,
            Trust::Trusted,
            json!({"readOnlyHint": true}),
            json!({"q": "x"}),
            Some(Effect::Allow),
        ),
        (
            RequestKind::Resource,
            Trust::Untrusted,
            json!({}),
            json!({"uri": "file:///etc/shadow"}),
            None,
        ),
        (
            RequestKind::Prompt,
            Trust::Trusted,
            json!({}),
            json!({"topic": "y"}),
            None,
        ),
    ];
    calls
        .into_iter()
        .map(|(kind, trust, annotations, arguments, rules)| {
            let facts = CallFacts {
                kind,
                server: ServerFacts {
                    name: "probe".into(),
                    trust,
                    transport: TransportKind::Stdio,
                    scope: Scope::User,
                    dirs: Default::default(),
                },
                tool: ToolFacts {
                    name: "probe".into(),
                    qualified: "mcp__probe__probe".into(),
                    annotations,
                    input_schema: Value::Null.into(),
                    pin: PinState::Pinned,
                },
                arguments,
                context: CallContext {
                    mode: Mode::Interactive,
                    session: "probe".into(),
                    call_index: 0,
                },
            };
            let before_policy: Vec<StageVerdict> = [
                Stage::Trust,
                Stage::Schema,
                Stage::Pinning,
                Stage::Annotations,
                Stage::Rules,
            ]
            .into_iter()
            .map(|stage| {
                let effect = if stage == Stage::Rules { rules } else { None };
                StageVerdict::new(stage, effect, vec![])
            })
            .collect();
            let canonical = crate::canon::canonicalize(
                &facts.arguments,
                &crate::canon::Context {
                    workspace,
                    ..Default::default()
                },
                &crate::canon::Limits::default(),
            )
            .ok();
            build(
                &facts,
                canonical.as_ref(),
                Mode::Interactive,
                &before_policy,
                workspace,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::PipelineConfig;

    /// Found by fuzz/rego_input (arguments `444444444444444444.222`): an
    /// integral float beyond 2^53 reaches Rego as that f64, but its JSON
    /// form (regorus writes the shortest decimal, `444444444444444400`)
    /// reads back as a different *integer*. What holds, and is checked
    /// here: the value is the sent one as a number (f64), never another.
    #[test]
    fn large_floats_keep_their_value_in_the_rego_input() {
        let p = Pipeline::load(PipelineConfig {
            policies: Some(vec![]),
            ..PipelineConfig::default()
        })
        .expect("load");
        let sent: Value = serde_json::from_str("444444444444444444.222").unwrap();
        let facts = CallFacts {
            kind: warden_core::RequestKind::Tool,
            server: ServerFacts {
                name: "s".into(),
                trust: Trust::Trusted,
                transport: TransportKind::Stdio,
                scope: Scope::User,
                dirs: Default::default(),
            },
            tool: ToolFacts {
                name: "t".into(),
                qualified: "mcp__s__t".into(),
                annotations: Value::Null,
                input_schema: json!({}).into(),
                pin: PinState::Pinned,
            },
            arguments: json!({"n": sent, "m": [sent, -1e300, 9007199254740993u64]}),
            context: CallContext {
                mode: Mode::Ci,
                session: "s".into(),
                call_index: 1,
            },
        };
        let input = p.rego_input_json(&facts, Mode::Ci, &[]);
        let as_f64 = |v: &Value| v.as_f64().unwrap();
        assert_eq!(as_f64(&input["raw_arguments"]["n"]), as_f64(&sent));
        assert_eq!(as_f64(&input["arguments"]["n"]), as_f64(&sent));
        assert_eq!(as_f64(&input["raw_arguments"]["m"][1]), -1e300);
        // Integers are kept exactly.
        assert_eq!(input["raw_arguments"]["m"][2], json!(9007199254740993u64));
    }

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
            kind: warden_core::RequestKind::Tool,
            server: ServerFacts {
                name: "fs".into(),
                trust: Trust::Trusted,
                transport: TransportKind::Sse,
                scope: Scope::Project,
                dirs: Default::default(),
            },
            tool: ToolFacts {
                name: "t".into(),
                qualified: "mcp__fs__t".into(),
                annotations: json!({"readOnlyHint": true}),
                input_schema: json!({}).into(),
                pin: PinState::Unpinned,
            },
            arguments: json!({"a": [1, -2, 2.5, null, true, {"b": "c"}], "big": u64::MAX,
                              "n": 2.0, "p": "/etc//./shadow", "u": "file:///srv/repo/a#x", "k/~": "v"}),
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
            "kind": "tool",
            "server": {"name": "fs", "trust": "trusted", "transport": "sse", "scope": "project"},
            "tool": {"name": "t", "qualified": "mcp__fs__t",
                     "annotations": {"readOnlyHint": true}, "pinned": false},
            "arguments": {"a": [1, -2, 2.5, null, true, {"b": "c"}], "big": u64::MAX,
                          "n": 2, "p": "/etc/shadow", "u": "file:///srv/repo/a#x", "k/~": "v"},
            // (regorus itself holds 2.0 as the number 2)
            "raw_arguments": {"a": [1, -2, 2.5, null, true, {"b": "c"}], "big": u64::MAX,
                              "n": 2, "p": "/etc//./shadow", "u": "file:///srv/repo/a#x", "k/~": "v"},
            // Every string by JSON pointer, as read and as sent.
            "strings": {"/a/5/b": "c", "/k~1~0": "v", "/p": "/etc/shadow", "/u": "file:///srv/repo/a#x"},
            "raw_strings": {"/a/5/b": "c", "/k~1~0": "v", "/p": "/etc//./shadow", "/u": "file:///srv/repo/a#x"},
            "readings": {"/u": ["/srv/repo/a#x", "/srv/repo/a", "/srv/repo/file:/srv/repo/a#x"]},
            "uncertain": {"/u": "it is a `file:` URI with a fragment (`#`: URL parsers drop it, naive servers do not)"},
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

#[cfg(test)]
mod shared_tests {
    use proptest::prelude::*;

    use super::*;
    use crate::pipeline::PipelineConfig;

    fn facts(arguments: Value) -> CallFacts {
        CallFacts {
            kind: RequestKind::Tool,
            server: ServerFacts {
                name: "fs".into(),
                trust: Trust::Untrusted,
                transport: TransportKind::Stdio,
                scope: Scope::User,
                dirs: Default::default(),
            },
            tool: ToolFacts {
                name: "t".into(),
                qualified: "mcp__fs__t".into(),
                annotations: Value::Null,
                input_schema: json!({}).into(),
                pin: PinState::Pinned,
            },
            arguments,
            context: CallContext {
                mode: Mode::Interactive,
                session: "s".into(),
                call_index: 1,
            },
        }
    }

    /// The input built as the pipeline builds it (sharing `raw_arguments`
    /// when the arguments read as sent) is the input built the long way.
    fn check(arguments: Value) -> Result<(), TestCaseError> {
        let p = Pipeline::load(PipelineConfig {
            policies: Some(vec![]),
            workspace: "/srv/repo".into(),
            ..PipelineConfig::default()
        })
        .expect("load");
        let facts = facts(arguments);
        let Ok(canonical) = p.canonical_for(facts.kind, &facts.arguments, &facts.server.dirs)
        else {
            return Ok(());
        };
        let input = p.rego_input_canonical(&facts, &canonical, Mode::Interactive, &[]);
        let long_way = canon_to_rego(&canonical.value);
        prop_assert_eq!(&input["arguments"], &long_way, "{}", facts.arguments);
        prop_assert_eq!(
            &input["strings"],
            &strings_by_pointer(&long_way),
            "{}",
            facts.arguments
        );
        prop_assert_eq!(
            &input["raw_arguments"],
            &crate::rego::to_rego(&facts.arguments)
        );
        Ok(())
    }

    #[test]
    fn arguments_read_otherwise_are_built_from_their_canonical_form() {
        for arguments in [
            json!({"message": "hello"}),
            json!({"n": 2.0}),
            json!({"n": 2, "x": [1.5, null, true]}),
            json!({"p": "/etc//./shadow"}),
            json!({"p": "../x", "q": "plain"}),
            json!({"u": "file:///srv/repo/a#x"}),
            json!({"deep": {"a": ["~/.ssh/id_rsa", {"b": "c"}]}}),
            json!({}),
        ] {
            check(arguments).expect("same input");
        }
        // Both ways are taken: some of these differ from the sent values.
        let p = Pipeline::load(PipelineConfig {
            policies: Some(vec![]),
            workspace: "/srv/repo".into(),
            ..PipelineConfig::default()
        })
        .expect("load");
        let sent = json!({"p": "/etc//./shadow"});
        let c = p
            .canonical_for(RequestKind::Tool, &sent, &Default::default())
            .expect("canonical");
        assert!(!reads_as_sent(&c.value, &sent));
        let sent = json!({"message": "hello", "n": [1, 2]});
        let c = p
            .canonical_for(RequestKind::Tool, &sent, &Default::default())
            .expect("canonical");
        assert!(reads_as_sent(&c.value, &sent));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn the_shared_input_is_the_input(
            args in prop::collection::btree_map("[a-z~/.]{1,6}", crate::strategies::argument_value(), 0..4),
        ) {
            check(Value::Object(args.into_iter().collect()))?;
        }
    }
}
