//! Finding the official MCP conformance suite (npm
//! `@modelcontextprotocol/conformance`) for the tests that run it: the one
//! scripts/test-deps.sh installs in tests/conformance (with a Node 22
//! binary beside it), or the `conformance` executable
//! `WARDEN_CONFORMANCE_BIN` names.

use std::path::{Path, PathBuf};

/// The suite, and a PATH on which its Node comes first; `None` (the test
/// prints SKIPPED) when the suite is missing or no Node ≥ 22 is found.
pub fn suite() -> Option<(PathBuf, String)> {
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance/node_modules/.bin/conformance");
    let suite = std::env::var_os("WARDEN_CONFORMANCE_BIN")
        .map(PathBuf::from)
        .or_else(|| installed.exists().then_some(installed))?;
    let bin_dir = suite.parent().map(Path::to_path_buf).unwrap_or_default();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let node = std::process::Command::new("node")
        .arg("--version")
        .env("PATH", &path)
        .output()
        .ok()?;
    let version = String::from_utf8_lossy(&node.stdout);
    let major: u32 = version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    (major >= 22).then_some((suite, path))
}

/// Printed by a test that cannot find the suite.
pub const NOT_INSTALLED: &str = "SKIPPED: the conformance suite (with Node 22) is not installed \
     (scripts/test-deps.sh, or set WARDEN_CONFORMANCE_BIN)";
