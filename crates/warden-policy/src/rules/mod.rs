//! Permission rules (CONTRACT §5, stage 5, and the rule targets of §8):
//! `TARGET` or `TARGET(ARG: GLOB, …)`.
//!
//! Grammar and semantics, as enforced here:
//!
//! - `TARGET` names what is decided, by kind: `mcp__S__T` (a tool call),
//!   `resource__S` (reading a resource; one condition, `uri`),
//!   `prompt__S__P` (getting a prompt), `sampling__S` and
//!   `elicitation__S` (a server's requests; no conditions: the Rego
//!   policy decides on their contents). Globs (`*`, `?`, `[…]`, `{a,b}`)
//!   are allowed; `mcp__S` and `prompt__S` without any wildcard are
//!   shorthand for `mcp__S__*` and `prompt__S__*` (as in Claude Code). A
//!   glob whose literal start does not say the kind (`*`, `m*`) is a tool
//!   glob. A target that can never match (a character outside
//!   `[A-Za-z0-9_-]`, a literal start that is no kind's) is a load-time
//!   error. The parser is total: no text makes it panic.
//! - `ARG` is a top-level argument name or a JSON pointer (`/a/b`). Several
//!   conditions must all hold. A missing argument never matches (the
//!   rules stage also reads a tool's arguments with its schema's
//!   defaults, for deny and ask rules only). Each key
//!   is matched as servers bind it ([`keys`]): every key equal to it with
//!   case folded (`PATH` is `path`) names it; `deny`/`ask` fire on any of
//!   them, `allow` needs all of them to hold.
//! - Values are matched in their canonical form ([`crate::canon`]), never
//!   as raw text where the meaning differs:
//!   - a `GLOB` containing `/` is a *path pattern* (absolute, or starting
//!     with `*`; no `.`/`..` segments): it is matched against every path
//!     reading of the value (a relative value is taken relative to the
//!     workspace and to the server's `cwd`; a `file:` URI as the path it
//!     names and as the relative path a server that does not parse URIs
//!     opens; a URI of another scheme as the files a server may open for
//!     it, which only deny and ask rules see: its first reading is a URI);
//!     `*` does not cross `/`, and `DIR/**` also matches `DIR` itself; a
//!     non-ASCII pattern is matched in Unicode NFC and NFD alike (a value
//!     not in NFC is read in both forms too);
//!   - a `GLOB` of the form `scheme://…` (not `file:`; the scheme may be a
//!     glob, `*://…`) is a *URI pattern*, matched against the value's
//!     canonical URI (WHATWG serialisation);
//!   - a `GLOB` that is a JSON number is compared by value with numbers
//!     (`id: 2` matches `2`, `2.0`, `2e0`);
//!   - any other `GLOB` is matched against the text as sent, and, since a
//!     server may hand text to a shell, as the commands a shell runs for
//!     it ([`command`]): an `allow` with a wildcard never holds for a value
//!     with shell syntax, a `deny`/`ask` fires on any command it runs.
//! - `allow` needs a value warden can read with certainty and *every*
//!   reading to match; a value that is uncertain (`~/…`, a `file:` URI with
//!   a fragment, `$HOME/…`, a glob, JSON text…) never satisfies a path or
//!   URI condition of an `allow`,
//!   and the rules stage then asks, saying why. `deny`/`ask` fire when
//!   *any* plausible reading matches (for numbers: also a numeric string
//!   equal in value).
//! - Arrays: `allow` needs a non-empty array whose every element matches;
//!   `deny`/`ask` fire when any element matches.
//! - Wrong types: a value that is neither a string nor (for a number
//!   pattern) a number never satisfies `allow`. For `deny`/`ask`, numbers
//!   and booleans are matched as their canonical JSON text, and `null`,
//!   objects and nested arrays *fire* the rule: a restriction the value
//!   cannot be checked against fails closed.

use std::fmt;
use std::path::PathBuf;

use globset::{Glob, GlobMatcher, GlobSet};
use serde_json::{Number, Value};

use warden_core::{RequestKind, Scope};

use crate::canon::{CanonStr, CanonValue, Reading, Shape, canonical_number, numeric_value};
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
    /// Every value the argument may be to a server, with the name to show
    /// for it ([`keys`]: keys equal when case is folded).
    fn lookup<'a>(&'a self, args: &'a CanonValue) -> Vec<(&'a str, &'a CanonValue)> {
        match self {
            ArgRef::Name(name) => keys::by_name(args, name),
            ArgRef::Pointer(pointer) => keys::by_pointer(args, pointer)
                .into_iter()
                .map(|v| (pointer.as_str(), v))
                .collect(),
        }
    }
    fn as_str(&self) -> &str {
        match self {
            ArgRef::Name(s) | ArgRef::Pointer(s) => s,
        }
    }
}

/// How a condition's `GLOB` is matched.
#[derive(Debug, Clone)]
enum Pattern {
    /// Contains `/`: matched against path readings.
    Path(PathGlobs),
    /// `scheme://…`: matched against canonical URI readings.
    Uri(GlobSet),
    /// A JSON number: compared by value.
    Number(Number),
    /// Anything else: matched against the text as sent.
    Text(GlobMatcher),
}

/// A path condition's globs: its own set, and the globs it was built
/// from (for [`PathIndex`], which joins every rule's).
#[derive(Debug, Clone)]
struct PathGlobs {
    set: GlobSet,
    globs: Vec<Glob>,
}

/// How a path condition is matched for one request: by its own set, or
/// through the request's [`PathHits`] (every rule's path globs in one pass
/// per reading). Both give the same answer.
#[derive(Clone, Copy)]
enum PathMatcher<'h, 'a> {
    Alone,
    Shared {
        hits: &'h PathHits<'h, 'a>,
        slot: usize,
    },
}

