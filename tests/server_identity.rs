//! A rule written for one server applies to that server only. Tool names
//! are `mcp__S__T` and server names have no `__`, but a server name
//! ending in `_` ran into the separator: the tools of a server `fx_` are
//! `mcp__fx___T`, which the shorthand `mcp__fx` (`mcp__fx__*`) of an
//! allow rule written for server `fx` matched, so an untrusted server
//! named after a trusted one had every call allowed.

mod cli_support;

use cli_support::{World, calls_received, stderr};
use serde_json::json;

/// The attack end to end: `warden --ci call fx_ echo` with an allow rule
/// for `fx` only. The call must never run.
#[test]
fn a_rule_for_one_server_never_covers_a_server_whose_name_extends_it() {
    let world = World::new();
    let (shadow, counter) = world.counting_fixture();
    for rule in ["mcp__fx", "mcp__fx__*", "mcp__fx__echo"] {
        world.write_config(&json!({
            "mcpServers": {"fx": world.fixture(), "fx_": shadow},
            "permissions": {"allow": [rule]},
        }));
        let out = world.run(&[
            "--ci",
            "call",
            "fx_",
            "echo",
            "--json",
            "--args",
            r#"{"message":"hi"}"#,
        ]);
        assert_ne!(out.status.code(), Some(0), "{rule}: {}", stderr(&out));
        assert!(
            calls_received(&counter).is_empty(),
            "{rule}: the call reached `fx_`: {:?}",
            calls_received(&counter)
        );
        assert!(stderr(&out).contains("fx_"), "{rule}: {}", stderr(&out));
    }
}

/// The rule side of the same class: a shorthand for a server name that
/// ends in `_` would cover another server's tools whose names start with
/// `_` (`mcp__fx_` → `mcp__fx___*` matches `fx`'s tool `_x`); it is a
/// load-time error naming the rule, like every rule that can never match.
#[test]
fn a_rule_naming_a_server_that_ends_in_an_underscore_is_refused_at_load() {
    let world = World::new();
    for rule in ["mcp__fx_", "prompt__fx_", "resource__fx_"] {
        world.write_config(&json!({
            "mcpServers": {"fx": world.fixture()},
            "permissions": {"allow": [rule]},
        }));
        let out = world.run(&[
            "--ci",
            "call",
            "fx",
            "echo",
            "--args",
            r#"{"message":"hi"}"#,
        ]);
        assert_eq!(out.status.code(), Some(2), "{rule}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(rule) && stderr(&out).contains("end with `_`"),
            "{rule}: {}",
            stderr(&out)
        );
    }
}
