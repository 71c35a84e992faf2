//! CFSSL errors, classified once by what the controllers must do about them.

use super::endpoints::EndpointsError;
use crate::pki::{ChainError, CsrError, KeyType};

/// A cause whose type the caller does not name (transport errors from reqwest and below).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a controller does with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// Try again later with backoff: network trouble, timeouts, 5xx, garbage answers.
    Retryable,
    /// This request can never succeed as it is: the CA refused the CSR, or the CSR is invalid.
    Permanent,
    /// The issuer is misconfigured: it goes not-Ready and its requests wait for it.
    Issuer(IssuerFault),
}

/// Why an issuer is at fault; each maps to a `Ready` condition reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IssuerFault {
    /// The CA rejected the HMAC key (`invalid token`), or the key is unusable.
    Credentials,
    /// Unknown label or profile, an unusable URL or a profile the CA will not sign with.
    Config,
    /// TLS to the CA failed: wrong or missing trust anchors, bad CA bundle.
    Tls,
}

/// Which CFSSL call failed, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Info,
    AuthSign,
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Call::Info => "info",
            Call::AuthSign => "authsign",
        })
    }
}

/// Every message of a failed call names the URL and label; none carries the key, token or
/// request body.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The issuer's `url` does not parse.
    #[error(transparent)]
    Endpoints(#[from] EndpointsError),
    /// The configured CA bundle is not PEM certificates: the cause is reqwest's error or
    /// [`NoCertificate`].
    #[error("invalid CA bundle: {0}")]
    CaBundle(#[source] BoxError),
    /// The HTTP client could not be built (TLS setup).
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// A request body could not be encoded as JSON; never seen (the bodies are plain structs).
    #[error("{call}: cannot encode the request: {source}")]
    Encode {
        call: Call,
        #[source]
        source: serde_json::Error,
    },
    /// The CSR failed local checks; it was never sent.
    #[error(transparent)]
    Csr(#[from] CsrError),
    /// A namespaced Issuer's URL names a host off `--namespaced-issuer-allowed-hosts`; no
    /// request was sent to any of its URLs.
    #[error(
        "the CA host {host} is not on the manager's allow-list for namespaced Issuers; no request \
         was made"
    )]
    HostNotAllowed { host: String },
    /// A call to one URL failed: the CA refused, or what answered (or did not) is unusable.
    #[error(transparent)]
    Call(#[from] CallError),
}

/// Which call went to which URL for which label: what every failed call's message starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub call: Call,
    /// The base URL, without credentials.
    pub url: String,
    pub label: String,
}

impl Attempt {
    pub fn new(call: Call, url: impl Into<String>, label: impl Into<String>) -> Self {
        Self {
            call,
            url: url.into(),
            label: label.into(),
        }
    }

    /// The error of this attempt ending in `failure`.
    pub fn failed(self, failure: Failure) -> Error {
        Error::Call(CallError {
            attempt: self,
            failure,
        })
    }
}

impl std::fmt::Display for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {} (label {:?})", self.call, self.url, self.label)
    }
}

/// A failed call: where ([`Attempt`]) and what ([`Failure`]). Written by hand because its
/// source is the failure's cause, not the failure itself.
#[derive(Debug)]
pub struct CallError {
    pub attempt: Attempt,
    pub failure: Failure,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A refusal is the CA's verdict on the call ("… refused: …"); anything else is what went
        // wrong with it ("…: TLS failure: …").
        let joint = if self.failure.is_verdict() { " " } else { ": " };
        write!(f, "{}{joint}{}", self.attempt, self.failure)
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.failure.source()
    }
}