impl<'a> PathMatcher<'_, 'a> {
    fn is_match(self, globs: &PathGlobs, path: &'a str) -> bool {
        match self {
            PathMatcher::Alone => globs.set.is_match(path),
            PathMatcher::Shared { hits, slot } => hits.is_match(slot, path),
        }
    }
}

#[derive(Debug, Clone)]
struct Condition {
    arg: ArgRef,
    text: String,
    pattern: Pattern,
}

/// One parsed, checked rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub effect: RuleEffect,
    pub text: String,
    /// `permissions.deny[2] in FILE`.
    pub origin: String,
    pub scope: Scope,
    kind: RequestKind,
    target: GlobMatcher,
    /// The glob `target` was built from.
    target_glob: String,
    /// The target names one tool (or resource…) exactly: no glob, no
    /// `mcp__S` shorthand.
    exact: bool,
    conditions: Vec<Condition>,
}

/// Outcome of matching one rule against one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleMatch {
    No,
    /// Matched; the string explains on what (for reasons).
    Yes(String),
    /// An `allow` rule that would match some reading of a value warden
    /// cannot read with certainty: it does not apply; the string says why.
    Uncertain(String),
}

/// A condition's verdict for one value.
enum Holds {
    Yes(String),
    No,
    Uncertain(String),
}

