//! One table per group of cert-manager's webhook rules: each bad input with the exact message,
//! and inputs the rule accepts with an empty message.

use super::*;
use crate::certificates::go;

type Change = Box<dyn FnOnce(&mut CertificateSpec)>;

fn check(cases: Vec<(Change, &str)>) {
    for (i, (change, want)) in cases.into_iter().enumerate() {
        assert_eq!(webhook(change), want, "case {i}");
    }
}

fn b(change: impl FnOnce(&mut CertificateSpec) + 'static) -> Change {
    Box::new(change)
}

const AT_LEAST_ONE: &str = r#"spec: Invalid value: "": at least one of commonName (from the commonName field or from a literalSubject), dnsNames, emailSANs, ipAddresses, otherNames, or uriSANs must be set"#;

#[test]
fn secret_name_and_issuer_ref() {
    check(vec![
        (
            b(|s| s.secret_name = String::new()),
            "spec.secretName: Required value: must be specified",
        ),
        (
            b(|s| s.secret_name = "Bad_Name".into()),
            r#"spec.secretName: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
        ),
        (
            b(|s| s.secret_name = "a".repeat(254)),
            &format!(
                r#"spec.secretName: Invalid value: "{}": must be no more than 253 characters"#,
                "a".repeat(254)
            )
            .leak()[..],
        ),
        (b(|s| s.secret_name = "tls.example-1".into()), ""),
        (
            b(|s| s.issuer_ref.name = String::new()),
            "spec.issuerRef.name: Required value: must be specified",
        ),
        (
            b(|s| s.issuer_ref.kind = "CfsslIssuer".into()),
            r#"spec.issuerRef.kind: Invalid value: "CfsslIssuer": must be one of Issuer or ClusterIssuer (did you forget to set spec.issuerRef.kind.group?)"#,
        ),
        (
            b(|s| {
                s.issuer_ref.kind = "CfsslIssuer".into();
                s.issuer_ref.group = "cert-manager.io".into();
            }),
            r#"spec.issuerRef.kind: Invalid value: "CfsslIssuer": must be one of Issuer or ClusterIssuer"#,
        ),
        (
            b(|s| {
                s.issuer_ref.kind = "ClusterIssuer".into();
                s.issuer_ref.group = "cfssl-issuer.wikimedia.org".into();
            }),
            "",
        ),
        (b(|s| s.issuer_ref.kind = "ClusterIssuer".into()), ""),
    ]);
}

#[test]
fn common_name_and_subject_alternative_names() {
    check(vec![
        (b(|s| s.dns_names.clear()), AT_LEAST_ONE),
        (
            b(|s| {
                s.dns_names.clear();
                s.subject = Some(Box::new(subject(&["Acme"])));
            }),
            AT_LEAST_ONE,
        ),
        (
            b(|s| s.common_name = "a".repeat(65)),
            "spec.commonName: Too long: may not be more than 64 bytes",
        ),
        (
            b(|s| s.common_name = "é".repeat(33)),
            "spec.commonName: Too long: may not be more than 64 bytes",
        ),
        (b(|s| s.common_name = "a".repeat(64)), ""),
        (
            b(|s| {
                s.dns_names.clear();
                s.common_name = "example.com".into();
            }),
            "",
        ),
        (
            b(|s| {
                s.dns_names.clear();
                s.uris = vec!["spiffe://example.com/a".into()];
            }),
            "",
        ),
    ]);
}

