//! warden's transport and rmcp's `AsyncRwTransport` side by side on the
//! same bytes (for the tests and the `server_message` fuzz target).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rmcp::service::ServiceRole;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleClient, RoleServer};

use super::WireTransport;

/// Panics unless both transports, as a client and as a server, receive
/// the same messages from `data` (compared as JSON) and write back the
/// same bytes.
pub(crate) async fn assert_same_as_rmcp(data: &[u8], max_line: usize) {
    let ours = receive_all::<RoleClient, _>(|w| WireTransport::new(data, w, max_line)).await;
    let rmcps = receive_all::<RoleClient, _>(|w| {
        AsyncRwTransport::new_client(data, w).with_max_line_length(max_line)
    })
    .await;
    assert_eq!(ours, rmcps, "as a client reads it");
    let ours = receive_all::<RoleServer, _>(|w| WireTransport::new(data, w, max_line)).await;
    let rmcps = receive_all::<RoleServer, _>(|w| {
        AsyncRwTransport::new_server(data, w).with_max_line_length(max_line)
    })
    .await;
    assert_eq!(ours, rmcps, "as a server reads it");
}

/// Every message a transport receives (as JSON text), and what it wrote.
async fn receive_all<R, T>(make: impl FnOnce(SharedBuf) -> T) -> (Vec<String>, Vec<u8>)
where
    R: ServiceRole,
    T: Transport<R>,
{
    let written = SharedBuf::default();
    let mut transport = make(written.clone());
    let mut received = Vec::new();
    while let Some(message) = transport.receive().await {
        received.push(serde_json::to_string(&message).unwrap_or_default());
        assert!(received.len() <= 1 << 20, "no end of messages");
    }
    drop(transport);
    let bytes = written.0.lock().map(|b| b.clone()).unwrap_or_default();
    (received, bytes)
}

/// A writer whose bytes can be read after the transport that owns it is
/// gone.
#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl tokio::io::AsyncWrite for SharedBuf {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if let Ok(mut buf) = self.0.lock() {
            buf.extend_from_slice(bytes);
        }
        Poll::Ready(Ok(bytes.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
