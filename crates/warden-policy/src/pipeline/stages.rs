//! The stages of CONTRACT §5, in order: trust, schema, pinning,
//! annotations, rules and the Rego policy. Each gives `allow`, `ask`,
//! `deny` or nothing, with reasons; none can fail (an error is its deny).

use std::sync::Arc;

use serde_json::Value;
use warden_core::{Effect, Stage, Trust};

use super::{CompiledSchema, Pipeline, SchemaEntry};
use crate::canon::{CanonValue, Canonical};
use crate::decision::StageVerdict;
use crate::facts::{CallFacts, PIN_CHANGED, PinState};
use crate::rules::RuleMatch;
use crate::sources::RuleEffect;
use warden_core::{RequestKind, Scope};

/// Stage 1, server trust: a blocked server's calls are denied.
pub(super) fn trust(facts: &CallFacts) -> StageVerdict {
    let (effect, reasons) = if facts.server.trust == Trust::Blocked {
        (
            Some(Effect::Deny),
            vec![format!("server `{}` is blocked", facts.server.name)],
        )
    } else {
        (None, vec![])
    };
    StageVerdict::new(Stage::Trust, effect, reasons)
}

/// Stage 4, annotations, believed for trusted servers only; a missing hint takes
/// the MCP default (may write, destructive).
pub(super) fn annotations(facts: &CallFacts) -> StageVerdict {
    let v = |effect, reason: &str| {
        StageVerdict::new(Stage::Annotations, effect, vec![reason.to_string()])
    };
    if facts.server.trust != Trust::Trusted {
        return v(
            None,
            "annotations of a server that is not trusted are not believed",
        );
    }
    let ann = &facts.tool.annotations;
    let hint = |k: &str| ann.get(k).and_then(Value::as_bool);
    if hint("readOnlyHint") == Some(true) {
        return v(
            Some(Effect::Allow),
            "trusted server marks the tool read-only",
        );
    }
    match hint("destructiveHint") {
        Some(true) => v(
            Some(Effect::Ask),
            "trusted server marks the tool destructive",
        ),
        None => v(
            Some(Effect::Ask),
            "trusted server gives no readOnlyHint/destructiveHint: by MCP default the tool \
             may write and be destructive",
        ),
        Some(false) => v(
            None,
            "trusted server marks the tool as writing but not destructive",
        ),
    }
}

impl Pipeline {
    /// Stage 2, arguments against the tool's `inputSchema` (no remote
    /// `$ref`; a schema [`crate::schema_guard`] refuses is a deny, never
    /// validated), compiled already (`compiled`: an inline decision's) or
    /// now (cached per tool).
    pub(super) fn stage_schema(
        &self,
        facts: &CallFacts,
        compiled: Option<&CompiledSchema>,
    ) -> StageVerdict {
        let schema = &facts.tool.input_schema;
        if schema.is_null() {
            return StageVerdict::new(
                Stage::Schema,
                None,
                vec!["the tool declares no inputSchema".into()],
            );
        }
        let found;
        let compiled = match compiled {
            Some(compiled) => compiled,
            None => {
                found = self
                    .cached_schema(&facts.tool.qualified, schema)
                    .map(|entry| entry.compiled)
                    .unwrap_or_else(|| self.compiled_schema(&facts.tool.qualified, schema));
                &found
            }
        };
        self.schema_verdict(facts, compiled)
    }

    fn schema_verdict(&self, facts: &CallFacts, compiled: &CompiledSchema) -> StageVerdict {
        let v = |effect, reason: String| StageVerdict::new(Stage::Schema, effect, vec![reason]);
        let empty = Value::Object(Default::default());
        let args = match &facts.arguments {
            Value::Null => &empty,
            Value::Object(_) => &facts.arguments,
            _ => {
                return v(Some(Effect::Deny), "arguments must be a JSON object".into());
            }
        };
        match compiled.as_ref() {
            Err(e) => v(
                Some(Effect::Deny),
                format!(
                    "server `{}` sent an invalid inputSchema for `{}`: {e}",
                    facts.server.name, facts.tool.name
                ),
            ),
            Ok(validator) => {
                let errors: Vec<String> = validator
                    .iter_errors(args)
                    .take(3)
                    .map(|e| {
                        let at = e.instance_path().to_string();
                        let at = if at.is_empty() { "/".to_string() } else { at };
                        truncate(&format!("at {at}: {e}"), 200)
                    })
                    .collect();
                if errors.is_empty() {
                    v(None, "arguments match the tool's inputSchema".into())
                } else {
                    v(
                        Some(Effect::Deny),
                        format!(
                            "arguments do not match the tool's inputSchema: {}",
                            errors.join("; ")
                        ),
                    )
                }
            }
        }
    }

