//! The legacy HTTP+SSE transport (protocol 2024-11-05), which rmcp 3
//! dropped, as an rmcp [`Transport`] so rmcp still handles every message.
//!
//! `GET url` with `Accept: text/event-stream` opens the stream; its first
//! `endpoint` event names the URL to POST messages to, resolved against the
//! stream's URL and refused when it has another origin (a server must not
//! redirect our requests, and the configured headers, elsewhere). `message`
//! events carry JSON-RPC messages, deserialised into rmcp's types; each
//! outgoing message is one POST. Events are size-bounded.

use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::SseStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Largest single SSE event accepted (bytes between blank lines).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;
/// Messages buffered between the stream reader and rmcp.
const CHANNEL: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("invalid SSE URL `{url}`: {reason}")]
    Url { url: String, reason: String },
    #[error("connecting to the SSE stream failed: {0}")]
    Connect(String),
    #[error("the SSE stream answered HTTP {0}")]
    Status(u16),
    #[error("the SSE stream ended before its `endpoint` event")]
    NoEndpoint,
    #[error("the server's endpoint `{endpoint}` is not on the stream's origin `{origin}`")]
    ForeignEndpoint { endpoint: String, origin: String },
    #[error("posting a message failed: {0}")]
    Post(String),
    #[error("posting a message was answered with HTTP {0}")]
    PostStatus(u16),
    #[error("encoding a message failed: {0}")]
    Encode(String),
}

/// A connected legacy SSE session.
pub struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    /// Bound on each POST (the stream itself is unbounded).
    timeout: Duration,
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    /// Stops the stream reader.
    stop: CancellationToken,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl SseTransport {
    /// Opens the stream and waits (up to `timeout`) for the `endpoint` event.
    /// `headers` are sent with the GET and every POST; they are never logged.
    pub async fn connect(
        url: &str,
        headers: HeaderMap,
        timeout: Duration,
    ) -> Result<Self, SseError> {
        let base = Url::parse(url).map_err(|e| SseError::Url {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(SseError::Url {
                url: url.to_string(),
                reason: "only http and https are supported".into(),
            });
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .build()
            .map_err(|e| SseError::Connect(e.to_string()))?;
        let open = async {
            let response = client
                .get(base.clone())
                .headers(headers.clone())
                .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
                .send()
                .await
                .map_err(|e| SseError::Connect(e.without_url().to_string()))?;
            if !response.status().is_success() {
                return Err(SseError::Status(response.status().as_u16()));
            }
            let bytes = bounded_events(response.bytes_stream());
            let mut events = SseStream::from_bytes_stream(bytes);
            loop {
                match events.next().await {
                    Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                        let data = event.data.unwrap_or_default();
                        let endpoint = resolve_endpoint(&base, data.trim())?;
                        return Ok((endpoint, events));
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err(SseError::Connect(e.to_string())),
                    None => return Err(SseError::NoEndpoint),
                }
            }
        };
        let (endpoint, mut events) = tokio::time::timeout(timeout, open)
            .await
            .map_err(|_| SseError::Connect(format!("no `endpoint` event within {timeout:?}")))??;

        let (tx, rx) = mpsc::channel(CHANNEL);
        let stop = CancellationToken::new();
        let reader_stop = stop.clone();
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    () = reader_stop.cancelled() => break,
                    event = events.next() => event,
                };
                match event {
                    None => break,
                    Some(Err(error)) => {
                        tracing::warn!(%error, "the SSE stream failed");
                        break;
                    }
                    Some(Ok(event)) => {
                        let kind = event.event.as_deref().unwrap_or("message");
                        if kind != "message" {
                            tracing::debug!(kind, "ignoring SSE event");
                            continue;
                        }
                        let Some(data) = event.data else { continue };
                        match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data) {
                            Ok(message) => {
                                if tx.send(message).await.is_err() {
                                    break;
                                }
                            }
                            Err(error) => {
                                tracing::warn!(%error, "ignoring an SSE message that is not JSON-RPC");
                            }
                        }
                    }
                }
            }
            // Dropping `tx` tells rmcp the connection closed.
        });
        Ok(SseTransport {
            client,
            endpoint,
            headers,
            timeout,
            rx,
            stop,
        })
    }
}

