//! One HTTP answer from a CFSSL URL: read within the size limit, then turned into a result or
//! a classified [`Error`] (transport, TLS, timeout, a body that is not CFSSL's, a refusal).

use std::time::Duration;

use reqwest::StatusCode;
use serde::de::DeserializeOwned;

use super::error::{Attempt, BoxError, Call, Error, Failure, MalformedAnswer, classify_refusal};
use super::wire::Envelope;

/// Where an error happened, to build the errors of one call.
pub(super) struct ErrorContext {
    pub(super) attempt: Attempt,
    /// The answer's `content-type`, once there is an answer.
    pub(super) content_type: String,
    /// Whether a body that is not CFSSL's may be quoted in messages (see
    /// [`Trust`](super::Trust)); when not, only its status and length are told.
    pub(super) quote: bool,
}

impl ErrorContext {
    fn failed(&self, failure: Failure) -> Error {
        self.attempt.clone().failed(failure)
    }

    pub(super) fn transport(&self, err: reqwest::Error, timeout: Duration) -> Error {
        // Our own (redacted) URL names the endpoint; reqwest's could carry credentials.
        let err = err.without_url();
        // A connection that could not be made carried nothing: it is unreachable, not quiet,
        // even when making it timed out.
        if err.is_timeout() && !err.is_connect() {
            return self.failed(Failure::Timeout { timeout });
        }
        let tls = is_tls_failure(&err);
        let source: BoxError = Box::new(err);
        self.failed(if tls {
            Failure::Tls(source)
        } else {
            Failure::Unreachable(source)
        })
    }

    pub(super) fn too_large(&self, limit: usize) -> Error {
        self.failed(Failure::TooLarge { limit })
    }

    /// A 3xx answer from `url`, naming the host its `location` points at (resolved against
    /// `url`, as a relative Location is).
    pub(super) fn redirect(&self, status: StatusCode, url: &reqwest::Url, location: Option<&str>) -> Error {
        let host = location
            .and_then(|l| url.join(l).ok())
            .and_then(|target| target.host_str().map(str::to_string))
            .filter(|host| !host.is_empty());
        self.failed(Failure::Redirect {
            status: status.as_u16(),
            host,
        })
    }

    pub(super) fn parse<T: DeserializeOwned>(&self, status: StatusCode, bytes: &[u8]) -> Result<T, Error> {
        let not_cfssl = || {
            if self.quote {
                Failure::Http {
                    status: status.as_u16(),
                    snippet: snippet(bytes),
                }
            } else {
                Failure::HttpUnquoted {
                    status: status.as_u16(),
                    length: bytes.len(),
                }
            }
        };
        let envelope = match serde_json::from_slice::<Envelope<T>>(bytes) {
            Ok(envelope) => envelope,
            Err(source) if status.is_success() => {
                let malformed = if self.quote {
                    MalformedAnswer::NotCfssl {
                        content_type: self.content_type.clone(),
                        source,
                    }
                } else {
                    MalformedAnswer::NotCfsslUnquoted { length: bytes.len() }
                };
                return Err(self.failed(Failure::Malformed(malformed)));
            }
            Err(_) => return Err(self.failed(not_cfssl())),
        };
        let failure = match envelope.result {
            Some(result) if envelope.success && status.is_success() => return Ok(result),
            _ if envelope.success && status.is_success() => Failure::Malformed(MalformedAnswer::NoResult),
            _ if envelope.errors.is_empty() && status.is_success() => {
                Failure::Malformed(MalformedAnswer::NoVerdict)
            }
            // A failure envelope without an error is no verdict either: whatever sent it is
            // quoted, as any other non-CFSSL answer.
            _ if envelope.errors.is_empty() => not_cfssl(),
            _ => {
                let first = envelope.errors.into_iter().next();
                let (code, message) =
                    first.map_or((0, "no error message".to_string()), |m| (m.code, m.message));
                let status = status.as_u16();
                let class = classify_refusal(self.attempt.call, status, &message, true);
                Failure::Refused {
                    status,
                    code,
                    message,
                    class,
                }
            }
        };
        Err(self.failed(failure))
    }
}

/// One answer's `status` and `body` (read within the size cap) as the client decodes them: the
/// result, or the classified error. Public so that tests/fuzz_parsers.rs can feed it directly.
pub fn parse_answer<T: DeserializeOwned>(call: Call, status: StatusCode, body: &[u8]) -> Result<T, Error> {
    let ctx = ErrorContext {
        attempt: Attempt::new(call, "", ""),
        content_type: String::new(),
        quote: true,
    };
    ctx.parse(status, body)
}

/// How much of a non-CFSSL body an error message quotes, in characters.
const SNIPPET_CHARS: usize = 120;

/// The start of a non-CFSSL body, for error messages: a web page (a proxy's or an ingress's
/// error page) by its words without the markup, anything else as it is; control characters and
/// runs of white space become one space; at most [`SNIPPET_CHARS`] characters.
pub(super) fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4 * 1024)]);
    let text = if looks_like_html(&text) {
        without_tags(&text)
    } else {
        text.into_owned()
    };
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect();
    words.join(" ").chars().take(SNIPPET_CHARS).collect()
}

fn looks_like_html(text: &str) -> bool {
    let start: String = text.trim_start().chars().take(14).collect();
    let start = start.to_ascii_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html") || start.starts_with("<head")
}

/// The text between the tags; each tag becomes a space.
fn without_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => {
                in_tag = true;
                out.push(' ');
            }
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// Whether a rustls error sits anywhere in the chain; `io::Error` hides its payload from
/// `source()`, so it is unwrapped by hand.
fn is_tls_failure(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if e.is::<rustls::Error>() {
            return true;
        }
        if let Some(inner) = e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref())
            && (inner.is::<rustls::Error>() || is_tls_failure(inner))
        {
            return true;
        }
        next = e.source();
    }
    false
}

pub(super) enum ReadError {
    TooLarge,
    Transport(reqwest::Error),
}

/// Reads a body but never more than `limit` bytes, so a CA streaming garbage cannot balloon us.
pub(super) async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ReadError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(ReadError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests;
