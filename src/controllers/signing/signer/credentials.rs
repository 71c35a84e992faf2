//! The issuer's credential Secret: read one Secret when needed, never cache Secrets.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::api::{IssuerKind, ReadyReason};
use crate::cfssl::AuthKey;

/// Secret entry holding the hex HMAC key (the Go issuer's name).
pub const KEY: &str = "key";
/// Optional Secret entry mixed into every token.
pub const ADDITIONAL_DATA: &str = "additional_data";

/// Why the credential Secret cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretProblem {
    #[error("Secret {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    /// A ClusterIssuer's Secret missing: says where it must be, since the usual mistake is to
    /// put it beside the requests.
    #[error(
        "Secret {namespace}/{name} not found; a ClusterIssuer's Secret must be in the cluster resource namespace (--cluster-resource-namespace)"
    )]
    NotFoundForClusterIssuer { namespace: String, name: String },
    #[error("Secret {namespace}/{name} has no {key:?} entry")]
    MissingKey {
        namespace: String,
        name: String,
        key: &'static str,
    },
    #[error("Secret {namespace}/{name}: {what}")]
    InvalidKey {
        namespace: String,
        name: String,
        /// What is wrong with the entry; never its value.
        what: String,
    },
    #[error("cannot read Secret {namespace}/{name}: {}", describe(.source))]
    Unreadable {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// An API error in a sentence: the API server's own message with its code and reason, not
/// kube's `ApiError: ... (Status { .. })` with the whole object printed for debugging.
pub fn describe(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => format!("{} (HTTP {} {})", status.message, status.code, status.reason),
        other => other.to_string(),
    }
}

impl SecretProblem {
    /// The issuer's `Ready` reason while its Secret has this problem.
    pub fn reason(&self) -> ReadyReason {
        match self {
            SecretProblem::NotFound { .. } | SecretProblem::NotFoundForClusterIssuer { .. } => {
                ReadyReason::SecretNotFound
            }
            SecretProblem::MissingKey { .. } | SecretProblem::InvalidKey { .. } => {
                ReadyReason::InvalidCredentials
            }
            // RBAC or the API server: our problem, not the issuer's, but it cannot sign.
            SecretProblem::Unreadable { .. } => ReadyReason::Pending,
        }
    }
}

impl SecretProblem {
    /// Pure: the problem as an issuer of `kind` shows it.
    pub fn for_kind(self, kind: IssuerKind) -> Self {
        match (self, kind) {
            (SecretProblem::NotFound { namespace, name }, IssuerKind::ClusterIssuer) => {
                SecretProblem::NotFoundForClusterIssuer { namespace, name }
            }
            (problem, _) => problem,
        }
    }
}

/// A usable key and the Secret version it came from, so clients built on it can be reused until
/// the Secret changes.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub key: AuthKey,
    pub version: String,
}

/// Reads `namespace/name` and turns it into credentials.
pub async fn read(client: &kube::Client, namespace: &str, name: &str) -> Result<Credentials, SecretProblem> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Ok(Some(secret)) => from_secret(&secret, namespace, name),
        Ok(None) => Err(SecretProblem::NotFound {
            namespace: namespace.into(),
            name: name.into(),
        }),
        Err(source) => Err(SecretProblem::Unreadable {
            namespace: namespace.into(),
            name: name.into(),
            source,
        }),
    }
}

