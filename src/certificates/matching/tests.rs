use k8s_openapi::ByteString;
use rcgen::{DnType, DnValue};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

use super::*;
use crate::api::certmanager::{NameConstraints, OtherName, PrivateKey, SecretTemplate, X509Subject};
use crate::certificates::fixtures::{self, certificate_pem, request_for};

fn s(items: &[&str]) -> Vec<String> {
    items.iter().map(|i| (*i).to_string()).collect()
}

/// A spec with every field request_matches_spec compares set.
fn full_spec() -> CertificateSpec {
    CertificateSpec {
        common_name: "example.com".to_string(),
        dns_names: s(&["example.com", "www.example.com"]),
        ip_addresses: s(&["10.0.0.1", "::1"]),
        uris: s(&["spiffe://cluster.local/ns/a/sa/b"]),
        email_addresses: s(&["admin@example.com"]),
        subject: Some(Box::new(X509Subject {
            organizations: s(&["Org"]),
            countries: s(&["GB"]),
            organizational_units: s(&["Unit"]),
            localities: s(&["London"]),
            provinces: s(&["England"]),
            street_addresses: s(&["1 Road"]),
            postal_codes: s(&["N1"]),
            serial_number: "42".to_string(),
            ..Default::default()
        })),
        usages: s(&["digital signature", "key encipherment"]),
        duration: Some("2160h".to_string()),
        ..fixtures::spec()
    }
}

fn subject(spec: &mut CertificateSpec) -> &mut X509Subject {
    spec.subject.get_or_insert_with(Default::default)
}

type Change = fn(&mut CertificateSpec);

#[test]
fn request_matches_spec_reports_each_compared_field_in_order() {
    let table: &[(&str, Change, &[&str])] = &[
        ("unchanged", |_| {}, &[]),
        ("dns names reordered", |s| s.dns_names.reverse(), &[]),
        (
            "ipv4 written as mapped ipv6",
            |s| s.ip_addresses[0] = "::ffff:10.0.0.1".to_string(),
            &[],
        ),
        (
            "ip addresses",
            |s| s.ip_addresses[0] = "10.0.0.2".to_string(),
            &["spec.ipAddresses"],
        ),
        (
            "an unparsable ip",
            |s| s.ip_addresses[0] = "10.0.0".to_string(),
            &["spec.ipAddresses"],
        ),
        ("uris", |s| s.uris.clear(), &["spec.uris"]),
        (
            "emails",
            |s| s.email_addresses.push("b@example.com".to_string()),
            &["spec.emailAddresses"],
        ),
        (
            "dns names",
            |s| {
                s.dns_names.pop();
            },
            &["spec.dnsNames"],
        ),
        (
            "common name",
            |s| s.common_name = "other.example.com".to_string(),
            &["spec.commonName"],
        ),
        (
            "serial number",
            |s| subject(s).serial_number = "43".to_string(),
            &["spec.subject.serialNumber"],
        ),
        (
            "organizations",
            |s| subject(s).organizations = vec!["Other".into()],
            &["spec.subject.organizations"],
        ),
        (
            "countries",
            |s| subject(s).countries = vec!["FR".into()],
            &["spec.subject.countries"],
        ),
        (
            "localities",
            |s| subject(s).localities.clear(),
            &["spec.subject.localities"],
        ),
        (
            "units",
            |s| subject(s).organizational_units.clear(),
            &["spec.subject.organizationalUnits"],
        ),
        (
            "postal codes",
            |s| subject(s).postal_codes.clear(),
            &["spec.subject.postCodes"],
        ),
        (
            "provinces",
            |s| subject(s).provinces.clear(),
            &["spec.subject.provinces"],
        ),
        (
            "streets",
            |s| subject(s).street_addresses.clear(),
            &["spec.subject.streetAddresses"],
        ),
        ("isCA", |s| s.is_ca = true, &["spec.isCA"]),
        (
            "usages",
            |s| s.usages.push("client auth".to_string()),
            &["spec.usages"],
        ),
        ("usages reordered", |s| s.usages.reverse(), &[]),
        (
            "duration",
            |s| s.duration = Some("720h".to_string()),
            &["spec.duration"],
        ),
        (
            "duration spelled otherwise",
            |s| s.duration = Some("2160h0m0s".to_string()),
            &[],
        ),
        ("duration unset", |s| s.duration = None, &[]),
        (
            "issuer name",
            |s| s.issuer_ref.name = "other".to_string(),
            &["spec.issuerRef"],
        ),
        (
            "issuer kind",
            |s| s.issuer_ref.kind = "ClusterIssuer".to_string(),
            &["spec.issuerRef"],
        ),
        (
            "issuer group",
            |s| s.issuer_ref.group = "example.io".to_string(),
            &["spec.issuerRef"],
        ),
        (
            "default kind written out",
            |s| s.issuer_ref.kind = "Issuer".to_string(),
            &[],
        ),
        (
            "default group written out",
            |s| s.issuer_ref.group = "cert-manager.io".to_string(),
            &[],
        ),
        (
            "several, in cert-manager's order",
            |s| {
                s.issuer_ref.name = "other".to_string();
                s.common_name = "other.example.com".to_string();
                s.dns_names.clear();
                s.ip_addresses.clear();
            },
            &[
                "spec.ipAddresses",
                "spec.dnsNames",
                "spec.commonName",
                "spec.issuerRef",
            ],
        ),
    ];
    let base = full_spec();
    let request = request_for(&base, fixtures::ec());
    for (name, change, expected) in table {
        let mut spec = base.clone();
        change(&mut spec);
        assert_eq!(request_matches_spec(&request, &spec), Ok(s(expected)), "{name}");
    }
}

