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

use std::fmt;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use serde_json::Value;

use warden_core::Scope;

use crate::sources::{RuleEffect, RuleSource};

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

/// Lexical normalisation with [`warden_core::path::normalize`]: relative
/// paths are joined to `workspace`; `.`, `..` and empty segments are
/// resolved; `..` at the root stays at the root. A value starting with `~`
/// keeps its `~` root (warden cannot know which home directory a server
/// expands it to), so it never matches an absolute allow pattern; `..`
/// never climbs above that `~` either.
///
/// URIs: a `file:` URI is decoded (`%XX`) and normalised as the absolute
/// path it names; a value with any other scheme (`https:`, `s3:`, also
/// `C:`) is kept as written, so it never matches an absolute pattern.
pub fn normalize_path(value: &str, workspace: &str) -> String {
    if let Some((scheme, rest)) = split_scheme(value) {
        if !scheme.eq_ignore_ascii_case("file") {
            return value.to_string();
        }
        // file:///p, file://localhost/p, file:/p
        let path = rest
            .strip_prefix("//")
            .map(|r| r.find('/').map_or("/", |i| &r[i..]))
            .unwrap_or(rest);
        return rooted(&percent_decode(path));
    }
    if value.starts_with('~') {
        let (head, tail) = value.split_once('/').unwrap_or((value, ""));
        // `~` acts as the root: `~/..` is `~`.
        let tail = rooted(tail);
        return format!("{head}{}", tail.trim_end_matches('/'));
    }
    let base = Path::new(workspace);
    warden_core::path::absolutize(&Path::new("/").join(base), Path::new(value))
        .to_string_lossy()
        .into_owned()
}

/// `path` taken from `/` (absolute or not) and normalised.
fn rooted(path: &str) -> String {
    warden_core::path::normalize(&Path::new("/").join(path))
        .to_string_lossy()
        .into_owned()
}

/// `scheme:rest` when `value` starts with an RFC 3986 scheme.
fn split_scheme(value: &str) -> Option<(&str, &str)> {
    let colon = value.find(':')?;
    let scheme = &value[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then(|| (scheme, &value[colon + 1..]))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct RawCondition<'a> {
    arg: &'a str,
    arg_at: usize,
    glob: &'a str,
    glob_at: usize,
}

struct Parsed<'a> {
    tool: &'a str,
    tool_at: usize,
    conditions: Vec<RawCondition<'a>>,
}

/// Char column of a byte offset.
fn col(text: &str, byte: usize) -> usize {
    text.get(..byte).map_or(0, |s| s.chars().count())
}

