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
//! the connection stays up. The gateway's transport (`with_refusals`)
//! answers more, as JSON-RPC asks of a server ([`unreadable`]): every line
//! from its client that cannot be read is answered (a parse error, an
//! invalid request or invalid params, under the request's `id` when that
//! can be read) and reported, so that it is recorded.

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod compare;
mod decode;
mod encode;
mod lines;
mod outbox;
#[cfg(test)]
mod strategies;
pub(crate) mod unreadable;

use std::borrow::Cow;
use std::io;
use std::marker::PhantomData;
use std::sync::Arc;

use rmcp::model::{ErrorData, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncRead, AsyncWrite};

use decode::Decoded;
pub(crate) use decode::ReadRole;
pub(crate) use encode::WriteRole;
use lines::{Line, Lines};
use outbox::{Outbox, SharedOutbox};
use unreadable::Unreadable;

/// Told of every client message the gateway answered with an error
/// instead of serving (to record it).
pub(crate) type Refusals = Arc<dyn Fn(&Unreadable) + Send + Sync>;

/// A stdio-style transport: newline-delimited JSON-RPC over a reader and
/// a writer (a server's stdout and stdin, or warden's own stdin and
/// stdout).
pub(crate) struct WireTransport<Role, R, W> {
    lines: Lines<R>,
    outbox: SharedOutbox<W>,
    /// An error answer owed to the peer, and whether it is in the outbox
    /// yet (so that a `receive` cancelled half-way neither loses it nor
    /// sends it twice).
    owed_answer: Option<Owed>,
    /// Set for the gateway's client: every unreadable line is answered and
    /// reported here.
    refusals: Option<Refusals>,
    _role: PhantomData<fn() -> Role>,
}

enum Owed {
    Queue(ErrorData, Option<RequestId>),
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
            refusals: None,
            _role: PhantomData,
        }
    }

    /// The gateway's transport to its client: every line that cannot be
    /// read is answered as JSON-RPC asks of a server (not only JSON of no
    /// known shape, as rmcp's transport does) and reported to `refusals`.
    pub(crate) fn with_refusals(mut self, refusals: Refusals) -> Self {
        self.refusals = Some(refusals);
        self
    }

    /// What is owed for a line rmcp's decoder refused with `error`
    /// (`not_json`: a syntax error, which rmcp drops).
    fn answer_for(&self, line: &[u8], error: &serde_json::Error, not_json: bool) -> Option<Owed> {
        let Some(refusals) = &self.refusals else {
            return (!not_json)
                .then(|| Owed::Queue(ErrorData::invalid_request("Invalid request", None), None));
        };
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let unreadable = unreadable::classify(line, error)?;
        refusals(&unreadable);
        Some(Owed::Queue(unreadable.error, unreadable.id))
    }

    /// Writes the error answer owed, if any; `false` when the peer can no
    /// longer be written to.
    async fn pay_owed_answer(&mut self) -> bool {
        if self.owed_answer.is_none() {
            return true;
        }
        let mut outbox = self.outbox.lock().await;
        if let Some(Owed::Queue(error, id)) = self.owed_answer.take() {
            let answer = TxJsonRpcMessage::<Role>::error(error, id);
            match encode::encode::<Role>(&answer) {
                Ok(frame) => outbox.queue(frame),
                Err(error) => tracing::error!(%error, "cannot encode an error answer"),
            }
        }
        // Queued: only the flush is left, should this future be dropped.
        self.owed_answer = Some(Owed::Flush);
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
                    // The gateway's client is told, and the attempt recorded.
                    if let Some(refusals) = &self.refusals {
                        let unreadable = unreadable::oversized(self.lines.max());
                        refusals(&unreadable);
                        self.owed_answer = Some(Owed::Queue(unreadable.error, None));
                    }
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
                Decoded::Message(message) => {
                    if let Some(refusals) = &self.refusals
                        && let Some(unreadable) = Role::refused(&message)
                    {
                        refusals(&unreadable);
                        self.owed_answer = Some(Owed::Queue(unreadable.error, unreadable.id));
                        continue;
                    }
                    return Some(message);
                }
                Decoded::Ignored => {}
                Decoded::Unparsable(error) => {
                    tracing::debug!("Unparsable incoming message: {error}");
                    self.owed_answer = self.answer_for(line, &error, true);
                }
                Decoded::Invalid(error) => {
                    tracing::debug!("Protocol error on incoming message: {error}");
                    self.owed_answer = self.answer_for(line, &error, false);
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