    /// Compiles `schema` (checked by [`crate::schema_guard`] first) and
    /// caches it under `qualified`.
    fn compiled_schema(&self, qualified: &str, schema: &Arc<Value>) -> CompiledSchema {
        let cost = crate::schema_guard::expanded_cost(schema, &self.schema_limits);
        // What validating one value may cost at most: every expanded node
        // visited, and every value of the document compared (`enum`).
        let inline_cost = match &cost {
            Ok(cost) if !crate::schema_guard::uses_regexes(schema) => {
                Some(cost.saturating_add(crate::schema_guard::document_size(schema)))
            }
            _ => None,
        };
        let compiled: CompiledSchema = Arc::new(cost.and_then(|_| {
            jsonschema::options()
                .offline()
                // `pattern`: backtracking regexes, but bounded.
                .with_pattern_options(
                    jsonschema::PatternOptions::fancy_regex().backtrack_limit(100_000),
                )
                .build(schema)
                .map_err(|e| truncate(&e.to_string(), 300))
        }));
        if let Ok(mut cache) = self.schemas.write() {
            cache.insert(
                qualified.to_string(),
                SchemaEntry {
                    schema: Arc::clone(schema),
                    compiled: compiled.clone(),
                    inline_cost,
                },
            );
        }
        compiled
    }

    /// The compiled form of `schema`, if a decision made it already.
    pub(super) fn cached_schema(
        &self,
        qualified: &str,
        schema: &Arc<Value>,
    ) -> Option<SchemaEntry> {
        // The registry's own schema (the same allocation) on every call of
        // a listed tool; compared by value only when it is another one.
        let cache = self.schemas.read().ok()?;
        let entry = cache.get(qualified)?;
        (Arc::ptr_eq(&entry.schema, schema) || entry.schema == *schema).then(|| entry.clone())
    }

    /// Stage 3, tool pinning: a changed definition asks (denies with `--locked`).
    pub(super) fn stage_pinning(&self, facts: &CallFacts) -> StageVerdict {
        let (effect, reasons) = match &facts.tool.pin {
            PinState::Pinned => (None, vec![]),
            PinState::Changed { changes } => {
                let msg = format!("{PIN_CHANGED} {}", changes.join("; "));
                if self.locked {
                    (Some(Effect::Deny), vec![format!("{msg} (--locked)")])
                } else {
                    (Some(Effect::Ask), vec![msg])
                }
            }
            PinState::Unsaved { error } => {
                let msg = format!(
                    "the tool's definition could not be pinned ({error}), so a later change \
                     would go unnoticed"
                );
                if self.locked {
                    (Some(Effect::Deny), vec![format!("{msg} (--locked)")])
                } else {
                    (Some(Effect::Ask), vec![msg])
                }
            }
            PinState::Unpinned => (
                Some(Effect::Deny),
                vec![format!(
                    "tool `{}` is not in the lock file (--locked)",
                    facts.tool.qualified
                )],
            ),
        };
        StageVerdict::new(Stage::Pinning, effect, reasons)
    }

