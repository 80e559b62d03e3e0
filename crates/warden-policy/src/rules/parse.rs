//! The rule grammar: `TARGET` or `TARGET(ARG: GLOB, …)` parsed into a
//! target and conditions (total: no text makes it panic), and each part
//! compiled to what [`super::Rule`] matches with.

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use serde_json::Number;

use warden_core::RequestKind;

use super::{ArgRef, Condition, PathGlobs, Pattern};
use crate::canon::split_scheme;

pub(super) struct RawCondition<'a> {
    pub(super) arg: &'a str,
    pub(super) arg_at: usize,
    pub(super) glob: &'a str,
    pub(super) glob_at: usize,
}

pub(super) struct Parsed<'a> {
    pub(super) tool: &'a str,
    pub(super) tool_at: usize,
    pub(super) conditions: Vec<RawCondition<'a>>,
}

/// Char column of a byte offset.
pub(super) fn col(text: &str, byte: usize) -> usize {
    text.get(..byte).map_or(0, |s| s.chars().count())
}

pub(super) fn parse(text: &str) -> Result<Parsed<'_>, (usize, String)> {
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
    let tool = text.get(lead..open).unwrap_or("").trim_end();
    if tool.is_empty() {
        return Err((col(text, lead), "missing target name before `(`".into()));
    }
    if !text[..body_end].ends_with(')') || body_end <= open + 1 {
        return Err((
            col(text, body_end),
            "expected `)` at the end of the argument list".into(),
        ));
    }
    let inner_start = open + 1;
    let inner_end = body_end - 1;
    let inner = text.get(inner_start..inner_end).unwrap_or("");
    if inner.trim().is_empty() {
        return Err((
            col(text, open),
            "empty argument list: write `TARGET` or `TARGET(ARG: GLOB)`".into(),
        ));
    }
    // Split on top-level commas (not inside `{…}` or `[…]`, not escaped).
    let mut parts = Vec::new();
    let (mut depth_brace, mut depth_bracket, mut start) = (0i32, 0i32, inner_start);
    let mut escaped = false;
    for (i, c) in inner.char_indices() {
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
        let part = text.get(s..e).unwrap_or("");
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

pub(super) const GLOB_META: &[char] = &['*', '?', '[', '{'];

pub(super) struct Target {
    pub(super) kind: RequestKind,
    pub(super) matcher: GlobMatcher,
    /// The glob `matcher` was built from.
    pub(super) glob: String,
    pub(super) exact: bool,
}

/// The form each kind's names take, for messages.
fn target_forms() -> &'static str {
    "mcp__SERVER__TOOL, resource__SERVER, prompt__SERVER__PROMPT, sampling__SERVER or \
     elicitation__SERVER"
}

