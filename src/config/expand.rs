//! `${VAR}`, `${VAR:-default}` and `${WORKSPACE}` expansion (CONTRACT §3).
//! Paths are then normalised by [`warden_core::path`].

use std::path::Path;

/// Looks a host variable up. Passed in rather than read from the process so
/// tests and embedders control it without mutating the global environment.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpandError {
    /// `${NAME}` with NAME unset and no default.
    Unset(String),
    /// `${` without `}`, or a name that is not `[A-Za-z_][A-Za-z0-9_]*`.
    Malformed(String),
}

/// Expands every `${…}` in `input`. A `$` not followed by `{` stays as it is.
/// Like the shell, `${VAR:-default}` uses the default when VAR is unset or
/// empty; `${VAR}` set to the empty string expands to the empty string.
#[cfg(test)]
pub fn expand(input: &str, workspace: &Path, env: EnvLookup<'_>) -> Result<String, ExpandError> {
    expand_tracked(input, workspace, env, &mut Vec::new())
}

/// [`expand`], also listing every `(NAME, value)` taken from the host
/// environment (not `${WORKSPACE}`, not a default written in the file):
/// in a project file these values are secrets.
pub fn expand_tracked(
    input: &str,
    workspace: &Path,
    env: EnvLookup<'_>,
    used: &mut Vec<(String, String)>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Malformed(
                "`${` without a closing `}`".to_string(),
            ));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if !is_var_name(name) {
            return Err(ExpandError::Malformed(format!(
                "`${{{name}}}` is not a variable reference: names are letters, digits and `_`, not starting with a digit"
            )));
        }
        // ${WORKSPACE} is always the workspace root, never a host variable of
        // that name: rules written against it must mean one thing.
        let value = if name == "WORKSPACE" {
            Some(workspace.to_string_lossy().into_owned())
        } else {
            env(name)
        };
        match (value, default) {
            (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
            (Some(v), _) => {
                out.push_str(&v);
                if name != "WORKSPACE" && !v.is_empty() {
                    used.push((name.to_string(), v));
                }
            }
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(ExpandError::Unset(name.to_string())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The `${NAME}` references in `input`, for showing what host variables a
/// server would receive (approval prompt).
pub fn referenced_vars(input: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = input;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let inner = &after[..end];
        let name = inner.split_once(":-").map_or(inner, |(n, _)| n);
        if is_var_name(name) && name != "WORKSPACE" {
            out.push(name.to_string());
        }
        rest = &after[end + 1..];
    }
    out
}

pub fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("t0k".into()),
            "EMPTY" => Some(String::new()),
            "WORKSPACE" => Some("/not/this".into()),
            _ => None,
        }
    }

    #[test]
    fn expands_vars_defaults_and_workspace() {
        let ws = Path::new("/srv/repo");
        let e = |s: &str| expand(s, ws, &env);
        assert_eq!(e("Bearer ${TOKEN}").unwrap(), "Bearer t0k");
        assert_eq!(e("${NOPE:-x/y}").unwrap(), "x/y");
        assert_eq!(e("${EMPTY:-d}").unwrap(), "d");
        assert_eq!(e("${EMPTY}").unwrap(), "");
        assert_eq!(e("${WORKSPACE}/a").unwrap(), "/srv/repo/a");
        assert_eq!(e("$HOME and $").unwrap(), "$HOME and $");
        assert_eq!(e("${NOPE}"), Err(ExpandError::Unset("NOPE".into())));
        assert!(matches!(e("${TOKEN"), Err(ExpandError::Malformed(_))));
        assert!(matches!(e("${1X}"), Err(ExpandError::Malformed(_))));
    }

    #[test]
    fn lists_referenced_vars() {
        assert_eq!(
            referenced_vars("${A}-${WORKSPACE}-${B:-x}-${"),
            vec!["A".to_string(), "B".to_string()]
        );
    }
}