    /// Stage 5, permission rules on the canonical arguments: any deny rule,
    /// else any ask rule, else any allow rule; else, when an allow rule
    /// would have matched a value warden cannot read with certainty, an
    /// ask that says why. The verdict names the rules that decided.
    /// A tool's arguments are also read with the schema's defaults for
    /// those left out ([`super::defaults`]): a deny or ask that holds for
    /// them decides; an allow never comes from them.
    pub(super) fn stage_rules(&self, facts: &CallFacts, canonical: &Canonical) -> StageVerdict {
        let sent = self.rules_verdict(facts.kind, &facts.tool.qualified, &canonical.value);
        if facts.kind != RequestKind::Tool || sent.effect == Some(Effect::Deny) {
            return sent;
        }
        let Some((defaulted, names)) =
            super::defaults::with_defaults(&facts.arguments, &facts.tool.input_schema)
        else {
            return sent;
        };
        let Ok(defaulted) = self.canonical_for(facts.kind, &defaulted, &facts.server.dirs) else {
            return sent;
        };
        let mut with = self.rules_verdict(facts.kind, &facts.tool.qualified, &defaulted.value);
        let raises = match with.effect {
            Some(Effect::Deny) => true,
            Some(Effect::Ask) => sent.effect != Some(Effect::Ask),
            _ => false,
        };
        if !raises {
            return sent;
        }
        with.exact_operator_allow = false;
        with.reasons.push(format!(
            "read with the default the tool's schema declares for {} (the server uses it \
             when the argument is left out)",
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        with
    }

    /// The rules stage for a request of any kind (CONTRACT §8): `name` is
    /// the target (`mcp__S__T`, `resource__S`, `prompt__S__P`,
    /// `sampling__S`, `elicitation__S`), `args` the canonical arguments.
    pub(crate) fn rules_verdict(
        &self,
        kind: RequestKind,
        name: &str,
        args: &CanonValue,
    ) -> StageVerdict {
        // (reason, rule) per effect: deny, ask, allow.
        let mut hits: [(Vec<String>, Vec<String>); 3] = Default::default();
        let mut uncertain: (Vec<String>, Vec<String>) = Default::default();
        let mut exact_operator_allow = false;
        // Every candidate's path conditions answered by one pass per
        // reading (`rules/paths.rs`).
        let paths = self.rule_index.paths();
        let path_hits = paths.hits();
        for (i, rule) in self.indexed_rules_for(kind, name) {
            let shared = path_hits.as_ref().zip(paths.base(i));
            let named = || {
                format!(
                    "{} rule `{}` ({})",
                    rule.effect.as_str(),
                    rule.text,
                    rule.origin
                )
            };
            match rule.matches_request_with(kind, name, args, shared) {
                RuleMatch::No => {}
                RuleMatch::Yes(detail) => {
                    let slot = match rule.effect {
                        RuleEffect::Deny => 0,
                        RuleEffect::Ask => 1,
                        RuleEffect::Allow => 2,
                    };
                    if rule.effect == RuleEffect::Allow
                        && rule.kind() == RequestKind::Tool
                        && rule.names_tool_exactly()
                        && rule.scope != Scope::Project
                    {
                        exact_operator_allow = true;
                    }
                    let reason = if detail.is_empty() {
                        format!("{} matched", named())
                    } else {
                        format!("{} matched on {detail}", named())
                    };
                    hits[slot].0.push(reason);
                    hits[slot].1.push(named());
                }
                RuleMatch::Uncertain(why) => {
                    uncertain.0.push(format!(
                        "{} does not apply: {why}; warden never allows what it cannot read \
                         with certainty",
                        named()
                    ));
                    uncertain.1.push(named());
                }
            }
        }
        let [deny, ask, allow] = hits;
        let (effect, (reasons, matched_rules)) = if !deny.0.is_empty() {
            (Some(Effect::Deny), deny)
        } else if !ask.0.is_empty() {
            (Some(Effect::Ask), ask)
        } else if !allow.0.is_empty() {
            (Some(Effect::Allow), allow)
        } else if !uncertain.0.is_empty() {
            (Some(Effect::Ask), uncertain)
        } else {
            (None, Default::default())
        };
        StageVerdict {
            stage: Stage::Rules,
            effect,
            reasons,
            matched_rules,
            exact_operator_allow: exact_operator_allow && effect == Some(Effect::Allow),
        }
    }

    /// Stage 6, the Rego policy, for a ready `input`: any `deny` reason, else any
    /// `ask` reason, else `allow == true`. An evaluation error is a deny.
    /// Checks that every policy group on the bytecode VM answers `facts`
    /// as the interpreter does (a deferral is no answer, so it agrees).
    /// For the fuzz target and differential tests; decisions never run
    /// both.
    #[doc(hidden)]
    pub fn engines_agree(&self, facts: &CallFacts) -> Result<(), String> {
        let mode = self.effective_mode(facts);
        let input = self.rego_input(facts, mode, &[]);
        for set in &self.rego {
            let both = set.both_engines(input.clone());
            let agree = match &both {
                None | Some((Err(_), Err(_))) => true,
                Some((Ok(vm), Ok(interpreter))) => vm == interpreter,
                Some(_) => false,
            };
            if !agree {
                return Err(format!(
                    "the Rego VM and the interpreter answered differently for {input}: {both:?}"
                ));
            }
        }
        Ok(())
    }

    pub(super) fn policy_verdict(&self, input: regorus::Value) -> StageVerdict {
        policy_stage(self.rego.iter().map(|set| set.eval_value(input.clone())))
    }

    /// The Rego stage on the bytecode VM alone, each group's timer at
    /// `limit` (an inline decision): `None` when a group is not on the VM,
    /// defers to the interpreter or runs out of `limit`.
    pub(super) fn policy_verdict_within(
        &self,
        input: regorus::Value,
        limit: std::time::Duration,
    ) -> Option<StageVerdict> {
        let verdicts = self
            .rego
            .iter()
            .map(|set| set.eval_value_within(input.clone(), limit))
            .collect::<Option<Vec<_>>>()?;
        Some(policy_stage(verdicts))
    }
}

/// The Rego stage's verdict from each group's answer.
fn policy_stage(
    verdicts: impl IntoIterator<Item = Result<crate::rego::RegoVerdict, String>>,
) -> StageVerdict {
    let mut deny = Vec::new();
    let mut ask = Vec::new();
    let mut allow = false;
    for verdict in verdicts {
        match verdict {
            Ok(v) => {
                deny.extend(v.deny);
                ask.extend(v.ask);
                // A project set never reports `allow` (it is ignored).
                allow |= v.allow;
            }
            Err(e) => deny.push(format!("policy failed to evaluate (fail closed): {e}")),
        }
    }
    let (effect, reasons) = if !deny.is_empty() {
        (Some(Effect::Deny), deny)
    } else if !ask.is_empty() {
        (Some(Effect::Ask), ask)
    } else if allow {
        (Some(Effect::Allow), vec!["policy allows the call".into()])
    } else {
        (None, vec![])
    };
    StageVerdict::new(Stage::Policy, effect, reasons)
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let cut = (0..=max)
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}…", &s[..cut])
}
