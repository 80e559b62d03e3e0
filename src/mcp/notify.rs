//! Notifications from one upstream server, routed in wire order.
//!
//! rmcp hands each inbound notification to its handler on a task of its
//! own, so handlers see them out of order. [`Tap`] wraps the transport and
//! routes every notification synchronously as it is read, before rmcp
//! spawns anything: `notifications/progress` to the request that carries
//! its token ([`Router::register`]; warden's own upstream token, never a
//! client's), everything a client of warden may be owed (log messages,
//! resource updates, resource and prompt list changes) to the
//! [`Upstream`] broadcast that the gateway filters per client. Answers
//! and a server's elicitation/sampling requests are noted as read too, for
//! attributing those requests ([`super::server_requests::InFlight`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::model::{
    ProgressNotificationParam, ProgressToken, ServerJsonRpcMessage, ServerNotification,
    ServerRequest,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{broadcast, mpsc};

/// Where one request's progress goes (in order). Boxed: a channel holds
/// its first block of 32 slots from the start, and a gateway makes one
/// for every call that carries a progress token (rmcp's clients send one
/// with every request): 32 boxes are 256 bytes, 32 notifications 3 KB, for
/// each call in flight (BENCHMARKS.md, "Eighteenth pass").
pub type ProgressSink = mpsc::UnboundedSender<Box<ProgressNotificationParam>>;

/// A notification of one upstream server that is not about one request.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub server: String,
    pub notification: ServerNotification,
}

/// How many progress notifications with a token not (yet) registered are
/// kept: rmcp returns a request's token only once the request is queued,
/// so the first progress may be read before [`Router::register`].
const EARLY_PROGRESS: usize = 64;

pub(crate) struct Router {
    server: String,
    /// The warden requests in flight, for attributing server requests.
    pub(crate) in_flight: Arc<super::server_requests::InFlight>,
    inner: Mutex<RouterInner>,
    others: broadcast::Sender<Arc<Upstream>>,
}

#[derive(Default)]
struct RouterInner {
    sinks: HashMap<ProgressToken, ProgressSink>,
    early: VecDeque<ProgressNotificationParam>,
}

impl Router {
    pub(crate) fn new(server: &str, others: broadcast::Sender<Arc<Upstream>>) -> Arc<Router> {
        Arc::new(Router {
            server: server.to_string(),
            in_flight: Arc::default(),
            inner: Mutex::new(RouterInner::default()),
            others,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RouterInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends the progress of the request with upstream `token` to `sink`
    /// (also what arrived before this call) until the guard is dropped.
    pub(crate) fn register(
        self: &Arc<Self>,
        token: ProgressToken,
        sink: ProgressSink,
    ) -> Registered {
        let mut inner = self.lock();
        let early: Vec<_> = inner
            .early
            .iter()
            .filter(|p| p.progress_token == token)
            .cloned()
            .collect();
        inner.early.retain(|p| p.progress_token != token);
        for p in early {
            let _ = sink.send(Box::new(p));
        }
        inner.sinks.insert(token.clone(), sink);
        Registered {
            router: Arc::clone(self),
            token,
        }
    }

    fn route(&self, notification: &ServerNotification) {
        match notification {
            ServerNotification::ProgressNotification(p) => {
                let mut inner = self.lock();
                match inner.sinks.get(&p.params.progress_token) {
                    Some(sink) => {
                        let _ = sink.send(Box::new(p.params.clone()));
                    }
                    None => {
                        if inner.early.len() == EARLY_PROGRESS {
                            inner.early.pop_front();
                        }
                        inner.early.push_back(p.params.clone());
                    }
                }
            }
            ServerNotification::LoggingMessageNotification(_)
            | ServerNotification::ResourceUpdatedNotification(_)
            | ServerNotification::ResourceListChangedNotification(_)
            | ServerNotification::PromptListChangedNotification(_) => {
                // No receiver (no gateway client) is fine: logged below.
                if self.others.receiver_count() == 0 {
                    tracing::debug!(server = %self.server, ?notification, "notification with no one to pass it to");
                    return;
                }
                let _ = self.others.send(Arc::new(Upstream {
                    server: self.server.clone(),
                    notification: notification.clone(),
                }));
            }
            _ => {}
        }
    }
}

/// Stops routing a request's progress when dropped.
pub(crate) struct Registered {
    router: Arc<Router>,
    token: ProgressToken,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.router.lock().sinks.remove(&self.token);
    }
}

/// A transport that routes notifications through a [`Router`] as they
/// are read (see the module docs).
pub(crate) struct Tap<T> {
    inner: T,
    router: Arc<Router>,
}

impl<T> Tap<T> {
    pub(crate) fn new(inner: T, router: Arc<Router>) -> Self {
        Tap { inner, router }
    }
}

impl<T> Transport<RoleClient> for Tap<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await;
        match &message {
            Some(ServerJsonRpcMessage::Notification(n)) => self.router.route(&n.notification),
            // In wire order, before rmcp hands anything on: a request
            // answered is no longer in flight, and a server request is
            // attributed to what is in flight as it is read.
            Some(ServerJsonRpcMessage::Response(r)) => self.router.in_flight.answered(&r.id),
            Some(ServerJsonRpcMessage::Error(e)) => {
                if let Some(id) = &e.id {
                    self.router.in_flight.answered(id);
                }
            }
            Some(ServerJsonRpcMessage::Request(r))
                if matches!(
                    r.request,
                    ServerRequest::CreateMessageRequest(_) | ServerRequest::ElicitRequest(_)
                ) =>
            {
                self.router.in_flight.server_request(r.id.clone());
            }
            _ => {}
        }
        message
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