fn parse(text: &str) -> Result<Parsed<'_>, (usize, String)> {
    if text.trim().is_empty() {
        return Err((0, "empty rule".into()));
    }
    let lead = text.len() - text.trim_start().len();
    let body_end = text.trim_end().len();
    let Some(open) = text.find('(') else {
        if let Some(close) = text.find(')') {
            return Err((col(text, close), "`)` without `(`".into()));
        }
        return Ok(Parsed {
            tool: &text[lead..body_end],
            tool_at: col(text, lead),
            conditions: Vec::new(),
        });
    };
    let tool = text[lead..open].trim_end();
    if tool.is_empty() {
        return Err((col(text, lead), "missing tool name before `(`".into()));
    }
    if !text[..body_end].ends_with(')') {
        return Err((
            col(text, body_end),
            "expected `)` at the end of the argument list".into(),
        ));
    }
    let inner_start = open + 1;
    let inner_end = body_end - 1;
    if inner_end < inner_start || text[inner_start..inner_end].trim().is_empty() {
        return Err((
            col(text, open),
            "empty argument list: write `TOOL` or `TOOL(ARG: GLOB)`".into(),
        ));
    }
    // Split on top-level commas (not inside `{…}` or `[…]`, not escaped).
    let mut parts = Vec::new();
    let (mut depth_brace, mut depth_bracket, mut start) = (0i32, 0i32, inner_start);
    let mut escaped = false;
    for (i, c) in text[inner_start..inner_end].char_indices() {
        let at = inner_start + i;
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            '[' => depth_bracket += 1,
            ']' => depth_bracket -= 1,
            '(' | ')' if depth_bracket == 0 => {
                return Err((
                    col(text, at),
                    format!("unexpected `{c}` in the argument list"),
                ));
            }
            ',' if depth_brace == 0 && depth_bracket == 0 => {
                parts.push((start, at));
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push((start, inner_end));
    let mut conditions = Vec::new();
    for (s, e) in parts {
        let part = &text[s..e];
        let trimmed_lead = part.len() - part.trim_start().len();
        let ps = s + trimmed_lead;
        let part = part.trim();
        if part.is_empty() {
            return Err((col(text, ps), "empty condition (stray `,`?)".into()));
        }
        let Some(colon) = part.find(':') else {
            return Err((
                col(text, ps),
                format!("expected `ARG: GLOB`, found `{part}`"),
            ));
        };
        let arg = part[..colon].trim();
        if arg.is_empty() {
            return Err((col(text, ps), "missing argument name before `:`".into()));
        }
        if let Some(bad) = arg.find(|c: char| c.is_whitespace()) {
            return Err((
                col(text, ps + bad),
                format!("argument name `{arg}` contains whitespace"),
            ));
        }
        let after = &part[colon + 1..];
        let glob_lead = after.len() - after.trim_start().len();
        let glob = after.trim();
        let glob_at = ps + colon + 1 + glob_lead;
        if glob.is_empty() {
            return Err((col(text, glob_at), format!("missing pattern for `{arg}`")));
        }
        conditions.push(RawCondition {
            arg,
            arg_at: col(text, ps),
            glob,
            glob_at: col(text, glob_at),
        });
    }
    Ok(Parsed {
        tool,
        tool_at: col(text, lead),
        conditions,
    })
}

const GLOB_META: &[char] = &['*', '?', '[', '{'];

fn compile_tool_glob(tool: &str, at: usize) -> Result<GlobMatcher, (usize, String)> {
    for (i, c) in tool.chars().enumerate() {
        let ok = c.is_ascii_alphanumeric() || "_-*?[]{},!^".contains(c);
        if !ok {
            return Err((
                at + i,
                format!(
                    "`{c}` can never match: qualified tool names contain only [A-Za-z0-9_-] \
                     (mcp__SERVER__TOOL)"
                ),
            ));
        }
    }
    let literal_len = tool.find(GLOB_META).unwrap_or(tool.len());
    let prefix = &tool[..literal_len];
    if !(prefix.starts_with("mcp__") || "mcp__".starts_with(prefix)) {
        return Err((
            at,
            format!("`{tool}` can never match: tool names have the form mcp__SERVER__TOOL"),
        ));
    }
    let mut pattern = tool.to_string();
    if literal_len == tool.len() {
        let rest = &tool[5..];
        match rest.split_once("__") {
            None if !rest.is_empty() => pattern = format!("{tool}__*"),
            Some((server, t)) if !server.is_empty() && !t.is_empty() => {}
            _ => {
                return Err((
                    at,
                    format!(
                        "`{tool}` can never match: write mcp__SERVER__TOOL, mcp__SERVER or a glob"
                    ),
                ));
            }
        }
        if tool.len() > warden_core::MAX_QUALIFIED_LEN {
            return Err((
                at,
                format!(
                    "`{tool}` can never match: qualified names are at most {} characters",
                    warden_core::MAX_QUALIFIED_LEN
                ),
            ));
        }
    }
    Glob::new(&pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| (at, format!("invalid tool glob: {}", e.kind())))
}

fn compile_condition(raw: &RawCondition<'_>) -> Result<Condition, (usize, String)> {
    let arg = if raw.arg.starts_with('/') {
        let mut chars = raw.arg.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '~' && !matches!(chars.peek(), Some('0' | '1')) {
                return Err((
                    raw.arg_at,
                    format!(
                        "invalid JSON pointer `{}`: `~` must be followed by 0 or 1",
                        raw.arg
                    ),
                ));
            }
        }
        ArgRef::Pointer(raw.arg.to_string())
    } else if let Some(bad) = raw.arg.find([':', ',', '(', ')']) {
        return Err((
            raw.arg_at + bad,
            format!("invalid argument name `{}`", raw.arg),
        ));
    } else {
        ArgRef::Name(raw.arg.to_string())
    };
    let path_like = raw.glob.contains('/');
    let mut patterns = vec![raw.glob.to_string()];
    if path_like {
        if !(raw.glob.starts_with('/') || raw.glob.starts_with('*')) {
            return Err((
                raw.glob_at,
                format!(
                    "path pattern `{}` can never match: values are normalised to absolute \
                     paths, so write `${{WORKSPACE}}/{}` or `**/{}`",
                    raw.glob, raw.glob, raw.glob
                ),
            ));
        }
        let mut collapsed = String::with_capacity(raw.glob.len());
        for c in raw.glob.chars() {
            if !(c == '/' && collapsed.ends_with('/')) {
                collapsed.push(c);
            }
        }
        if collapsed.split('/').any(|seg| seg == "." || seg == "..") {
            return Err((
                raw.glob_at,
                format!(
                    "path pattern `{}` can never match: values are normalised, so `.` and `..` \
                     segments never occur",
                    raw.glob
                ),
            ));
        }
        patterns = vec![collapsed.clone()];
        if let Some(base) = collapsed.strip_suffix("/**")
            && !base.is_empty()
        {
            patterns.push(base.to_string());
        }
    }
    let mut set = GlobSetBuilder::new();
    for p in &patterns {
        let glob = GlobBuilder::new(p)
            .literal_separator(path_like)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                (
                    raw.glob_at,
                    format!("invalid pattern `{}`: {}", raw.glob, e.kind()),
                )
            })?;
        set.add(glob);
    }
    let matcher = set
        .build()
        .map_err(|e| (raw.glob_at, format!("invalid pattern `{}`: {e}", raw.glob)))?;
    Ok(Condition {
        arg,
        pattern: raw.glob.to_string(),
        matcher,
        path_like,
    })
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
    fn normalises_paths() {
        assert_eq!(normalize_path("/w/../x", "/w"), "/x");
        assert_eq!(normalize_path("a/./b//c", "/w"), "/w/a/b/c");
        assert_eq!(normalize_path("../../..", "/w"), "/");
        assert_eq!(normalize_path("~/a/../.ssh/k", "/w"), "~/.ssh/k");
        assert_eq!(normalize_path("~/../../x", "/w"), "~/x");
        assert_eq!(normalize_path("~", "/w"), "~");
        assert_eq!(normalize_path("", "/w"), "/w");
        assert_eq!(normalize_path("...", "/w"), "/w/...");
        assert_eq!(
            normalize_path("file:///w/../etc/passwd", "/w"),
            "/etc/passwd"
        );
        assert_eq!(normalize_path("file://localhost/w/%2e%2e/x", "/w"), "/x");
        assert_eq!(normalize_path("file:/w/a", "/w"), "/w/a");
        assert_eq!(normalize_path("https://h/w/a", "/w"), "https://h/w/a");
        assert_eq!(normalize_path("C:\\x", "/w"), "C:\\x");
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
