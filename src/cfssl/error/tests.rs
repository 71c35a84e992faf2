//! Classes, failover and causes of every CFSSL error.

use super::*;
use Class::*;
use IssuerFault::*;

/// One refusal: what the CA answered to which call, and its class.
struct Refusal {
    call: Call,
    status: u16,
    message: &'static str,
    label_known: bool,
    want: Class,
}

#[rustfmt::skip]
#[test]
fn refusal_classification_table() {
    use Call::{AuthSign, Info};
    let cases = [
        Refusal { call: AuthSign, status: 400, message: "invalid token", label_known: true, want: Issuer(Credentials) },
        Refusal { call: AuthSign, status: 400, message: "invalid profile", label_known: true, want: Issuer(Config) },
        Refusal { call: AuthSign, status: 401, message: "authorisation required", label_known: true, want: Issuer(Config) },
        Refusal { call: AuthSign, status: 403, message: "not authorised", label_known: true, want: Issuer(Config) },
        Refusal { call: AuthSign, status: 400, message: "bad request", label_known: false, want: Issuer(Config) },
        Refusal { call: AuthSign, status: 400, message: "bad request", label_known: true, want: Permanent },
        Refusal { call: AuthSign, status: 400, message: "invalid request", label_known: true, want: Permanent },
        Refusal {
            call: AuthSign, status: 400, message: "illegal base64 data at input byte 0", label_known: true,
            want: Permanent,
        },
        Refusal { call: AuthSign, status: 500, message: "error creating bundle", label_known: true, want: Retryable },
        Refusal { call: Info, status: 400, message: "bad label", label_known: true, want: Issuer(Config) },
        Refusal { call: Info, status: 503, message: "unavailable", label_known: true, want: Retryable },
    ];
    for Refusal { call, status, message, label_known, want } in cases {
        assert_eq!(classify_refusal(call, status, message, label_known), want, "{call} {status} {message}");
    }
}

fn authsign() -> Attempt {
    Attempt::new(Call::AuthSign, "https://ca", "l")
}

fn http(status: u16) -> Error {
    authsign().failed(Failure::Http {
        status,
        snippet: "<html>".into(),
    })
}

fn redirect(status: u16, host: Option<&str>) -> Error {
    authsign().failed(Failure::Redirect {
        status,
        host: host.map(String::from),
    })
}

fn refused(status: u16, class: Class) -> Error {
    authsign().failed(Failure::Refused {
        status,
        code: 1,
        message: "m".into(),
        class,
    })
}