/// What went wrong with one call to one URL.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The CA answered with a CFSSL error.
    #[error("refused: {message} (HTTP {status}, code {code})")]
    Refused {
        status: u16,
        code: i64,
        message: String,
        class: Class,
    },
    /// The CA refused a CSR whose key type it cannot sign.
    #[error(
        "refused the CSR: the CA does not sign {key_type} keys; request an RSA or ECDSA key \
         (CA said: {message})"
    )]
    UnsupportedKey { key_type: KeyType, message: String },
    /// An HTTP status with a body that is not a CFSSL envelope (a proxy, a wrong URL): not the
    /// CA's verdict, so the next URL is tried, and the issuer is unreachable if all answer so.
    #[error("HTTP {status} without a CFSSL answer: {snippet:?}")]
    Http { status: u16, snippet: String },
    /// [`Failure::Http`] from a host whose answers are not quoted (see
    /// [`Trust::Unquoted`](super::Trust::Unquoted)): its status and length only.
    #[error("HTTP {status} without a CFSSL answer ({length} bytes, not quoted)")]
    HttpUnquoted { status: u16, length: usize },
    /// A 3xx. Redirects are not followed: reqwest would send the signed body again to wherever
    /// the answer points, over plain http:// too (the CFSSL token covers the body only), and a
    /// tenant's CA could so send the manager to any host. Only the Location's host is named,
    /// never its path, query or user info.
    #[error(
        "the CA answered {} {}; redirects are not followed",
        status_line(*.status),
        location_or_none(.host.as_deref())
    )]
    Redirect { status: u16, host: Option<String> },
    /// A 200 whose body is not the CFSSL envelope or lacks the expected result.
    #[error("malformed answer: {0}")]
    Malformed(#[source] MalformedAnswer),
    /// The answer was larger than the client accepts.
    #[error("answer larger than {limit} bytes")]
    TooLarge { limit: usize },
    /// No answer in time.
    #[error("no answer within {timeout:?}")]
    Timeout { timeout: std::time::Duration },
    /// TLS handshake or certificate verification failed.
    /// The source is the transport error; the message carries the causes below it (see
    /// [`source_chain`]).
    #[error("TLS failure: {}", source_chain(.0))]
    Tls(#[source] BoxError),
    /// Connection refused or reset, DNS failure and the like. The source is the transport
    /// error; the message carries the causes below it (see [`source_chain`]).
    #[error("cannot reach the CA: {}", source_chain(.0))]
    Unreachable(#[source] BoxError),
    /// The CA signed, but what came back is not a usable certificate chain.
    #[error("unusable certificate: {0}")]
    BadCertificate(#[source] ChainError),
}

impl Failure {
    /// Whether this is the CA's answer to the call rather than a failure to get one.
    fn is_verdict(&self) -> bool {
        matches!(self, Failure::Refused { .. } | Failure::UnsupportedKey { .. })
    }

    fn class(&self) -> Class {
        match self {
            Failure::Tls(_) => Class::Issuer(IssuerFault::Tls),
            // The URL points at something that sends us elsewhere: the issuer's URL is wrong,
            // and asking again soon gets the same answer.
            Failure::Redirect { .. } => Class::Issuer(IssuerFault::Config),
            // The CA signed and answered a certificate that cannot be used for this request
            // (another key, expired, not parsing, a chain that does not hold): asking again
            // would sign again and most likely answer the same, so the request fails and
            // cert-manager's own back-off (hours, not seconds) paces the next attempt.
            Failure::UnsupportedKey { .. } | Failure::BadCertificate(_) => Class::Permanent,
            Failure::Refused { class, .. } => *class,
            Failure::Http { .. }
            | Failure::HttpUnquoted { .. }
            | Failure::Malformed(_)
            | Failure::TooLarge { .. }
            | Failure::Timeout { .. }
            | Failure::Unreachable(_) => Class::Retryable,
        }
    }
}

/// A CA bundle that parses but holds no certificate.
#[derive(Debug, thiserror::Error)]
#[error("no PEM certificate in it")]
pub struct NoCertificate;

/// What is wrong with an answer that claims success.
#[derive(Debug, thiserror::Error)]
pub enum MalformedAnswer {
    /// The body is not a CFSSL envelope with the expected result; the content type says what
    /// answered instead (a web server's page is `text/html`).
    #[error("not a CFSSL JSON answer ({}): {source}", content_type_or_none(.content_type))]
    NotCfssl {
        content_type: String,
        #[source]
        source: serde_json::Error,
    },
    /// [`MalformedAnswer::NotCfssl`] from a host whose answers are not quoted: the parser's
    /// message can quote the body (`invalid type: string "…"`), so only the length is told.
    #[error("not a CFSSL JSON answer ({length} bytes, not quoted)")]
    NotCfsslUnquoted { length: usize },
    #[error("success without a result")]
    NoResult,
    /// `success: false` without an error: no verdict on the request, so not a refusal.
    #[error("a failure without an error message")]
    NoVerdict,
    /// The credential probe's empty CSR was signed: no multirootca does that.
    #[error("the CA accepted an empty CSR")]
    AcceptedEmptyCsr,
    #[error("signer certificate: {0}")]
    SignerCertificate(#[source] ChainError),
}

/// `307 Temporary Redirect`: the status and its standard name, when it has one.
fn status_line(status: u16) -> String {
    match reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
    {
        Some(reason) => format!("{status} {reason}"),
        None => status.to_string(),
    }
}

fn location_or_none(host: Option<&str>) -> String {
    match host {
        Some(host) => format!("to host {host}"),
        None => "without a usable Location".to_string(),
    }
}

fn content_type_or_none(content_type: &str) -> &str {
    if content_type.is_empty() {
        "no content type"
    } else {
        content_type
    }
}

/// The messages of the errors below `err`, joined by `: `, or `err`'s own when it has none:
/// reqwest's top message ("error sending request") says less than its causes.
pub(super) fn source_chain(err: &BoxError) -> String {
    let err: &(dyn std::error::Error + 'static) = err.as_ref();
    let mut parts = Vec::new();
    let mut next = err.source();
    while let Some(e) = next {
        parts.push(e.to_string());
        next = e.source();
    }
    if parts.is_empty() {
        err.to_string()
    } else {
        parts.join(": ")
    }
}

impl Error {
    /// What went wrong, when a call to a URL failed.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Error::Call(e) => Some(&e.failure),
            _ => None,
        }
    }

    /// Whether the CA refused with exactly `message`.
    pub fn is_refusal(&self, message: &str) -> bool {
        matches!(self.failure(), Some(Failure::Refused { message: m, .. }) if m == message)
    }

    /// The same refusal classified again, now that the client knows whether the CA knows the
    /// label (see [`classify_refusal`]); any other error is returned as it is.
    pub fn with_label_known(mut self, label_known: bool) -> Self {
        if let Error::Call(CallError {
            attempt,
            failure:
                Failure::Refused {
                    status,
                    message,
                    class,
                    ..
                },
        }) = &mut self
        {
            *class = classify_refusal(attempt.call, *status, message, label_known);
        }
        self
    }

    pub fn class(&self) -> Class {
        match self {
            Error::Endpoints(_) => Class::Issuer(IssuerFault::Config),
            Error::CaBundle(_) | Error::HttpClient(_) => Class::Issuer(IssuerFault::Tls),
            Error::Csr(_) => Class::Permanent,
            Error::HostNotAllowed { .. } => Class::Issuer(IssuerFault::Config),
            Error::Encode { .. } => Class::Retryable,
            Error::Call(e) => e.failure.class(),
        }
    }

    /// Whether the next URL in the list should be tried: the CA was not reached, not healthy,
    /// or something else answered (any status without a CFSSL envelope). Only a CFSSL envelope
    /// from a live CA (a 4xx refusal) is final.
    pub fn fails_over(&self) -> bool {
        match self.failure() {
            Some(Failure::Refused { status, .. }) => *status >= 500,
            Some(
                Failure::Http { .. }
                | Failure::HttpUnquoted { .. }
                | Failure::Redirect { .. }
                | Failure::Malformed(_)
                | Failure::TooLarge { .. }
                | Failure::Timeout { .. }
                | Failure::Tls(_)
                | Failure::Unreachable(_),
            ) => true,
            Some(Failure::UnsupportedKey { .. } | Failure::BadCertificate(_)) | None => false,
        }
    }

    /// A CSR refused for good whose key type CFSSL builds before Go 1.13 cannot sign (Ed25519;
    /// the 2016 multirootca answers `bad request`) becomes [`Failure::UnsupportedKey`], whose
    /// message says so.
    pub fn for_key_type(self, key_type: KeyType) -> Error {
        match self {
            Error::Call(CallError {
                attempt,
                failure:
                    Failure::Refused {
                        message,
                        class: Class::Permanent,
                        ..
                    },
            }) if key_type == KeyType::Ed25519 => {
                attempt.failed(Failure::UnsupportedKey { key_type, message })
            }
            other => other,
        }
    }
}

/// Classifies a CFSSL error message from `call` (see multirootca's authsign processing order).
/// `bad request` on authsign is ambiguous (unknown label, or the CA refused this CSR); the
/// client resolves it with an `info` probe and passes the outcome as `label_known`.
pub fn classify_refusal(call: Call, status: u16, message: &str, label_known: bool) -> Class {
    if status >= 500 {
        return Class::Retryable;
    }
    match (call, message) {
        (Call::AuthSign, "invalid token") => Class::Issuer(IssuerFault::Credentials),
        (Call::AuthSign, "invalid profile" | "authorisation required" | "not authorised") => {
            Class::Issuer(IssuerFault::Config)
        }
        (Call::AuthSign, "bad request") if !label_known => Class::Issuer(IssuerFault::Config),
        (Call::AuthSign, _) => Class::Permanent,
        (Call::Info, _) => Class::Issuer(IssuerFault::Config),
    }
}

#[cfg(test)]
mod tests;
