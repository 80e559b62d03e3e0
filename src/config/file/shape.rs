//! JSON shape helpers: reading objects, strings, booleans and lists out of
//! the position-keeping tree, with errors that name the key path, the line
//! and (for unknown keys) the nearest allowed key; `${VAR}` expansion.

use super::*;

/// Host variables that are warden's own secrets, never a server's.
const WARDENS_OWN: &[&str] = &[warden_audit::KEY_ENV];

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
        // A project file's host values are secrets: shown as `${NAME}`.
        let hide = |text: String| {
            let mut text = text;
            let expanded = self.expanded.borrow();
            // Longest first: a value that contains another goes whole.
            let mut by_length: Vec<&(String, String)> = expanded.iter().collect();
            by_length.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
            for (name, value) in by_length {
                if value.len() >= 2 && text.contains(value.as_str()) {
                    text = text.replace(value.as_str(), &format!("${{{name}}}"));
                }
            }
            text
        };
        ConfigError::at(
            kind,
            self.file,
            key,
            Some(pos),
            hide(message.into()),
            help.map(hide),
        )
    }

    /// In a project file, refuses a value that uses a host variable where
    /// its value would reach decision reasons, the model or the audit log
    /// in the clear (rules, policy paths).
    pub(super) fn no_host_vars(&self, text: &str, key: &str, pos: Pos, what: &str) -> Result<()> {
        if self.scope != Scope::Project {
            return Ok(());
        }
        let vars = expand::referenced_vars(text);
        if let Some(name) = vars.first() {
            return Err(self.err(
                ErrorKind::TrustBoundary,
                key,
                pos,
                format!(
                    "a project-scope {what} may not use the host variable `${{{name}}}`: values a \
                     repository's file takes from your environment are secrets, and a {what} \
                     is shown in decision reasons, to the model and in the audit log"
                ),
                Some(
                    "write the value out, use ${WORKSPACE}, or move this to your own config file"
                        .into(),
                ),
            ));
        }
        Ok(())
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
        for name in expand::referenced_vars(text) {
            self.not_wardens_own(&name, key, pos)?;
        }
        let mut used = Vec::new();
        let out = expand::expand_tracked(text, self.workspace, self.env, &mut used);
        // Every host value a file expands is a secret: README sends a token
        // in a URL's path or on a command line to a `${VAR}`, and a server
        // echoing its argument put it in the audit log. Your own files may
        // name where you are (`${HOME}/notes`) without every path under it
        // becoming `[REDACTED]`; a project file's are all secret.
        self.expanded.borrow_mut().extend(
            used.into_iter()
                .filter(|(name, _)| self.scope == Scope::Project || !names_a_place(name)),
        );
        out.map_err(|e| match e {
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

    /// Refuses a host variable that is warden's own secret
    /// ([`WARDENS_OWN`]): no configuration, whoever wrote it, passes it to
    /// a server (expanded into a value, or by `env_from`/`sandbox.env`).
    fn not_wardens_own(&self, name: &str, key: &str, pos: Pos) -> Result<()> {
        if !WARDENS_OWN.contains(&name) {
            return Ok(());
        }
        Err(self.err(
            ErrorKind::InvalidValue,
            key,
            pos,
            format!(
                "`{name}` is warden's own secret (the audit log's HMAC key): a server that \
                 held it could write a log that verifies, so no configuration passes it on"
            ),
            Some("remove it; servers never need the audit key".into()),
        ))
    }

    pub(super) fn var_names(&self, node: &Node, key: &str) -> Result<Vec<String>> {
        self.strings(node, key)?
            .into_iter()
            .map(|(s, k, pos)| {
                self.not_wardens_own(s, &k, pos)?;
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

/// Variables that say where the person is (their home, folders, user
/// name, search path), not credentials: in their own files an expanded
/// value of one is not scrubbed, since the log shows those paths anyway.
fn names_a_place(name: &str) -> bool {
    matches!(
        name,
        "HOME" | "PWD" | "TMPDIR" | "USER" | "LOGNAME" | "PATH" | "SHELL"
    ) || name.starts_with("XDG_")
}
