//! Frames out: one encoded message per `write`, shared by every send.
//!
//! rmcp runs a transport's sends concurrently (`Transport::send` returns
//! a `'static` future), so the write half sits behind an async mutex, as
//! in rmcp's own transport. A frame is written from the outbox, never
//! from the send future's stack: a send dropped half-way through a write
//! (its caller cancelled) leaves the rest of its frame in the outbox, and
//! the next writer finishes it before its own, so a peer never reads half
//! a message followed by another one.

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

pub(super) type SharedOutbox<W> = Arc<Mutex<Outbox<W>>>;

pub(super) struct Outbox<W> {
    /// `None` once closed.
    io: Option<W>,
    /// The frame being written, and how much of it is written.
    frame: Vec<u8>,
    written: usize,
}

impl<W: AsyncWrite + Unpin> Outbox<W> {
    pub(super) fn shared(io: W) -> SharedOutbox<W> {
        Arc::new(Mutex::new(Self {
            io: Some(io),
            frame: Vec::new(),
            written: 0,
        }))
    }

    /// Takes `frame` (a whole line, `\n` included) as the next to write;
    /// a frame still unfinished goes first. Synchronous, so that a caller
    /// who holds the lock can queue without an `.await` in between.
    pub(super) fn queue(&mut self, frame: Vec<u8>) {
        if self.written == self.frame.len() {
            self.frame = frame;
            self.written = 0;
        } else {
            self.frame.extend_from_slice(&frame);
        }
    }

    /// Writes what is queued. Safe to drop at any `.await`: progress is
    /// kept in `written`.
    pub(super) async fn flush(&mut self) -> io::Result<()> {
        let io = self.io.as_mut().ok_or_else(closed)?;
        while self.written < self.frame.len() {
            match io.write(&self.frame[self.written..]).await {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        io.flush().await
    }

    /// Drops the write half: the peer reads end of file.
    pub(super) fn close(&mut self) {
        self.io = None;
        self.frame = Vec::new();
        self.written = 0;
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "Transport is closed")
}

/// Queues `frame` and writes it, with every frame queued before it.
pub(super) async fn send<W: AsyncWrite + Unpin>(
    outbox: &SharedOutbox<W>,
    frame: Vec<u8>,
) -> io::Result<()> {
    let mut outbox = outbox.lock().await;
    if outbox.io.is_none() {
        return Err(closed());
    }
    outbox.queue(frame);
    outbox.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_send_cancelled_mid_frame_is_finished_before_the_next() {
        // A pipe with room for 8 bytes: the first frame blocks half-way.
        let (tx, mut rx) = tokio::io::duplex(8);
        let outbox = Outbox::shared(tx);
        let first = send(&outbox, b"{\"first\":1}\n".to_vec());
        let cancelled = tokio::time::timeout(std::time::Duration::from_millis(20), first).await;
        assert!(cancelled.is_err(), "the write should have blocked");
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            let mut chunk = [0u8; 64];
            while all.len() < 25 {
                let n = rx.read(&mut chunk).await.unwrap();
                all.extend_from_slice(&chunk[..n]);
            }
            all
        });
        send(&outbox, b"{\"second\":2}\n".to_vec()).await.unwrap();
        let all = reader.await.unwrap();
        assert_eq!(all, b"{\"first\":1}\n{\"second\":2}\n");
    }

    #[tokio::test]
    async fn a_closed_outbox_refuses_to_send() {
        let (tx, _rx) = tokio::io::duplex(64);
        let outbox = Outbox::shared(tx);
        outbox.lock().await.close();
        let error = send(&outbox, b"{}\n".to_vec()).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotConnected);
    }
}
