//! Which rules can match a request, found without trying every rule.
//!
//! A call was matched against each rule's target glob in turn, so the
//! rules stage grew with the rule count, and worse than linearly (1000
//! rules cost about three times per rule what 100 did: a thousand
//! separate matchers do not stay in cache). Rules whose target names one
//! tool (or resource…) exactly are found by a hash lookup of the name;
//! the others by one pass of a `GlobSet` of their targets. The candidates
//! come back in rule order, so reasons are listed as before; each is still
//! matched in full (target and conditions) by the caller, with the path
//! conditions of all of them answered by one [`PathIndex`] pass.

use std::collections::HashMap;

use globset::{Glob, GlobSet, GlobSetBuilder};
use warden_core::RequestKind;

use super::{PathIndex, Rule};

#[derive(Debug, Default)]
pub(crate) struct RuleIndex {
    /// Exact targets by kind, then name (looked up without allocating).
    exact: HashMap<RequestKind, HashMap<String, Vec<usize>>>,
    globs: Option<GlobSet>,
    /// The rule behind each glob of `globs`.
    glob_rules: Vec<usize>,
    /// Rules tried on every request: all of them if the set could not be
    /// built.
    always: Vec<usize>,
    paths: PathIndex,
}

impl RuleIndex {
    pub(crate) fn new(rules: &[Rule]) -> RuleIndex {
        let mut index = RuleIndex {
            paths: PathIndex::new(rules),
            ..RuleIndex::default()
        };
        let mut builder = GlobSetBuilder::new();
        for (i, rule) in rules.iter().enumerate() {
            if let Some(name) = rule.literal_target() {
                index
                    .exact
                    .entry(rule.kind())
                    .or_default()
                    .entry(name.to_string())
                    .or_default()
                    .push(i);
                continue;
            }
            match Glob::new(rule.target_glob()) {
                Ok(glob) => {
                    builder.add(glob);
                    index.glob_rules.push(i);
                }
                Err(_) => index.always.push(i),
            }
        }
        match builder.build() {
            Ok(set) => index.globs = Some(set),
            Err(_) => {
                index.always.append(&mut index.glob_rules);
            }
        }
        index
    }

    /// Every rule's path conditions, joined.
    pub(crate) fn paths(&self) -> &PathIndex {
        &self.paths
    }

    /// The rules whose target may match `kind` and `name`, in rule order.
    pub(crate) fn candidates(&self, kind: RequestKind, name: &str) -> Vec<usize> {
        let mut out: Vec<usize> = self.always.clone();
        if let Some(found) = self.exact.get(&kind).and_then(|names| names.get(name)) {
            out.extend_from_slice(found);
        }
        if let Some(set) = &self.globs {
            out.extend(set.matches(name).into_iter().map(|g| self.glob_rules[g]));
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::sources::{RuleEffect, RuleSource};
    use warden_core::Scope;

    fn rules(texts: &[&str]) -> Vec<Rule> {
        texts
            .iter()
            .enumerate()
            .map(|(index, text)| {
                Rule::compile(&RuleSource {
                    effect: RuleEffect::Deny,
                    text: text.to_string(),
                    scope: Scope::User,
                    file: PathBuf::from("/c.json"),
                    index,
                })
                .expect("rule")
            })
            .collect()
    }

    const TEXTS: &[&str] = &[
        "mcp__fs__read",
        "mcp__fs",
        "mcp__*__write*",
        "mcp__fs__read(path: /etc/**)",
        "resource__fs",
        "prompt__fs__p",
        "prompt__fs",
        "mcp__fs__{read,list}",
        "mcp__f?__read",
        "sampling__fs",
        "elicitation__*",
        "mcp__fs__read",
        "*",
    ];

    const NAMES: &[(RequestKind, &str)] = &[
        (RequestKind::Tool, "mcp__fs__read"),
        (RequestKind::Tool, "mcp__fs__list"),
        (RequestKind::Tool, "mcp__git__write_file"),
        (RequestKind::Tool, "mcp__fs__readx"),
        (RequestKind::Resource, "resource__fs"),
        (RequestKind::Prompt, "prompt__fs__p"),
        (RequestKind::Prompt, "prompt__fs__q"),
        (RequestKind::Sampling, "sampling__fs"),
        (RequestKind::Elicitation, "elicitation__x"),
        (RequestKind::Tool, "resource__fs"),
    ];

    #[test]
    fn candidates_are_every_rule_whose_target_matches() {
        let rules = rules(TEXTS);
        let index = RuleIndex::new(&rules);
        for &(kind, name) in NAMES {
            let found: Vec<usize> = index
                .candidates(kind, name)
                .into_iter()
                .filter(|&i| rules[i].matches_target(kind, name))
                .collect();
            let every: Vec<usize> = (0..rules.len())
                .filter(|&i| rules[i].matches_target(kind, name))
                .collect();
            assert_eq!(found, every, "{kind:?} {name}");
        }
    }

    #[test]
    fn exact_targets_are_not_globbed() {
        let rules = rules(&["mcp__fs__read", "mcp__fs__write"]);
        let index = RuleIndex::new(&rules);
        assert!(index.globs.as_ref().is_some_and(|g| g.is_empty()));
        assert_eq!(index.candidates(RequestKind::Tool, "mcp__fs__read"), [0]);
        assert!(
            index
                .candidates(RequestKind::Prompt, "mcp__fs__read")
                .is_empty()
        );
    }
}