pub(super) fn compile_target(target: &str, at: usize) -> Result<Target, (usize, String)> {
    for (i, c) in target.chars().enumerate() {
        let ok = c.is_ascii_alphanumeric() || "_-*?[]{},!^".contains(c);
        if !ok {
            return Err((
                at + i,
                format!(
                    "`{c}` can never match: names contain only [A-Za-z0-9_-] ({})",
                    target_forms()
                ),
            ));
        }
    }
    let literal_len = target.find(GLOB_META).unwrap_or(target.len());
    let literal = &target[..literal_len];
    let is_glob = literal_len < target.len();
    let never = || {
        (
            at,
            format!(
                "`{target}` can never match: names have the form {}",
                target_forms()
            ),
        )
    };
    // The kind whose prefix the literal start has, else (for a glob whose
    // literal start is shorter than any prefix) the one it can still
    // become; a glob that could be any kind (`*`, `m*`) is a tool glob.
    let kind = RequestKind::ALL
        .into_iter()
        .find(|k| literal.starts_with(k.target_prefix()))
        .or_else(|| {
            if !is_glob {
                return None;
            }
            if RequestKind::Tool.target_prefix().starts_with(literal) {
                return Some(RequestKind::Tool);
            }
            let mut candidates = RequestKind::ALL
                .into_iter()
                .filter(|k| k.target_prefix().starts_with(literal));
            match (candidates.next(), candidates.next()) {
                (Some(k), None) => Some(k),
                _ => None,
            }
        })
        .ok_or_else(never)?;
    let mut pattern = target.to_string();
    let mut exact = false;
    if !is_glob {
        // `literal` starts with the kind's prefix (found above).
        let rest = literal.get(kind.target_prefix().len()..).unwrap_or("");
        match kind {
            // A server name never ends with `_` (config validation): the
            // shorthand for such a name (`mcp__a_` → `mcp__a___*`) would
            // cover server `a`'s tools whose names start with `_`.
            RequestKind::Tool | RequestKind::Prompt
                if rest.ends_with('_') && !rest.contains("__") =>
            {
                return Err((
                    at,
                    format!("`{target}` can never match: server names do not end with `_`"),
                ));
            }
            RequestKind::Tool | RequestKind::Prompt => match rest.split_once("__") {
                None if !rest.is_empty() => pattern = format!("{target}__*"),
                Some((server, name)) if !server.is_empty() && !name.is_empty() => exact = true,
                _ => {
                    let (prefix, what) = if kind == RequestKind::Tool {
                        ("mcp", "TOOL")
                    } else {
                        ("prompt", "PROMPT")
                    };
                    return Err((
                        at,
                        format!(
                            "`{target}` can never match: write {prefix}__SERVER__{what}, \
                             {prefix}__SERVER or a glob"
                        ),
                    ));
                }
            },
            _ => {
                if rest.is_empty() || rest.contains("__") || rest.ends_with('_') {
                    return Err((
                        at,
                        format!(
                            "`{target}` can never match: write {}SERVER (server names have no `__` \
                             and do not end with `_`)",
                            kind.target_prefix()
                        ),
                    ));
                }
                exact = true;
            }
        }
        if kind == RequestKind::Tool && target.len() > warden_core::MAX_QUALIFIED_LEN {
            return Err((
                at,
                format!(
                    "`{target}` can never match: qualified names are at most {} characters",
                    warden_core::MAX_QUALIFIED_LEN
                ),
            ));
        }
    }
    let matcher = Glob::new(&pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| (at, format!("invalid glob: {}", e.kind())))?;
    Ok(Target {
        kind,
        matcher,
        glob: pattern,
        exact,
    })
}

pub(super) fn compile_condition(raw: &RawCondition<'_>) -> Result<Condition, (usize, String)> {
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
    let invalid = |e: String| (raw.glob_at, format!("invalid pattern `{}`: {e}", raw.glob));
    let pattern = if let Some((scheme, rest)) = split_scheme(raw.glob)
        && rest.starts_with("//")
    {
        if scheme.eq_ignore_ascii_case("file") {
            return Err((
                raw.glob_at,
                format!(
                    "`{}`: write the path instead (`file:` URIs are matched as the path they \
                     name), e.g. `{}`",
                    raw.glob,
                    rest.trim_start_matches("//localhost")
                        .trim_start_matches("//")
                ),
            ));
        }
        let glob = ip_literal_escaped(&authority_lowered(raw.glob));
        Pattern::Uri(glob_set(&with_dir_itself(&glob), true).map_err(invalid)?)
    } else if scheme_glob(raw.glob) {
        // `*://evil.com/**`, `{http,https}://…`: a URI pattern for any of
        // those schemes. Read as a path pattern (it starts with `*`), it
        // loaded and never matched a URL, so a deny never fired.
        let glob = ip_literal_escaped(&authority_lowered(raw.glob));
        Pattern::Uri(glob_set(&with_dir_itself(&glob), true).map_err(invalid)?)
    } else if raw.glob.contains('/') {
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
        Pattern::Path(path_globs(&unicode_forms(with_dir_itself(&collapsed))).map_err(invalid)?)
    } else if !raw.glob.contains(GLOB_META)
        && let Ok(n) = serde_json::from_str::<Number>(raw.glob)
    {
        Pattern::Number(n)
    } else {
        Pattern::Text(
            GlobBuilder::new(raw.glob)
                .backslash_escape(true)
                .build()
                .map_err(|e| invalid(e.kind().to_string()))?
                .compile_matcher(),
        )
    };
    Ok(Condition {
        arg,
        text: raw.glob.to_string(),
        pattern,
    })
}