#[test]
fn request_matches_spec_ignores_the_fields_that_do_not_re_issue() {
    let table: &[(&str, Change)] = &[
        ("privateKey.encoding", |s| {
            s.private_key.get_or_insert_with(Default::default).encoding = "PKCS8".into();
        }),
        ("privateKey.rotationPolicy", |s| {
            s.private_key
                .get_or_insert_with(PrivateKey::default)
                .rotation_policy = "Always".into();
        }),
        ("signatureAlgorithm", |s| {
            s.signature_algorithm = "ECDSAWithSHA512".into();
        }),
        ("nameConstraints", |s| {
            s.name_constraints = Some(Box::new(NameConstraints {
                critical: true,
                ..Default::default()
            }));
        }),
        ("encodeUsagesInRequest", |s| {
            s.encode_usages_in_request = Some(false);
        }),
        ("secretTemplate", |s| {
            s.secret_template = Some(Box::new(SecretTemplate::default()));
        }),
        ("renewBefore", |s| s.renew_before = Some("1h".into())),
        ("revisionHistoryLimit", |s| s.revision_history_limit = Some(3)),
        ("secretName", |s| s.secret_name = "other".into()),
    ];
    let base = full_spec();
    let request = request_for(&base, fixtures::ec());
    for (name, change) in table {
        let mut spec = base.clone();
        change(&mut spec);
        assert_eq!(request_matches_spec(&request, &spec), Ok(vec![]), "{name}");
    }
}

fn upn(value: &str) -> OtherName {
    OtherName {
        oid: "1.3.6.1.4.1.311.20.2.3".to_string(),
        utf8_value: value.to_string(),
        ..Default::default()
    }
}

#[test]
fn other_names_are_compared_only_when_the_spec_has_some() {
    let with = |names: Vec<OtherName>| CertificateSpec {
        other_names: names,
        ..fixtures::spec()
    };
    let two = with(vec![upn("a@example.local"), upn("b@example.local")]);
    let no_san = CertificateSpec {
        dns_names: vec![],
        ..fixtures::spec()
    };
    let table: &[(&str, &CertificateSpec, CertificateSpec, &[&str])] = &[
        (
            "equal",
            &two,
            with(vec![upn("a@example.local"), upn("b@example.local")]),
            &[],
        ),
        (
            "reordered",
            &two,
            with(vec![upn("b@example.local"), upn("a@example.local")]),
            &[],
        ),
        (
            "a value differs",
            &two,
            with(vec![upn("a@example.local"), upn("c@example.local")]),
            &["spec.otherNames"],
        ),
        ("none asked: not compared", &two, with(vec![]), &[]),
        (
            "asked, the CSR has other SANs only",
            &fixtures::spec(),
            with(vec![upn("a@example.local")]),
            &["spec.otherNames"],
        ),
    ];
    for (name, requested, spec, expected) in table {
        let request = request_for(requested, fixtures::ec());
        assert_eq!(request_matches_spec(&request, spec), Ok(s(expected)), "{name}");
    }
    // A CSR without any subjectAltName mismatches, as cert-manager reports it.
    let request = request_for(&no_san, fixtures::ec());
    let spec = CertificateSpec {
        other_names: vec![upn("a")],
        ..no_san
    };
    assert_eq!(request_matches_spec(&request, &spec), Ok(s(&["spec.otherNames"])));
}