/// Pure: the credentials in a Secret. Surrounding whitespace and a trailing newline around the
/// key are tolerated (`echo ... | kubectl create secret --from-file` leaves one).
pub fn from_secret(secret: &Secret, namespace: &str, name: &str) -> Result<Credentials, SecretProblem> {
    let entry = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.as_slice())
    };
    let hex_key = entry(KEY).ok_or_else(|| SecretProblem::MissingKey {
        namespace: namespace.into(),
        name: name.into(),
        key: KEY,
    })?;
    let invalid = |what: String| SecretProblem::InvalidKey {
        namespace: namespace.into(),
        name: name.into(),
        what,
    };
    let hex_key = std::str::from_utf8(hex_key).map_err(|_| invalid(format!("{KEY:?} is not text")))?;
    let mut key = AuthKey::from_hex(hex_key).map_err(|e| invalid(format!("{KEY:?}: {e}")))?;
    if let Some(extra) = entry(ADDITIONAL_DATA) {
        key = key.with_additional_data(extra.to_vec());
    }
    Ok(Credentials {
        key,
        version: secret.metadata.resource_version.clone().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn secret(entries: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        }
    }

    /// What a Secret gives: the token its key makes for a fixed message, or the error text.
    fn outcome(got: Result<Credentials, SecretProblem>) -> Result<String, String> {
        got.map(|c| c.key.token(b"m")).map_err(|e| e.to_string())
    }

    #[rustfmt::skip]
    #[test]
    fn secret_table() {
        let good = b"0123456789abcdef0123456789abcdef";
        let token = |extra: Option<&[u8]>| {
            let key = AuthKey::from_hex(std::str::from_utf8(good).unwrap()).unwrap();
            let key = match extra {
                Some(extra) => key.with_additional_data(extra.to_vec()),
                None => key,
            };
            Ok(key.token(b"m"))
        };
        let invalid = |what: &str| Err(format!("Secret ns/creds: {what}"));
        let missing = Err("Secret ns/creds has no \"key\" entry".to_string());
        let cases: Vec<(&str, Secret, Result<String, String>)> = vec![
            ("plain key", secret(&[("key", good)]), token(None)),
            ("trailing newline and spaces",
                secret(&[("key", b"  0123456789abcdef0123456789abcdef\n")]), token(None)),
            ("with additional data", secret(&[("key", good), ("additional_data", b"x")]), token(Some(b"x"))),
            ("no data at all", Secret::default(), missing.clone()),
            ("wrong entry name", secret(&[("hmac", good)]), missing),
            ("not hex", secret(&[("key", b"not-a-hex-keys")]),
                invalid("\"key\": the key is not hex (invalid digit at position 0)")),
            ("not utf-8", secret(&[("key", &[0xff, 0xfe])]), invalid("\"key\" is not text")),
        ];
        for (name, s, want) in cases {
            assert_eq!(outcome(from_secret(&s, "ns", "creds")), want, "{name}");
        }
    }

    #[test]
    fn for_kind_table() {
        use IssuerKind::{ClusterIssuer, Issuer};
        let missing = || SecretProblem::NotFound {
            namespace: "sys".into(),
            name: "creds".into(),
        };
        let no_key = || SecretProblem::MissingKey {
            namespace: "sys".into(),
            name: "creds".into(),
            key: KEY,
        };
        let cases = [
            ("Issuer, missing", missing(), Issuer, "Secret sys/creds not found"),
            (
                "ClusterIssuer, missing",
                missing(),
                ClusterIssuer,
                "Secret sys/creds not found; a ClusterIssuer's Secret must be in the cluster resource namespace (--cluster-resource-namespace)",
            ),
            (
                "ClusterIssuer, other problem",
                no_key(),
                ClusterIssuer,
                "Secret sys/creds has no \"key\" entry",
            ),
        ];
        for (row, problem, kind, want) in cases {
            let shown = problem.for_kind(kind);
            assert_eq!(
                shown.reason(),
                if row.ends_with("missing") {
                    ReadyReason::SecretNotFound
                } else {
                    ReadyReason::InvalidCredentials
                },
                "{row}"
            );
            assert_eq!(shown.to_string(), want, "{row}");
        }
    }

    #[test]
    fn unreadable_table() {
        let api = |code: u16, message: &str, reason: &str| {
            let status: kube::core::Status = serde_json::from_value(
                serde_json::json!({"code": code, "message": message, "reason": reason}),
            )
            .unwrap();
            kube::Error::Api(Box::new(status))
        };
        let cases = [
            (
                "forbidden",
                api(
                    403,
                    "secrets \"creds\" is forbidden: User \"x\" cannot get resource",
                    "Forbidden",
                ),
                "cannot read Secret ns/creds: secrets \"creds\" is forbidden: User \"x\" cannot get resource (HTTP 403 Forbidden)",
            ),
            (
                "server error",
                api(500, "etcd is down", "InternalError"),
                "cannot read Secret ns/creds: etcd is down (HTTP 500 InternalError)",
            ),
            (
                "not an API answer",
                kube::Error::LinesCodecMaxLineLengthExceeded,
                "cannot read Secret ns/creds: Error finding newline character",
            ),
        ];
        for (row, source, want) in cases {
            let problem = SecretProblem::Unreadable {
                namespace: "ns".into(),
                name: "creds".into(),
                source,
            };
            assert_eq!(problem.to_string(), want, "{row}");
        }
    }

    #[test]
    fn additional_data_changes_the_token() {
        let plain = from_secret(&secret(&[("key", b"00ff")]), "ns", "s").unwrap();
        let extra = from_secret(&secret(&[("key", b"00ff"), ("additional_data", b"x")]), "ns", "s").unwrap();
        assert_ne!(plain.key.token(b"m"), extra.key.token(b"m"));
    }

    #[test]
    fn errors_never_carry_the_key() {
        let err = from_secret(&secret(&[("key", b"zz0123456789abcdef")]), "ns", "s").unwrap_err();
        assert!(!err.to_string().contains("0123456789abcdef"), "{err}");
    }
}
