use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use super::*;
use crate::certificates::decode::public_keys_equal;
use crate::certificates::fixtures::{self, at};
use crate::pki::keys::KeySpec;

struct Row {
    name: &'static str,
    key: &'static Key,
    duration: Option<&'static str>,
    usages: &'static [&'static str],
    is_ca: bool,
    /// (seconds valid, key usage bits as x509-parser prints them, extended: server, client)
    want: (i64, &'static str, (bool, bool)),
}

#[test]
fn a_temporary_certificate_is_for_the_key_and_the_spec() {
    let rows = [
        Row {
            name: "RSA, defaults",
            key: fixtures::key(KeySpec::Rsa(2048), false),
            duration: None,
            usages: &[],
            is_ca: false,
            want: (
                90 * 24 * 3600,
                "Digital Signature, Key Encipherment",
                (false, false),
            ),
        },
        Row {
            name: "EC, an hour, server and client auth",
            key: fixtures::ec(),
            duration: Some("1h"),
            usages: &["digital signature", "server auth", "client auth"],
            is_ca: false,
            want: (3600, "Digital Signature", (true, true)),
        },
        Row {
            name: "a CA",
            key: fixtures::ec(),
            duration: Some("2h"),
            usages: &[],
            is_ca: true,
            want: (
                7200,
                "Digital Signature, Key Encipherment, Key Cert Sign",
                (false, false),
            ),
        },
    ];
    let now = at("2026-03-01T00:00:00Z");
    for row in rows {
        let mut spec = fixtures::spec();
        spec.common_name = "web".into();
        spec.dns_names = vec!["web.example.com".into()];
        spec.duration = row.duration.map(str::to_string);
        spec.usages = row.usages.iter().map(ToString::to_string).collect();
        spec.is_ca = row.is_ca;
        let pem = temporary_certificate(&spec, row.key, now).expect(row.name);
        let der = pem::parse(&pem).expect("pem").into_contents();
        let (_, cert) = X509Certificate::from_der(&der).expect("x509");
        assert_eq!(
            public_keys_equal(cert.public_key(), row.key),
            Ok(true),
            "{}",
            row.name
        );
        assert_eq!(cert.issuer().to_string(), "CN=cert-manager.local", "{}", row.name);
        assert_eq!(
            cert.subject().to_string(),
            "CN=web, serialNumber=1234567890",
            "{}",
            row.name
        );
        let validity = cert.validity();
        let seconds = validity.not_after.timestamp() - validity.not_before.timestamp();
        let key_usage = cert.key_usage().expect("ext").map(|u| u.value.to_string());
        let eku = cert
            .extended_key_usage()
            .expect("ext")
            .map(|e| (e.value.server_auth, e.value.client_auth));
        assert_eq!(
            (
                validity.not_before.timestamp(),
                seconds,
                key_usage.as_deref(),
                eku.unwrap_or_default()
            ),
            (now.as_second(), row.want.0, Some(row.want.1), row.want.2),
            "{}",
            row.name
        );
        let sans = cert.subject_alternative_name().expect("ext").expect("SANs");
        let dns: Vec<String> = sans
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some(d.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(dns, ["web.example.com"], "{}", row.name);
    }
}
