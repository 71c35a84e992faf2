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

/// Every message names the URL and label; none carries the key, token or request body.
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
    /// The CA answered with a CFSSL error.
    #[error("{call} at {url} (label {label:?}) refused: {message} (HTTP {status}, code {code})")]
    Refused {
        call: Call,
        url: String,
        label: String,
        status: u16,
        code: i64,
        message: String,
        class: Class,
    },
    /// The CA refused a CSR whose key type it cannot sign.
    #[error(
        "{call} at {url} (label {label:?}) refused the CSR: the CA does not sign {key_type} keys; \
         request an RSA or ECDSA key (CA said: {message})"
    )]
    UnsupportedKey {
        call: Call,
        url: String,
        label: String,
        key_type: KeyType,
        message: String,
    },
    /// An HTTP status with a body that is not a CFSSL envelope (a proxy, a wrong URL): not the
    /// CA's verdict, so the next URL is tried, and the issuer is unreachable if all answer so.
    #[error("{call} at {url} (label {label:?}): HTTP {status} without a CFSSL answer: {snippet:?}")]
    Http {
        call: Call,
        url: String,
        label: String,
        status: u16,
        snippet: String,
    },
    /// A 200 whose body is not the CFSSL envelope or lacks the expected result.
    #[error("{call} at {url} (label {label:?}): malformed answer: {problem}")]
    Malformed {
        call: Call,
        url: String,
        label: String,
        #[source]
        problem: MalformedAnswer,
    },
    /// The answer was larger than the client accepts.
    #[error("{call} at {url} (label {label:?}): answer larger than {limit} bytes")]
    TooLarge {
        call: Call,
        url: String,
        label: String,
        limit: usize,
    },
    /// No answer in time.
    #[error("{call} at {url} (label {label:?}): no answer within {timeout:?}")]
    Timeout {
        call: Call,
        url: String,
        label: String,
        timeout: std::time::Duration,
    },
    /// TLS handshake or certificate verification failed.
    /// `source` is the transport error; the message carries the causes below it (see
    /// [`source_chain`]).
    #[error("{call} at {url} (label {label:?}): TLS failure: {}", source_chain(.source))]
    Tls {
        call: Call,
        url: String,
        label: String,
        source: BoxError,
    },
    /// Connection refused or reset, DNS failure and the like. `source` is the transport error;
    /// the message carries the causes below it (see [`source_chain`]).
    #[error("{call} at {url} (label {label:?}): cannot reach the CA: {}", source_chain(.source))]
    Unreachable {
        call: Call,
        url: String,
        label: String,
        source: BoxError,
    },
    /// The CA signed, but what came back is not a usable certificate chain.
    #[error("{call} at {url} (label {label:?}): unusable certificate: {source}")]
    BadCertificate {
        call: Call,
        url: String,
        label: String,
        #[source]
        source: ChainError,
    },
}

/// A CA bundle that parses but holds no certificate.
#[derive(Debug, thiserror::Error)]
#[error("no PEM certificate in it")]
pub struct NoCertificate;

