//! warden's line transport for rmcp: the stdio framing of every stdio
//! server's connection and of `warden gateway --stdio`.
//!
//! rmcp still does everything MCP: the service loop, request ids,
//! cancellation, the message types and their serde. This is the
//! [`rmcp::transport::Transport`] underneath, which turns lines into
//! those typed messages and back, as rmcp's `AsyncRwTransport` does, for
//! less: lines read in large chunks and split with `memchr`
//! ([`lines`]), a `tools/call` and a tool result read straight into
//! their types where rmcp would try every variant of an untagged enum
//! ([`decode`]), a `tools/call`'s arguments written without first being
//! copied into a `Value` ([`encode`]), one write per frame ([`outbox`]).
//! Every other message is read and written by rmcp's own code, so its
//! compatibility rules stay rmcp's: a non-MCP notification is ignored, a
//! line that is not JSON is dropped, well-formed JSON that is no message
//! is answered with Invalid Request, a line over the limit is dropped and
//! the connection stays up.

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod compare;
mod decode;
mod encode;
mod lines;
mod outbox;
#[cfg(test)]
mod strategies;

use std::borrow::Cow;
use std::io;
use std::marker::PhantomData;

use rmcp::model::ErrorData;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncRead, AsyncWrite};

use decode::Decoded;
pub(crate) use decode::ReadRole;
pub(crate) use encode::WriteRole;
use lines::{Line, Lines};
use outbox::{Outbox, SharedOutbox};

/// A stdio-style transport: newline-delimited JSON-RPC over a reader and
/// a writer (a server's stdout and stdin, or warden's own stdin and
/// stdout).
pub(crate) struct WireTransport<Role, R, W> {
    lines: Lines<R>,
    outbox: SharedOutbox<W>,
    /// An Invalid Request answer owed to the peer, and whether it is in
    /// the outbox yet (so that a `receive` cancelled half-way neither
    /// loses it nor sends it twice).
    owed_answer: Option<Owed>,
    _role: PhantomData<fn() -> Role>,
}

enum Owed {
    Queue,
    Flush,
}

impl<Role, R, W> WireTransport<Role, R, W>
where
    Role: ReadRole + WriteRole,
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// `max_line`: the longest line read (longer ones are dropped).
    pub(crate) fn new(read: R, write: W, max_line: usize) -> Self {
        Self {
            lines: Lines::new(read, max_line),
            outbox: Outbox::shared(write),
            owed_answer: None,
            _role: PhantomData,
        }
    }

    /// Writes the Invalid Request answer owed, if any; `false` when the
    /// peer can no longer be written to.
    async fn pay_owed_answer(&mut self) -> bool {
        let Some(state) = &self.owed_answer else {
            return true;
        };
        let mut outbox = self.outbox.lock().await;
        if matches!(state, Owed::Queue) {
            let answer = TxJsonRpcMessage::<Role>::error(
                ErrorData::invalid_request("Invalid request", None),
                None,
            );
            match encode::encode::<Role>(&answer) {
                Ok(frame) => outbox.queue(frame),
                Err(error) => tracing::error!(%error, "cannot encode an Invalid Request answer"),
            }
            self.owed_answer = Some(Owed::Flush);
        }
        if outbox.flush().await.is_err() {
            return false;
        }
        self.owed_answer = None;
        true
    }
}

impl<Role, R, W> Transport<Role> for WireTransport<Role, R, W>
where
    Role: ReadRole + WriteRole,
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn name() -> Cow<'static, str> {
        "warden::mcp::wire".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<Role>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Encoded now, in the caller's order; written in the outbox's.
        let frame = encode::encode::<Role>(&item).map_err(io::Error::from);
        let outbox = self.outbox.clone();
        async move { outbox::send(&outbox, frame?).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<Role>> {
        loop {
            if !self.pay_owed_answer().await {
                return None;
            }
            let range = match self.lines.next().await {
                Line::Ready(range) => range,
                Line::Oversized => {
                    tracing::error!(
                        "Incoming message exceeded the maximum line length, discarding it"
                    );
                    continue;
                }
                Line::Eof => return None,
                Line::Failed(error) => {
                    tracing::error!("Error reading from stream: {error}");
                    return None;
                }
            };
            let line = &self.lines.buffer()[range];
            if line.is_empty() {
                continue;
            }
            match decode::decode::<Role>(line) {
                Decoded::Message(message) => return Some(message),
                Decoded::Ignored => {}
                Decoded::Unparsable(error) => {
                    tracing::debug!("Ignoring unparsable incoming message: {error}");
                }
                Decoded::Invalid(error) => {
                    tracing::debug!("Protocol error on incoming message: {error}");
                    self.owed_answer = Some(Owed::Queue);
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.outbox.lock().await.close();
        Ok(())
    }
}

#[cfg(test)]
#[path = "transport_tests.rs"]
mod tests;
