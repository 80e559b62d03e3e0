//! Newline-delimited frames in: one JSON-RPC message per line, read in
//! large chunks and split with `memchr`.
//!
//! rmcp's `AsyncRwTransport` reads through an 8 KiB `BufReader` and finds
//! the newline a byte at a time, then copies every chunk into a line
//! buffer: for a 100 KB message that is thirteen reads and a byte loop
//! over the whole line (4–5 % of the gateway's CPU at 100 KB, twice per
//! call). Here the bytes are read straight into one buffer (64 KiB at a
//! time: a pipe's capacity) and the line is handed out as a slice of it.
//!
//! The limits are rmcp's: a line longer than `max` is dropped as it
//! arrives, never buffered whole, and reading goes on after it.
//! Cancellation: [`Lines::next`] may be dropped at any `.await` (rmcp polls
//! `receive` inside a `select!`); every byte read is in `buf` before the
//! await returns, so a new call resumes the same line.

use std::io;
use std::ops::Range;

use tokio::io::{AsyncRead, AsyncReadExt};

/// How much room each read has at least: the capacity of a Linux pipe.
const READ_CHUNK: usize = 64 * 1024;
/// A buffer grown past this by one long line is given back once empty.
const KEEP_CAPACITY: usize = 1024 * 1024;

/// What one [`Lines::next`] found.
#[derive(Debug)]
pub(super) enum Line {
    /// A whole line: these bytes of [`Lines::buffer`], without `\n` or a
    /// final `\r`.
    Ready(Range<usize>),
    /// A line longer than the limit; dropped (what of it has not arrived
    /// yet is dropped as it comes).
    Oversized,
    /// The peer closed the stream (a last line without `\n` is not a
    /// message: rmcp does the same).
    Eof,
    Failed(io::Error),
}

pub(super) struct Lines<R> {
    io: R,
    buf: Vec<u8>,
    /// Where the next line starts in `buf`.
    start: usize,
    /// How far past `start` no newline was found.
    scanned: usize,
    max: usize,
    /// Dropping the rest of an oversized line until its newline.
    discarding: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    pub(super) fn new(io: R, max: usize) -> Self {
        Self {
            io,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            max,
            discarding: false,
        }
    }

    /// The longest line read.
    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// The bytes a [`Line::Ready`] range points into; valid until the next
    /// call to [`Lines::next`].
    pub(super) fn buffer(&self) -> &[u8] {
        &self.buf
    }

    pub(super) async fn next(&mut self) -> Line {
        loop {
            if let Some(line) = self.take_line() {
                return line;
            }
            if self.make_room() {
                return Line::Oversized;
            }
            match self.io.read_buf(&mut self.buf).await {
                Ok(0) => return Line::Eof,
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Line::Failed(error),
            }
        }
    }

    /// A complete line from what is buffered, if there is one (skipping
    /// the end of a line being discarded).
    fn take_line(&mut self) -> Option<Line> {
        loop {
            let from = self.start + self.scanned;
            let Some(offset) = memchr::memchr(b'\n', &self.buf[from..]) else {
                self.scanned = self.buf.len() - self.start;
                return None;
            };
            let newline = from + offset;
            let line = self.start..newline;
            self.start = newline + 1;
            self.scanned = 0;
            if std::mem::take(&mut self.discarding) {
                continue;
            }
            // rmcp counts the newline in the limit.
            if line.len() >= self.max {
                return Some(Line::Oversized);
            }
            let end = if self.buf[line.clone()].ends_with(b"\r") {
                line.end - 1
            } else {
                line.end
            };
            return Some(Line::Ready(line.start..end));
        }
    }

    /// Before a read: moves a partial line to the front, drops a line that
    /// is already too long (`true`: report it), and leaves at least
    /// [`READ_CHUNK`] free.
    fn make_room(&mut self) -> bool {
        let partial = self.buf.len() - self.start;
        let mut oversized = false;
        if self.discarding || partial >= self.max {
            // Nothing buffered is wanted: keep reading until the newline.
            oversized = !self.discarding;
            self.discarding = true;
            self.buf.clear();
        } else if self.start > 0 {
            self.buf.copy_within(self.start.., 0);
            self.buf.truncate(partial);
        }
        self.start = 0;
        if self.buf.is_empty() {
            self.scanned = 0;
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::new();
            }
        }
        self.buf.reserve(READ_CHUNK);
        oversized
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn lines_of(chunks: Vec<Vec<u8>>, max: usize) -> Vec<Result<Vec<u8>, &'static str>> {
        let (mut tx, rx) = tokio::io::duplex(7);
        let writer = tokio::spawn(async move {
            for chunk in chunks {
                tx.write_all(&chunk).await.unwrap();
            }
        });
        let mut lines = Lines::new(rx, max);
        let mut out = Vec::new();
        loop {
            match lines.next().await {
                Line::Ready(range) => out.push(Ok(lines.buffer()[range].to_vec())),
                Line::Oversized => out.push(Err("oversized")),
                Line::Eof => break,
                Line::Failed(_) => out.push(Err("failed")),
            }
        }
        writer.await.unwrap();
        out
    }

    #[tokio::test]
    async fn splits_lines_across_chunks_and_strips_carriage_returns() {
        let got = lines_of(
            vec![b"{\"a\":1}\n{\"b\"".to_vec(), b":2}\r\n\n{}\ntail".to_vec()],
            1024,
        )
        .await;
        let want: Vec<Result<Vec<u8>, &str>> = vec![
            Ok(b"{\"a\":1}".to_vec()),
            Ok(b"{\"b\":2}".to_vec()),
            Ok(Vec::new()),
            Ok(b"{}".to_vec()),
        ];
        assert_eq!(got, want, "the unterminated tail is not a message");
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_dropped_and_reading_goes_on() {
        let long = vec![b'x'; 300_000];
        let mut first = b"ok\n".to_vec();
        first.extend_from_slice(&long[..150_000]);
        let mut second = long[150_000..].to_vec();
        second.extend_from_slice(b"\nafter\n");
        let got = lines_of(vec![first, second], 1000).await;
        assert_eq!(
            got,
            vec![Ok(b"ok".to_vec()), Err("oversized"), Ok(b"after".to_vec())]
        );
    }

    #[tokio::test]
    async fn the_limit_counts_the_newline_as_rmcp_does() {
        let got = lines_of(vec![b"abcde\nabcd\n".to_vec()], 5).await;
        assert_eq!(got, vec![Err("oversized"), Ok(b"abcd".to_vec())]);
    }

    #[tokio::test]
    async fn a_long_line_within_the_limit_arrives_whole() {
        let long = vec![b'y'; 200_000];
        let mut bytes = long.clone();
        bytes.push(b'\n');
        let chunks: Vec<Vec<u8>> = bytes.chunks(4093).map(<[u8]>::to_vec).collect();
        let got = lines_of(chunks, 16 << 20).await;
        assert_eq!(got, vec![Ok(long)]);
    }

    #[tokio::test]
    async fn a_cancelled_read_loses_nothing() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let mut lines = Lines::new(rx, 1024);
        tx.write_all(b"{\"par").await.unwrap();
        // Cancel a read that has the first half of a line buffered.
        let cancelled =
            tokio::time::timeout(std::time::Duration::from_millis(20), lines.next()).await;
        assert!(cancelled.is_err());
        tx.write_all(b"tial\":true}\n").await.unwrap();
        match lines.next().await {
            Line::Ready(range) => assert_eq!(&lines.buffer()[range], b"{\"partial\":true}"),
            other => panic!("{other:?}"),
        }
    }
}
