//! Entry points for the fuzz targets under `fuzz/` (cargo feature
//! `fuzzing`, which only `fuzz/Cargo.toml` turns on). Each is a thin,
//! narrowly named door into a private module; nothing here is API.

use std::path::Path;
use std::sync::Arc;

use crate::config::{Config, ConfigError, EnvLookup, Scope};

/// Loads one configuration file as `scope` (validation, `${VAR}`
/// expansion with `env`, the trust boundary, the merge) without adding its
/// secrets to the process-wide scrub list. `workspace` must be canonical.
pub fn load_config_file(
    path: &Path,
    scope: Scope,
    workspace: &Path,
    config_dir: &Path,
    env: EnvLookup<'_>,
) -> Result<Config, ConfigError> {
    crate::config::load_file_unregistered(path, scope, workspace, config_dir, env)
}

/// The registry's name sanitiser.
pub fn sanitize(name: &str) -> String {
    crate::registry::sanitize(name)
}

/// One registered tool, as the fuzz target checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub server: String,
    pub remote: String,
    pub qualified: String,
}

/// Builds a registry from servers and their tool names; returns what was
/// registered (and looked up again by server and remote name) and how many
/// tools were skipped.
pub fn register(servers: &[(String, Vec<String>)]) -> (Vec<Registered>, usize) {
    let schema: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r#"{"type":"object"}"#).unwrap_or_default();
    let schema = Arc::new(schema);
    let tools: Vec<(&str, Vec<crate::mcp::Tool>)> = servers
        .iter()
        .map(|(server, names)| {
            let tools = names
                .iter()
                .map(|n| crate::mcp::Tool::new(n.clone(), "", schema.clone()))
                .collect();
            (server.as_str(), tools)
        })
        .collect();
    let registry = crate::registry::Registry::build_with(
        tools.iter().map(|(s, t)| (*s, t.as_slice())),
        &|_| None,
    );
    let registered = registry
        .tools()
        .map(|e| {
            // Every entry must be found again by its server and remote name.
            let again = registry.find(&e.server, &e.remote).map(|f| &f.qualified);
            assert_eq!(again, Some(&e.qualified), "find() disagrees with tools()");
            assert!(
                registry.get(&e.qualified).is_some(),
                "get() misses a listed tool"
            );
            Registered {
                server: e.server.clone(),
                remote: e.remote.clone(),
                qualified: e.qualified.clone(),
            }
        })
        .collect();
    (registered, registry.skipped().len())
}

/// Reads `data` as the byte stream of a stdio peer with warden's transport
/// (`mcp::wire`) and with rmcp's `AsyncRwTransport`, as a client and as a
/// server, lines longer than `max_line` dropped; panics unless both
/// receive the same messages (compared as JSON) and write back the same
/// answers (Invalid Request for JSON that is no message).
pub fn wire_matches_rmcp(data: &[u8], max_line: usize) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    runtime.block_on(crate::mcp::wire::compare::assert_same_as_rmcp(
        data, max_line,
    ));
}