/// Longest value shown in a reason.
const SHOWN: usize = 200;

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
        let target = compile_target(parsed.tool, parsed.tool_at).map_err(|(c, m)| err(c, m))?;
        match target.kind {
            RequestKind::Sampling | RequestKind::Elicitation if !parsed.conditions.is_empty() => {
                return Err(err(
                    parsed.conditions[0].arg_at,
                    format!(
                        "`{}` rules take no argument conditions: write `{}` and decide on the \
                         request's contents in a Rego policy (input.{})",
                        target.kind, parsed.tool, target.kind
                    ),
                ));
            }
            RequestKind::Resource => {
                if let Some(c) = parsed.conditions.iter().find(|c| c.arg != "uri") {
                    return Err(err(
                        c.arg_at,
                        format!(
                            "`resource` rules have one condition, `uri` (found `{}`)",
                            c.arg
                        ),
                    ));
                }
            }
            _ => {}
        }
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
            scope: source.scope,
            kind: target.kind,
            target: target.matcher,
            target_glob: target.glob,
            exact: target.exact,
            conditions,
        })
    }

    /// What kind of request the rule is about.
    pub fn kind(&self) -> RequestKind {
        self.kind
    }

    /// True when the rule has no argument conditions.
    pub fn is_unconditional(&self) -> bool {
        self.conditions.is_empty()
    }

    /// True when the target names exactly one tool (`mcp__S__T`, no glob,
    /// not the `mcp__S` shorthand): what CONTRACT §5's annotations
    /// exception requires of an operator's `allow`.
    pub fn names_tool_exactly(&self) -> bool {
        self.kind == RequestKind::Tool && self.exact
    }

    /// The one name the target matches, when it is exact and every
    /// character is a name character (so string equality is what the
    /// glob would decide): for [`RuleIndex`].
    pub(crate) fn literal_target(&self) -> Option<&str> {
        let name_chars = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        (self.exact && name_chars(&self.target_glob)).then_some(self.target_glob.as_str())
    }

    /// The glob the target is matched with.
    pub(crate) fn target_glob(&self) -> &str {
        &self.target_glob
    }

    /// Whether this is a `deny` without conditions that matches every
    /// target of `kind` starting with `prefix` (`prompt__S__` for every
    /// prompt of server S): its target glob is a literal start that
    /// `prefix` begins with, then `*` (`prompt__S__*`, `prompt__*`, the
    /// shorthand `prompt__S`). Any other glob is not taken to cover them
    /// all, even when it might.
    pub(crate) fn denies_every_target_from(&self, kind: RequestKind, prefix: &str) -> bool {
        if self.effect != RuleEffect::Deny || !self.conditions.is_empty() || self.kind != kind {
            return false;
        }
        let Some(base) = self.target_glob.strip_suffix('*') else {
            return false;
        };
        let base = base.trim_end_matches('*');
        !base.contains(parse::GLOB_META) && !base.contains('\\') && prefix.starts_with(base)
    }

    /// Whether this is a `deny` rule on `target` (`resource__S`) that
    /// fires for every URI starting with `fixed` (a resource template's
    /// literal start, before its first expression): its `uri` pattern is
    /// `BASE**`, a literal `BASE` ending in `/` that `fixed` begins with.
    /// Whatever a template's expressions expand to, the URI as sent starts
    /// with `fixed`, and a `deny` URI pattern fires on the URI as sent too
    /// (`Condition::fires`), so every expansion is denied. Path patterns
    /// (`file:` URIs) are never taken to cover a template: a `..` in an
    /// expansion moves the path it names.
    pub(crate) fn denies_every_uri_from(&self, target: &str, fixed: &str) -> bool {
        if self.effect != RuleEffect::Deny || !self.matches_target(RequestKind::Resource, target) {
            return false;
        }
        let [cond] = self.conditions.as_slice() else {
            return false;
        };
        if !matches!(cond.pattern, Pattern::Uri(_)) {
            return false;
        }
        let Some(base) = cond.text.strip_suffix("**") else {
            return false;
        };
        base.ends_with('/')
            && !base.contains(parse::GLOB_META)
            && !base.contains('\\')
            && fixed.starts_with(base)
    }

    /// Whether the rule's target matches a qualified tool name.
    pub fn matches_tool(&self, qualified: &str) -> bool {
        self.matches_target(RequestKind::Tool, qualified)
    }

    /// Whether the rule's target matches a request of `kind` on `name`
    /// (`mcp__S__T`, `resource__S`, `prompt__S__P`, `sampling__S`,
    /// `elicitation__S`).
    pub fn matches_target(&self, kind: RequestKind, name: &str) -> bool {
        self.kind == kind && self.target.is_match(name)
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

    /// Matches the rule against one tool call's canonical arguments.
    #[cfg(test)]
    pub fn matches(&self, qualified: &str, args: &CanonValue) -> RuleMatch {
        self.matches_request(RequestKind::Tool, qualified, args)
    }

    /// Matches the rule against one request of any kind. For a
    /// `resource`, `args` is `{"uri": …}` with the URI read by
    /// [`crate::canon::canon_resource_uri`] (a `file:` URI as its path,
    /// another scheme as its canonical URI). Each path condition is
    /// matched with its own globs (the oracle of `paths.rs`'s test).
    #[cfg(test)]
    pub fn matches_request(&self, kind: RequestKind, name: &str, args: &CanonValue) -> RuleMatch {
        self.matches_request_with(kind, name, args, None)
    }

    /// Matches the rule against one request of any kind (for a
    /// `resource`, `args` is `{"uri": …}` with the URI read by
    /// [`crate::canon::canon_resource_uri`]), with the request's shared
    /// path matches and this rule's first slot in them (the rules stage),
    /// or each path condition by its own globs (`None`).
    pub(crate) fn matches_request_with<'a>(
        &self,
        kind: RequestKind,
        name: &str,
        args: &'a CanonValue,
        shared: Option<(&PathHits<'_, 'a>, usize)>,
    ) -> RuleMatch {
        if !self.matches_target(kind, name) {
            return RuleMatch::No;
        }
        let mut details = Vec::new();
        let mut uncertain = Vec::new();
        for (i, cond) in self.conditions.iter().enumerate() {
            let paths = match shared {
                Some((hits, base)) => PathMatcher::Shared {
                    hits,
                    slot: base + i,
                },
                None => PathMatcher::Alone,
            };
            match self.eval_condition(cond, args, paths) {
                Holds::Yes(detail) => details.push(detail),
                Holds::No => return RuleMatch::No,
                Holds::Uncertain(why) => uncertain.push(why),
            }
        }
        if uncertain.is_empty() {
            RuleMatch::Yes(details.join(", "))
        } else {
            RuleMatch::Uncertain(uncertain.join("; "))
        }
    }

    fn eval_condition<'a>(
        &self,
        cond: &Condition,
        args: &'a CanonValue,
        paths: PathMatcher<'_, 'a>,
    ) -> Holds {
        let found = cond.arg.lookup(args);
        if found.is_empty() {
            return Holds::No;
        }
        let restrict = self.effect != RuleEffect::Allow;
        // Several keys may name the argument (`path`, `PATH`): a
        // restriction fires on any, an allow needs every one.
        let mut shown = Vec::with_capacity(found.len());
        let mut uncertain = None;
        for (name, value) in found {
            match self.eval_value(cond, name, value, paths) {
                Holds::Yes(detail) if restrict => return Holds::Yes(detail),
                Holds::Yes(detail) => shown.push(detail),
                Holds::No if restrict => {}
                Holds::No => return Holds::No,
                Holds::Uncertain(why) => {
                    uncertain.get_or_insert(why);
                }
            }
        }
        match uncertain {
            Some(why) => Holds::Uncertain(why),
            None if shown.is_empty() => Holds::No,
            None => Holds::Yes(shown.join(", ")),
        }
    }

    /// One value of a condition's argument, under the key `name`.
    fn eval_value<'a>(
        &self,
        cond: &Condition,
        name: &str,
        value: &'a CanonValue,
        paths: PathMatcher<'_, 'a>,
    ) -> Holds {
        let restrict = self.effect != RuleEffect::Allow;
        match value {
            CanonValue::Array(items) if restrict => items
                .iter()
                .enumerate()
                .find_map(|(i, item)| {
                    cond.fires(item, paths)
                        .map(|d| Holds::Yes(format!("{name}[{i}]={d}")))
                })
                .unwrap_or(Holds::No),
            CanonValue::Array(items) => {
                if items.is_empty() {
                    return Holds::No;
                }
                let mut shown = Vec::with_capacity(items.len());
                let mut uncertain = None;
                for (i, item) in items.iter().enumerate() {
                    match cond.allows(item, paths) {
                        Holds::Yes(d) => shown.push(d),
                        Holds::No => return Holds::No,
                        Holds::Uncertain(why) => {
                            uncertain.get_or_insert(format!("{name}[{i}]: {why}"));
                        }
                    }
                }
                match uncertain {
                    Some(why) => Holds::Uncertain(why),
                    None => Holds::Yes(format!("{name}=[{}]", shown.join(", "))),
                }
            }
            other if restrict => match cond.fires(other, paths) {
                Some(d) => Holds::Yes(format!("{name}={d}")),
                None => Holds::No,
            },
            other => match cond.allows(other, paths) {
                Holds::Yes(d) => Holds::Yes(format!("{name}={d}")),
                Holds::Uncertain(why) => Holds::Uncertain(format!("{name}: {why}")),
                Holds::No => Holds::No,
            },
        }
    }
}

fn shown(s: &str) -> String {
    if s.len() <= SHOWN {
        return s.to_string();
    }
    let cut = (0..=SHOWN)
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}…", &s[..cut])
}

fn numbers_equal(a: &Number, b: &Number) -> bool {
    let (a, b) = (canonical_number(a), canonical_number(b));
    match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
        (Some(x), Some(y), _, _) => x == y,
        (_, _, Some(x), Some(y)) => x == y,
        _ => a.as_f64().zip(b.as_f64()).is_some_and(|(x, y)| x == y),
    }
}

