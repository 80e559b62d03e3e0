//! Deciding on the caller's task when the decision cannot run away.
//!
//! [`Pipeline::decide_within`] hands a decision to an evaluation thread so
//! that a runaway schema or policy can be abandoned at the deadline
//! ([`super::deadline`]). The hand-off costs two thread wake-ups per call:
//! about one context switch and 30–60 µs of a 16 B call through the
//! gateway (BENCHMARKS.md, "Seventh pass"). A decision whose work is
//! bounded small before it starts does not need it, so it is made in place
//! when all of these hold:
//!
//! - every Rego group runs on the bytecode VM (the shipped policies: a
//!   user's policy runs on the interpreter, whose timer is process-wide),
//!   and the VM's timer is set to [`BUDGET`];
//! - the arguments are small: at most [`MAX_VALUES`] values and
//!   [`MAX_TEXT`] bytes of keys and strings, so canonicalisation, the
//!   rules and the policy's regexes are linear in little;
//! - a tool's input schema was compiled by an earlier decision (compiling
//!   is left to the pool), validating against it runs no regular
//!   expression ([`crate::schema_guard::uses_regexes`]), and its expanded
//!   size plus its document's size (an `enum` of 10,000 values is cheap
//!   to expand and costly to compare with), times the values, is at most
//!   [`MAX_SCHEMA_VISITS`].
//!
//! Anything else is decided on the pool, as is a decision whose policy
//! evaluation the VM defers to the interpreter or that runs out of
//! [`BUDGET`] (the inline attempt is discarded: a decision has no side
//! effect but caches). So a decision holds a runtime thread for at most
//! about [`BUDGET`], as a runaway on the pool delays another caller by at
//! most [`super::deadline::STUCK`]. (warden's sessions run on one runtime
//! worker by default, so that thread is the session's: every other
//! message waits that long at most.)

use std::time::Duration;

use serde_json::Value;
use warden_core::RequestKind;

use super::deadline::Progress;
use super::{CompiledSchema, Pipeline};
use crate::decision::Decision;
use crate::facts::CallFacts;

/// The Rego VM's wall-clock budget for an inline decision. The shipped
/// policy decides a small call in 40–120 µs; past this the decision is
/// made again on the pool.
pub(super) const BUDGET: Duration = Duration::from_millis(10);
/// Most argument values (every scalar, array and object) decided inline.
/// The shipped policy's work grows with the strings: a call at both caps,
/// every string full of what `default.rego` and `canon` look for, is
/// decided in 3.2 ms (criterion, `benches/pipeline.rs`, `decide_in_place`);
/// with 256 values it took 8.7–9.5 ms, too close to the 10 ms budget.
pub const MAX_VALUES: usize = 64;
/// Most bytes of argument keys and strings decided inline.
pub const MAX_TEXT: usize = 16 * 1024;
/// Most work an inline validation may do: the schema's expanded size plus
/// its document's size (a tool's `inline_cost`), times the values.
pub const MAX_SCHEMA_VISITS: u64 = 20_000;

/// What an inline decision was planned with.
pub(super) struct Inline {
    /// The tool's compiled input schema, checked small (`None`: no schema,
    /// or not a tool).
    pub(super) schema: Option<CompiledSchema>,
}

impl Pipeline {
    /// The decision, made on this thread, when it is bounded small (see
    /// the module); `None` when it must go to the pool.
    pub(super) fn decide_inline(&self, facts: &CallFacts) -> Option<Decision> {
        let plan = self.inline_plan(facts)?;
        self.decide_run(facts, &Progress::default(), Some(&plan))
    }

    /// Whether `facts` qualify for an inline decision (before the policy
    /// runs: it may still overrun and go to the pool).
    #[doc(hidden)]
    pub fn decides_inline(&self, facts: &CallFacts) -> bool {
        self.inline_plan(facts).is_some()
    }

    /// Checks that a call decided in place is decided as the pool decides
    /// it. `Ok(true)`: decided in place, the same; `Ok(false)`: not decided
    /// in place (not bounded small, or the VM's timer ran out). For the
    /// fuzz target and differential tests.
    #[doc(hidden)]
    pub fn inline_agrees(&self, facts: &CallFacts) -> Result<bool, String> {
        let Some(inline) = self.decide_inline(facts) else {
            return Ok(false);
        };
        let pooled = self.decide(facts);
        if inline == pooled {
            Ok(true)
        } else {
            Err(format!(
                "decided in place as {inline:?}, on the pool as {pooled:?}"
            ))
        }
    }

    fn inline_plan(&self, facts: &CallFacts) -> Option<Inline> {
        if !self.rego.iter().all(|set| set.on_vm()) {
            return None;
        }
        let values = small(&facts.arguments)?;
        if facts.kind != RequestKind::Tool || facts.tool.input_schema.is_null() {
            return Some(Inline { schema: None });
        }
        let entry = self.cached_schema(&facts.tool.qualified, &facts.tool.input_schema)?;
        let cost = entry.inline_cost?;
        (cost.saturating_mul(values as u64) <= MAX_SCHEMA_VISITS).then_some(Inline {
            schema: Some(entry.compiled),
        })
    }
}

/// How many values `arguments` holds, if it is within [`MAX_VALUES`] and
/// [`MAX_TEXT`] (counting stops as soon as it is not).
fn small(arguments: &Value) -> Option<usize> {
    let mut values = 0usize;
    let mut text = 0usize;
    let mut pending = vec![arguments];
    while let Some(value) = pending.pop() {
        values += 1;
        match value {
            Value::String(s) => text += s.len(),
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => {
                for (key, item) in map {
                    text += key.len();
                    pending.push(item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
        if values > MAX_VALUES || text > MAX_TEXT {
            return None;
        }
    }
    Some(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn small_counts_values_and_text_and_stops_past_the_caps() {
        assert_eq!(small(&json!({})), Some(1));
        assert_eq!(small(&json!({"message": "hi"})), Some(2));
        assert_eq!(small(&json!({"a": [1, 2, {"b": null}]})), Some(6));
        let many: Vec<u32> = (0..MAX_VALUES as u32).collect();
        assert_eq!(small(&json!({ "a": many })), None);
        let just: Vec<u32> = (0..MAX_VALUES as u32 - 2).collect();
        assert_eq!(small(&json!({ "a": just })), Some(MAX_VALUES));
        assert_eq!(small(&json!({ "a": "x".repeat(MAX_TEXT) })), None);
        assert_eq!(small(&json!({ "a": "x".repeat(MAX_TEXT - 1) })), Some(2));
        assert_eq!(small(&json!({ "x".repeat(MAX_TEXT + 1): 1 })), None);
    }
}