#[test]
fn literal_subject() {
    let no_sans = |literal: &'static str| {
        b(move |s: &mut CertificateSpec| {
            s.dns_names.clear();
            s.literal_subject = literal.into();
        })
    };
    let long_first = format!("CN={},CN=short", "a".repeat(65)).leak();
    let long_last = format!("CN=short,CN={}", "a".repeat(65)).leak();
    check(vec![
        (no_sans("CN=foo,O=Acme,C=DE"), ""),
        (no_sans("2.5.4.3=foo"), ""),
        (no_sans("O=Acme"), AT_LEAST_ONE),
        (
            no_sans("cn=foo"),
            &*format!(
                r#"[spec.literalSubject: Invalid value: "cn=foo": Literal subject contains unrecognized key with value [foo], {AT_LEAST_ONE}]"#
            )
            .leak(),
        ),
        (
            no_sans("CN=foo,POSTALCODE=123"),
            r#"spec.literalSubject: Invalid value: "CN=foo,POSTALCODE=123": Literal subject contains unrecognized key with value [123]"#,
        ),
        (
            no_sans("X=1,CN=foo,Y=2"),
            r#"[spec.literalSubject: Invalid value: "X=1,CN=foo,Y=2": Literal subject contains unrecognized key with value [2], spec.literalSubject: Invalid value: "X=1,CN=foo,Y=2": Literal subject contains unrecognized key with value [1]]"#,
        ),
        // The first written RDN's CN is the one checked.
        (no_sans(long_first), "spec.commonName: Too long: may not be more than 64 bytes"),
        (no_sans(long_last), ""),
        (no_sans("CN=#0c03666f6f"), ""),
        (
            b(|s| {
                s.literal_subject = "CN=foo".into();
                s.common_name = "bar".into();
            }),
            "spec.commonName: Invalid value: \"bar\": When providing a `LiteralSubject` no `commonName` may be provided.",
        ),
        (
            b(|s| {
                s.literal_subject = "CN=foo".into();
                s.subject = Some(Box::new(subject(&["Acme"])));
            }),
            "spec.subject: Invalid value: {\"Organizations\":[\"Acme\"],\"Countries\":null,\"OrganizationalUnits\":null,\"Localities\":null,\"Provinces\":null,\"StreetAddresses\":null,\"PostalCodes\":null,\"SerialNumber\":\"\"}: When providing a `LiteralSubject` no `Subject` properties may be provided.",
        ),
        (
            b(|s| {
                s.literal_subject = "CN=foo".into();
                s.subject = Some(Box::new(subject(&[])));
            }),
            "",
        ),
    ]);
}

#[test]
fn literal_subject_parse_errors_are_go_ldaps() {
    let cases = [
        ("CN", "DN ended with incomplete type, value pair"),
        ("CN=a,b", "DN ended with incomplete type, value pair"),
        (",CN=a", "incomplete type, value pair"),
        ("CN=a\"b", "got unescaped character: '\"'"),
        ("CN=a\\", "got corrupted escaped character: 'a\\'"),
        (
            "CN=a\\zz",
            "failed to decode escaped character: encoding/hex: invalid byte: U+007A 'z'",
        ),
        (
            "CN=a\\4",
            "failed to decode escaped character: encoding/hex: invalid byte: 4",
        ),
        (
            "CN=#zz",
            "failed to decode BER encoding: encoding/hex: invalid byte: U+007A 'z'",
        ),
        (
            "CN=#0c0",
            "failed to decode BER encoding: encoding/hex: odd length hex string",
        ),
        ("CN=#0c05666f6f", "failed to decode BER encoding: unexpected EOF"),
        (
            "CN=#0c01666f6f",
            "failed to decode BER encoding: trailing bytes after value",
        ),
    ];
    for (literal, error) in cases {
        let got = webhook(|s| s.literal_subject = literal.into());
        let want = format!(
            "spec.literalSubject: Invalid value: {}: {error}",
            go::strconv_quote(literal)
        );
        assert_eq!(got, want, "{literal}");
    }
    // Escapes decode: "\2C" is a comma inside the value, "\+" a plus.
    assert_eq!(webhook(|s| s.literal_subject = "CN=a\\2Cb\\+c,O=x".into()), "");
}

