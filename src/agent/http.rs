//! HTTP plumbing shared by the providers: one JSON POST with retries
//! (exponential backoff on 429/5xx and transport failures, honouring
//! `Retry-After`), timeouts, and error texts that are cut short and scrubbed
//! of the API key.

use std::fmt;
use std::sync::Once;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;

use super::ModelError;

/// Timeouts and retry behaviour of a provider's HTTP client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// Whole-request timeout of one attempt.
    pub timeout: Duration,
    /// Connection timeout of one attempt.
    pub connect_timeout: Duration,
    /// Attempts in total, including the first (at least 1).
    pub max_attempts: u32,
    /// Delay before the first retry; doubled for each further retry.
    pub initial_backoff: Duration,
    /// Upper bound of the computed backoff.
    pub max_backoff: Duration,
    /// Upper bound of a server's `Retry-After` that is honoured.
    pub max_retry_after: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl HttpSettings {
    /// The backoff before retry number `retry` (1-based), without jitter.
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32 << retry.saturating_sub(1).min(16);
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// An API key. Its `Debug` never shows the value and it has no `Display`.
#[derive(Clone)]
pub(crate) struct ApiKey(String);

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl ApiKey {
    /// Reads `var` through `env`; unset or blank is [`ModelError::MissingKey`].
    pub(crate) fn from_env(
        provider: &'static str,
        var: &'static str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ModelError> {
        match env(var) {
            Some(k) if !k.trim().is_empty() => Ok(Self(k.trim().to_string())),
            _ => Err(ModelError::MissingKey { provider, var }),
        }
    }

    pub(crate) fn new(key: String) -> Self {
        Self(key)
    }

    /// A header value holding `prefix` + the key, marked sensitive.
    pub(crate) fn header_value(&self, prefix: &str) -> Result<HeaderValue, ModelError> {
        let mut v = HeaderValue::from_str(&format!("{prefix}{}", self.0)).map_err(|_| {
            ModelError::Config(
                "the API key contains characters not allowed in an HTTP header".into(),
            )
        })?;
        v.set_sensitive(true);
        Ok(v)
    }

    /// Replaces any occurrence of the key in `text`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        if self.0.len() >= 4 {
            text.replace(&self.0, "[redacted]")
        } else {
            text.to_string()
        }
    }
}

/// Builds a reqwest client with rustls (ring) and the given timeouts.
pub(crate) fn build_client(settings: &HttpSettings) -> Result<reqwest::Client, ModelError> {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // Err means another provider is already installed: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
        .timeout(settings.timeout)
        .connect_timeout(settings.connect_timeout)
        .redirect(same_origin_redirects())
        .build()
        .map_err(|e| ModelError::Config(format!("cannot build the HTTP client: {e}")))
}

/// Redirects are followed on the first request's origin only: reqwest
/// keeps every header but `Authorization` and cookies across origins, so
/// Anthropic's `x-api-key` (and, for a 307/308, the whole conversation)
/// would go wherever the endpoint pointed. Another origin's answer is the
/// redirect itself, an error for the provider.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if attempt.previous().len() > 10 {
            attempt.error("too many redirects")
        } else if same {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// Checks and normalises a base URL (no trailing slash).
pub(crate) fn base_url(provider: &str, var: &str, url: &str) -> Result<String, ModelError> {
    let url = url.trim().trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() <= "https://".len()
    {
        return Err(ModelError::Config(format!(
            "{provider}: {var} must be an http:// or https:// URL, got '{url}'"
        )));
    }
    if url.starts_with("http://") {
        let loopback = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .is_some_and(|h| {
                h == "localhost"
                    || h == "[::1]"
                    || h.parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            });
        if !loopback {
            tracing::warn!(provider, url = %display_url(url), "{var} is plain http: the API key travels unencrypted");
        }
    }
    Ok(url.to_string())
}

/// What a request is for: used in errors and logs.
pub(crate) struct Target<'a> {
    pub provider: &'static str,
    pub key_var: &'static str,
    pub model: &'a str,
    pub url: String,
    pub key: &'a ApiKey,
    pub headers: HeaderMap,
}

