use std::collections::BTreeMap;
use std::net::IpAddr;

use base64::Engine;
use rcgen::{CertificateParams, DnType, KeyPair, SanType};

use super::*;
use crate::api::certmanager::{
    AdditionalOutputFormat, CertificateSpec, JksKeystore, Keystores, Pkcs12Keystore, SecretTemplate,
};
use crate::pki::keys::{Encoding, Key, KeySpec};

/// What a test leaf carries.
#[derive(Default)]
pub(crate) struct Leaf {
    pub cn: &'static str,
    pub subject: Vec<(DnType, &'static str)>,
    pub dns: Vec<&'static str>,
    pub emails: Vec<&'static str>,
    pub ips: Vec<&'static str>,
    pub uris: Vec<&'static str>,
}

/// A self-signed leaf (PEM) and its key as `tls.key` holds it (PKCS#1/SEC1).
pub(crate) fn leaf(spec: &Leaf) -> (String, String) {
    let key = Key::generate(KeySpec::Ecdsa(256)).unwrap();
    let pair = KeyPair::try_from(key.pkcs8_der()).unwrap();
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    if !spec.cn.is_empty() {
        params.distinguished_name.push(DnType::CommonName, spec.cn);
    }
    for (ty, value) in &spec.subject {
        params.distinguished_name.push(ty.clone(), *value);
    }
    let ia5 = |s: &str| s.to_string().try_into().unwrap();
    params.subject_alt_names = spec
        .dns
        .iter()
        .map(|d| SanType::DnsName(ia5(d)))
        .chain(spec.emails.iter().map(|e| SanType::Rfc822Name(ia5(e))))
        .chain(
            spec.ips
                .iter()
                .map(|ip| SanType::IpAddress(ip.parse::<IpAddr>().unwrap())),
        )
        .chain(spec.uris.iter().map(|u| SanType::URI(ia5(u))))
        .collect();
    let cert = params.self_signed(&pair).unwrap();
    (cert.pem(), key.to_pem(Encoding::Pkcs1).unwrap())
}

pub(crate) fn certificate(spec: CertificateSpec) -> Certificate {
    let mut crt = Certificate::new("web", spec);
    crt.metadata.namespace = Some("apps".into());
    crt.metadata.uid = Some("0b5c6d1e-uid".into());
    crt
}

fn spec() -> CertificateSpec {
    CertificateSpec {
        secret_name: "web-tls".into(),
        ..CertificateSpec::default()
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn data_keys(secret: &Secret) -> Vec<&str> {
    secret.data.as_ref().unwrap().keys().map(String::as_str).collect()
}

fn data<'s>(secret: &'s Secret, key: &str) -> &'s [u8] {
    &secret.data.as_ref().unwrap()[key].0
}

/// The annotations the plain `web.example.com` leaf gives.
fn plain_details() -> Vec<(&'static str, &'static str)> {
    vec![
        ("cert-manager.io/alt-names", "web.example.com"),
        ("cert-manager.io/common-name", "web.example.com"),
        ("cert-manager.io/ip-sans", ""),
        ("cert-manager.io/uri-sans", ""),
    ]
}

fn plain_leaf() -> (String, String) {
    leaf(&Leaf {
        cn: "web.example.com",
        dns: vec!["web.example.com"],
        ..Leaf::default()
    })
}

#[test]
fn body_metadata_and_data_keys() {
    let (crt_pem, key_pem) = plain_leaf();
    let ca_pem = crt_pem.clone();
    let templated = CertificateSpec {
        secret_template: Some(Box::new(SecretTemplate {
            labels: map(&[("team", "web"), ("controller.cert-manager.io/fao", "false")]),
            annotations: map(&[
                ("note", "kept"),
                ("cert-manager.io/common-name", "overridden"),
                ("cert-manager.io/allow-direct-injection", "true"),
            ]),
            ..SecretTemplate::default()
        })),
        ..spec()
    };
    struct Row {
        name: &'static str,
        spec: CertificateSpec,
        ca: &'static str,
        certificate_name: &'static str,
        issuer: (&'static str, &'static str, &'static str),
        data_keys: Vec<&'static str>,
        labels: Vec<(&'static str, &'static str)>,
        extra_annotations: Vec<(&'static str, &'static str)>,
    }
    let base_label = vec![("controller.cert-manager.io/fao", "true")];
    let rows = [
        Row {
            name: "no CA, no issuer, no certificate name",
            spec: spec(),
            ca: "",
            certificate_name: "",
            issuer: ("", "", ""),
            data_keys: vec!["tls.crt", "tls.key"],
            labels: base_label.clone(),
            extra_annotations: vec![],
        },
        Row {
            name: "CA known, full issuer",
            spec: spec(),
            ca: "ca",
            certificate_name: "web",
            issuer: ("cfssl", "ClusterIssuer", "cfssl-issuer.wikimedia.org"),
            data_keys: vec!["ca.crt", "tls.crt", "tls.key"],
            labels: base_label.clone(),
            extra_annotations: vec![
                ("cert-manager.io/certificate-name", "web"),
                ("cert-manager.io/issuer-group", "cfssl-issuer.wikimedia.org"),
                ("cert-manager.io/issuer-kind", "ClusterIssuer"),
                ("cert-manager.io/issuer-name", "cfssl"),
            ],
        },
        Row {
            name: "issuer name only: kind and group written empty",
            spec: spec(),
            ca: "",
            certificate_name: "web",
            issuer: ("cfssl", "", ""),
            data_keys: vec!["tls.crt", "tls.key"],
            labels: base_label.clone(),
            extra_annotations: vec![
                ("cert-manager.io/certificate-name", "web"),
                ("cert-manager.io/issuer-group", ""),
                ("cert-manager.io/issuer-kind", ""),
                ("cert-manager.io/issuer-name", "cfssl"),
            ],
        },
        Row {
            name: "template labels and annotations, cert-manager's own override",
            spec: templated,
            ca: "",
            certificate_name: "web",
            issuer: ("", "Issuer", ""),
            data_keys: vec!["tls.crt", "tls.key"],
            labels: vec![("controller.cert-manager.io/fao", "true"), ("team", "web")],
            extra_annotations: vec![
                ("cert-manager.io/allow-direct-injection", "true"),
                ("cert-manager.io/certificate-name", "web"),
                ("cert-manager.io/issuer-group", ""),
                ("cert-manager.io/issuer-kind", "Issuer"),
                ("cert-manager.io/issuer-name", ""),
                ("note", "kept"),
            ],
        },
    ];
    for row in rows {
        let crt = certificate(row.spec);
        let ca: &[u8] = if row.ca.is_empty() { b"" } else { ca_pem.as_bytes() };
        let input = SecretData {
            private_key: key_pem.as_bytes(),
            certificate: crt_pem.as_bytes(),
            ca,
            certificate_name: row.certificate_name,
            issuer_name: row.issuer.0,
            issuer_kind: row.issuer.1,
            issuer_group: row.issuer.2,
        };
        let body = secret_body(&crt, &input, &KeystoreData::default(), BodyOptions::default()).unwrap();
        let mut annotations = plain_details();
        annotations.extend(row.extra_annotations);
        assert_eq!(data_keys(&body), row.data_keys, "{}", row.name);
        assert_eq!(body.metadata.labels, Some(map(&row.labels)), "{}", row.name);
        assert_eq!(body.metadata.annotations, Some(map(&annotations)), "{}", row.name);
        assert_eq!(body.metadata.name.as_deref(), Some("web-tls"), "{}", row.name);
        assert_eq!(body.metadata.namespace.as_deref(), Some("apps"), "{}", row.name);
        assert_eq!(body.type_.as_deref(), Some("kubernetes.io/tls"), "{}", row.name);
        assert_eq!(body.metadata.owner_references, None, "{}", row.name);
        assert_eq!(data(&body, "tls.crt"), crt_pem.as_bytes(), "{}", row.name);
        assert_eq!(data(&body, "tls.key"), key_pem.as_bytes(), "{}", row.name);
        if !row.ca.is_empty() {
            assert_eq!(data(&body, "ca.crt"), ca_pem.as_bytes(), "{}", row.name);
        }
    }
}

/// The DER inside a PEM block, decoded without the pem crate: the base64 lines between the
/// BEGIN and END lines.
fn pem_body_der(pem_text: &str) -> Vec<u8> {
    let b64: String = pem_text
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(b64).unwrap()
}

fn formats(types: &[&str]) -> Vec<AdditionalOutputFormat> {
    types
        .iter()
        .map(|t| AdditionalOutputFormat {
            type_: t.to_string(),
            ..AdditionalOutputFormat::default()
        })
        .collect()
}

#[test]
fn additional_output_formats() {
    let (crt_pem, key_pem) = plain_leaf();
    assert!(key_pem.starts_with("-----BEGIN EC PRIVATE KEY-----\n"));
    let combined = format!("{key_pem}\n{crt_pem}");
    let der = pem_body_der(&key_pem);
    type Row<'a> = (&'a [&'a str], Vec<(&'a str, &'a [u8])>);
    let rows: [Row<'_>; 4] = [
        (&[], vec![]),
        (&["DER"], vec![("key.der", &der)]),
        (&["CombinedPEM"], vec![("tls-combined.pem", combined.as_bytes())]),
        (
            &["CombinedPEM", "DER"],
            vec![("key.der", &der), ("tls-combined.pem", combined.as_bytes())],
        ),
    ];
    for (types, expected) in rows {
        let crt = certificate(CertificateSpec {
            additional_output_formats: formats(types),
            ..spec()
        });
        let input = SecretData {
            private_key: key_pem.as_bytes(),
            certificate: crt_pem.as_bytes(),
            ..SecretData::default()
        };
        let body = secret_body(&crt, &input, &KeystoreData::default(), BodyOptions::default()).unwrap();
        let mut keys = vec!["tls.crt", "tls.key"];
        keys.extend(expected.iter().map(|(k, _)| *k));
        keys.sort_unstable();
        assert_eq!(data_keys(&body), keys, "{types:?}");
        for (key, value) in expected {
            assert_eq!(data(&body, key), value, "{types:?} {key}");
        }
    }
}

#[test]
fn type_is_kept_and_owner_reference_added_when_asked() {
    let (crt_pem, key_pem) = plain_leaf();
    let crt = certificate(spec());
    let input = SecretData {
        private_key: key_pem.as_bytes(),
        certificate: crt_pem.as_bytes(),
        ..SecretData::default()
    };
    let options = BodyOptions {
        existing_type: Some("Opaque"),
        owner_reference: true,
    };
    let body = secret_body(&crt, &input, &KeystoreData::default(), options).unwrap();
    assert_eq!(body.type_.as_deref(), Some("Opaque"));
    assert_eq!(
        serde_json::to_value(&body.metadata.owner_references).unwrap(),
        serde_json::json!([{
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "name": "web",
            "uid": "0b5c6d1e-uid",
            "controller": true,
            "blockOwnerDeletion": true,
        }])
    );
}

fn keystores(pkcs12: Option<bool>, jks: Option<bool>) -> Option<Keystores> {
    Some(Keystores {
        pkcs12: pkcs12.map(|create| Pkcs12Keystore {
            create,
            password: Some("changeit".into()),
            ..Pkcs12Keystore::default()
        }),
        jks: jks.map(|create| JksKeystore {
            create,
            password: Some("changeit".into()),
            ..JksKeystore::default()
        }),
        ..Keystores::default()
    })
}

fn store(tag: &str) -> Store {
    Store {
        keystore: format!("{tag}-keystore").into_bytes(),
        truststore: Some(format!("{tag}-truststore").into_bytes()),
    }
}

#[test]
fn keystores_are_placed_as_asked() {
    let (crt_pem, key_pem) = plain_leaf();
    let both = KeystoreData {
        pkcs12: Some(store("p12")),
        jks: Some(store("jks")),
    };
    type Row = (
        Option<Keystores>,
        &'static str,
        Result<Vec<(&'static str, &'static str)>, BodyError>,
    );
    let rows: [Row; 6] = [
        (None, "ca", Ok(vec![])),
        (
            keystores(Some(true), Some(true)),
            "ca",
            Ok(vec![
                ("keystore.jks", "jks-keystore"),
                ("keystore.p12", "p12-keystore"),
                ("truststore.jks", "jks-truststore"),
                ("truststore.p12", "p12-truststore"),
            ]),
        ),
        (
            keystores(Some(true), None),
            "",
            Ok(vec![("keystore.p12", "p12-keystore")]),
        ),
        (
            keystores(Some(false), Some(true)),
            "",
            Ok(vec![("keystore.jks", "jks-keystore")]),
        ),
        (keystores(Some(false), Some(false)), "ca", Ok(vec![])),
        (
            keystores(Some(true), None),
            "missing",
            Err(BodyError::KeystoreMissing("PKCS12")),
        ),
    ];
    for (asked, ca, expected) in rows {
        let crt = certificate(CertificateSpec {
            keystores: asked.clone().map(Box::new),
            ..spec()
        });
        let input = SecretData {
            private_key: key_pem.as_bytes(),
            certificate: crt_pem.as_bytes(),
            ca: if ca == "ca" { b"ca" } else { b"" },
            ..SecretData::default()
        };
        let given = if ca == "missing" {
            KeystoreData::default()
        } else {
            both.clone()
        };
        let got = secret_body(&crt, &input, &given, BodyOptions::default()).map(|body| {
            body.data
                .unwrap()
                .into_iter()
                .filter(|(k, _)| k.contains("store"))
                .map(|(k, v)| (k, String::from_utf8(v.0).unwrap()))
                .collect::<Vec<_>>()
        });
        let expected = expected.map(|pairs| {
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        });
        assert_eq!(got, expected, "{asked:?} ca={ca}");
    }
}

#[test]
fn body_errors() {
    let (crt_pem, key_pem) = plain_leaf();
    type Row<'a> = (&'a [&'a str], &'a [u8], &'a [u8], &'a str);
    // Just over cert-manager's limits: a padded chain and a padded key.
    let big_chain = format!("{crt_pem}{}", " ".repeat(330_001 - crt_pem.len()));
    let big_key = format!("{key_pem}{}", " ".repeat(13_001 - key_pem.len()));
    let rows: [Row<'_>; 6] = [
        (
            &[],
            key_pem.as_bytes(),
            big_chain.as_bytes(),
            "provided PEM data was larger than the maximum 330000B",
        ),
        (
            &["DER"],
            big_key.as_bytes(),
            crt_pem.as_bytes(),
            "failed to add additional output formats to Secret: the private key is not PEM or is larger than 13000 bytes",
        ),
        (
            &["PKCS12"],
            key_pem.as_bytes(),
            crt_pem.as_bytes(),
            "failed to add additional output formats to Secret: unknown additional output format PKCS12",
        ),
        (
            &["DER"],
            b"not a key",
            crt_pem.as_bytes(),
            "failed to add additional output formats to Secret: the private key is not PEM or is larger than 13000 bytes",
        ),
        (
            &[],
            key_pem.as_bytes(),
            b"garbage",
            "error decoding certificate PEM block: no valid certificates found",
        ),
        (
            &[],
            key_pem.as_bytes(),
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            "error parsing X.509 certificate: ",
        ),
    ];
    for (types, private_key, certificate_pem, message) in rows {
        let crt = certificate(CertificateSpec {
            additional_output_formats: formats(types),
            ..spec()
        });
        let input = SecretData {
            private_key,
            certificate: certificate_pem,
            ..SecretData::default()
        };
        let err = secret_body(&crt, &input, &KeystoreData::default(), BodyOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(message), "{err:?} should start with {message:?}");
        if !message.ends_with(": ") {
            assert_eq!(err, message);
        }
    }
}

#[test]
fn certificate_details_annotations_of_a_leaf() {
    let street = DnType::CustomDnType(vec![2, 5, 4, 9]);
    let postal = DnType::CustomDnType(vec![2, 5, 4, 17]);
    let serial = DnType::CustomDnType(vec![2, 5, 4, 5]);
    let rows = [
        (
            Leaf::default(),
            vec![
                ("cert-manager.io/alt-names", ""),
                ("cert-manager.io/common-name", ""),
                ("cert-manager.io/ip-sans", ""),
                ("cert-manager.io/uri-sans", ""),
            ],
        ),
        (
            Leaf {
                cn: "web.example.com",
                subject: vec![
                    (DnType::OrganizationName, "Acme, Inc"),
                    (DnType::OrganizationalUnitName, "SRE"),
                    (DnType::CountryName, "GB"),
                    (DnType::StateOrProvinceName, "England"),
                    (DnType::LocalityName, "London"),
                    (postal, "EC1A 1BB"),
                    (street, " 10 Downing St"),
                    (serial, "42"),
                ],
                dns: vec!["web.example.com", "www.example.com"],
                emails: vec!["a@example.com", "b@example.com"],
                ips: vec!["10.0.0.1", "2001:db8::1", "::ffff:192.0.2.1"],
                uris: vec!["spiffe://cluster.local/ns/apps/sa/web"],
            },
            vec![
                ("cert-manager.io/alt-names", "web.example.com,www.example.com"),
                ("cert-manager.io/common-name", "web.example.com"),
                ("cert-manager.io/email-sans", "a@example.com,b@example.com"),
                ("cert-manager.io/ip-sans", "10.0.0.1,2001:db8::1,192.0.2.1"),
                ("cert-manager.io/subject-countries", "GB"),
                ("cert-manager.io/subject-localities", "London"),
                ("cert-manager.io/subject-organizationalunits", "SRE"),
                ("cert-manager.io/subject-organizations", "\"Acme, Inc\""),
                ("cert-manager.io/subject-postalcodes", "EC1A 1BB"),
                ("cert-manager.io/subject-provinces", "England"),
                ("cert-manager.io/subject-serialnumber", "42"),
                ("cert-manager.io/subject-streetaddresses", "\" 10 Downing St\""),
                (
                    "cert-manager.io/uri-sans",
                    "spiffe://cluster.local/ns/apps/sa/web",
                ),
            ],
        ),
    ];
    for (spec, expected) in rows {
        let (pem_text, _) = leaf(&spec);
        // The leaf is the first certificate: a second one after it does not count.
        let (other, _) = plain_leaf();
        let chain = format!("{pem_text}{other}");
        assert_eq!(
            certificate_details_annotations(chain.as_bytes()).unwrap(),
            map(&expected),
            "{}",
            spec.cn
        );
    }
    assert_eq!(certificate_details_annotations(b"").unwrap(), BTreeMap::new());
}

#[test]
fn csv_joins_as_go_writes_it() {
    let rows: [(&[&str], &str); 8] = [
        (&[], ""),
        (&["a"], "a"),
        (&["a", "b"], "a,b"),
        (&["a,b", "c"], "\"a,b\",c"),
        (&["say \"hi\""], "\"say \"\"hi\"\"\""),
        (&[" lead", "in side"], "\" lead\",in side"),
        (&["line\nbreak"], "\"line\nbreak\""),
        (&["\\.", "\\.x"], "\"\\.\",\\.x"),
    ];
    for (values, expected) in rows {
        let values: Vec<String> = values.iter().map(std::string::ToString::to_string).collect();
        assert_eq!(join_csv(&values), expected, "{values:?}");
    }
}

/// cert-manager's own `AnnotationsForCertificate` case (secrets_test.go), with every subject
/// attribute given twice; rcgen keeps one value per attribute, so openssl makes this leaf.
#[test]
fn certificate_details_annotations_of_a_multi_valued_subject() {
    let subject = "/CN=cert-manager/O=Example Organization 1/O=Example Organization 2\
        /OU=Example Organizational Unit 1/OU=Example Organizational Unit 2/C=AA/C=BB\
        /ST=Province 1/ST=Province 2/L=City 1/L=City 2\
        /street=1725 Slough Avenue, Suite 200, Scranton Business Park/street=123 Example St\
        /postalCode=55555/postalCode=12345/serialNumber=12345678";
    let sans = "subjectAltName=DNS:example.com,DNS:cert-manager.io,IP:1.1.1.1,IP:1.2.3.4,\
        URI:spiffe.io//cert-manager.io/test,URI:spiffe.io//hello.world,\
        email:test1@example.com,email:test2@cert-manager.io";
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args([
            "-nodes",
            "-keyout",
            "/dev/null",
            "-days",
            "1",
            "-subj",
            subject,
            "-addext",
            sans,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected = [
        ("cert-manager.io/common-name", "cert-manager"),
        ("cert-manager.io/alt-names", "example.com,cert-manager.io"),
        ("cert-manager.io/ip-sans", "1.1.1.1,1.2.3.4"),
        (
            "cert-manager.io/uri-sans",
            "spiffe.io//cert-manager.io/test,spiffe.io//hello.world",
        ),
        (
            "cert-manager.io/email-sans",
            "test1@example.com,test2@cert-manager.io",
        ),
        (
            "cert-manager.io/subject-organizations",
            "Example Organization 1,Example Organization 2",
        ),
        (
            "cert-manager.io/subject-organizationalunits",
            "Example Organizational Unit 1,Example Organizational Unit 2",
        ),
        ("cert-manager.io/subject-countries", "AA,BB"),
        ("cert-manager.io/subject-provinces", "Province 1,Province 2"),
        ("cert-manager.io/subject-localities", "City 1,City 2"),
        (
            "cert-manager.io/subject-streetaddresses",
            "\"1725 Slough Avenue, Suite 200, Scranton Business Park\",123 Example St",
        ),
        ("cert-manager.io/subject-postalcodes", "55555,12345"),
        ("cert-manager.io/subject-serialnumber", "12345678"),
    ];
    assert_eq!(
        certificate_details_annotations(&out.stdout).unwrap(),
        map(&expected)
    );
}