/// What is wrong with an answer that claims success.
#[derive(Debug, thiserror::Error)]
pub enum MalformedAnswer {
    /// The body is not a CFSSL envelope with the expected result.
    #[error("{0}")]
    NotCfssl(#[source] serde_json::Error),
    #[error("success without a result")]
    NoResult,
    /// The credential probe's empty CSR was signed: no multirootca does that.
    #[error("the CA accepted an empty CSR")]
    AcceptedEmptyCsr,
    #[error("signer certificate: {0}")]
    SignerCertificate(#[source] ChainError),
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
    /// Whether the CA refused with exactly `message`.
    pub fn is_refusal(&self, message: &str) -> bool {
        matches!(self, Error::Refused { message: m, .. } if m == message)
    }

    /// The same refusal classified again, now that the client knows whether the CA knows the
    /// label (see [`classify_refusal`]); any other error is returned as it is.
    pub fn with_label_known(mut self, label_known: bool) -> Self {
        if let Error::Refused {
            call,
            status,
            message,
            class,
            ..
        } = &mut self
        {
            *class = classify_refusal(*call, *status, message, label_known);
        }
        self
    }

    pub fn class(&self) -> Class {
        match self {
            Error::Endpoints(_) => Class::Issuer(IssuerFault::Config),
            Error::CaBundle(_) | Error::HttpClient(_) | Error::Tls { .. } => Class::Issuer(IssuerFault::Tls),
            Error::Csr(_) | Error::UnsupportedKey { .. } => Class::Permanent,
            Error::Refused { class, .. } => *class,
            Error::Encode { .. }
            | Error::Http { .. }
            | Error::Malformed { .. }
            | Error::TooLarge { .. }
            | Error::Timeout { .. }
            | Error::Unreachable { .. }
            | Error::BadCertificate { .. } => Class::Retryable,
        }
    }

    /// Whether the next URL in the list should be tried: the CA was not reached, not healthy,
    /// or something else answered (any status without a CFSSL envelope). Only a CFSSL envelope
    /// from a live CA (a 4xx refusal) is final.
    pub fn fails_over(&self) -> bool {
        match self {
            Error::Refused { status, .. } => *status >= 500,
            Error::Http { .. }
            | Error::Malformed { .. }
            | Error::TooLarge { .. }
            | Error::Timeout { .. }
            | Error::Tls { .. }
            | Error::Unreachable { .. } => true,
            _ => false,
        }
    }

    /// A CSR refused for good whose key type CFSSL builds before Go 1.13 cannot sign (Ed25519;
    /// the 2016 multirootca answers `bad request`) becomes [`Error::UnsupportedKey`], whose
    /// message says so.
    pub fn for_key_type(self, key_type: KeyType) -> Error {
        match self {
            Error::Refused {
                call,
                url,
                label,
                message,
                class: Class::Permanent,
                ..
            } if key_type == KeyType::Ed25519 => Error::UnsupportedKey {
                call,
                url,
                label,
                key_type,
                message,
            },
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
mod tests {
    use super::*;
    use Class::*;
    use IssuerFault::*;

    #[test]
    fn refusal_classification_table() {
        let cases = [
            (Call::AuthSign, 400, "invalid token", true, Issuer(Credentials)),
            (Call::AuthSign, 400, "invalid profile", true, Issuer(Config)),
            (
                Call::AuthSign,
                401,
                "authorisation required",
                true,
                Issuer(Config),
            ),
            (Call::AuthSign, 403, "not authorised", true, Issuer(Config)),
            (Call::AuthSign, 400, "bad request", false, Issuer(Config)),
            (Call::AuthSign, 400, "bad request", true, Permanent),
            (Call::AuthSign, 400, "invalid request", true, Permanent),
            (
                Call::AuthSign,
                400,
                "illegal base64 data at input byte 0",
                true,
                Permanent,
            ),
            (Call::AuthSign, 500, "error creating bundle", true, Retryable),
            (Call::Info, 400, "bad label", true, Issuer(Config)),
            (Call::Info, 503, "unavailable", true, Retryable),
        ];
        for (call, status, message, label_known, want) in cases {
            assert_eq!(
                classify_refusal(call, status, message, label_known),
                want,
                "{call} {status} {message}"
            );
        }
    }

    fn http(status: u16) -> Error {
        Error::Http {
            call: Call::AuthSign,
            url: "https://ca".into(),
            label: "l".into(),
            status,
            snippet: "<html>".into(),
        }
    }

    fn refused(status: u16, class: Class) -> Error {
        Error::Refused {
            call: Call::AuthSign,
            url: "https://ca".into(),
            label: "l".into(),
            status,
            code: 1,
            message: "m".into(),
            class,
        }
    }

    /// Only a CFSSL envelope from a live CA is final; anything else tries the next URL and, on
    /// the last one, leaves the issuer unreachable (retryable).
    #[test]
    fn class_and_failover_table() {
        let (call, url, label) = (Call::Info, "https://ca".to_string(), "l".to_string());
        let cases: Vec<(&str, Error, Class, bool)> = vec![
            ("proxy 400", http(400), Retryable, true),
            ("proxy 404", http(404), Retryable, true),
            ("proxy 405", http(405), Retryable, true),
            ("proxy 413", http(413), Retryable, true),
            ("proxy 429", http(429), Retryable, true),
            ("proxy 502", http(502), Retryable, true),
            ("refused 400", refused(400, Permanent), Permanent, false),
            (
                "refused token",
                refused(401, Issuer(Credentials)),
                Issuer(Credentials),
                false,
            ),
            ("refused 500", refused(500, Retryable), Retryable, true),
            (
                "200 not cfssl",
                Error::Malformed {
                    call,
                    url: url.clone(),
                    label: label.clone(),
                    problem: MalformedAnswer::NoResult,
                },
                Retryable,
                true,
            ),
            (
                "too large",
                Error::TooLarge {
                    call,
                    url: url.clone(),
                    label: label.clone(),
                    limit: 1,
                },
                Retryable,
                true,
            ),
            (
                "timeout",
                Error::Timeout {
                    call,
                    url: url.clone(),
                    label: label.clone(),
                    timeout: std::time::Duration::from_secs(1),
                },
                Retryable,
                true,
            ),
            (
                "tls",
                Error::Tls {
                    call,
                    url: url.clone(),
                    label: label.clone(),
                    source: "x".into(),
                },
                Issuer(Tls),
                true,
            ),
            (
                "unreachable",
                Error::Unreachable {
                    call,
                    url: url.clone(),
                    label: label.clone(),
                    source: "x".into(),
                },
                Retryable,
                true,
            ),
            (
                "bad certificate",
                Error::BadCertificate {
                    call,
                    url: url.clone(),
                    label: label.clone(),
                    source: ChainError::KeyMismatch,
                },
                Retryable,
                false,
            ),
            (
                "ed25519",
                Error::UnsupportedKey {
                    call,
                    url,
                    label,
                    key_type: KeyType::Ed25519,
                    message: "bad request".into(),
                },
                Permanent,
                false,
            ),
            (
                "csr",
                Error::Csr(CsrError::TooLarge { size: 70000 }),
                Permanent,
                false,
            ),
            (
                "ca bundle",
                Error::CaBundle(Box::new(NoCertificate)),
                Issuer(Tls),
                false,
            ),
            (
                "url",
                Error::Endpoints(super::super::EndpointsError::Empty),
                Issuer(Config),
                false,
            ),
        ];
        for (name, err, class, fails_over) in cases {
            assert_eq!((err.class(), err.fails_over()), (class, fails_over), "{name}");
        }
    }

    #[test]
    fn key_type_refusal_table() {
        let kind = |err: &Error| match err {
            Error::UnsupportedKey {
                key_type, message, ..
            } => format!("unsupported {key_type}: {message}"),
            Error::Refused { class, .. } => format!("refused {class:?}"),
            other => format!("{other}"),
        };
        let cases = [
            (
                refused(400, Permanent),
                KeyType::Ed25519,
                "unsupported Ed25519: m",
            ),
            (
                refused(400, Issuer(Config)),
                KeyType::Ed25519,
                "refused Issuer(Config)",
            ),
            (refused(500, Retryable), KeyType::Ed25519, "refused Retryable"),
            (refused(400, Permanent), KeyType::EcdsaP521, "refused Permanent"),
            (refused(400, Permanent), KeyType::Rsa, "refused Permanent"),
        ];
        for (err, key_type, want) in cases {
            assert_eq!(kind(&err.for_key_type(key_type)), want, "{key_type}");
        }
    }

    /// An error with one cause, as reqwest's "error sending request" wraps what went wrong.
    #[derive(Debug, thiserror::Error)]
    #[error("error sending request")]
    struct Sending(#[source] std::io::Error);

    /// Every error with an underlying cause returns it from `source()`, and its message is the
    /// one it always had (causes below a transport error joined by `: `); errors without a
    /// cause have no source.
    #[tokio::test]
    async fn causes_are_sources_and_messages_are_unchanged() {
        use super::super::answer::ErrorContext;
        use reqwest::StatusCode;
        use std::error::Error as _;
        crate::install_crypto_provider();
        let ctx = ErrorContext {
            call: Call::Info,
            url: "https://ca".into(),
            label: "l".into(),
        };
        let parse = |body: &[u8]| ctx.parse::<serde_json::Value>(StatusCode::OK, body).unwrap_err();
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let refused = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(format!("http://{closed}/"))
            .send()
            .await
            .unwrap_err();
        let bad_certificate = |source| Error::BadCertificate {
            call: Call::AuthSign,
            url: "https://ca".into(),
            label: "l".into(),
            source,
        };
        let garbage_pem = "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n";
        let bad_bundle =
            reqwest::Certificate::from_pem_bundle(b"-----BEGIN CERTIFICATE-----\n!!\n").unwrap_err();
        let unencodable = serde_json::to_vec(&std::collections::BTreeMap::from([((1, 2), 3)])).unwrap_err();
        let cases: Vec<(&str, Error, &str, Option<&str>)> = vec![
            (
                "unreachable",
                ctx.transport(refused, std::time::Duration::from_secs(1)),
                r#"info at https://ca (label "l"): cannot reach the CA: client error (Connect): tcp connect error: Connection refused (os error 111)"#,
                Some("error sending request"),
            ),
            (
                "tls",
                Error::Tls {
                    call: Call::Info,
                    url: "https://ca".into(),
                    label: "l".into(),
                    source: Box::new(Sending(std::io::Error::other(rustls::Error::InvalidCertificate(
                        rustls::CertificateError::UnknownIssuer,
                    )))),
                },
                r#"info at https://ca (label "l"): TLS failure: invalid peer certificate: UnknownIssuer"#,
                Some("error sending request"),
            ),
            (
                "not cfssl",
                parse(b"<html>"),
                r#"info at https://ca (label "l"): malformed answer: expected value at line 1 column 1"#,
                Some("expected value at line 1 column 1"),
            ),
            (
                "no result",
                parse(br#"{"success":true,"result":null,"errors":[],"messages":[]}"#),
                r#"info at https://ca (label "l"): malformed answer: success without a result"#,
                Some("success without a result"),
            ),
            (
                "signer certificate",
                Error::Malformed {
                    call: Call::Info,
                    url: "https://ca".into(),
                    label: "l".into(),
                    problem: MalformedAnswer::SignerCertificate(
                        crate::pki::certificates_in("x").unwrap_err(),
                    ),
                },
                r#"info at https://ca (label "l"): malformed answer: signer certificate: no PEM certificate found"#,
                Some("signer certificate: no PEM certificate found"),
            ),
            (
                "certificate not der",
                bad_certificate(crate::pki::certificates_in(garbage_pem).unwrap_err()),
                r#"authsign at https://ca (label "l"): unusable certificate: certificate 0 does not parse: Parsing Error: NomError(Eof)"#,
                Some("certificate 0 does not parse: Parsing Error: NomError(Eof)"),
            ),
            (
                "certificate not pem",
                bad_certificate(
                    crate::pki::certificates_in(
                        "-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n",
                    )
                    .unwrap_err(),
                ),
                r#"authsign at https://ca (label "l"): unusable certificate: not PEM: invalid data: Invalid symbol 33, offset 0."#,
                Some("not PEM: invalid data: Invalid symbol 33, offset 0."),
            ),
            (
                "certificate for another key",
                bad_certificate(ChainError::KeyMismatch),
                r#"authsign at https://ca (label "l"): unusable certificate: the certificate is for a different key than the CSR"#,
                Some("the certificate is for a different key than the CSR"),
            ),
            (
                "ca bundle",
                Error::CaBundle(Box::new(bad_bundle)),
                "invalid CA bundle: builder error",
                Some("builder error"),
            ),
            (
                "empty ca bundle",
                Error::CaBundle(Box::new(NoCertificate)),
                "invalid CA bundle: no PEM certificate in it",
                Some("no PEM certificate in it"),
            ),
            (
                "url",
                Error::from(super::super::Endpoints::parse("not a url").unwrap_err()),
                r#"invalid CFSSL URL "not a url": relative URL without a base"#,
                Some("relative URL without a base"),
            ),
            (
                "url scheme",
                Error::from(super::super::Endpoints::parse("ftp://ca").unwrap_err()),
                r#"invalid CFSSL URL "ftp://ca": scheme must be http or https"#,
                Some("scheme must be http or https"),
            ),
            (
                "csr not pem",
                Error::from(crate::pki::check_csr_pem(b"hello").unwrap_err()),
                "the CSR is not PEM: malformedframing",
                Some("malformedframing"),
            ),
            (
                "csr not der",
                Error::from(
                    crate::pki::check_csr_pem(
                        garbage_pem
                            .replace("CERTIFICATE", "CERTIFICATE REQUEST")
                            .as_bytes(),
                    )
                    .unwrap_err(),
                ),
                "the CSR does not parse: Parsing Error: NomError(Eof)",
                Some("Parsing Error: NomError(Eof)"),
            ),
            (
                "encode",
                Error::Encode {
                    call: Call::AuthSign,
                    source: unencodable,
                },
                "authsign: cannot encode the request: key must be a string",
                Some("key must be a string"),
            ),
            (
                "no cause",
                http(502),
                r#"authsign at https://ca (label "l"): HTTP 502 without a CFSSL answer: "<html>""#,
                None,
            ),
        ];
        for (name, err, display, source) in cases {
            let got = (err.to_string(), err.source().map(ToString::to_string));
            assert_eq!(got, (display.to_string(), source.map(String::from)), "{name}");
        }
    }
}