#[test]
fn ip_addresses_and_emails() {
    let email = |e: &'static str| b(move |s: &mut CertificateSpec| s.email_addresses = vec![e.into()]);
    let bad_email = |e: &str, why: &str| {
        format!(
            "spec.emailAddresses[0]: Invalid value: {}: invalid email address: {why}",
            go::strconv_quote(e)
        )
        .leak() as &str
    };
    let only = "make sure the supplied value only contains the email address itself";
    check(vec![
        (
            b(|s| s.ip_addresses = vec!["10.0.0.1".into(), "1.2.3".into(), "::1".into(), "01.2.3.4".into()]),
            r#"[spec.ipAddresses[1]: Invalid value: "1.2.3": invalid IP address, spec.ipAddresses[3]: Invalid value: "01.2.3.4": invalid IP address]"#,
        ),
        (
            b(|s| s.ip_addresses = vec!["2001:db8::1".into(), "::ffff:1.2.3.4".into()]),
            "",
        ),
        (email("foo@example.com"), ""),
        (email("foo@[10.0.0.1]"), ""),
        (email("foo"), bad_email("foo", "mail: missing '@' or angle-addr")),
        (
            email("foo..bar@example.com"),
            bad_email("foo..bar@example.com", "mail: missing '@' or angle-addr"),
        ),
        (email("foo bar"), bad_email("foo bar", "mail: no angle-addr")),
        (email(""), bad_email("", "mail: no address")),
        (
            email("@example.com"),
            bad_email(
                "@example.com",
                "mail: missing word in phrase: mail: invalid string",
            ),
        ),
        (
            email("foo@example.com bar"),
            bad_email(
                "foo@example.com bar",
                r#"mail: expected single address, got "bar""#,
            ),
        ),
        (
            email("Foo <foo>"),
            bad_email("Foo <foo>", "mail: missing @ in addr-spec"),
        ),
        (
            email("Foo <foo@example.com"),
            bad_email("Foo <foo@example.com", "mail: unclosed angle-addr"),
        ),
        (
            email("Foo <foo@example.com>"),
            bad_email("Foo <foo@example.com>", only),
        ),
        (
            email("foo@example.com (Foo)"),
            bad_email("foo@example.com (Foo)", only),
        ),
        (email(" foo@example.com"), bad_email(" foo@example.com", only)),
        (email("foo@[IPv6:2001:db8::1]"), ""),
        (
            email("test@.com"),
            bad_email("test@.com", "mail: missing '@' or angle-addr"),
        ),
        (
            email("test@domain..com"),
            bad_email("test@domain..com", "mail: missing '@' or angle-addr"),
        ),
        (
            email("\"\"@example.com"),
            bad_email("\"\"@example.com", "mail: missing '@' or angle-addr"),
        ),
        (
            email("\"foo\"@example.com"),
            bad_email("\"foo\"@example.com", only),
        ),
        (
            email("<foo@[300.1.1.1]>"),
            bad_email(
                "<foo@[300.1.1.1]>",
                r#"mail: invalid IP address in domain-literal: "300.1.1.1""#,
            ),
        ),
        (
            email("<foo@[::1]>"),
            bad_email(
                "<foo@[::1]>",
                r#"mail: invalid IP address in domain-literal: "::1""#,
            ),
        ),
        (
            email("<foo@[IPv6:x]>"),
            bad_email(
                "<foo@[IPv6:x]>",
                r#"mail: invalid IPv6 address in domain-literal: "IPv6:x""#,
            ),
        ),
        (
            email("<foo@[1.2.3.4>"),
            bad_email("<foo@[1.2.3.4>", "mail: unclosed domain-literal"),
        ),
        (
            email("<foo@[1 2]>"),
            bad_email("<foo@[1 2]>", "mail: bad character in domain-literal: ' '"),
        ),
        (
            // Go reports a bad quoted local part as an empty one.
            email("<\"a\\\u{1}\"@b>"),
            bad_email("<\"a\\\u{1}\"@b>", "mail: empty quoted string in addr-spec"),
        ),
        (
            email("\"a\u{1}\" <b@c>"),
            bad_email(
                "\"a\u{1}\" <b@c>",
                r"mail: missing word in phrase: mail: bad character in quoted-string: '\x01'",
            ),
        ),
    ]);
}

#[test]
fn other_names() {
    check(vec![
        (
            b(|s| s.other_names = vec![other_name("1.3.6.1.4.1.311.20.2.3", "upn@example.com")]),
            "",
        ),
        (
            b(|s| s.other_names = vec![other_name("", "")]),
            r#"[spec.otherNames[0].oid: Required value: must be specified, spec.otherNames[0].oid: Invalid value: "": invalid oid syntax, spec.otherNames[0].utf8Value: Required value: must be set to a valid non-empty UTF8 string]"#,
        ),
        (
            b(|s| s.other_names = vec![other_name("1.2.3", "v"), other_name("1.2.x", "v")]),
            r#"spec.otherNames[1].oid: Invalid value: "1.2.x": invalid oid syntax"#,
        ),
        (
            b(|s| {
                s.dns_names.clear();
                s.other_names = vec![other_name("1.2..3", "v")];
            }),
            r#"spec.otherNames[0].oid: Invalid value: "1.2..3": invalid oid syntax"#,
        ),
    ]);
}

