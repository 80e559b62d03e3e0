//! JSON shape helpers: reading objects, strings, booleans and lists out of
//! the position-keeping tree, with errors that name the key path, the line
//! and (for unknown keys) the nearest allowed key; `${VAR}` expansion.

use super::*;

pub(super) fn get<'n>(members: &'n [Member], key: &str) -> Option<&'n Member> {
    members.iter().find(|m| m.key == key)
}

/// The closest allowed key, for "did you mean" hints on typos.
pub(super) fn suggest<'k>(key: &str, allowed: &[&'k str]) -> Option<&'k str> {
    allowed
        .iter()
        .map(|a| (edit_distance(&key.to_lowercase(), &a.to_lowercase()), *a))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

pub(super) fn short(s: &str) -> String {
    // Echoed enum-like values are capped: a long string is likely not what
    // the user meant to type there anyway.
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.to_string()
    }
}

impl Ctx<'_> {
    pub(super) fn err(
        &self,
        kind: ErrorKind,
        key: &str,
        pos: Pos,
        message: impl Into<String>,
        help: Option<String>,
    ) -> ConfigError {
        ConfigError::at(kind, self.file, key, Some(pos), message, help)
    }

    pub(super) fn wrong_type(&self, node: &Node, key: &str, expected: &str) -> ConfigError {
        self.err(
            ErrorKind::WrongType,
            key,
            node.pos,
            format!("expected {expected}, found {}", node.type_name()),
            None,
        )
    }

    pub(super) fn object<'n>(
        &self,
        node: &'n Node,
        key: &str,
        expected: &str,
    ) -> Result<&'n [Member]> {
        match &node.kind {
            Kind::Object(m) => Ok(m),
            _ => Err(self.wrong_type(node, key, expected)),
        }
    }

    pub(super) fn check_keys(&self, members: &[Member], key: &str, allowed: &[&str]) -> Result<()> {
        for m in members {
            if !allowed.contains(&m.key.as_str()) {
                let help = match suggest(&m.key, allowed) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("allowed keys here: {}", allowed.join(", ")),
                };
                return Err(self.err(
                    ErrorKind::UnknownKey,
                    &push_key(key, &m.key),
                    m.key_pos,
                    "unknown key",
                    Some(help),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn string<'n>(&self, node: &'n Node, key: &str) -> Result<&'n str> {
        match &node.kind {
            Kind::String(s) => Ok(s),
            _ => Err(self.wrong_type(node, key, "a string")),
        }
    }

    pub(super) fn boolean(&self, node: &Node, key: &str) -> Result<bool> {
        match &node.kind {
            Kind::Bool(b) => Ok(*b),
            _ => Err(self.wrong_type(node, key, "true or false")),
        }
    }

    /// `[ "a", "b" ]` → each string with its key path and position.
    pub(super) fn strings<'n>(
        &self,
        node: &'n Node,
        key: &str,
    ) -> Result<Vec<(&'n str, String, Pos)>> {
        let Kind::Array(items) = &node.kind else {
            return Err(self.wrong_type(node, key, "an array of strings"));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let k = push_index(key, i);
                self.string(item, &k).map(|s| (s, k, item.pos))
            })
            .collect()
    }

    /// `{ "K": "v" }` → each entry; values must be strings.
    pub(super) fn string_map<'n>(
        &self,
        node: &'n Node,
        key: &str,
    ) -> Result<Vec<(&'n Member, &'n str, String)>> {
        let members = self.object(node, key, "an object of string values")?;
        members
            .iter()
            .map(|m| {
                let k = push_key(key, &m.key);
                self.string(&m.value, &k).map(|s| (m, s, k))
            })
            .collect()
    }

    /// Expands `${…}`; the result may not contain NUL, which no program
    /// argument, environment value or path can hold. (The value is not
    /// echoed: it may be an expanded secret.)
    pub(super) fn expand(&self, text: &str, key: &str, pos: Pos) -> Result<String> {
        let out = self.expand_raw(text, key, pos)?;
        if out.contains('\0') {
            return Err(self.err(
                ErrorKind::InvalidValue,
                key,
                pos,
                "contains a NUL character (value not shown: it may be secret)",
                None,
            ));
        }
        Ok(out)
    }

    pub(super) fn expand_raw(&self, text: &str, key: &str, pos: Pos) -> Result<String> {
        expand::expand(text, self.workspace, self.env).map_err(|e| match e {
            ExpandError::Unset(name) => self.err(
                ErrorKind::UnsetVariable,
                key,
                pos,
                format!("`${{{name}}}` is not set in the environment"),
                Some(format!(
                    "set {name}, or give a default with `${{{name}:-default}}`"
                )),
            ),
            ExpandError::Malformed(why) => self.err(
                ErrorKind::InvalidValue,
                key,
                pos,
                why,
                Some("write variables as `${NAME}` or `${NAME:-default}`".into()),
            ),
        })
    }

    pub(super) fn var_names(&self, node: &Node, key: &str) -> Result<Vec<String>> {
        self.strings(node, key)?
            .into_iter()
            .map(|(s, k, pos)| {
                if expand::is_var_name(s) {
                    Ok(s.to_string())
                } else {
                    Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        pos,
                        format!("`{}` is not an environment variable name", short(s)),
                        Some("names are letters, digits and `_`, not starting with a digit".into()),
                    ))
                }
            })
            .collect()
    }
}
