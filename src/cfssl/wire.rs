//! CFSSL wire format: the JSON that `multirootca` reads and writes.
//!
//! Field order matters for the inner sign request: the HMAC token is computed over its exact
//! bytes, so the struct is serialised once and those bytes are both signed and sent.

use serde::{Deserialize, Serialize};

/// The inner `authsign` request, serialised in the order CFSSL's own client uses.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SignRequest<'a> {
    pub certificate_request: &'a str,
    pub label: &'a str,
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub profile: &'a str,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bundle: bool,
}

/// The outer `authsign` envelope: the inner request and its token, both base64.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AuthSignRequest {
    pub timestamp: i64,
    pub token: String,
    pub request: String,
}

/// The `info` request body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct InfoRequest<'a> {
    pub label: &'a str,
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub profile: &'a str,
}

/// Every CFSSL API answer: `{"success","result","errors","messages"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub success: bool,
    pub result: Option<T>,
    #[serde(default)]
    pub errors: Vec<ResponseMessage>,
    #[serde(default)]
    pub messages: Vec<ResponseMessage>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ResponseMessage {
    pub code: i64,
    pub message: String,
}

/// `authsign` result. `bundle` is only present on servers carrying cfssl PR #1218.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SignResult {
    pub certificate: String,
    #[serde(default)]
    pub bundle: Option<BundleResult>,
}

/// The part of a marshalled `bundler.Bundle` we use.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BundleResult {
    /// PEM chain, leaf first; the root is excluded in the "optimal" flavour.
    pub bundle: String,
    #[serde(default)]
    pub root: Option<String>,
}

/// `info` result: the signer's certificate and the profile's policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InfoResult {
    pub certificate: String,
    #[serde(default)]
    pub usages: Vec<String>,
    #[serde(default)]
    pub expiry: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_request_keeps_cfssl_field_order_and_omits_empty_fields() {
        let cases = [
            (
                ("CSR", "l", "", false),
                r#"{"certificate_request":"CSR","label":"l"}"#,
            ),
            (
                ("CSR", "l", "p", false),
                r#"{"certificate_request":"CSR","label":"l","profile":"p"}"#,
            ),
            (
                ("CSR", "l", "p", true),
                r#"{"certificate_request":"CSR","label":"l","profile":"p","bundle":true}"#,
            ),
            (
                ("", "l", "", true),
                r#"{"certificate_request":"","label":"l","bundle":true}"#,
            ),
        ];
        for ((csr, label, profile, bundle), want) in cases {
            let req = SignRequest {
                certificate_request: csr,
                label,
                profile,
                bundle,
            };
            assert_eq!(serde_json::to_string(&req).unwrap(), want);
        }
    }

    #[test]
    fn envelope_parses_multirootca_error_and_success_bodies() {
        let err: Envelope<SignResult> = serde_json::from_str(
            r#"{"success":false,"result":null,"errors":[{"code":1,"message":"invalid token"}],"messages":[]}"#,
        )
        .unwrap();
        assert!(!err.success);
        assert_eq!(err.errors[0].message, "invalid token");

        let ok: Envelope<SignResult> = serde_json::from_str(
            r#"{"success":true,"result":{"certificate":"PEM","bundle":{"bundle":"CHAIN","root":"ROOT","status":{}}},"errors":[],"messages":[]}"#,
        )
        .unwrap();
        let result = ok.result.unwrap();
        assert_eq!(result.certificate, "PEM");
        assert_eq!(result.bundle.unwrap().root.as_deref(), Some("ROOT"));
    }
}
