//! Property: adding a `deny` rule never makes a decision more permissive
//! (a deny stays a deny, a non-allow never becomes an allow).

mod policy_support;

use policy_support::*;
use proptest::prelude::*;
use serde_json::{Value, json};
use warden::config::Trust;
use warden_policy::{Effect, Mode};
use warden_policy::{RuleEffect, RuleSource};

const TOOLS: &[&str] = &[
    "mcp__fs__*",
    "mcp__*__read*",
    "mcp__fs__read_text_file",
    "mcp__git__*",
    "mcp__*",
    "mcp__fs",
    "mcp__fs__write_file",
    "mcp__*__*",
];
const CONDS: &[&str] = &[
    "",
    "(path: ${WORKSPACE}/**)",
    "(path: **/.ssh/**)",
    "(path: /etc/**)",
    "(path: **/*.rs)",
    "(path: ${WORKSPACE}/src/*)",
    "(path: *)",
    "(/opt/mode: w*)",
    "(path: ${WORKSPACE}/**, /opt/mode: r)",
];
const TOOL_NAMES: &[&str] = &["read_text_file", "write_file", "delete", "log"];

fn paths() -> Vec<Value> {
    vec![
        json!(format!("{WS}/a.rs")),
        json!(format!("{WS}/../x")),
        json!(format!("{WS}/./src/../src/m.rs")),
        json!("~/.ssh/k"),
        json!("/etc/passwd"),
        json!("src/main.rs"),
        json!(5),
        json!(null),
        json!([format!("{WS}/a"), "/etc/x"]),
        json!([format!("{WS}/a"), "b.rs"]),
        json!({"o": 1}),
    ]
}

fn effect_of(i: u8) -> RuleEffect {
    match i % 3 {
        0 => RuleEffect::Allow,
        1 => RuleEffect::Ask,
        _ => RuleEffect::Deny,
    }
}

fn rank(e: Effect) -> u8 {
    match e {
        Effect::Allow => 0,
        Effect::Ask => 1,
        Effect::Deny => 2,
    }
}

fn rule_strategy() -> impl Strategy<Value = (u8, usize, usize)> {
    (0u8..3, 0..TOOLS.len(), 0..CONDS.len())
}

fn make(r: (u8, usize, usize)) -> RuleSource {
    rule(effect_of(r.0), &format!("{}{}", TOOLS[r.1], CONDS[r.2]))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn adding_a_deny_rule_never_loosens(
        rules in proptest::collection::vec(rule_strategy(), 0..8),
        extra in (0..TOOLS.len(), 0..CONDS.len()),
        tool in 0..TOOL_NAMES.len(),
        path in 0..11usize,
        opt_mode in 0..3usize,
        trust in 0..3u8,
        read_only in any::<bool>(),
        ci in any::<bool>(),
    ) {
        let before: Vec<RuleSource> = rules.into_iter().map(make).collect();
        let mut after = before.clone();
        after.push(make((2, extra.0, extra.1)));
        let mode = if ci { Mode::Ci } else { Mode::Interactive };
        let p1 = pipeline(before, Some(vec![]), mode);
        let p2 = pipeline(after, Some(vec![]), mode);
        let trust = [Trust::Trusted, Trust::Untrusted, Trust::Blocked][trust as usize];
        let opt = ["r", "w", "x"][opt_mode];
        let args = json!({"path": paths()[path].clone(), "opt": {"mode": opt}});
        let f = facts(trust, TOOL_NAMES[tool], json!({"readOnlyHint": read_only}), args);
        let (d1, d2) = (p1.decide(&f), p2.decide(&f));
        prop_assert!(rank(d2.effect) >= rank(d1.effect), "{:?} -> {:?}", d1, d2);
        if d1.effect == Effect::Deny {
            prop_assert_eq!(d2.effect, Effect::Deny);
        }
        if d1.effect != Effect::Allow {
            prop_assert_ne!(d2.effect, Effect::Allow);
        }
        // A matching unconditional deny rule hides the tool and denies it.
        if p2.hidden(&f.tool.qualified) {
            prop_assert_eq!(d2.effect, Effect::Deny);
        }
    }
}