#[test]
fn request_matches_spec_fails_on_a_request_it_cannot_read() {
    let mut request = request_for(&fixtures::spec(), fixtures::ec());
    let table: &[(&[u8], &str)] = &[
        (
            b"not pem",
            "error decoding certificate request PEM block: no PEM data was found in given input",
        ),
        (
            b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
            "x509: malformed certificate request: ",
        ),
    ];
    for (pem, message) in table {
        request.spec.request = ByteString(pem.to_vec());
        let err = request_matches_spec(&request, &fixtures::spec()).expect_err("unreadable");
        assert!(err.to_string().starts_with(message), "{err}");
    }
    request.spec.request = ByteString(vec![b'a'; 36_501]);
    assert_eq!(
        request_matches_spec(&request, &fixtures::spec()).map_err(|e| e.to_string()),
        Err("error decoding certificate request PEM block: provided PEM data was larger than the maximum 36500B".to_string())
    );
}

fn with_key(algorithm: &str, size: i64) -> CertificateSpec {
    CertificateSpec {
        private_key: Some(PrivateKey {
            algorithm: algorithm.to_string(),
            size,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn private_key_matches_spec_names_algorithm_or_size() {
    let rsa = fixtures::key(KeySpec::Rsa(2048), false);
    let ec256 = fixtures::ec();
    let ec384 = fixtures::key(KeySpec::Ecdsa(384), false);
    let ed = fixtures::key(KeySpec::Ed25519, false);
    type Row<'a> = (&'a str, &'a Key, Option<(&'a str, i64)>, &'a [&'a str]);
    let table: &[Row<'_>] = &[
        ("no privateKey: RSA 2048", rsa, None, &[]),
        (
            "no privateKey, EC key",
            ec256,
            None,
            &["spec.privateKey.algorithm"],
        ),
        ("RSA default size", rsa, Some(("RSA", 0)), &[]),
        ("empty algorithm is RSA", rsa, Some(("", 2048)), &[]),
        (
            "RSA size differs",
            rsa,
            Some(("RSA", 3072)),
            &["spec.privateKey.size"],
        ),
        ("ECDSA default 256", ec256, Some(("ECDSA", 0)), &[]),
        ("ECDSA 384", ec384, Some(("ECDSA", 384)), &[]),
        (
            "ECDSA size differs",
            ec256,
            Some(("ECDSA", 384)),
            &["spec.privateKey.size"],
        ),
        (
            "ECDSA asked, RSA held",
            rsa,
            Some(("ECDSA", 256)),
            &["spec.privateKey.algorithm"],
        ),
        ("Ed25519", ed, Some(("Ed25519", 0)), &[]),
        ("Ed25519 ignores size", ed, Some(("Ed25519", 4096)), &[]),
        (
            "Ed25519 asked, EC held",
            ec256,
            Some(("Ed25519", 0)),
            &["spec.privateKey.algorithm"],
        ),
        (
            "RSA asked, Ed25519 held",
            ed,
            Some(("RSA", 2048)),
            &["spec.privateKey.algorithm"],
        ),
    ];
    for (name, key, spec, expected) in table {
        let spec = spec.map_or_else(CertificateSpec::default, |(a, n)| with_key(a, n));
        assert_eq!(private_key_matches_spec(key.spec, &spec), s(expected), "{name}");
    }
}

fn names(cn: &str, dns: &[&str]) -> CertificateSpec {
    CertificateSpec {
        common_name: cn.to_string(),
        dns_names: s(dns),
        ..Default::default()
    }
}

#[test]
fn fuzzy_alt_names_let_names_move_between_common_name_and_dns_names() {
    let issued = CertificateSpec {
        ip_addresses: s(&["10.0.0.1"]),
        uris: s(&["spiffe://a"]),
        email_addresses: s(&["a@example.com"]),
        ..names("a.example.com", &["b.example.com"])
    };
    let pem = certificate_pem(&issued, fixtures::ec(), (2026, 1, 1), (2026, 4, 1));
    let der = crate::certificates::decode::leaf_certificate(&pem).expect("certificate");
    let (_, cert) = X509Certificate::from_der(&der).expect("parse");
    let others = |spec: CertificateSpec| CertificateSpec {
        ip_addresses: issued.ip_addresses.clone(),
        uris: issued.uris.clone(),
        email_addresses: issued.email_addresses.clone(),
        ..spec
    };
    let table: &[(&str, CertificateSpec, &[&str])] = &[
        ("same", others(names("a.example.com", &["b.example.com"])), &[]),
        (
            "cn moved to dns names",
            others(names("", &["a.example.com", "b.example.com"])),
            &[],
        ),
        ("swapped", others(names("b.example.com", &["a.example.com"])), &[]),
        (
            "cn differs",
            others(names("c.example.com", &["b.example.com"])),
            &["spec.commonName"],
        ),
        (
            "a dns name added",
            others(names("a.example.com", &["b.example.com", "c.example.com"])),
            &["spec.dnsNames"],
        ),
        (
            "a dns name removed",
            others(names("a.example.com", &[])),
            &["spec.dnsNames"],
        ),
        (
            "all differ",
            names("c.example.com", &["d.example.com"]),
            &[
                "spec.commonName",
                "spec.dnsNames",
                "spec.ipAddresses",
                "spec.uris",
                "spec.emailAddresses",
            ],
        ),
        (
            "ips written otherwise",
            CertificateSpec {
                ip_addresses: s(&["::ffff:10.0.0.1"]),
                ..others(names("a.example.com", &["b.example.com"]))
            },
            &[],
        ),
    ];
    for (name, spec, expected) in table {
        assert_eq!(
            fuzzy_x509_alt_names_match_spec(&cert, spec),
            s(expected),
            "{name}"
        );
    }
}

#[test]
fn issuer_annotations_match_up_to_defaults() {
    use crate::certificates::keys::annotation::{ISSUER_GROUP, ISSUER_KIND, ISSUER_NAME};
    let reference = |name: &str, kind: &str, group: &str| IssuerRef {
        name: name.into(),
        kind: kind.into(),
        group: group.into(),
        ..Default::default()
    };
    type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], IssuerRef, bool);
    let table: &[Row<'_>] = &[
        ("no annotations, default ref", &[], reference("ca", "", ""), true),
        (
            "no annotations, explicit defaults",
            &[],
            reference("ca", "Issuer", "cert-manager.io"),
            true,
        ),
        (
            "no annotations, ClusterIssuer",
            &[],
            reference("ca", "ClusterIssuer", ""),
            false,
        ),
        (
            "no annotations, other group",
            &[],
            reference("ca", "", "example.io"),
            false,
        ),
        (
            "name only, same",
            &[(ISSUER_NAME, "ca")],
            reference("ca", "", ""),
            true,
        ),
        (
            "name only, other",
            &[(ISSUER_NAME, "old")],
            reference("ca", "", ""),
            false,
        ),
        (
            "kind only: the name must match too",
            &[(ISSUER_KIND, "Issuer")],
            reference("ca", "", ""),
            false,
        ),
        (
            "all three, defaults spelled out",
            &[
                (ISSUER_NAME, "ca"),
                (ISSUER_KIND, "Issuer"),
                (ISSUER_GROUP, "cert-manager.io"),
            ],
            reference("ca", "", ""),
            true,
        ),
        (
            "kind differs",
            &[(ISSUER_NAME, "ca"), (ISSUER_KIND, "ClusterIssuer")],
            reference("ca", "Issuer", ""),
            false,
        ),
    ];
    for (name, annotations, issuer_ref, expected) in table {
        let secret = fixtures::secret(&[], annotations);
        assert_eq!(
            secret_issuer_annotations_match(&secret, issuer_ref),
            *expected,
            "{name}"
        );
    }
}

