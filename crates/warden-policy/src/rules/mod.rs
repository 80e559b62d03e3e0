//! Permission rules (CONTRACT §5, stage 5): `TOOL_GLOB` or
//! `TOOL_GLOB(ARG: GLOB, …)`.
//!
//! Grammar and semantics, as enforced here:
//!
//! - `TOOL_GLOB` matches the qualified name `mcp__S__T` (`*`, `?`, `[…]`,
//!   `{a,b}`). `mcp__S` without any wildcard is shorthand for `mcp__S__*`
//!   (as in Claude Code). A glob that can never match a qualified name (a
//!   character outside `[A-Za-z0-9_-]`, a literal prefix other than `mcp__`)
//!   is a load-time error.
//! - `ARG` is a top-level argument name or a JSON pointer (`/a/b`). Several
//!   conditions must all hold. A missing argument never matches.
//! - A `GLOB` containing `/` is a *path pattern*: the argument value is
//!   normalised lexically (`.`, `..`, repeated `/`; a relative value is
//!   taken relative to the workspace; `~…` stays as written) before
//!   matching, `*` does not cross `/`, and `DIR/**` also matches `DIR`
//!   itself. A path pattern must be absolute or start with `*`, and may not
//!   contain `.`/`..` segments (it could never match a normalised path).
//!   A `file:` URI is decoded and normalised as the path it names; a value
//!   with another scheme (`https:`…) is matched as written, so it never
//!   satisfies an absolute path pattern. Symlinks are not resolved: this
//!   is lexical, the sandbox is the enforcement for the file system.
//! - Arrays: `allow` needs a non-empty array whose every element matches;
//!   `deny`/`ask` fire when any element matches.
//! - Wrong types: a value that is not a string (or array of strings) never
//!   satisfies `allow`. For `deny`/`ask`, numbers and booleans are matched
//!   as their JSON text, and `null`, objects and nested arrays *fire* the
//!   rule: a restriction the value cannot be checked against fails closed.

mod parse;
mod paths;

use std::fmt;
use std::path::PathBuf;

use globset::{GlobMatcher, GlobSet};
use serde_json::Value;

use warden_core::Scope;

use crate::sources::{RuleEffect, RuleSource};
use parse::{compile_condition, compile_tool_glob, parse};
use paths::normalize_path;

/// A malformed rule, with where it came from and where in the text the
/// problem is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct RuleError {
    pub file: PathBuf,
    /// `permissions.deny[2]`.
    pub key: String,
    pub text: String,
    /// 1-based column (in characters) of the problem in `text`.
    pub column: usize,
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {} (column {})\n    {}\n    {}^",
            self.file.display(),
            self.key,
            self.message,
            self.column,
            self.text,
            " ".repeat(self.column.saturating_sub(1))
        )
    }
}

#[derive(Debug, Clone)]
enum ArgRef {
    Name(String),
    Pointer(String),
}

impl ArgRef {
    fn lookup<'a>(&self, args: &'a Value) -> Option<&'a Value> {
        match self {
            ArgRef::Name(name) => args.as_object()?.get(name),
            ArgRef::Pointer(pointer) => args.pointer(pointer),
        }
    }
    fn as_str(&self) -> &str {
        match self {
            ArgRef::Name(s) | ArgRef::Pointer(s) => s,
        }
    }
}

#[derive(Debug, Clone)]
struct Condition {
    arg: ArgRef,
    pattern: String,
    matcher: GlobSet,
    path_like: bool,
}

/// One parsed, checked rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub effect: RuleEffect,
    pub text: String,
    /// `permissions.deny[2] in FILE`.
    pub origin: String,
    tool: GlobMatcher,
    conditions: Vec<Condition>,
}

/// Outcome of matching one rule against one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleMatch {
    No,
    /// Matched; the string explains on what (for reasons).
    Yes(String),
}

impl Rule {
    /// Parses and checks one rule. Project-scope `allow` rules are refused
    /// (CONTRACT §3), whatever the config loader did.
    pub fn compile(source: &RuleSource) -> Result<Rule, RuleError> {
        let key = format!("permissions.{}[{}]", source.effect.as_str(), source.index);
        let err = |column: usize, message: String| RuleError {
            file: source.file.clone(),
            key: key.clone(),
            text: source.text.clone(),
            column: column + 1,
            message,
        };
        if source.scope == Scope::Project && source.effect == RuleEffect::Allow {
            return Err(err(
                0,
                "a project file (.mcp.json in the workspace) may not add `allow` rules; \
                 move the rule to your user config"
                    .into(),
            ));
        }
        let parsed = parse(&source.text).map_err(|(col, msg)| err(col, msg))?;
        let tool = compile_tool_glob(parsed.tool, parsed.tool_at).map_err(|(c, m)| err(c, m))?;
        let mut conditions = Vec::with_capacity(parsed.conditions.len());
        let mut seen = Vec::new();
        for raw in parsed.conditions {
            if seen.contains(&raw.arg) {
                return Err(err(
                    raw.arg_at,
                    format!("argument `{}` is named twice", raw.arg),
                ));
            }
            seen.push(raw.arg);
            conditions.push(compile_condition(&raw).map_err(|(c, m)| err(c, m))?);
        }
        Ok(Rule {
            effect: source.effect,
            text: source.text.clone(),
            origin: format!("{key} in {}", source.file.display()),
            tool,
            conditions,
        })
    }

