//! The session's view of the tools: the registry built from every connected
//! server's listing, each tool's pin state, and which tools are hidden
//! because they can never be called (CONTRACT §4). Rebuilt whenever the
//! connection manager reports a change (connect, list_changed, reconnect).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::mcp::ServerState;
use crate::registry::{Registry, SkippedTool, ToolEntry};
use warden_policy::PinState;

use super::Host;

#[derive(Default)]
pub(super) struct Cache {
    version: Option<u64>,
    view: Arc<ToolView>,
}

#[derive(Debug, Default)]
pub struct ToolView {
    registry: Registry,
    pins: BTreeMap<String, PinState>,
    hidden: HashSet<String>,
}

impl ToolView {
    /// Every registered tool, hidden ones included (calls to them are still
    /// decided, and denied, by the pipeline).
    pub fn get(&self, qualified: &str) -> Option<&Arc<ToolEntry>> {
        self.registry.get(qualified)
    }

    pub fn find(&self, server: &str, remote: &str) -> Option<&Arc<ToolEntry>> {
        self.registry.find(server, remote)
    }

    /// The tool `qualified` names, if it is shown (not hidden).
    pub fn get_visible(&self, qualified: &str) -> Option<&Arc<ToolEntry>> {
        self.registry
            .get(qualified)
            .filter(|t| !self.hidden.contains(&t.qualified))
    }

    pub fn pin(&self, qualified: &str) -> PinState {
        self.pins
            .get(qualified)
            .cloned()
            .unwrap_or(PinState::Unpinned)
    }

    /// What models and gateway clients are shown.
    pub fn visible(&self) -> impl Iterator<Item = &ToolEntry> {
        self.registry
            .tools()
            .filter(|t| !self.hidden.contains(&t.qualified))
    }

    pub fn skipped(&self) -> &[SkippedTool] {
        self.registry.skipped()
    }
}

impl Host {
    /// The current tool view, rebuilt if any server changed since last time.
    pub fn tools(&self) -> Arc<ToolView> {
        let version = *self.manager.subscribe().borrow();
        let mut cache = match self.tools.lock() {
            Ok(cache) => cache,
            Err(poisoned) => poisoned.into_inner(),
        };
        if cache.version != Some(version) {
            cache.view = Arc::new(self.build_view());
            cache.version = Some(version);
        }
        cache.view.clone()
    }

    /// Forgets the cached view: the next [`Host::tools`] builds it again
    /// (after a policy reload: hidden tools and schema checks may differ).
    pub(super) fn invalidate_tools(&self) {
        let mut cache = match self.tools.lock() {
            Ok(cache) => cache,
            Err(poisoned) => poisoned.into_inner(),
        };
        cache.version = None;
    }

    fn build_view(&self) -> ToolView {
        let pipeline = self.pipeline();
        let statuses = self.manager.statuses();
        let connected: Vec<_> = statuses
            .iter()
            .filter(|s| s.state == ServerState::Connected)
            .collect();
        // A tool whose input schema could take unbounded time to validate
        // is skipped here, when listed, and reported (`skipped_tools`).
        let refuse = |schema: &serde_json::Value| pipeline.check_input_schema(schema).err();
        let registry = Registry::build_with(
            connected
                .iter()
                .map(|s| (s.name.as_str(), s.tools.as_slice())),
            &refuse,
        );
        let mut pins = BTreeMap::new();
        {
            let mut store = match self.pins.lock() {
                Ok(store) => store,
                Err(poisoned) => poisoned.into_inner(),
            };
            for entry in registry.tools() {
                let Some(server) = self.server_config(&entry.server) else {
                    continue;
                };
                let state = store.check(
                    &entry.server,
                    &server.digest,
                    &entry.definition,
                    self.locked,
                );
                pins.insert(entry.qualified.clone(), state);
            }
            // A pin that is not on disk is no baseline: those tools are
            // treated as unpinned (ask; deny with --ci) until a save works.
            let unsaved = store.unsaved_tools();
            if let Err(error) = store.save() {
                tracing::error!(%error, tools = unsaved.len(), "saving tool pins failed; the tools first seen now are treated as unpinned (ask; deny with --ci)");
                for (server, tool) in unsaved {
                    if let Some(entry) = registry.find(&server, &tool) {
                        pins.insert(
                            entry.qualified.clone(),
                            PinState::Unsaved {
                                error: error.to_string(),
                            },
                        );
                    }
                }
            }
        }
        for entry in registry.tools() {
            let schema = serde_json::Value::Object((*entry.definition.input_schema).clone());
            for warning in pipeline.check_tool(&entry.qualified, &schema) {
                tracing::warn!(tool = %entry.qualified, "{warning}");
            }
        }
        let hidden = registry
            .tools()
            .filter(|t| pipeline.hidden(&t.qualified))
            .map(|t| t.qualified.clone())
            .collect();
        ToolView {
            registry,
            pins,
            hidden,
        }
    }
}