/// A CertificateRequest whose CSR subject is `rdns`, one attribute per RDN, in order.
fn request_with_subject(rdns: &[(DnType, DnValue)]) -> CertificateRequest {
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    for (ty, value) in rdns {
        params.distinguished_name.push(ty.clone(), value.clone());
    }
    let pair = rcgen::KeyPair::try_from(fixtures::ec().pkcs8_der()).expect("key pair");
    let csr = params.serialize_request(&pair).expect("csr").pem().expect("pem");
    let mut request = request_for(&fixtures::spec(), fixtures::ec());
    request.spec.request = ByteString(csr.into_bytes());
    request
}

fn printable(text: &str) -> DnValue {
    DnValue::PrintableString(text.try_into().expect("printable"))
}

#[test]
fn literal_subject_is_compared_by_raw_der() {
    // Go's order for "CN=example.com,O=Org,C=GB" is the reverse: C, O, CN; all printable.
    let go_encoded = request_with_subject(&[
        (DnType::CountryName, printable("GB")),
        (DnType::OrganizationName, printable("Org")),
        (DnType::CommonName, printable("example.com")),
    ]);
    let as_utf8 = request_with_subject(&[
        (DnType::CountryName, printable("GB")),
        (DnType::OrganizationName, DnValue::Utf8String("Org".into())),
        (DnType::CommonName, printable("example.com")),
    ]);
    let literal = |text: &str| CertificateSpec {
        literal_subject: text.to_string(),
        dns_names: vec![],
        // Not compared when there is a literal subject.
        common_name: "ignored.example.com".to_string(),
        subject: Some(Box::new(X509Subject {
            organizations: s(&["ignored"]),
            ..Default::default()
        })),
        ..fixtures::spec()
    };
    let table: &[(&str, &CertificateRequest, &str, &[&str])] = &[
        ("same", &go_encoded, "CN=example.com,O=Org,C=GB", &[]),
        (
            "an RDN fewer",
            &go_encoded,
            "CN=example.com,O=Org",
            &["spec.literalSubject"],
        ),
        (
            "another order",
            &go_encoded,
            "O=Org,CN=example.com,C=GB",
            &["spec.literalSubject"],
        ),
        (
            "another value",
            &go_encoded,
            "CN=example.com,O=Other,C=GB",
            &["spec.literalSubject"],
        ),
        (
            "same text, another string type",
            &as_utf8,
            "CN=example.com,O=Org,C=GB",
            &["spec.literalSubject"],
        ),
    ];
    for (name, request, text, expected) in table {
        assert_eq!(
            request_matches_spec(request, &literal(text)),
            Ok(s(expected)),
            "{name}"
        );
    }
    let unknown = request_matches_spec(&go_encoded, &literal("FOO=bar"));
    assert!(
        matches!(
            unknown,
            Err(MatchError::LiteralSubject(SubjectError::UnrecognizedKey(_)))
        ),
        "{unknown:?}"
    );
}

