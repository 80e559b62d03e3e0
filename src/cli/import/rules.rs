//! Permission rules of an import: kept as read until every file is read,
//! then renamed with their server and checked. A rule is decided last
//! because the server it names may be renamed by a later file (Claude
//! Code's `settings.json` is read after `~/.claude.json`), and a rule left
//! under a server's old name would match nothing: a `deny` lost that way
//! loosens what the user had.

use std::path::{Path, PathBuf};

use super::Import;

/// A rule as the input wrote it, with where it came from.
#[derive(Debug)]
pub(super) struct Pending {
    file: PathBuf,
    key: String,
    effect: String,
    text: String,
}

impl Import {
    /// A Claude-style permission rule (`mcp__S__T(…)`), decided by
    /// [`Import::finish_rules`].
    pub fn add_rule(&mut self, file: &Path, key: &str, effect: &str, rule: &str) {
        self.rules.push(Pending {
            file: file.to_path_buf(),
            key: key.to_string(),
            effect: effect.to_string(),
            text: rule.to_string(),
        });
    }

    /// Each rule under its server's imported name, kept when warden's rule
    /// syntax reads it, otherwise a note.
    pub(super) fn finish_rules(&mut self) {
        use warden_policy::{RuleEffect, RuleSource};
        for rule in std::mem::take(&mut self.rules) {
            let text = self.renamed_rule(&rule.text);
            if text != rule.text {
                self.note(
                    &rule.file,
                    &rule.key,
                    format!("rule `{}` follows its renamed server: `{text}`", rule.text),
                );
            }
            let effect = match rule.effect.as_str() {
                "allow" => RuleEffect::Allow,
                "ask" => RuleEffect::Ask,
                _ => RuleEffect::Deny,
            };
            let source = RuleSource {
                effect,
                text: text.clone(),
                scope: warden_core::Scope::User,
                file: rule.file.clone(),
                index: 0,
            };
            if let Err(error) = warden_policy::check_rule(&source) {
                self.note(
                    &rule.file,
                    &rule.key,
                    format!("rule `{text}` is not in warden's rule syntax ({error}): left out"),
                );
                continue;
            }
            let list = match effect {
                RuleEffect::Allow => &mut self.allow,
                RuleEffect::Ask => &mut self.ask,
                RuleEffect::Deny => &mut self.deny,
            };
            if !list.contains(&text) {
                list.push(text);
            }
        }
    }

    /// `rule` with the server it names (as the input wrote the name, or as
    /// Claude Code writes it in tool names: characters outside
    /// `[A-Za-z0-9_-]` as `_`) replaced by the name it was imported as.
    fn renamed_rule(&self, rule: &str) -> String {
        let Some(target) = rule.strip_prefix("mcp__") else {
            return rule.to_string();
        };
        let mut forms: Vec<(String, &str)> = self
            .renamed
            .iter()
            .flat_map(|(new, old)| {
                [
                    (old.clone(), new.as_str()),
                    (claude_name(old), new.as_str()),
                ]
            })
            // A name another imported server has is that server's.
            .filter(|(old, new)| old != new && !self.servers.contains_key(old))
            .collect();
        // The longest name first: `a.b` before `a`.
        forms.sort_by_key(|(old, _)| std::cmp::Reverse(old.len()));
        for (old, new) in forms {
            if let Some(rest) = target.strip_prefix(old.as_str())
                && (rest.is_empty() || rest.starts_with("__") || rest.starts_with('('))
            {
                return format!("mcp__{new}{rest}");
            }
        }
        rule.to_string()
    }
}

/// A name as MCP clients put it in tool names: every character outside
/// `[A-Za-z0-9_-]` as `_`, which is how warden's registry names a tool.
pub(super) fn claude_name(name: &str) -> String {
    crate::registry::sanitize(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    #[test]
    fn a_rule_for_a_server_of_that_exact_name_stays_with_it() {
        let mut out = Import::default();
        let file = Path::new("/x.json");
        out.add_server(file, "a", "my.db", Map::new());
        let mut other = Map::new();
        other.insert("command".into(), "y".into());
        out.add_server(file, "b", "my_db", other);
        for rule in ["mcp__my_db__x", "mcp__my.db__y", "mcp__my.dbz__w"] {
            out.add_rule(file, "r", "deny", rule);
        }
        out.finish_rules();
        assert_eq!(out.deny, ["mcp__my_db__x", "mcp__my-db__y"]);
    }
}