impl Condition {
    /// For `allow`: does the value satisfy the condition?
    fn allows<'a>(&self, value: &'a CanonValue, paths: PathMatcher<'_, 'a>) -> Holds {
        match (&self.pattern, value) {
            (Pattern::Path(m), CanonValue::Str(s)) => readings_hold(s, |r| match r {
                Reading::Path(p) => paths.is_match(m, p),
                Reading::Uri(_) => false,
            }),
            (Pattern::Uri(m), CanonValue::Str(s)) => {
                // Only URI readings can satisfy a URI pattern; the path a
                // server that does not parse URIs would open is a file in
                // the workspace, not the resource the pattern names.
                let uris: Vec<&str> = s
                    .readings
                    .iter()
                    .filter_map(|r| match r {
                        Reading::Uri(u) => Some(u.as_str()),
                        Reading::Path(_) => None,
                    })
                    .collect();
                let all = !uris.is_empty() && uris.iter().all(|u| m.is_match(u));
                let any = uris.iter().any(|u| m.is_match(u));
                match &s.uncertain {
                    None if all => Holds::Yes(shown(&s.primary)),
                    Some(why) if any => Holds::Uncertain(format!(
                        "`{}` cannot be read with certainty: {why}",
                        shown(&s.raw)
                    )),
                    _ => Holds::No,
                }
            }
            (Pattern::Number(_), CanonValue::Str(s)) if s.raw == self.text => {
                Holds::Yes(format!("<value matching `{}`>", self.text))
            }
            (Pattern::Number(n), CanonValue::Number(v)) if numbers_equal(n, v) => {
                Holds::Yes(v.to_string())
            }
            // Not echoed: a non-path value may be a secret, and reasons
            // reach the audit log and the model unredacted.
            (Pattern::Text(m), CanonValue::Str(s)) if m.is_match(&s.raw) => {
                // A wildcard would also cover what a shell runs besides
                // the named command (`ls*` and `ls; cat /etc/shadow`).
                match command::shell_syntax(&s.raw) {
                    Some(c) if command::has_wildcard(&self.text) => Holds::Uncertain(format!(
                        "the value holds shell syntax ({}): a server that passes it to a \
                         shell runs more than `{}` names",
                        c.escape_debug(),
                        self.text
                    )),
                    _ => Holds::Yes(format!("<value matching `{}`>", self.text)),
                }
            }
            _ => Holds::No,
        }
    }

    /// For `deny`/`ask`: does this (non-array-level) value fire the
    /// condition? Returns what to show in the reason.
    fn fires<'a>(&self, value: &'a CanonValue, paths: PathMatcher<'_, 'a>) -> Option<String> {
        let hidden = || format!("<value matching `{}`>", self.text);
        match value {
            CanonValue::Str(s) => match &self.pattern {
                Pattern::Path(m) => s.readings.iter().find_map(|r| match r {
                    Reading::Path(p) if paths.is_match(m, p) => Some(reading_shown(s, p)),
                    _ => None,
                }),
                Pattern::Uri(m) => {
                    let hit = s.readings.iter().find_map(|r| match r {
                        Reading::Uri(u) if m.is_match(u) => Some(reading_shown(s, u)),
                        _ => None,
                    });
                    hit.or_else(|| m.is_match(&s.raw).then(|| shown(&s.raw)))
                }
                Pattern::Number(n) => {
                    let by_value = n
                        .as_f64()
                        .zip(numeric_value(value))
                        .is_some_and(|(a, b)| a == b);
                    (s.raw == self.text || by_value).then(hidden)
                }
                Pattern::Text(m) => {
                    if m.is_match(&s.raw)
                        || m.is_match(&s.primary)
                        || s.readings.iter().any(|r| m.is_match(r.as_str()))
                    {
                        return Some(hidden());
                    }
                    match command::any_command(&s.raw, &self.text, |c| m.is_match(c)) {
                        command::CommandHit::Yes => Some(format!(
                            "<value running a command matching `{}` in a shell>",
                            self.text
                        )),
                        command::CommandHit::TooLong => {
                            Some("a value too long to read as shell commands (fails closed)".into())
                        }
                        command::CommandHit::No => None,
                    }
                }
            },
            CanonValue::Number(v) => match &self.pattern {
                // Also as JavaScript reads JSON numbers (a double): a Node
                // server reads 9007199254740993 as 9007199254740992.
                Pattern::Number(n) => (numbers_equal(n, v)
                    || n.as_f64().zip(v.as_f64()).is_some_and(|(a, b)| a == b))
                .then(|| v.to_string()),
                other => glob_text(other, &v.to_string()).then(hidden),
            },
            CanonValue::Bool(b) => match &self.pattern {
                Pattern::Number(_) => None,
                other => glob_text(other, if *b { "true" } else { "false" }).then(hidden),
            },
            CanonValue::Null => Some("null (not a string: fails closed)".into()),
            CanonValue::Array(_) => Some("a nested array (not a string: fails closed)".into()),
            CanonValue::Object(_) => Some("an object (not a string: fails closed)".into()),
        }
    }
}

/// A reading that matched, shown with the value as sent when they differ.
fn reading_shown(s: &CanonStr, reading: &str) -> String {
    if reading == s.primary {
        shown(reading)
    } else {
        format!("{} (read as {})", shown(&s.raw), shown(reading))
    }
}

fn glob_text(pattern: &Pattern, text: &str) -> bool {
    match pattern {
        Pattern::Path(m) => m.set.is_match(text),
        Pattern::Uri(m) => m.is_match(text),
        Pattern::Text(m) => m.is_match(text),
        Pattern::Number(_) => false,
    }
}

/// `allow` on a path condition: a certain value whose every reading
/// matches; an uncertain value some reading of which matches is
/// `Uncertain` (the rules stage asks, saying why).
fn readings_hold<'a>(s: &'a CanonStr, matches: impl Fn(&'a Reading) -> bool) -> Holds {
    let all = !s.readings.is_empty() && s.readings.iter().all(&matches);
    match &s.uncertain {
        None if all => Holds::Yes(shown(&s.primary)),
        // A certain value with another meaning the pattern does not cover:
        // a `file:` URI is also a relative path to a server that does not
        // parse URIs; a relative path is opened from the server's working
        // directory and, by servers that resolve against their root, from
        // the workspace.
        None if s.readings.first().is_some_and(&matches) => {
            let other = s
                .readings
                .iter()
                .find(|r| !matches(r))
                .map_or("", Reading::as_str);
            let how = if matches!(s.shape, Shape::FileUri | Shape::Uri) {
                "a server that does not parse URIs opens it relative to its working directory"
            } else {
                "a relative path is opened from the server's working directory and, by servers \
                 that resolve it against their root, from the workspace"
            };
            Holds::Uncertain(format!(
                "`{}` also reads as `{}` ({how})",
                shown(&s.raw),
                shown(other)
            ))
        }
        None => Holds::No,
        Some(why) if s.readings.iter().any(&matches) => Holds::Uncertain(format!(
            "`{}` cannot be read with certainty: {why}",
            shown(&s.raw)
        )),
        Some(_) => Holds::No,
    }
}