/// Resolves the `endpoint` event's data against the stream URL; same origin only.
fn resolve_endpoint(base: &Url, data: &str) -> Result<Url, SseError> {
    let endpoint = base.join(data).map_err(|e| SseError::Url {
        url: data.to_string(),
        reason: e.to_string(),
    })?;
    if endpoint.origin() != base.origin() {
        return Err(SseError::ForeignEndpoint {
            endpoint: endpoint.to_string(),
            origin: base.origin().ascii_serialization(),
        });
    }
    Ok(endpoint)
}

/// Passes bytes through, failing once more than [`MAX_EVENT_BYTES`] arrive
/// without an empty line (the end of an SSE event).
fn bounded_events<S, B, E>(stream: S) -> impl Stream<Item = Result<B, std::io::Error>>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    let mut since_boundary = 0usize;
    let mut at_line_start = true;
    stream.map(move |chunk| {
        let chunk = chunk.map_err(|e| std::io::Error::other(e.to_string()))?;
        for &byte in chunk.as_ref() {
            since_boundary += 1;
            match byte {
                b'\n' => {
                    if at_line_start {
                        since_boundary = 0;
                    }
                    at_line_start = true;
                }
                b'\r' => {}
                _ => at_line_start = false,
            }
        }
        if since_boundary > MAX_EVENT_BYTES {
            return Err(std::io::Error::other(format!(
                "an SSE event exceeded {MAX_EVENT_BYTES} bytes"
            )));
        }
        Ok(chunk)
    })
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let client = self.client.clone();
        let endpoint = self.endpoint.clone();
        let headers = self.headers.clone();
        let timeout = self.timeout;
        async move {
            let body = serde_json::to_vec(&item).map_err(|e| SseError::Encode(e.to_string()))?;
            let response = client
                .post(endpoint)
                .timeout(timeout)
                .headers(headers)
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body)
                .send()
                .await
                .map_err(|e| SseError::Post(e.without_url().to_string()))?;
            if !response.status().is_success() {
                return Err(SseError::PostStatus(response.status().as_u16()));
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.rx.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.stop.cancel();
        self.rx.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_is_resolved_relative_to_the_stream() {
        let base = Url::parse("http://127.0.0.1:3001/sse").unwrap();
        let url = resolve_endpoint(&base, "/message?sessionId=abc").unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:3001/message?sessionId=abc");
    }

    #[tokio::test]
    async fn events_are_size_bounded_across_chunk_boundaries() {
        let big = vec![b'x'; MAX_EVENT_BYTES / 2];
        // Two half-size events, each ended by a blank line split over chunks.
        let ok: Vec<Result<Vec<u8>, std::io::Error>> = vec![
            Ok(big.clone()),
            Ok(b"\n".to_vec()),
            Ok(b"\r\n".to_vec()),
            Ok(big.clone()),
            Ok(b"\n\n".to_vec()),
        ];
        let passed: Vec<_> = bounded_events(futures::stream::iter(ok)).collect().await;
        assert!(passed.iter().all(Result::is_ok));
        // The same bytes without the blank line between them: one event too big.
        let too_big: Vec<Result<Vec<u8>, std::io::Error>> = vec![
            Ok(big.clone()),
            Ok(b"\n".to_vec()),
            Ok(big),
            Ok(b"xx".to_vec()),
        ];
        let failed: Vec<_> = bounded_events(futures::stream::iter(too_big))
            .collect()
            .await;
        assert!(failed.last().is_some_and(Result::is_err));
    }

    #[test]
    fn endpoint_on_another_origin_is_refused() {
        let base = Url::parse("http://127.0.0.1:3001/sse").unwrap();
        for foreign in [
            "http://evil.example/message",
            "https://127.0.0.1:3001/message",
            "http://127.0.0.1:3002/message",
            "//evil.example/x",
        ] {
            assert!(matches!(
                resolve_endpoint(&base, foreign),
                Err(SseError::ForeignEndpoint { .. })
            ));
        }
    }
}