/// Whether `glob` starts with a scheme that has glob characters, then
/// `://` (`*://`, `http*://`, `{http,https}://`).
fn scheme_glob(glob: &str) -> bool {
    glob.find("://").is_some_and(|i| {
        let scheme = &glob[..i];
        !scheme.is_empty()
            && scheme.contains(GLOB_META)
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.*?[]{},!^".contains(c))
    })
}

/// A URI pattern with its scheme and host in lower case, as every reading
/// of a value has them (URL parsers lower-case the scheme and a web host;
/// a host of another scheme has a lower-cased reading too): a deny on
/// `Secret://Vault/**` matched no reading and never fired.
fn authority_lowered(glob: &str) -> String {
    let Some(i) = glob.find("://") else {
        return glob.to_string();
    };
    let end = glob[i + 3..]
        .find(['/', '?', '#'])
        .map_or(glob.len(), |j| i + 3 + j);
    format!("{}{}", glob[..end].to_ascii_lowercase(), &glob[end..])
}

/// A URI pattern whose host is an IPv6 literal (`http://[::1]/**`) with
/// its brackets taken literally: as a glob, `[::1]` is a class of one
/// character, and the rule never matched `http://[::1]/x`.
fn ip_literal_escaped(glob: &str) -> String {
    if let Some(i) = glob.find("://")
        && glob[i + 3..].starts_with('[')
        && let Some(close) = glob[i + 3..].find(']')
    {
        let host = &glob[i + 4..i + 3 + close];
        return format!("{}\\[{host}\\]{}", &glob[..i + 3], &glob[i + 4 + close..]);
    }
    glob.to_string()
}

/// `DIR/**` also matches `DIR` (and `DIR/`).
fn with_dir_itself(pattern: &str) -> Vec<String> {
    let mut out = vec![pattern.to_string()];
    if let Some(base) = pattern.strip_suffix("/**")
        && !base.is_empty()
        && !base.ends_with('/')
    {
        out.push(base.to_string());
        out.push(format!("{base}/"));
    }
    out
}

/// Each pattern also in Unicode's composed (NFC) and decomposed (NFD)
/// forms where they differ, so a pattern written in either form matches a
/// name written in either: a composed value (read as it is) meets the NFC
/// form, a decomposed one as it is the NFD form (and its NFC reading,
/// `canon::unicode_forms`, the NFC form), a mixed one by its NFC reading.
fn unicode_forms(patterns: Vec<String>) -> Vec<String> {
    use unicode_normalization::UnicodeNormalization;
    let mut out = Vec::with_capacity(patterns.len());
    for p in patterns {
        if !p.is_ascii() {
            for form in [p.nfc().collect::<String>(), p.nfd().collect()] {
                if form != p && !out.contains(&form) {
                    out.push(form);
                }
            }
        }
        out.push(p);
    }
    out
}

/// A path pattern's globs (`*` does not cross `/`), and their set.
fn path_globs(patterns: &[String]) -> Result<PathGlobs, String> {
    let globs = patterns
        .iter()
        .map(|p| {
            GlobBuilder::new(p)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| e.kind().to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut set = GlobSetBuilder::new();
    for glob in &globs {
        set.add(glob.clone());
    }
    let set = set.build().map_err(|e| e.to_string())?;
    Ok(PathGlobs { set, globs })
}

fn glob_set(patterns: &[String], literal_separator: bool) -> Result<GlobSet, String> {
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        let glob = GlobBuilder::new(p)
            .literal_separator(literal_separator)
            .backslash_escape(true)
            .build()
            .map_err(|e| e.kind().to_string())?;
        set.add(glob);
    }
    set.build().map_err(|e| e.to_string())
}