mod command;
mod index;
mod keys;
mod parse;
mod paths;

pub(crate) use index::RuleIndex;
pub(crate) use paths::{PathHits, PathIndex};

use parse::{compile_condition, compile_target, parse};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::{Context, Limits, canonicalize};
    use proptest::prelude::*;
    use serde_json::json;

    const WS: &str = "/w";

    fn rule(effect: RuleEffect, text: &str) -> Result<Rule, RuleError> {
        Rule::compile(&RuleSource {
            effect,
            text: text.into(),
            scope: Scope::User,
            file: "/cfg.json".into(),
            index: 0,
        })
    }

    fn canon(args: Value) -> CanonValue {
        canonicalize(
            &args,
            &Context {
                workspace: WS,
                home: Some("/home/u"),
                ..Default::default()
            },
            &Limits::default(),
        )
        .unwrap()
        .value
    }

    fn resource(uri: &str) -> CanonValue {
        let ctx = Context {
            workspace: WS,
            ..Default::default()
        };
        let mut map = std::collections::BTreeMap::new();
        map.insert(
            "uri".to_string(),
            CanonValue::Str(Box::new(crate::canon::canon_resource_uri(uri, &ctx))),
        );
        CanonValue::Object(map)
    }

    fn m(effect: RuleEffect, text: &str, args: Value) -> RuleMatch {
        rule(effect, text)
            .unwrap()
            .matches("mcp__fs__read", &canon(args))
    }

    fn yes(r: &RuleMatch) -> bool {
        matches!(r, RuleMatch::Yes(_))
    }

    #[test]
    fn server_shorthand() {
        let r = rule(RuleEffect::Deny, "mcp__fs").unwrap();
        assert!(r.matches_tool("mcp__fs__read"));
        assert!(!r.matches_tool("mcp__fsx__read"));
        assert!(!r.names_tool_exactly());
        assert!(
            rule(RuleEffect::Allow, "mcp__fs__read")
                .unwrap()
                .names_tool_exactly()
        );
        assert!(
            !rule(RuleEffect::Allow, "mcp__fs__*")
                .unwrap()
                .names_tool_exactly()
        );
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

    /// These used to slice past the end of the text.
    #[test]
    fn short_targets_are_errors_not_panics() {
        for text in [
            "mcp_",
            "mc",
            "mcp",
            "m",
            "mcp__",
            "resource__",
            "prompt_",
            "(",
            ")",
            "a(",
            "(b)",
            "x()",
        ] {
            assert!(rule(RuleEffect::Deny, text).is_err(), "{text}");
        }
    }

    /// A deny on a number fires on every integer a JavaScript server reads
    /// as it (doubles above 2^53 are every other integer).
    #[test]
    fn numbers_are_also_read_as_doubles() {
        let deny = "mcp__fs__read(id: 9007199254740992)";
        for id in [json!(9007199254740992u64), json!(9007199254740993u64)] {
            assert!(yes(&m(RuleEffect::Deny, deny, json!({ "id": id }))), "{id}");
        }
        assert!(!yes(&m(
            RuleEffect::Deny,
            deny,
            json!({"id": 9007199254740994u64})
        )));
        let allow = "mcp__fs__read(id: 9007199254740992)";
        assert!(!yes(&m(
            RuleEffect::Allow,
            allow,
            json!({"id": 9007199254740993u64})
        )));
    }

    /// Keys equal with case folded name the argument, at every level of a
    /// pointer too: a deny fires on any, an allow needs all.
    #[test]
    fn every_spelling_of_a_key_is_read() {
        let deny = "mcp__fs__read(/options/cwd: /etc/**)";
        let hit = m(RuleEffect::Deny, deny, json!({"OPTIONS": {"Cwd": "/etc"}}));
        assert!(yes(&hit), "{hit:?}");
        let hit = m(
            RuleEffect::Deny,
            "mcp__fs__read(path: /etc/**)",
            json!({"PATH": "/etc/x"}),
        );
        assert!(yes(&hit), "{hit:?}");
        let allow = "mcp__fs__read(paths: /w/**)";
        let both = json!({"paths": ["/w/a"], "path\u{17f}": ["/etc/x"]});
        assert_eq!(m(RuleEffect::Allow, allow, both), RuleMatch::No);
        let both = json!({"paths": ["/w/a"], "PATHS": ["/w/b"]});
        assert!(yes(&m(RuleEffect::Allow, allow, both)));
        // A pointer into JSON text reaches the text (the SDK parses it).
        let text = json!({"paths": "[\"/etc/x\"]"});
        let deny = "mcp__fs__read(/paths/0: /etc/**)";
        assert!(yes(&m(RuleEffect::Deny, deny, text.clone())));
        let allow = "mcp__fs__read(/paths/0: /etc/**)";
        assert!(matches!(
            m(RuleEffect::Allow, allow, text),
            RuleMatch::Uncertain(_)
        ));
    }

    #[test]
    fn targets_of_every_kind() {
        let r = rule(RuleEffect::Deny, "resource__fs(uri: /w/secrets/**)").unwrap();
        assert_eq!(r.kind(), RequestKind::Resource);
        assert!(r.matches_target(RequestKind::Resource, "resource__fs"));
        assert!(!r.matches_target(RequestKind::Tool, "resource__fs"));
        let hit = r.matches_request(
            RequestKind::Resource,
            "resource__fs",
            &resource("file:///w/secrets/key"),
        );
        assert!(yes(&hit), "{hit:?}");
        // A fragment cannot hide the path from a deny …
        let hit = r.matches_request(
            RequestKind::Resource,
            "resource__fs",
            &resource("file:///w/secrets/key#/../../public/x"),
        );
        assert!(yes(&hit), "{hit:?}");
        // … nor satisfy an allow.
        let allow = rule(RuleEffect::Allow, "resource__fs(uri: /w/public/**)").unwrap();
        let got = allow.matches_request(
            RequestKind::Resource,
            "resource__fs",
            &resource("file:///w/secrets/key#/../../public/x"),
        );
        assert!(matches!(got, RuleMatch::Uncertain(_)), "{got:?}");
        // A resource URI is always a URI: its path alone decides.
        assert!(yes(&allow.matches_request(
            RequestKind::Resource,
            "resource__fs",
            &resource("file:///w/public/a")
        )));
        let web = rule(
            RuleEffect::Allow,
            "resource__web(uri: https://example.com/docs/**)",
        )
        .unwrap();
        assert!(yes(&web.matches_request(
            RequestKind::Resource,
            "resource__web",
            &resource("HTTPS://EXAMPLE.com:443/docs/a/../b")
        )));
        assert!(!yes(&web.matches_request(
            RequestKind::Resource,
            "resource__web",
            &resource("https://example.com/docs/../private")
        )));
        let p = rule(RuleEffect::Ask, "prompt__notes__summarise(topic: *secret*)").unwrap();
        assert_eq!(p.kind(), RequestKind::Prompt);
        assert!(!p.names_tool_exactly());
        assert!(
            rule(RuleEffect::Ask, "prompt__notes")
                .unwrap()
                .matches_target(RequestKind::Prompt, "prompt__notes__x")
        );
        assert_eq!(
            rule(RuleEffect::Ask, "sampling__*").unwrap().kind(),
            RequestKind::Sampling
        );
        assert_eq!(
            rule(RuleEffect::Deny, "elicitation__srv").unwrap().kind(),
            RequestKind::Elicitation
        );
        assert_eq!(
            rule(RuleEffect::Deny, "*").unwrap().kind(),
            RequestKind::Tool
        );
        assert_eq!(
            rule(RuleEffect::Deny, "r*").unwrap().kind(),
            RequestKind::Resource
        );
        for bad in [
            "sampling__srv(maxTokens: 5)",
            "elicitation__a__b",
            "resource__fs(path: /x)",
            "resource__",
            "prompt__x__",
            "resource__fs(uri: file:///x/**)",
        ] {
            assert!(rule(RuleEffect::Deny, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_are_canonical() {
        let deny = |args| m(RuleEffect::Deny, "mcp__*__*(path: /etc/**)", args);
        for p in [
            "//etc/shadow",
            "/etc/./shadow",
            "/w/../etc/shadow",
            "~/../../../../../../etc/shadow",
            "file:///etc/shadow",
            "file:///w/x#/../../../etc/shadow",
            "file:///etc/shadow?x",
            "file:///w/a\\..\\..\\etc\\shadow",
            "file:///w/%2e%2e/etc/shadow",
            "file:///w/a%2f..%2f..%2fetc%2fshadow",
            "../etc/shadow",
        ] {
            assert!(yes(&deny(json!({"path": p}))), "{p}");
        }
        let allow = |args| m(RuleEffect::Allow, "mcp__fs__read(path: /w/public/**)", args);
        assert!(yes(&allow(json!({"path": "/w/public/a"}))));
        assert!(yes(&allow(json!({"path": "public/./a"}))));
        // The literal reading (`/w/file:/w/public/a`) is not under /w/public:
        // a server that does not parse URIs would open that.
        let literal = allow(json!({"path": "file:///w/public/a"}));
        assert!(matches!(literal, RuleMatch::Uncertain(_)), "{literal:?}");
        let ws = m(
            RuleEffect::Allow,
            "mcp__fs__read(path: /w/**)",
            json!({"path": "file:///w/public/a"}),
        );
        assert!(yes(&ws), "{ws:?}");
        for p in [
            "file:///w/secrets/key#/../../public/x",
            "~/public/x",
            "/w/public/../secrets",
            "file:///w/public/%2e%2e/x",
        ] {
            assert!(!yes(&allow(json!({"path": p}))), "{p}");
        }
        // A file URI outside the workspace also has the literal reading
        // (`/w/file:/data/x`), which an allow for /data/** does not cover.
        let data = m(
            RuleEffect::Allow,
            "mcp__fs__read(path: /data/**)",
            json!({"path": "file:///data/x"}),
        );
        assert!(matches!(data, RuleMatch::Uncertain(_)), "{data:?}");
    }

    #[test]
    fn numbers_by_value() {
        for v in [
            json!(2),
            json!(2.0),
            serde_json::from_str::<Value>("2e0").unwrap(),
            json!("2.0"),
            json!(" 2"),
        ] {
            assert!(
                yes(&m(
                    RuleEffect::Deny,
                    "mcp__fs__read(id: 2)",
                    json!({"id": v})
                )),
                "{v}"
            );
        }
        assert!(!yes(&m(
            RuleEffect::Deny,
            "mcp__fs__read(id: 2)",
            json!({"id": 3})
        )));
        assert!(yes(&m(
            RuleEffect::Allow,
            "mcp__fs__read(id: 2)",
            json!({"id": 2.0})
        )));
        assert!(!yes(&m(
            RuleEffect::Allow,
            "mcp__fs__read(id: 2)",
            json!({"id": "2.0"})
        )));
    }

    #[test]
    fn braces_keep_commas() {
        let r = rule(
            RuleEffect::Deny,
            "mcp__*__*(path: **/{.env,.ssh/**}, mode: w)",
        )
        .unwrap();
        let args = canon(json!({"path": "/w/.env", "mode": "w"}));
        assert!(yes(&r.matches("mcp__a__b", &args)));
    }

    fn canon_in(args: Value, ctx: &Context<'_>) -> CanonValue {
        canonicalize(&args, ctx, &Limits::default()).unwrap().value
    }

    fn uncertain(r: &RuleMatch) -> bool {
        matches!(r, RuleMatch::Uncertain(_))
    }

    /// Class 1: a URI of another scheme is also the paths a server may
    /// open for it; a path `allow` still never holds for it.
    /// Spellings of a host that reach it: a trailing dot, an IPv4-mapped
    /// IPv6 address, a web scheme without `//` (WHATWG), and an IPv6
    /// literal in the pattern itself.
    #[test]
    fn every_spelling_of_a_host_meets_a_uri_rule() {
        let deny = |pattern: &str, url: &str| {
            m(
                RuleEffect::Deny,
                &format!("mcp__fs__read(url: {pattern})"),
                json!({ "url": url }),
            )
        };
        for url in [
            "https://evil.com./x",
            "https://EVIL.com../x",
            "https://evil.com%2e/x",
            "https:evil.com/x",
            "https:/evil.com/x",
            "https:\\\\evil.com/x",
        ] {
            assert!(yes(&deny("https://evil.com/**", url)), "{url}");
        }
        for url in [
            "http://[::ffff:127.0.0.1]/x",
            "http://[::ffff:7f00:1]/x",
            "http://0.0.0.0/x",
            "http://0/x",
            "http://[::]/x",
            "http://localhost/x",
            "http://LOCALHOST./x",
            "http://api.localhost/x",
        ] {
            assert!(yes(&deny("http://127.0.0.1/**", url)), "{url}");
        }
        for url in ["http://[::1]/x", "http://[0:0::1]/x"] {
            assert!(yes(&deny("http://[::1]/**", url)), "{url}");
        }
        // A pattern for any scheme is a URI pattern (it was a path pattern
        // that never matched a URL).
        for pattern in ["*://evil.com/**", "{http,https,gopher}://evil.com/**"] {
            for url in [
                "https://evil.com/x",
                "gopher://evil.com/x",
                "https:evil.com/x",
            ] {
                assert!(yes(&deny(pattern, url)), "{pattern} {url}");
            }
            assert!(
                !yes(&deny(pattern, "https://good.com/evil.com/x")),
                "{pattern}"
            );
        }
        // Nor does an allow hold for them.
        let allow = "mcp__fs__read(url: https://evil.com/**)";
        for url in ["https://evil.com./x", "https:evil.com/x"] {
            assert!(
                !yes(&m(RuleEffect::Allow, allow, json!({ "url": url }))),
                "{url}"
            );
        }
    }

    #[test]
    fn other_scheme_uris_meet_path_rules() {
        let deny = |uri: &str| {
            m(
                RuleEffect::Deny,
                "mcp__*__*(uri: /etc/**)",
                json!({ "uri": uri }),
            )
        };
        for uri in [
            "x:///etc/shadow",
            "http://localhost/etc/shadow",
            "https://h/etc/x",
            "notes://etc/shadow",
        ] {
            assert!(yes(&deny(uri)), "{uri}");
        }
        assert!(!yes(&deny("https://h/srv/x")));
        for uri in ["x:///w/public/a", "http://localhost/w/public/a"] {
            let got = m(
                RuleEffect::Allow,
                "mcp__fs__read(uri: /w/public/**)",
                json!({ "uri": uri }),
            );
            assert_eq!(got, RuleMatch::No, "{uri}");
        }
        // Resources: `resource__S(uri: GLOB)` with a path pattern.
        let r = rule(RuleEffect::Deny, "resource__*(uri: **/.ssh/**)").unwrap();
        let hit = r.matches_request(
            RequestKind::Resource,
            "resource__notes",
            &resource("notes://.ssh/id_rsa"),
        );
        assert!(yes(&hit), "{hit:?}");
        let allow = rule(RuleEffect::Allow, "resource__notes(uri: /**)").unwrap();
        let got = allow.matches_request(
            RequestKind::Resource,
            "resource__notes",
            &resource("notes://public/a"),
        );
        assert_eq!(got, RuleMatch::No);
    }

    /// A resource URI the rules read one way and the server another:
    /// servers percent-decode the URI they are asked for (once, or again
    /// after a proxy or a framework decoded it first), so a deny on
    /// `secret://vault/key*` must fire on `secret://vault/%6Bey`, on
    /// `%256Bey`, on an encoded `/` or `..` that climbs into the denied
    /// place, and on any case of scheme, host or hex; an allow must cover
    /// every reading, decoded and not.
    #[test]
    fn percent_escapes_in_resource_uris_meet_uri_rules() {
        let hit = |effect: RuleEffect, pattern: &str, uri: &str| {
            rule(effect, &format!("resource__v(uri: {pattern})"))
                .unwrap()
                .matches_request(RequestKind::Resource, "resource__v", &resource(uri))
        };
        for uri in [
            "secret://vault/%6Bey",
            "secret://vault/%6bey",
            "secret://vault/%256Bey",
            "secret://vault/%25256Bey",
            "SECRET://VAULT/%6Bey",
            "Secret://Vault/k%65y",
            "secret://vault/pub/%2e%2e/key",
            "secret://vault/pub/%252e%252e/key",
            "secret://vault/pub%2F..%2Fkey",
            "secret://%76ault/key",
        ] {
            let got = hit(RuleEffect::Deny, "secret://vault/key*", uri);
            assert!(yes(&got), "{uri}: {got:?}");
        }
        // A pattern's scheme and host are read in any case.
        for uri in ["secret://vault/key", "SECRET://VAULT/key"] {
            let got = hit(RuleEffect::Deny, "Secret://Vault/key*", uri);
            assert!(yes(&got), "{uri}: {got:?}");
        }
        // `file:` URIs are matched as their path, decoded as often.
        for uri in [
            "file:///etc/%73ecret",
            "file:///etc/%2573ecret",
            "FILE://LOCALHOST/etc/%2573ecret",
            "file:///etc/x%2F..%2Fsecret",
            "file:///tmp/%2e%2e/etc/secret",
            "file:///tmp/%252e%252e/etc/secret",
        ] {
            let got = hit(RuleEffect::Deny, "/etc/secret*", uri);
            assert!(yes(&got), "{uri}: {got:?}");
        }
        // Path patterns see the decoded path of the URI too.
        for uri in ["secret://vault/%2565tc/x", "x:///%2565tc/shadow"] {
            let got = hit(RuleEffect::Deny, "**/etc/**", uri);
            assert!(yes(&got), "{uri}: {got:?}");
        }
        // An allow of the public part holds for a plain escape there, and
        // never for a URI one of whose readings leaves it.
        let allow = |uri: &str| hit(RuleEffect::Allow, "secret://vault/pub/**", uri);
        assert!(yes(&allow("secret://vault/pub/%61")), "plain escape");
        for uri in [
            "secret://vault/pub/%2e%2e/key",
            "secret://vault/pub/%252e%252e/key",
            "secret://vault/pub/%2E%2E%2Fkey",
        ] {
            assert!(!yes(&allow(uri)), "{uri}");
        }
    }

    /// Class 2: JSON text.
    #[test]
    fn json_text_meets_path_rules_inside() {
        let args = json!({"paths": "[\"secrets/key\"]"});
        assert!(yes(&m(
            RuleEffect::Deny,
            "mcp__fs__read(paths: /w/secrets/**)",
            args.clone()
        )));
        assert!(uncertain(&m(
            RuleEffect::Allow,
            "mcp__fs__read(paths: /w/**)",
            args
        )));
    }

    /// Class 3: a pattern and a value in different Unicode forms.
    #[test]
    fn unicode_forms_meet() {
        let nfc = "donn\u{e9}es";
        let nfd = "donne\u{301}es";
        for (pattern, value) in [(nfc, nfd), (nfd, nfc), (nfc, nfc), (nfd, nfd)] {
            let deny = m(
                RuleEffect::Deny,
                &format!("mcp__fs__read(path: /w/{pattern}/**)"),
                json!({ "path": format!("/w/{value}/key") }),
            );
            assert!(yes(&deny), "{pattern:?} {value:?}: {deny:?}");
            let allow = m(
                RuleEffect::Allow,
                &format!("mcp__fs__read(path: /w/{pattern}/**)"),
                json!({ "path": format!("/w/{value}/key") }),
            );
            // A composed value is certain: the allow holds whichever form
            // the pattern is in; a decomposed one is asked about.
            if value == nfc {
                assert!(yes(&allow), "{pattern:?} {value:?}: {allow:?}");
            } else {
                assert!(uncertain(&allow), "{pattern:?} {value:?}: {allow:?}");
            }
        }
    }

    /// Class 4: the server's working directory.
    #[test]
    fn relative_paths_meet_rules_from_the_server_cwd() {
        let ctx = Context {
            workspace: WS,
            cwd: Some("/w/secrets"),
            ..Default::default()
        };
        let args = canon_in(json!({"path": "key"}), &ctx);
        let deny = rule(RuleEffect::Deny, "mcp__fs__read(path: /w/secrets/**)").unwrap();
        assert!(yes(&deny.matches("mcp__fs__read", &args)));
        // The allow needs both readings.
        let allow = rule(RuleEffect::Allow, "mcp__fs__read(path: /w/*)").unwrap();
        let got = allow.matches("mcp__fs__read", &args);
        assert!(uncertain(&got), "{got:?}");
        let both = rule(RuleEffect::Allow, "mcp__fs__read(path: /w/**)").unwrap();
        assert!(yes(&both.matches("mcp__fs__read", &args)));
    }

    /// Classes 5–7 and 9: `~` at the server's HOME, variables, globs,
    /// `;params`: deny rules see them, no allow holds.
    #[test]
    fn expansions_meet_deny_rules_and_no_allow() {
        let homes = ["/tmp/home".to_string()];
        let ctx = Context {
            workspace: WS,
            home: Some("/root"),
            homes: &homes,
            ..Default::default()
        };
        let deny = rule(RuleEffect::Deny, "mcp__fs__read(path: /tmp/outside/**)").unwrap();
        let allow = rule(RuleEffect::Allow, "mcp__fs__read(path: /w/**)").unwrap();
        for value in [
            "~/../outside/victim",
            "$HOME/../outside/victim",
            "${HOME}/../../../tmp/outside/victim",
            "/tmp/outside/*",
            "/tmp/outside/vict[i]m",
        ] {
            let args = canon_in(json!({ "path": value }), &ctx);
            assert!(yes(&deny.matches("mcp__fs__read", &args)), "{value}");
        }
        for value in ["/w/secret[s]/key", "secret*/key", "/w/public/..;x", "$X/a"] {
            let args = canon_in(json!({ "path": value }), &ctx);
            let got = allow.matches("mcp__fs__read", &args);
            assert!(uncertain(&got), "{value}: {got:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// No text makes the parser panic (errors are fine).
        #[test]
        fn no_rule_text_panics(text in "\\PC{0,40}") {
            for effect in [RuleEffect::Allow, RuleEffect::Deny] {
                let _ = rule(effect, &text);
            }
        }

        /// The same with the characters rules are made of.
        #[test]
        fn no_rule_shaped_text_panics(text in "[mcpresoumlingt_*?{}\\[\\],!^():/~0-9 .\\\\-]{0,30}") {
            if let Ok(r) = rule(RuleEffect::Deny, &text) {
                let _ = r.matches("mcp__a__b", &canon(json!({"path": "/x", "id": 2})));
            }
        }
    }
}