fn key(algorithm: &'static str, size: i64) -> Change {
    b(move |s| {
        s.private_key = Some(PrivateKey {
            algorithm: algorithm.into(),
            size,
            ..PrivateKey::default()
        });
    })
}

#[test]
fn private_key() {
    check(vec![
        (key("", 0), ""),
        (key("RSA", 3072), ""),
        (key("RSA", 8192), ""),
        (key("ECDSA", 521), ""),
        (key("Ed25519", 7), ""),
        (
            key("RSA", 1024),
            "spec.privateKey.size: Invalid value: 1024: must be between 2048 and 8192 for rsa keyAlgorithm",
        ),
        (
            key("", 8193),
            "spec.privateKey.size: Invalid value: 8193: must be between 2048 and 8192 for rsa keyAlgorithm",
        ),
        (
            key("ECDSA", 255),
            r#"spec.privateKey.size: Unsupported value: 255: supported values: "256", "384", "521""#,
        ),
        (
            key("rsa", 2048),
            r#"spec.privateKey.algorithm: Invalid value: "rsa": must be either empty or one of rsa, ecdsa or ed25519"#,
        ),
    ]);
}

#[test]
fn signature_algorithm() {
    let with = |algorithm: &'static str, signature: &'static str| {
        b(move |s: &mut CertificateSpec| {
            if !algorithm.is_empty() {
                s.private_key = Some(PrivateKey {
                    algorithm: algorithm.into(),
                    ..PrivateKey::default()
                });
            }
            s.signature_algorithm = signature.into();
        })
    };
    check(vec![
        (with("", "SHA384WithRSA"), ""),
        (with("ECDSA", "ECDSAWithSHA512"), ""),
        (with("Ed25519", "PureEd25519"), ""),
        (
            with("", "ECDSAWithSHA256"),
            r#"spec.signatureAlgorithm: Invalid value: "ECDSAWithSHA256": for key algorithm RSA the allowed signature algorithms are [SHA256WithRSA SHA384WithRSA SHA512WithRSA]"#,
        ),
        (
            with("ECDSA", "SHA256WithRSA"),
            r#"spec.signatureAlgorithm: Invalid value: "SHA256WithRSA": for key algorithm ECDSA the allowed signature algorithms are [ECDSAWithSHA256 ECDSAWithSHA384 ECDSAWithSHA512]"#,
        ),
        (
            with("Ed25519", "ECDSAWithSHA256"),
            r#"spec.signatureAlgorithm: Invalid value: "ECDSAWithSHA256": for key algorithm Ed25519 the allowed signature algorithms are [PureEd25519]"#,
        ),
    ]);
}

fn lifetime(duration: Option<&'static str>, renew_before: Option<&'static str>, pct: Option<i32>) -> Change {
    b(move |s| {
        s.duration = duration.map(str::to_string);
        s.renew_before = renew_before.map(str::to_string);
        s.renew_before_percentage = pct;
    })
}

