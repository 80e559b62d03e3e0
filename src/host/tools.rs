//! The session's view of the tools: the registry built from every connected
//! server's listing, each tool's pin state, which tools are hidden
//! because they can never be called (CONTRACT §4), and how a tool whose
//! definition changed since it was pinned is shown (as pinned). Rebuilt
//! whenever the connection manager reports a change (connect,
//! list_changed, reconnect).

use std::collections::{BTreeMap, HashMap, HashSet};
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
    /// Tools whose definition changed since it was pinned (a rug pull),
    /// as they were pinned: what models and clients are shown instead of
    /// the changed text, which they never read. Calls still resolve to
    /// the registry's entry (the definition as listed now), and the
    /// pinning stage decides them (`ask`, with what changed).
    as_pinned: HashMap<String, Arc<ToolEntry>>,
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

    /// The tool `qualified` names as it is shown, if it is (not hidden):
    /// its pinned definition while the listed one differs from its pin.
    pub fn get_visible(&self, qualified: &str) -> Option<&Arc<ToolEntry>> {
        self.registry
            .get(qualified)
            .filter(|t| !self.hidden.contains(&t.qualified))
            .map(|t| self.as_pinned.get(&t.qualified).unwrap_or(t))
    }

    pub fn pin(&self, qualified: &str) -> PinState {
        self.pins
            .get(qualified)
            .cloned()
            .unwrap_or(PinState::Unpinned)
    }

    /// What models and gateway clients are shown: each tool not hidden,
    /// as pinned while its listed definition differs from its pin.
    pub fn visible(&self) -> impl Iterator<Item = &ToolEntry> {
        self.registry
            .tools()
            .filter(|t| !self.hidden.contains(&t.qualified))
            .map(|t| self.as_pinned.get(&t.qualified).map_or(t, |p| &**p))
    }

    /// Every registered tool of `server`, hidden ones included.
    pub fn all_of<'a>(&'a self, server: &'a str) -> impl Iterator<Item = &'a ToolEntry> {
        self.registry.tools().filter(move |t| t.server == server)
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
        let mut as_pinned = HashMap::new();
        let mut withheld = HashSet::new();
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
                if matches!(state, PinState::Changed { .. }) {
                    // A rug pull: the new description, schema or
                    // annotations are the server's words, unapproved, read
                    // by a model as instructions. Shown as pinned; a pin
                    // that makes no definition hides the tool instead.
                    match store.as_pinned(&entry.server, &server.digest, &entry.definition) {
                        Some(definition) => {
                            tracing::warn!(tool = %entry.qualified, "the tool's definition changed since it was pinned; it is shown as pinned, and calls are decided by the pinning stage");
                            let shown = ToolEntry {
                                input_schema: Arc::new(serde_json::Value::Object(
                                    (*definition.input_schema).clone(),
                                )),
                                definition,
                                ..entry.clone()
                            };
                            as_pinned.insert(entry.qualified.clone(), Arc::new(shown));
                        }
                        None => {
                            tracing::warn!(tool = %entry.qualified, "the tool's definition changed since it was pinned, and the pin cannot be shown; the tool is hidden");
                            withheld.insert(entry.qualified.clone());
                        }
                    }
                }
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
        let mut hidden: HashSet<String> = registry
            .tools()
            .filter(|t| pipeline.hidden(&t.qualified))
            .map(|t| t.qualified.clone())
            .collect();
        hidden.extend(withheld);
        ToolView {
            registry,
            pins,
            hidden,
            as_pinned,
        }
    }
}
