//! `warden pin list` / `warden pin reset [SERVER]` (the lead wires clap).

use serde_json::json;

use super::exit;
use crate::pins::PinStore;
use warden_core::display;

/// Prints the pinned tool definitions, as a table or JSON.
pub fn list(store: &PinStore, json: bool) -> anyhow::Result<u8> {
    let entries = store.list();
    if json {
        super::json::print("pin list", json!({"file": store.path(), "pins": entries}))?;
        return Ok(exit::OK);
    }
    if entries.is_empty() {
        println!("no pinned tools in {}", store.path().display());
        return Ok(exit::OK);
    }
    println!(
        "{:<16} {:<32} {:<14} {:<14} PINNED AT",
        "SERVER", "TOOL", "SHA256", "CONFIG"
    );
    for e in &entries {
        println!(
            "{:<16} {:<32} {:<14} {:<14} {}",
            display::line(&e.server),
            display::line(&e.tool),
            &e.sha256[..12.min(e.sha256.len())],
            &e.config_digest[..12.min(e.config_digest.len())],
            e.pinned_at
        );
    }
    println!("{} pin(s) in {}", entries.len(), store.path().display());
    Ok(exit::OK)
}

/// Forgets the pins of one server (or all) and saves the file.
/// `warden pin reset [SERVER]`. Forgetting pins accepts whatever the
/// server defines now, so `record` (the `approval` record) runs first,
/// once there is something to forget: a reset the audit log cannot take
/// forgets nothing.
pub fn reset(
    store: &mut PinStore,
    server: Option<&str>,
    json: bool,
    record: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<u8> {
    let removed = store.reset(server);
    if removed > 0 {
        record()?;
    }
    store
        .save()
        .map_err(|e| super::CliError::with_code(exit::FAILED, e.to_string()))?;
    match server {
        Some(s) => eprintln!("forgot {removed} pin(s) of server `{}`", display::line(s)),
        None => eprintln!("forgot all {removed} pin(s)"),
    }
    if json {
        super::json::print(
            "pin reset",
            json!({"file": store.path(), "server": server, "removed": removed}),
        )?;
    }
    Ok(exit::OK)
}