#[test]
fn duration_and_renew_before() {
    check(vec![
        (lifetime(Some("1h"), None, None), ""),
        (lifetime(Some("2160h"), Some("720h"), None), ""),
        (lifetime(None, Some("5m"), None), ""),
        (
            lifetime(Some("30m"), None, None),
            "spec.duration: Invalid value: 1800000000000: certificate duration must be greater than 1h0m0s",
        ),
        (
            lifetime(None, Some("1m"), None),
            "spec.renewBefore: Invalid value: 60000000000: certificate renewBefore must be greater than 5m0s",
        ),
        (
            lifetime(None, Some("-5m"), None),
            "spec.renewBefore: Invalid value: -300000000000: certificate renewBefore must be greater than 5m0s",
        ),
        (
            lifetime(Some("2h"), Some("2h"), None),
            "spec.renewBefore: Invalid value: 7200000000000: certificate duration 2h0m0s must be greater than renewBefore 2h0m0s",
        ),
        (
            lifetime(Some("30m"), Some("1h"), None),
            "[spec.duration: Invalid value: 1800000000000: certificate duration must be greater than 1h0m0s, spec.renewBefore: Invalid value: 3600000000000: certificate duration 30m0s must be greater than renewBefore 1h0m0s]",
        ),
        (
            lifetime(None, Some("1h"), Some(50)),
            "[spec.renewBefore: Invalid value: 3600000000000: renewBefore and renewBeforePercentage are mutually exclusive and cannot both be set, spec.renewBeforePercentage: Invalid value: 50: renewBefore and renewBeforePercentage are mutually exclusive and cannot both be set]",
        ),
        (
            lifetime(Some("1d"), None, None),
            r#"spec.duration: Invalid value: "1d": time: unknown unit "d" in duration "1d""#,
        ),
        (
            lifetime(None, Some("soon"), None),
            r#"spec.renewBefore: Invalid value: "soon": time: invalid duration "soon""#,
        ),
    ]);
}

/// The effective renewBefore `duration * pct / 100` is checked, not cert-manager's complement.
#[test]
fn renew_before_percentage_is_checked_by_its_effect() {
    let too_short = "certificate renewBeforePercentage must result in a renewBefore greater than 5m0s";
    let too_long = "certificate renewBeforePercentage must result in a renewBefore less than duration";
    check(vec![
        (lifetime(Some("1h"), None, Some(10)), ""),
        // cert-manager's complement (57m) passes; the real renewBefore is 3m.
        (
            lifetime(Some("1h"), None, Some(5)),
            &*format!("spec.renewBeforePercentage: Invalid value: 5: {too_short}").leak(),
        ),
        // cert-manager's complement (3m) fails; the real renewBefore (57m) is fine.
        (lifetime(Some("1h"), None, Some(95)), ""),
        (
            lifetime(Some("1h"), None, Some(100)),
            &*format!("spec.renewBeforePercentage: Invalid value: 100: {too_long}").leak(),
        ),
        (
            lifetime(Some("1h"), None, Some(0)),
            &*format!("spec.renewBeforePercentage: Invalid value: 0: {too_short}").leak(),
        ),
        // A percentage alone is checked against the default 90 days.
        (lifetime(None, None, Some(33)), ""),
        (
            lifetime(None, None, Some(150)),
            &*format!("spec.renewBeforePercentage: Invalid value: 150: {too_long}").leak(),
        ),
    ]);
}

#[test]
fn usages_and_revision_history_limit() {
    check(vec![
        (
            b(|s| s.usages = vec!["server auth".into(), "client auth".into(), "s/mime".into()]),
            "",
        ),
        (
            b(|s| s.usages = vec!["server auth".into(), "Server Auth".into()]),
            r#"spec.usages[1]: Invalid value: "Server Auth": unknown keyusage"#,
        ),
        (b(|s| s.revision_history_limit = Some(1)), ""),
        (
            b(|s| s.revision_history_limit = Some(0)),
            "spec.revisionHistoryLimit: Invalid value: 0: must not be less than 1",
        ),
    ]);
}