/// Only a CFSSL envelope from a live CA is final; anything else tries the next URL and, on
/// the last one, leaves the issuer unreachable (retryable).
#[test]
fn class_and_failover_table() {
    let info = || Attempt::new(Call::Info, "https://ca", "l");
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
            info().failed(Failure::Malformed(MalformedAnswer::NoResult)),
            Retryable,
            true,
        ),
        (
            "too large",
            info().failed(Failure::TooLarge { limit: 1 }),
            Retryable,
            true,
        ),
        (
            "timeout",
            info().failed(Failure::Timeout {
                timeout: std::time::Duration::from_secs(1),
            }),
            Retryable,
            true,
        ),
        ("tls", info().failed(Failure::Tls("x".into())), Issuer(Tls), true),
        (
            "unreachable",
            info().failed(Failure::Unreachable("x".into())),
            Retryable,
            true,
        ),
        (
            "bad certificate",
            info().failed(Failure::BadCertificate(ChainError::KeyMismatch)),
            Permanent,
            false,
        ),
        (
            "ed25519",
            info().failed(Failure::UnsupportedKey {
                key_type: KeyType::Ed25519,
                message: "bad request".into(),
            }),
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
        (
            "too many urls",
            Error::Endpoints(super::super::EndpointsError::TooMany { count: 9 }),
            Issuer(Config),
            false,
        ),
        (
            "redirect 307",
            redirect(307, Some("other.example")),
            Issuer(Config),
            true,
        ),
        (
            "redirect 301",
            redirect(301, Some("other.example")),
            Issuer(Config),
            true,
        ),
        (
            "redirect without location",
            redirect(302, None),
            Issuer(Config),
            true,
        ),
        (
            "proxy 404, not quoted",
            authsign().failed(Failure::HttpUnquoted {
                status: 404,
                length: 9,
            }),
            Retryable,
            true,
        ),
        (
            "host not on the allow-list",
            Error::HostNotAllowed {
                host: "10.0.0.1".into(),
            },
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
    let kind = |err: &Error| match err.failure() {
        Some(Failure::UnsupportedKey { key_type, message }) => {
            format!("unsupported {key_type}: {message}")
        }
        Some(Failure::Refused { class, .. }) => format!("refused {class:?}"),
        _ => format!("{err}"),
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
        attempt: Attempt::new(Call::Info, "https://ca", "l"),
        content_type: "text/html".into(),
        quote: true,
    };
    let parse = |body: &[u8]| ctx.parse::<serde_json::Value>(StatusCode::OK, body).unwrap_err();
    let unquoted = ErrorContext {
        attempt: ctx.attempt.clone(),
        content_type: "text/html".into(),
        quote: false,
    };
    let parse_unquoted = |status, body: &[u8]| unquoted.parse::<serde_json::Value>(status, body).unwrap_err();
    let base: reqwest::Url = "https://ca/api/v1/cfssl/info".parse().unwrap();
    let redirected = |status, location| ctx.redirect(status, &base, location);
    // Bound but not listening: the port refuses connections and no one else can take it.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let closed = socket.local_addr().unwrap();
    let refused = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("http://{closed}/"))
        .send()
        .await
        .unwrap_err();
    let bad_certificate = |source| authsign().failed(Failure::BadCertificate(source));
    let garbage_pem = "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n";
    let bad_bundle = reqwest::Certificate::from_pem_bundle(b"-----BEGIN CERTIFICATE-----\n!!\n").unwrap_err();
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
            Attempt::new(Call::Info, "https://ca", "l").failed(Failure::Tls(Box::new(Sending(
                std::io::Error::other(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::UnknownIssuer,
                )),
            )))),
            r#"info at https://ca (label "l"): TLS failure: invalid peer certificate: UnknownIssuer"#,
            Some("error sending request"),
        ),
        (
            "not cfssl",
            parse(b"<html>"),
            r#"info at https://ca (label "l"): malformed answer: not a CFSSL JSON answer (text/html): expected value at line 1 column 1"#,
            Some("not a CFSSL JSON answer (text/html): expected value at line 1 column 1"),
        ),
        (
            "failure without an error",
            parse(br#"{"success":false,"result":null,"errors":[],"messages":[]}"#),
            r#"info at https://ca (label "l"): malformed answer: a failure without an error message"#,
            Some("a failure without an error message"),
        ),
        (
            "no result",
            parse(br#"{"success":true,"result":null,"errors":[],"messages":[]}"#),
            r#"info at https://ca (label "l"): malformed answer: success without a result"#,
            Some("success without a result"),
        ),
        (
            "signer certificate",
            Attempt::new(Call::Info, "https://ca", "l").failed(Failure::Malformed(
                MalformedAnswer::SignerCertificate(crate::pki::certificates_in("x").unwrap_err()),
            )),
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
                crate::pki::certificates_in("-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n")
                    .unwrap_err(),
            ),
            r#"authsign at https://ca (label "l"): unusable certificate: not PEM: base64 decode error: InvalidCharacter(33)"#,
            Some("not PEM: base64 decode error: InvalidCharacter(33)"),
        ),
        (
            "certificate for another key",
            bad_certificate(ChainError::KeyMismatch),
            r#"authsign at https://ca (label "l"): unusable certificate: the certificate is for a different key than the CSR"#,
            Some("the certificate is for a different key than the CSR"),
        ),
        (
            "foreign intermediate",
            bad_certificate(ChainError::Unchained { index: 1 }),
            r#"authsign at https://ca (label "l"): unusable certificate: certificate 1 of the CA's chain did not issue certificate 0"#,
            Some("certificate 1 of the CA's chain did not issue certificate 0"),
        ),
        (
            "expired",
            bad_certificate(ChainError::Expired {
                not_after: "2002-01-01T00:00:00Z".parse().unwrap(),
            }),
            r#"authsign at https://ca (label "l"): unusable certificate: the certificate expired at 2002-01-01T00:00:00Z"#,
            Some("the certificate expired at 2002-01-01T00:00:00Z"),
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
        (
            "not cfssl, not quoted",
            parse_unquoted(StatusCode::NOT_FOUND, b"secret: s3cret"),
            r#"info at https://ca (label "l"): HTTP 404 without a CFSSL answer (14 bytes, not quoted)"#,
            None,
        ),
        (
            "200 not cfssl, not quoted (the parser's message would quote it)",
            parse_unquoted(StatusCode::OK, br#"{"success":"s3cret"}"#),
            r#"info at https://ca (label "l"): malformed answer: not a CFSSL JSON answer (20 bytes, not quoted)"#,
            Some("not a CFSSL JSON answer (20 bytes, not quoted)"),
        ),
        (
            "307: the Location's host only, never its user info, path or query",
            redirected(
                StatusCode::TEMPORARY_REDIRECT,
                Some("http://user:s3cret@other.example:8443/s3cret/path?token=s3cret#s3cret"),
            ),
            r#"info at https://ca (label "l"): the CA answered 307 Temporary Redirect to host other.example; redirects are not followed"#,
            None,
        ),
        (
            "308 to an IP address",
            redirected(
                StatusCode::PERMANENT_REDIRECT,
                Some("https://10.0.0.1/api/v1/cfssl/info"),
            ),
            r#"info at https://ca (label "l"): the CA answered 308 Permanent Redirect to host 10.0.0.1; redirects are not followed"#,
            None,
        ),
        (
            "302 relative: the host asked",
            redirected(StatusCode::FOUND, Some("/login?next=s3cret")),
            r#"info at https://ca (label "l"): the CA answered 302 Found to host ca; redirects are not followed"#,
            None,
        ),
        (
            "301 without a Location",
            redirected(StatusCode::MOVED_PERMANENTLY, None),
            r#"info at https://ca (label "l"): the CA answered 301 Moved Permanently without a usable Location; redirects are not followed"#,
            None,
        ),
        (
            "399 with a Location that does not parse",
            redirected(StatusCode::from_u16(399).unwrap(), Some("http://[::1")),
            r#"info at https://ca (label "l"): the CA answered 399 without a usable Location; redirects are not followed"#,
            None,
        ),
        (
            "too many urls",
            Error::from(super::super::Endpoints::parse(&["https://ca"; 9].join(",")).unwrap_err()),
            "9 CFSSL URLs given; at most 8 are allowed",
            None,
        ),
        (
            "host not on the allow-list",
            Error::HostNotAllowed {
                host: "kubernetes.default.svc".into(),
            },
            "the CA host kubernetes.default.svc is not on the manager's allow-list for namespaced Issuers; no request was made",
            None,
        ),
    ];
    for (name, err, display, source) in cases {
        let got = (err.to_string(), err.source().map(ToString::to_string));
        assert_eq!(got, (display.to_string(), source.map(String::from)), "{name}");
    }
}