/// The first `max` characters of `text`, key scrubbed, control characters
/// shown as spaces, with an ellipsis when cut.
pub(crate) fn excerpt(text: &str, key: &ApiKey, max: usize) -> String {
    let scrubbed = key.scrub(text);
    let mut out: String = scrubbed
        .chars()
        .take(max)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if scrubbed.chars().count() > max {
        out.push('…');
    }
    out
}

/// The human-readable message of an error body (`{"error": {"message"}}`,
/// as both OpenAI and Anthropic send), else an excerpt of the body.
fn error_message(body: &str, key: &ApiKey) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        let err = v.get("error").unwrap_or(&v);
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| err.as_str());
        let kind = err.get("type").and_then(Value::as_str);
        if let Some(msg) = msg {
            let msg = excerpt(msg, key, 300);
            return match kind {
                Some(kind) => format!("{kind}: {msg}"),
                None => msg,
            };
        }
    }
    if body.trim().is_empty() {
        "(empty body)".to_string()
    } else {
        excerpt(body, key, 200)
    }
}

/// The delay a server asked for: `retry-after-ms` (OpenAI) or `Retry-After`
/// in seconds (an HTTP date is ignored), capped.
fn retry_after(headers: &HeaderMap, cap: Duration) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    let d = if let Some(ms) = get("retry-after-ms") {
        Duration::from_secs_f64((ms / 1000.0).min(cap.as_secs_f64()))
    } else {
        Duration::from_secs_f64(get("retry-after")?.min(cap.as_secs_f64()))
    };
    Some(d.min(cap))
}

/// A response body larger than this is refused.
const MAX_RESPONSE_BYTES: usize = 32 << 20;

enum ReadError {
    TooLarge,
    Http(reqwest::Error),
}

/// Reads the body, refusing more than `max` bytes.
async fn read_capped(mut response: reqwest::Response, max: usize) -> Result<String, ReadError> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(ReadError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Http)? {
        if body.len() + chunk.len() > max {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The URL without any user name or password in it.
fn display_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) => url.to_string(),
    }
}

/// A little jitter (75–100 %) so that many clients do not retry in step.
fn jitter(d: Duration) -> Duration {
    let r = (uuid::Uuid::new_v4().as_u128() % 1000) as u32;
    d.mul_f64(0.75 + f64::from(r) / 4000.0)
}