fn template(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Change {
    let pairs = |l: &[(&str, &str)]| l.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let template = SecretTemplate {
        labels: pairs(labels),
        annotations: pairs(annotations),
        ..SecretTemplate::default()
    };
    b(move |s| s.secret_template = Some(Box::new(template)))
}

#[test]
fn secret_template() {
    let key_regex = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let big = "x".repeat(256 * 1024);
    check(vec![
        (template(&[("app", "web")], &[("cert-manager.io/allow-direct-injection", "true"), ("Example.com/Note", "x")]), ""),
        // The webhook refuses cert-manager.io/ annotations only: such a label passes (the key
        // manager never takes the target Secret for a key Secret, whatever its labels).
        (template(&[("cert-manager.io/next-private-key", "true")], &[]), ""),
        (
            template(&[], &[("cert-manager.io/issuer-name", "ca")]),
            r#"spec.secretTemplate.annotations: Invalid value: "cert-manager.io/issuer-name": cert-manager.io/* annotations are not allowed"#,
        ),
        (
            template(&[], &[("bad key", "")]),
            &*format!(r#"spec.secretTemplate.annotations: Invalid value: "bad key": name part {key_regex}"#).leak(),
        ),
        (
            template(&[], &[("/x", "")]),
            r#"spec.secretTemplate.annotations: Invalid value: "/x": prefix part must be non-empty"#,
        ),
        (
            template(&[], &[("a", big.leak())]),
            "spec.secretTemplate.annotations: Too long: may not be more than 262144 bytes",
        ),
        (
            template(&[("a/b/c", "")], &[]),
            &*format!(r#"spec.secretTemplate.labels: Invalid value: "a/b/c": a valid label key {key_regex} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"#).leak(),
        ),
        (
            template(&[("app", "-web")], &[]),
            r#"spec.secretTemplate.labels: Invalid value: "-web": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"#,
        ),
    ]);
}

#[test]
fn name_constraints() {
    let with = |is_ca: bool, nc: NameConstraints| {
        b(move |s: &mut CertificateSpec| {
            s.is_ca = is_ca;
            s.name_constraints = Some(Box::new(nc));
        })
    };
    check(vec![
        (
            with(
                true,
                constraints(Some(&["example.com"]), Some(&["10.0.0.0/8", "fd00::/8"])),
            ),
            "",
        ),
        (
            with(false, constraints(Some(&["example.com"]), None)),
            r#"spec.nameConstraints: Invalid value: {"Critical":false,"Permitted":{"DNSDomains":["example.com"],"IPRanges":null,"EmailAddresses":null,"URIDomains":null},"Excluded":null}: isCA should be true when nameConstraints is set"#,
        ),
        (
            with(true, constraints(None, None)),
            r#"spec.nameConstraints: Invalid value: {"Critical":false,"Permitted":null,"Excluded":null}: either permitted or excluded must be set"#,
        ),
        (
            with(
                true,
                constraints(None, Some(&["10.0.0.0/33", "10.0.0.1", "fd00::/129"])),
            ),
            r#"[spec.nameConstraints.excluded.ipRanges[0]: Invalid value: "10.0.0.0/33": invalid CIDR address, spec.nameConstraints.excluded.ipRanges[1]: Invalid value: "10.0.0.1": invalid CIDR address, spec.nameConstraints.excluded.ipRanges[2]: Invalid value: "fd00::/129": invalid CIDR address]"#,
        ),
    ]);
}

#[test]
fn additional_output_formats_and_keystores() {
    let formats = |types: &'static [&'static str]| {
        b(move |s: &mut CertificateSpec| {
            s.additional_output_formats = types
                .iter()
                .map(|t| AdditionalOutputFormat {
                    type_: t.to_string(),
                    ..AdditionalOutputFormat::default()
                })
                .collect();
        })
    };
    let stores = |jks: Option<JksKeystore>, pkcs12: Option<Pkcs12Keystore>| {
        b(move |s: &mut CertificateSpec| {
            s.keystores = Some(Box::new(Keystores {
                jks,
                pkcs12,
                ..Keystores::default()
            }));
        })
    };
    check(vec![
        (formats(&["DER", "CombinedPEM"]), ""),
        (
            formats(&["DER", "CombinedPEM", "DER"]),
            r#"spec.additionalOutputFormats[type]: Duplicate value: "DER""#,
        ),
        (
            stores(Some(jks(Some("p"), None)), Some(pkcs12(None, Some("pw")))),
            "",
        ),
        (
            stores(Some(jks(Some("p"), Some("pw"))), None),
            "spec.keystores.jks: Forbidden: exactly one of passwordSecretRef and password must be provided for JKS keystores; cannot set both",
        ),
        (
            stores(None, Some(pkcs12(None, None))),
            "spec.keystores.pkcs12: Forbidden: must set exactly one of passwordSecretRef and password must for PKCS#12 keystores",
        ),
        (
            stores(None, Some(pkcs12(None, Some("")))),
            "spec.keystores.pkcs12: Forbidden: must set exactly one of passwordSecretRef and password must for PKCS#12 keystores",
        ),
        (
            stores(Some(jks(Some(""), None)), None),
            "spec.keystores.jks.password: Forbidden: literal password cannot be empty if set on JKS keystores",
        ),
    ]);
}

fn renewal(policy: &'static str, windows: &[(&str, &str, &str)]) -> Change {
    let windows: Vec<RenewalWindow> = windows
        .iter()
        .map(|(cron, timezone, duration)| RenewalWindow {
            cron: cron.to_string(),
            timezone: timezone.to_string(),
            window_duration: duration.to_string(),
            ..RenewalWindow::default()
        })
        .collect();
    b(move |s| {
        s.renewal = Some(Box::new(Renewal {
            policy: policy.into(),
            windows,
            ..Renewal::default()
        }));
    })
}

#[test]
fn renewal_policy_and_windows() {
    let cron_error = |cron: &str, why: &str| {
        format!(
            "spec.renewal.windows[0].cron: Invalid value: {}: invalid cron syntax: failed to parse cron spec '{cron}': {why}. cron needs to follow: cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow",
            go::strconv_quote(cron)
        )
        .leak() as &str
    };
    let window = |cron: &'static str| renewal("RenewBefore", &[(cron, "", "1h")]);
    check(vec![
        (renewal("Disabled", &[]), ""),
        (
            renewal(
                "RenewBefore",
                &[("0 2 * * mon-fri", "Europe/Berlin", "2h"), ("@daily", "", "1h")],
            ),
            "",
        ),
        (
            renewal("Disabled", &[("0 2 * * *", "", "1h")]),
            "spec.renewal.windows: Forbidden: windows cannot be set when `renewal.policy` is set to Disabled",
        ),
        (
            renewal("", &[]),
            r#"spec.renewal.policy: Unsupported value: "": supported values: "Disabled", "RenewBefore""#,
        ),
        (
            renewal("RenewBefore", &[("0 2 * * *", "", "")]),
            "spec.renewal.windows[0].windowDuration: Required value: windowDuration must be specified and should be greater than 0",
        ),
        (
            renewal("RenewBefore", &[("0 2 * * *", "Mars/Olympus", "1h")]),
            "[spec.renewal.windows[0].timezone: Invalid value: \"Mars/Olympus\": invalid value for timezone. timezone must be IANA compliant, spec.renewal.windows[0].cron: Invalid value: \"0 2 * * *\": invalid cron syntax: failed to parse cron spec '0 2 * * *': provided bad location Mars/Olympus: unknown time zone Mars/Olympus. cron needs to follow: cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow]",
        ),
        (window(""), cron_error("", "empty spec string")),
        (
            window("0 2 * *"),
            cron_error("0 2 * *", "expected exactly 5 fields, found 4: [0 2 * *]"),
        ),
        (
            window("61 * * * *"),
            cron_error("61 * * * *", "end of range (61) above maximum (59): 61"),
        ),
        (
            window("* * 0 * *"),
            cron_error("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ),
        (
            window("* 5-3 * * *"),
            cron_error(
                "* 5-3 * * *",
                "beginning of range (5) beyond end of range (3): 5-3",
            ),
        ),
        (
            window("*/0 * * * *"),
            cron_error("*/0 * * * *", "step of range should be a positive number: */0"),
        ),
        (
            window("1-2-3 * * * *"),
            cron_error("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ),
        (
            window("*/2/3 * * * *"),
            cron_error("*/2/3 * * * *", "too many slashes: */2/3"),
        ),
        (
            window("-1 * * * *"),
            cron_error(
                "-1 * * * *",
                r#"failed to parse int from : strconv.Atoi: parsing "": invalid syntax"#,
            ),
        ),
        (
            window("x * * * *"),
            cron_error(
                "x * * * *",
                r#"failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax"#,
            ),
        ),
        (
            window("@every 1d"),
            cron_error(
                "@every 1d",
                r#"failed to parse duration @every 1d: time: unknown unit "d" in duration "1d""#,
            ),
        ),
        (
            window("@fortnightly"),
            cron_error("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ),
        (window("0 0 1 jan,JUL ?"), ""),
        (window("@every 90m"), ""),
    ]);
}
