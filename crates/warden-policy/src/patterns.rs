//! `regex.match` with its compiled patterns shared, not cloned.
//!
//! regorus 0.14 caches compiled patterns but hands every call a *clone* of
//! the cached `Regex`, and a clone starts with an empty matching cache: each
//! `regex.match` built its lazy DFA again (profiled: a third of the Rego
//! stage's time in `default.rego`, more on long strings). This extension
//! (extensions are looked up before builtins) keeps one `Arc<Regex>` per
//! pattern, so its per-thread matching caches live across calls.
//!
//! Semantics are regorus's: the same `regex` crate and size limit
//! (100 KiB); a pattern that does not compile is *undefined* (regorus's
//! non-strict builtin errors, which warden uses) except one over the size
//! limit, which is an error (the evaluation fails and the call is denied,
//! as regorus's `LimitError` does); a non-string argument is undefined.
//! The `policy test` suites (`default_test.rego`, `ci_test.rego`) and the
//! tests below hold it to that.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use regex::{Regex, RegexBuilder};
use regorus::{Engine, Value};

/// regorus's bound on a compiled pattern (`builtins/regex.rs`).
const SIZE_LIMIT: usize = 100 * 1024;

/// Patterns kept; past it the map is emptied (a policy that builds patterns
/// from its input must not grow it without bound). Raised to the policy's
/// own call sites by [`reserve`].
static CAPACITY: AtomicUsize = AtomicUsize::new(256);

type Compiled = Result<Arc<Regex>, Failure>;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Failure {
    /// Not a pattern: `regex.match` is undefined.
    Invalid,
    /// Over the size limit: the evaluation fails.
    TooBig,
}

fn patterns() -> &'static Mutex<HashMap<String, Compiled>> {
    static PATTERNS: OnceLock<Mutex<HashMap<String, Compiled>>> = OnceLock::new();
    PATTERNS.get_or_init(Default::default)
}

/// Makes room for at least `n` patterns (never shrinks: another loaded
/// pipeline may still use them).
pub(crate) fn reserve(n: usize) {
    CAPACITY.fetch_max(n, Ordering::AcqRel);
}

fn compiled(pattern: &str) -> Compiled {
    let lock = || patterns().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = lock().get(pattern) {
        return found.clone();
    }
    // Compiled outside the lock: other decisions keep matching meanwhile.
    let built = match RegexBuilder::new(pattern).size_limit(SIZE_LIMIT).build() {
        Ok(re) => Ok(Arc::new(re)),
        Err(regex::Error::CompiledTooBig(_)) => Err(Failure::TooBig),
        Err(_) => Err(Failure::Invalid),
    };
    let mut map = lock();
    if map.len() >= CAPACITY.load(Ordering::Acquire) {
        map.clear();
    }
    map.insert(pattern.to_string(), built.clone());
    built
}

pub(crate) fn regex_match(args: Vec<Value>) -> anyhow::Result<Value> {
    let (Some(Value::String(pattern)), Some(Value::String(value))) = (args.first(), args.get(1))
    else {
        return Ok(Value::Undefined);
    };
    match compiled(pattern) {
        Ok(re) => Ok(Value::Bool(re.is_match(value))),
        Err(Failure::Invalid) => Ok(Value::Undefined),
        Err(Failure::TooBig) => {
            anyhow::bail!("regex.match: the pattern exceeds the size limit of {SIZE_LIMIT} bytes")
        }
    }
}

/// Installs the shared `regex.match`.
pub(crate) fn install(engine: &mut Engine) -> Result<(), String> {
    engine
        .add_extension("regex.match".into(), 2, Box::new(regex_match))
        .map_err(|e| format!("regex.match: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(policy: &str, input: &str) -> Value {
        let mut engine = Engine::new();
        install(&mut engine).expect("install");
        engine
            .add_policy("t.rego".into(), policy.into())
            .expect("policy");
        engine.set_input(Value::from_json_str(input).expect("input"));
        engine.eval_rule("data.t.r".into()).expect("eval")
    }

    const MATCH: &str = "package t\nimport rego.v1\nr := regex.match(input.p, input.v)\n";

    #[test]
    fn matches_like_regorus() {
        for (p, v, want) in [
            (r"^/etc/(shadow|gshadow)", "/etc/shadow", true),
            (
                r"\bAKIA[0-9A-Z]{16}\b",
                "key AKIAABCDEFGHIJKLMNOP here",
                true,
            ),
            (r"\bAKIA[0-9A-Z]{16}\b", "xAKIAABCDEFGHIJKLMNOP", false),
            ("(?i)secret", "SeCrEt", true),
            ("é+", "café", true),
        ] {
            let input = serde_json::json!({"p": p, "v": v}).to_string();
            assert_eq!(eval(MATCH, &input), Value::Bool(want), "{p} on {v}");
            let mut plain = Engine::new();
            plain
                .add_policy("t.rego".into(), MATCH.into())
                .expect("policy");
            plain.set_input(Value::from_json_str(&input).expect("input"));
            assert_eq!(
                plain.eval_rule("data.t.r".into()).expect("eval"),
                Value::Bool(want),
                "regorus itself: {p} on {v}"
            );
        }
    }

    #[test]
    fn an_invalid_pattern_or_argument_is_undefined() {
        for input in [
            r#"{"p": "(", "v": "x"}"#,
            r#"{"p": "x", "v": 1}"#,
            r#"{"p": 1, "v": "x"}"#,
        ] {
            assert_eq!(eval(MATCH, input), Value::Undefined, "{input}");
        }
    }

    #[test]
    fn a_pattern_over_the_size_limit_fails_the_evaluation() {
        let mut engine = Engine::new();
        install(&mut engine).expect("install");
        engine
            .add_policy("t.rego".into(), MATCH.into())
            .expect("policy");
        let input = serde_json::json!({"p": r"\w{1000}\w{1000}\w{1000}", "v": "x"}).to_string();
        engine.set_input(Value::from_json_str(&input).expect("input"));
        assert!(engine.eval_rule("data.t.r".into()).is_err());
    }

    #[test]
    fn the_map_is_bounded() {
        for i in 0..CAPACITY.load(Ordering::Acquire) + 10 {
            let _ = compiled(&format!("^bounded{i}$"));
        }
        let len = patterns().lock().map(|m| m.len()).unwrap_or(0);
        assert!(len <= CAPACITY.load(Ordering::Acquire), "{len}");
    }
}
