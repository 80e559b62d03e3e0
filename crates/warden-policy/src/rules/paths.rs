//! The path conditions of every rule, matched in one pass per reading.
//!
//! A path condition (`path: /etc/**`) has its own `GlobSet`. When many
//! rules' targets match a call (`mcp__*__*(path: **/secret{i}/**)` ×
//! 333 in `benches/growth.rs`), each of those sets ran on its own, and a
//! thousand separate matchers do not stay in cache: 1000 rules cost 2.3×
//! per rule what 100 did. [`PathIndex`] joins the globs of every path
//! condition into one set; [`PathHits`] runs it once per reading of one
//! request and answers each condition from that one result. Each glob
//! keeps its own options in the joined set, so every condition decides
//! exactly as its own set would (a test holds them equal).

use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;

use globset::{GlobSet, GlobSetBuilder};

use super::{Pattern, Rule};

/// Every rule's path globs in one set, and which condition each belongs
/// to. A condition is a *slot*: the rule's base plus its position.
#[derive(Debug, Default)]
pub(crate) struct PathIndex {
    /// `None` when there are no path conditions, or the joined set could
    /// not be built: then each condition is matched by its own set.
    set: Option<GlobSet>,
    /// The slot of each glob of `set`.
    glob_slot: Vec<usize>,
    /// The first slot of each rule.
    base: Vec<usize>,
}

impl PathIndex {
    pub(crate) fn new(rules: &[Rule]) -> PathIndex {
        let mut builder = GlobSetBuilder::new();
        let mut glob_slot = Vec::new();
        let mut base = Vec::with_capacity(rules.len());
        let mut slots = 0;
        for rule in rules {
            base.push(slots);
            for cond in &rule.conditions {
                if let Pattern::Path(path) = &cond.pattern {
                    for glob in &path.globs {
                        builder.add(glob.clone());
                        glob_slot.push(slots);
                    }
                }
                slots += 1;
            }
        }
        let set = if glob_slot.is_empty() {
            None
        } else {
            builder.build().ok()
        };
        PathIndex {
            set,
            glob_slot,
            base,
        }
    }

    /// A fresh memo for one request, when there is a joined set.
    pub(crate) fn hits<'a>(&self) -> Option<PathHits<'_, 'a>> {
        self.set.as_ref().map(|set| PathHits {
            index: self,
            set,
            seen: RefCell::new(HashMap::new()),
            _readings: PhantomData,
        })
    }

    /// The first slot of rule `rule`'s conditions.
    pub(crate) fn base(&self, rule: usize) -> Option<usize> {
        self.base.get(rule).copied()
    }
}

/// One request's answers: for each reading asked about, which slots its
/// globs match. Readings are kept by address for the memo's lifetime `'a`
/// (they live in the request's canonical arguments), so one found by its
/// address and length is the same string: no reading is hashed or compared
/// in full, which matters when an argument is 100 KB long. Found in a hash
/// map (a value may have thousands of readings: the strings inside JSON
/// text), each with only the slots it matches (most match none), so the
/// memo grows with the readings, not with readings × rules.
pub(crate) struct PathHits<'i, 'a> {
    index: &'i PathIndex,
    set: &'i GlobSet,
    seen: RefCell<HashMap<(usize, usize), Vec<usize>>>,
    _readings: PhantomData<&'a str>,
}

impl<'a> PathHits<'_, 'a> {
    /// Whether the condition in `slot` matches `path`.
    pub(crate) fn is_match(&self, slot: usize, path: &'a str) -> bool {
        let key = (path.as_ptr() as usize, path.len());
        let mut seen = self.seen.borrow_mut();
        let hits = seen.entry(key).or_insert_with(|| {
            let mut hits: Vec<usize> = self
                .set
                .matches(path)
                .into_iter()
                .filter_map(|glob| self.index.glob_slot.get(glob).copied())
                .collect();
            hits.sort_unstable();
            hits.dedup();
            hits
        });
        hits.binary_search(&slot).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};
    use warden_core::{RequestKind, Scope};

    use super::*;
    use crate::canon::{CanonValue, Context, Limits, canonicalize};
    use crate::sources::{RuleEffect, RuleSource};

    const PATTERNS: &[&str] = &[
        "/etc/**",
        "/etc/*",
        "**/secret*/**",
        "**/.ssh/**",
        "/w/src/**/*.rs",
        "/w/{a,b}/**",
        "/w/[ab]?/x",
        "/w/a\\*b",
        "*/x/**",
        "/home/u/**",
    ];

    const VALUES: &[&str] = &[
        "/etc/passwd",
        "/etc/ssl/certs/x",
        "/etc",
        "src/main.rs",
        "/w/src/a/b.rs",
        "a/x",
        "/w/a/secret1/k",
        "~/.ssh/id_rsa",
        "file:///etc/passwd#x",
        "/w/a*b",
        "/w/ab/x",
        "../../etc/shadow",
        "/w/b",
        "%2Fetc%2Fpasswd",
        "",
    ];

    fn compile(effect: RuleEffect, text: String, index: usize) -> Rule {
        Rule::compile(&RuleSource {
            effect,
            text,
            scope: Scope::User,
            file: "/c.json".into(),
            index,
        })
        .unwrap()
    }

    fn canon(args: &Value) -> CanonValue {
        let ctx = Context {
            workspace: "/w",
            home: Some("/home/u"),
            ..Default::default()
        };
        canonicalize(args, &ctx, &Limits::default()).unwrap().value
    }

    proptest! {
        /// Through the joined set, every rule decides exactly as with its
        /// own globs: same outcome, same reasons.
        #[test]
        fn the_joined_set_decides_as_each_rule_alone(
            picks in prop::collection::vec((0..3usize, 0..PATTERNS.len(), 0..PATTERNS.len(), any::<bool>()), 1..12),
            values in prop::collection::vec(0..VALUES.len(), 1..4),
            array in any::<bool>(),
        ) {
            let rules: Vec<Rule> = picks
                .iter()
                .enumerate()
                .map(|(i, &(effect, a, b, two))| {
                    let effect = [RuleEffect::Deny, RuleEffect::Ask, RuleEffect::Allow][effect];
                    let text = if two {
                        format!("mcp__*__*(path: {}, to: {})", PATTERNS[a], PATTERNS[b])
                    } else {
                        format!("mcp__fs__*(path: {})", PATTERNS[a])
                    };
                    compile(effect, text, i)
                })
                .collect();
            let index = PathIndex::new(&rules);
            let strings: Vec<&str> = values.iter().map(|&v| VALUES[v]).collect();
            let path = if array { json!(strings) } else { json!(strings[0]) };
            let args = canon(&json!({"path": path, "to": strings[strings.len() - 1]}));
            let hits = index.hits().unwrap();
            for (i, rule) in rules.iter().enumerate() {
                let alone = rule.matches_request(RequestKind::Tool, "mcp__fs__read", &args);
                let shared = rule.matches_request_with(
                    RequestKind::Tool,
                    "mcp__fs__read",
                    &args,
                    Some((&hits, index.base(i).unwrap())),
                );
                prop_assert_eq!(alone, shared, "rule {}", rule.text);
            }
        }
    }

    #[test]
    fn no_path_conditions_no_joined_set() {
        let rules = [
            compile(RuleEffect::Deny, "mcp__fs__read".into(), 0),
            compile(RuleEffect::Deny, "mcp__fs__read(id: 2)".into(), 1),
        ];
        assert!(PathIndex::new(&rules).hits().is_none());
    }
}