/// POSTs `body` as JSON and returns the parsed JSON response. 408, 409,
/// 429 and 5xx answers and connection failures or timeouts are retried.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    settings: &HttpSettings,
    target: &Target<'_>,
    body: &Value,
) -> Result<Value, ModelError> {
    let max_attempts = settings.max_attempts.max(1);
    let provider = target.provider;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let sent = client
            .post(&target.url)
            .headers(target.headers.clone())
            .json(body)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                let retryable = e.is_timeout() || e.is_connect();
                let what = if e.is_timeout() {
                    format!("timed out after {:?}", settings.timeout)
                } else {
                    target.key.scrub(&e.without_url().to_string())
                };
                if retryable && attempt < max_attempts {
                    let delay = jitter(settings.backoff(attempt));
                    tracing::warn!(provider, attempt, ?delay, error = %what, "model request failed; retrying");
                    tokio::time::sleep(delay).await;
                    continue;
                }
                return Err(ModelError::Http(format!(
                    "{provider}: POST {} failed after {attempt} attempt(s): {what}",
                    display_url(&target.url)
                )));
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        let text = match read_capped(response, MAX_RESPONSE_BYTES).await {
            Ok(t) => t,
            Err(ReadError::TooLarge) => {
                return Err(ModelError::Malformed(format!(
                    "{provider}: the response (HTTP {}) is larger than {} MiB",
                    status.as_u16(),
                    MAX_RESPONSE_BYTES >> 20
                )));
            }
            Err(ReadError::Http(e)) => {
                let what = target.key.scrub(&e.without_url().to_string());
                if attempt < max_attempts {
                    let delay = jitter(settings.backoff(attempt));
                    tracing::warn!(provider, attempt, ?delay, error = %what, "reading the model response failed; retrying");
                    tokio::time::sleep(delay).await;
                    continue;
                }
                return Err(ModelError::Http(format!(
                    "{provider}: reading the response failed after {attempt} attempt(s): {what}"
                )));
            }
        };
        let code = status.as_u16();
        if status.is_success() {
            tracing::debug!(
                provider,
                model = target.model,
                attempt,
                "model response received"
            );
            return serde_json::from_str::<Value>(&text).map_err(|e| {
                ModelError::Malformed(format!(
                    "{provider}: the response (HTTP {code}) is not valid JSON: {e}; body starts: {}",
                    if text.trim().is_empty() {
                        "(empty)".to_string()
                    } else {
                        format!("'{}'", excerpt(&text, target.key, 200))
                    }
                ))
            });
        }
        let message = error_message(&text, target.key);
        // As the official SDKs do: 408, 409, 429 and 5xx are worth retrying.
        if matches!(code, 408 | 409 | 429) || status.is_server_error() {
            if attempt < max_attempts {
                let delay = retry_after(&headers, settings.max_retry_after)
                    .unwrap_or_else(|| jitter(settings.backoff(attempt)));
                tracing::warn!(
                    provider,
                    status = code,
                    attempt,
                    ?delay,
                    "model API busy or failing; retrying"
                );
                tokio::time::sleep(delay).await;
                continue;
            }
            return Err(ModelError::Api {
                status: code,
                message: format!("{provider}: {message} (gave up after {attempt} attempts)"),
            });
        }
        return Err(match code {
            401 | 403 => ModelError::Unauthorized {
                provider,
                status: code,
                var: target.key_var,
                message,
            },
            404 => ModelError::UnknownModel {
                provider,
                model: target.model.to_string(),
                message,
            },
            _ => ModelError::Api {
                status: code,
                message: format!("{provider}: {message}"),
            },
        });
    }
}

/// Wraps a structural parse error with an excerpt of the response.
pub(crate) fn malformed(provider: &str, what: &str, body: &Value, key: &ApiKey) -> ModelError {
    ModelError::Malformed(format!(
        "{provider}: {what}; response starts: '{}'",
        excerpt(&body.to_string(), key, 200)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let s = HttpSettings {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            ..HttpSettings::default()
        };
        assert_eq!(s.backoff(1), Duration::from_millis(100));
        assert_eq!(s.backoff(2), Duration::from_millis(200));
        assert_eq!(s.backoff(3), Duration::from_millis(350));
        assert_eq!(s.backoff(60), Duration::from_millis(350));
    }

    #[test]
    fn retry_after_is_parsed_and_capped() {
        let cap = Duration::from_secs(5);
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h, cap), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h, cap), Some(Duration::from_secs(2)));
        h.insert("retry-after", HeaderValue::from_static("86400"));
        assert_eq!(retry_after(&h, cap), Some(cap));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h, cap), None);
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h, cap), Some(Duration::from_millis(250)));
    }

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(
            display_url("https://user:pw@example.com/v1/chat/completions"),
            "https://example.com/v1/chat/completions"
        );
    }

    #[test]
    fn key_is_scrubbed_and_never_debugged() {
        let k = ApiKey::new("sk-secret-123".into());
        assert_eq!(format!("{k:?}"), "ApiKey([redacted])");
        assert_eq!(
            excerpt("bad key sk-secret-123\nhere", &k, 100),
            "bad key [redacted] here"
        );
        assert_eq!(excerpt("abcdef", &k, 3), "abc…");
        assert!(
            !format!(
                "{:?}",
                k.header_value("Bearer ")
                    .unwrap_or(HeaderValue::from_static("x"))
            )
            .contains("secret")
        );
    }
}
