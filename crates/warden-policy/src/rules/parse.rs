//! The rule grammar: `TOOL_GLOB` or `TOOL_GLOB(ARG: GLOB, …)` parsed with
//! columns for errors, and the tool glob and each condition compiled and
//! checked (a glob that can never match is an error at load time).

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSetBuilder};

use super::{ArgRef, Condition};

pub(super) struct RawCondition<'a> {
    pub arg: &'a str,
    pub arg_at: usize,
    pub glob: &'a str,
    pub glob_at: usize,
}

pub(super) struct Parsed<'a> {
    pub tool: &'a str,
    pub tool_at: usize,
    pub conditions: Vec<RawCondition<'a>>,
}

/// Char column of a byte offset.
fn col(text: &str, byte: usize) -> usize {
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

pub(super) fn compile_tool_glob(tool: &str, at: usize) -> Result<GlobMatcher, (usize, String)> {
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