#[test]
fn secret_matches_spec_reads_tls_crt() {
    use crate::certificates::keys::data::TLS_CRT;
    let spec = fixtures::spec();
    let cert = certificate_pem(&spec, fixtures::ec(), (2026, 1, 1), (2026, 4, 1));
    let renamed = CertificateSpec {
        common_name: "other.example.com".to_string(),
        ..spec.clone()
    };
    type Row<'a> = (
        &'a str,
        &'a [(&'a str, &'a [u8])],
        &'a CertificateSpec,
        Result<&'a [&'a str], &'a str>,
    );
    let table: &[Row<'_>] = &[
        ("up to date", &[(TLS_CRT, &cert)], &spec, Ok(&[])),
        ("renamed", &[(TLS_CRT, &cert)], &renamed, Ok(&["spec.commonName"])),
        (
            "no certificate",
            &[],
            &spec,
            Err("error decoding certificate PEM block: no valid certificates found"),
        ),
    ];
    for (name, data, spec, expected) in table {
        let secret = fixtures::secret(data, &[]);
        let got = secret_matches_spec(&secret, spec).map_err(|e| e.to_string());
        assert_eq!(got, expected.map(s).map_err(str::to_string), "{name}");
    }
}

#[test]
fn subject_strings_of_every_type_go_reads_are_compared() {
    let spec = CertificateSpec {
        dns_names: vec![],
        subject: Some(Box::new(X509Subject {
            organizations: s(&["Org"]),
            ..Default::default()
        })),
        ..fixtures::spec()
    };
    let cn = (DnType::CommonName, printable("example.com"));
    let org = |value: DnValue| request_with_subject(&[(DnType::OrganizationName, value), cn.clone()]);
    let table: &[(&str, CertificateRequest, &[&str])] = &[
        ("PrintableString", org(printable("Org")), &[]),
        ("UTF8String", org(DnValue::Utf8String("Org".into())), &[]),
        (
            "BMPString",
            org(DnValue::BmpString("Org".try_into().expect("bmp"))),
            &[],
        ),
        (
            "TeletexString",
            org(DnValue::TeletexString("Org".try_into().expect("t61"))),
            &[],
        ),
        (
            "another value",
            org(DnValue::BmpString("Other".try_into().expect("bmp"))),
            &["spec.subject.organizations"],
        ),
    ];
    for (name, request, expected) in table {
        assert_eq!(request_matches_spec(request, &spec), Ok(s(expected)), "{name}");
    }
}
