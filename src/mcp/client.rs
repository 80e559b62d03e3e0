//! warden's side of an upstream session ([`WardenClient`]): what it
//! declares, and how it answers the server's own requests.

// Sampling and roots are deprecated for 2026-07-28 (SEP-2577) but are how
// the session protocol (2025-11-25) works.
#![allow(deprecated)]

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, Implementation, ListRootsResult, Root, RootsCapabilities,
    SamplingCapability, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use tokio::sync::mpsc;

use super::notify::Router;
use super::server_requests::ServerRequests;

/// warden's side of the session: it announces itself, passes
/// `notifications/tools/list_changed` on to the connection's re-lister,
/// answers `roots/list` with the workspace and has the host decide
/// elicitation and sampling.
pub(super) struct WardenClient {
    pub server: String,
    pub list_changed: mpsc::UnboundedSender<()>,
    pub router: Arc<Router>,
    pub handler: Option<Arc<dyn ServerRequests>>,
    pub roots: Roots,
}

/// The folder `roots/list` answers with: the session's workspace, which
/// the repl's `/workspace DIR` may narrow (`Manager::set_roots`).
pub type Roots = Arc<RwLock<PathBuf>>;

impl ClientHandler for WardenClient {
    fn get_info(&self) -> ClientConfig {
        let mut caps = ClientCapabilities::default();
        // URL mode too: the URL is shown to the person (or passed to a
        // client that declared it), never opened on anyone's behalf.
        caps.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::new())
                .with_url(UrlElicitationCapability::new()),
        );
        caps.sampling = Some(SamplingCapability::default());
        // `/workspace DIR` in the repl changes the root: servers are told.
        let mut roots = RootsCapabilities::default();
        roots.list_changed = Some(true);
        caps.roots = Some(roots);
        ClientConfig::new(
            caps,
            Implementation::new("warden", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(super::connect::LEGACY_PROTOCOL)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "notifications/tools/list_changed");
        let _ = self.list_changed.send(());
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let workspace = self.roots.read().unwrap_or_else(|p| p.into_inner()).clone();
        let answer = ListRootsResult::new(workspace_roots(&workspace));
        if let Some(handler) = &self.handler
            && let Err(error) = handler.roots_answered(&self.server, &answer)
        {
            return Err(ErrorData::internal_error(
                format!(
                    "warden could not record its answer to roots/list, so it gives none: {error}"
                ),
                None,
            ));
        }
        Ok(answer)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let from = self.router.in_flight.attribute(&context.id);
        match &self.handler {
            Some(handler) => {
                handler
                    .elicit(&self.server, request, from, context.ct.clone())
                    .await
            }
            None => {
                tracing::info!(server = %self.server, "elicitation declined: nothing decides it in this session");
                Ok(ElicitResult::new(ElicitationAction::Decline))
            }
        }
    }

    async fn create_message(
        &self,
        request: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let from = self.router.in_flight.attribute(&context.id);
        match &self.handler {
            Some(handler) => {
                handler
                    .sample(&self.server, request, from, context.ct.clone())
                    .await
            }
            None => Err(ErrorData::invalid_request(
                "warden does not offer sampling in this session",
                None,
            )),
        }
    }
}

/// The one root warden gives servers: the workspace.
fn workspace_roots(workspace: &std::path::Path) -> Vec<Root> {
    match reqwest::Url::from_directory_path(workspace) {
        Ok(url) => vec![Root::new(url.to_string()).with_name("workspace")],
        Err(()) => Vec::new(),
    }
}