    /// True when the rule has no argument conditions.
    pub fn is_unconditional(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Whether the rule's tool glob matches a qualified name.
    pub fn matches_tool(&self, qualified: &str) -> bool {
        self.tool.is_match(qualified)
    }

    /// Argument names this rule's conditions use that `input_schema` does
    /// not declare (most likely a typo: the condition then never holds):
    /// for warnings when a server lists its tools. Schemas without
    /// `properties` are not checked.
    pub fn unknown_arguments(&self, input_schema: &Value) -> Vec<String> {
        let Some(props) = input_schema.get("properties").and_then(Value::as_object) else {
            return Vec::new();
        };
        if input_schema.get("additionalProperties") != Some(&Value::Bool(false)) && props.is_empty()
        {
            return Vec::new();
        }
        self.conditions
            .iter()
            .filter_map(|c| {
                let top = match &c.arg {
                    ArgRef::Name(n) => n.clone(),
                    ArgRef::Pointer(p) => p
                        .trim_start_matches('/')
                        .split('/')
                        .next()
                        .unwrap_or_default()
                        .replace("~1", "/")
                        .replace("~0", "~"),
                };
                (!props.contains_key(&top)).then(|| c.arg.as_str().to_string())
            })
            .collect()
    }

    /// Matches the rule against one call.
    pub fn matches(&self, qualified: &str, args: &Value, workspace: &str) -> RuleMatch {
        if !self.matches_tool(qualified) {
            return RuleMatch::No;
        }
        let mut details = Vec::new();
        for cond in &self.conditions {
            match self.eval_condition(cond, args, workspace) {
                Some(detail) => details.push(detail),
                None => return RuleMatch::No,
            }
        }
        RuleMatch::Yes(details.join(", "))
    }

    /// `Some(detail)` when the condition holds for this rule's effect.
    fn eval_condition(&self, cond: &Condition, args: &Value, workspace: &str) -> Option<String> {
        let value = cond.arg.lookup(args)?;
        let name = cond.arg.as_str();
        let restrict = self.effect != RuleEffect::Allow;
        match value {
            Value::String(s) => {
                let (ok, shown) = cond.test_str(s, workspace);
                ok.then(|| format!("{name}={shown}"))
            }
            Value::Array(items) => {
                if restrict {
                    items.iter().enumerate().find_map(|(i, item)| {
                        self.restrict_scalar(cond, item, workspace)
                            .map(|d| format!("{name}[{i}]={d}"))
                    })
                } else {
                    if items.is_empty() {
                        return None;
                    }
                    let mut shown = Vec::with_capacity(items.len());
                    for item in items {
                        let s = item.as_str()?;
                        let (ok, norm) = cond.test_str(s, workspace);
                        if !ok {
                            return None;
                        }
                        shown.push(norm);
                    }
                    Some(format!("{name}=[{}]", shown.join(", ")))
                }
            }
            other if restrict => self
                .restrict_scalar(cond, other, workspace)
                .map(|d| format!("{name}={d}")),
            _ => None,
        }
    }

    /// For deny/ask: does this (non-array-level) value fire the condition?
    fn restrict_scalar(&self, cond: &Condition, value: &Value, workspace: &str) -> Option<String> {
        match value {
            Value::String(s) => {
                let (ok, shown) = cond.test_str(s, workspace);
                ok.then_some(shown)
            }
            Value::Number(_) | Value::Bool(_) => {
                let text = value.to_string();
                cond.matcher
                    .is_match(&text)
                    .then(|| format!("<value matching `{}`>", cond.pattern))
            }
            Value::Null => Some("null (not a string: fails closed)".into()),
            Value::Array(_) => Some("a nested array (not a string: fails closed)".into()),
            Value::Object(_) => Some("an object (not a string: fails closed)".into()),
        }
    }
}

impl Condition {
    /// Matches a string value; returns the (normalised) value shown in reasons.
    fn test_str(&self, value: &str, workspace: &str) -> (bool, String) {
        if self.path_like {
            let norm = normalize_path(value, workspace);
            (self.matcher.is_match(&norm), norm)
        } else {
            // Not echoed: a non-path value may be a secret, and reasons
            // reach the audit log and the model unredacted.
            (
                self.matcher.is_match(value),
                format!("<value matching `{}`>", self.pattern),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(effect: RuleEffect, text: &str) -> Result<Rule, RuleError> {
        Rule::compile(&RuleSource {
            effect,
            text: text.into(),
            scope: Scope::User,
            file: "/cfg.json".into(),
            index: 0,
        })
    }

    #[test]
    fn server_shorthand() {
        let r = rule(RuleEffect::Deny, "mcp__fs").unwrap();
        assert!(r.matches_tool("mcp__fs__read"));
        assert!(!r.matches_tool("mcp__fsx__read"));
    }

    #[test]
    fn errors_have_columns() {
        let e = rule(RuleEffect::Deny, "mcp__fs__read(path /x)").unwrap_err();
        assert_eq!(e.column, 15, "{e}");
        let e = rule(RuleEffect::Deny, "mcp__fs__read(path: src/**)").unwrap_err();
        assert_eq!(e.column, 21, "{e}");
        let e = rule(RuleEffect::Deny, "fs__read").unwrap_err();
        assert!(e.message.contains("never match"), "{e}");
    }

    #[test]
    fn braces_keep_commas() {
        let r = rule(
            RuleEffect::Deny,
            "mcp__*__*(path: **/{.env,.ssh/**}, mode: w)",
        )
        .unwrap();
        let args = json!({"path": "/w/.env", "mode": "w"});
        assert!(matches!(
            r.matches("mcp__a__b", &args, "/w"),
            RuleMatch::Yes(_)
        ));
    }
}
