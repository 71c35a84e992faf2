use std::collections::BTreeMap;

use k8s_openapi::jiff::SignedDuration;

use super::*;
use crate::api::certmanager::{
    AdditionalOutputFormat, CertificateSpec, IssuerRef, JksKeystore, Keystores, NameConstraintItem,
    NameConstraints, OtherName, Pkcs12Keystore, Renewal, RenewalWindow, SecretKeySelector, SecretTemplate,
    X509Subject,
};

mod rules;

/// A Certificate spec every rule accepts.
fn valid() -> CertificateSpec {
    CertificateSpec {
        secret_name: "tls".into(),
        issuer_ref: IssuerRef {
            name: "ca".into(),
            ..IssuerRef::default()
        },
        dns_names: vec!["example.com".into()],
        ..CertificateSpec::default()
    }
}

/// The webhook's aggregate message for `valid()` changed by `change`.
fn webhook(change: impl FnOnce(&mut CertificateSpec)) -> String {
    let mut spec = valid();
    change(&mut spec);
    message(&validate_webhook(&spec))
}

/// The whole check's (schema, then webhook) aggregate message.
fn full(change: impl FnOnce(&mut CertificateSpec)) -> String {
    let mut spec = valid();
    change(&mut spec);
    message(&validate(&spec))
}

#[test]
fn the_valid_spec_is_valid() {
    assert_eq!(validate(&valid()), vec![]);
}

#[test]
fn field_errors_read_as_apimachinery_prints_them() {
    let cases = [
        (
            FieldError::required("spec.a", "must be specified"),
            "spec.a: Required value: must be specified",
        ),
        (
            FieldError::invalid("spec.a", Value::Str("x\"y".into()), "bad"),
            r#"spec.a: Invalid value: "x\"y": bad"#,
        ),
        (
            FieldError::invalid("spec.a", Value::Int(-5), "bad"),
            "spec.a: Invalid value: -5: bad",
        ),
        (
            FieldError::invalid("spec.a", Value::Json("{\"A\":null}".into()), "bad"),
            r#"spec.a: Invalid value: {"A":null}: bad"#,
        ),
        (
            FieldError::not_supported("spec.a", Value::Str("x".into()), &["A", "B"]),
            r#"spec.a: Unsupported value: "x": supported values: "A", "B""#,
        ),
        (FieldError::forbidden("spec.a", "no"), "spec.a: Forbidden: no"),
        (
            FieldError::too_long("spec.a", 64),
            "spec.a: Too long: may not be more than 64 bytes",
        ),
        (
            FieldError::too_long("spec.a", 1),
            "spec.a: Too long: may not be more than 1 byte",
        ),
        (
            FieldError::duplicate("spec.a[type]", Value::Str("DER".into())),
            r#"spec.a[type]: Duplicate value: "DER""#,
        ),
        (
            FieldError::invalid("spec.a", Value::Str("tab\there\u{1}".into()), ""),
            r#"spec.a: Invalid value: "tab\there\x01""#,
        ),
        (
            FieldError::invalid("spec.a", Value::Str("é\u{200b}\u{a0}\u{e0001}".into()), ""),
            r#"spec.a: Invalid value: "é\u200b\u00a0\U000e0001""#,
        ),
    ];
    for (error, want) in cases {
        assert_eq!(error.to_string(), want);
    }
}

#[test]
fn message_joins_as_the_aggregate_does() {
    let a = FieldError::forbidden("spec.a", "no");
    let b = FieldError::forbidden("spec.b", "no");
    let cases: [(Vec<FieldError>, &str); 5] = [
        (vec![], ""),
        (vec![a.clone()], "spec.a: Forbidden: no"),
        (vec![a.clone(), a.clone()], "spec.a: Forbidden: no"),
        (
            vec![a.clone(), b.clone()],
            "[spec.a: Forbidden: no, spec.b: Forbidden: no]",
        ),
        (
            vec![a.clone(), b, a],
            "[spec.a: Forbidden: no, spec.b: Forbidden: no]",
        ),
    ];
    for (errors, want) in cases {
        assert_eq!(message(&errors), want);
    }
}

#[test]
fn go_durations_parse_as_go_parses_them() {
    let ok = [
        ("0", 0),
        ("-0", 0),
        ("1h", 3_600_000_000_000),
        ("1h30m", 5_400_000_000_000),
        ("1.5h", 5_400_000_000_000),
        ("90s", 90_000_000_000),
        ("-5m", -300_000_000_000),
        ("+1s", 1_000_000_000),
        (".5s", 500_000_000),
        ("5.s", 5_000_000_000),
        ("1us", 1_000),
        ("1\u{b5}s", 1_000),
        ("1\u{3bc}s", 1_000),
        ("300ms", 300_000_000),
        ("1h1m1s1ms1us1ns", 3_661_001_001_001),
        ("-9223372036854775808ns", i64::MIN),
        ("9223372036854775807ns", i64::MAX),
    ];
    for (text, nanos) in ok {
        assert_eq!(
            parse_go_duration(text),
            Ok(SignedDuration::from_nanos(nanos)),
            "{text}"
        );
    }
    let bad = [
        ("", r#"time: invalid duration """#),
        ("-", r#"time: invalid duration "-""#),
        ("h", r#"time: invalid duration "h""#),
        (".", r#"time: invalid duration ".""#),
        ("1", r#"time: missing unit in duration "1""#),
        ("1h2", r#"time: missing unit in duration "1h2""#),
        ("1d", r#"time: unknown unit "d" in duration "1d""#),
        ("1 h", r#"time: unknown unit " h" in duration "1 h""#),
        (
            "1\u{e9}",
            r#"time: unknown unit "\xc3\xa9" in duration "1\xc3\xa9""#,
        ),
        (
            "9223372036854775808ns",
            r#"time: invalid duration "9223372036854775808ns""#,
        ),
        ("3000000h", r#"time: invalid duration "3000000h""#),
    ];
    for (text, want) in bad {
        assert_eq!(parse_go_duration(text).unwrap_err().to_string(), want, "{text}");
    }
}

#[test]
fn go_durations_print_as_go_prints_them() {
    let cases = [
        (0, "0s"),
        (1, "1ns"),
        (1_500, "1.5\u{b5}s"),
        (1_500_000, "1.5ms"),
        (1_000_000_000, "1s"),
        (1_500_000_000, "1.5s"),
        (90_000_000_000, "1m30s"),
        (300_000_000_000, "5m0s"),
        (3_600_000_000_000, "1h0m0s"),
        (3_601_500_000_000, "1h0m1.5s"),
        (7_776_000_000_000_000, "2160h0m0s"),
        (-1_000_000_000, "-1s"),
        (i64::MIN, "-2562047h47m16.854775808s"),
    ];
    for (nanos, want) in cases {
        assert_eq!(format_go_duration(nanos), want, "{nanos}");
    }
}

#[test]
fn defaults_set_only_the_rotation_policy() {
    let with_key = |rotation: &str| CertificateSpec {
        private_key: Some(PrivateKey {
            rotation_policy: rotation.into(),
            ..PrivateKey::default()
        }),
        ..valid()
    };
    let ecdsa = CertificateSpec {
        private_key: Some(PrivateKey {
            algorithm: "ECDSA".into(),
            ..PrivateKey::default()
        }),
        ..valid()
    };
    let ecdsa_always = CertificateSpec {
        private_key: Some(PrivateKey {
            algorithm: "ECDSA".into(),
            rotation_policy: "Always".into(),
            ..PrivateKey::default()
        }),
        ..valid()
    };
    let cases = [
        (valid(), with_key("Always")),
        (with_key(""), with_key("Always")),
        (with_key("Never"), with_key("Never")),
        (with_key("Always"), with_key("Always")),
        (ecdsa, ecdsa_always),
    ];
    for (spec, want) in cases {
        let got = defaults(&spec);
        assert_eq!(got, want);
        // cert-manager #8158: issuerRef kind and group stay as written.
        assert_eq!(
            (got.issuer_ref.kind.as_str(), got.issuer_ref.group.as_str()),
            ("", "")
        );
    }
}

#[test]
fn backoff_flags_are_checked_as_cert_manager_checks_them() {
    let d = |s: &str| parse_go_duration(s).unwrap();
    let min = "certificateRequestMinimumBackoffDuration";
    let max = "certificateRequestMaximumBackoffDuration";
    let cases = [
        ("1h", "32h", Ok(())),
        ("0", "0", Ok(())),
        ("0", "1h", Ok(())),
        ("1h", "0", Ok(())),
        ("1h", "1h", Ok(())),
        (
            "-1s",
            "1h",
            Err(format!(r#"{min}: Invalid value: "-1s": must not be negative"#)),
        ),
        (
            "1h",
            "-90s",
            Err(format!(r#"{max}: Invalid value: "-1m30s": must not be negative"#)),
        ),
        (
            "-1s",
            "-2s",
            Err(format!(
                r#"[{min}: Invalid value: "-1s": must not be negative, {max}: Invalid value: "-2s": must not be negative]"#
            )),
        ),
        (
            "2h",
            "1h",
            Err(format!(
                r#"{max}: Invalid value: "1h0m0s": must be greater than or equal to {min}"#
            )),
        ),
    ];
    for (lo, hi, want) in cases {
        assert_eq!(validate_backoff(d(lo), d(hi)), want, "{lo} {hi}");
    }
}

#[test]
fn the_schema_refuses_values_outside_the_crd_enums() {
    let usages = r#""signing", "digital signature", "content commitment", "key encipherment", "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc""#;
    let key = |f: fn(&mut PrivateKey)| {
        move |s: &mut CertificateSpec| {
            let mut key = PrivateKey::default();
            f(&mut key);
            s.private_key = Some(key);
        }
    };
    let window = |cron: &str, duration: &str| {
        let (cron, duration) = (cron.to_string(), duration.to_string());
        move |s: &mut CertificateSpec| {
            s.renewal = Some(Box::new(Renewal {
                policy: "RenewBefore".into(),
                windows: vec![RenewalWindow {
                    cron,
                    window_duration: duration,
                    ..RenewalWindow::default()
                }],
                ..Renewal::default()
            }));
        }
    };
    type Change = Box<dyn FnOnce(&mut CertificateSpec)>;
    let cases: Vec<(Change, String)> = vec![
        (
            Box::new(key(|k| k.algorithm = "rsa".into())),
            r#"spec.privateKey.algorithm: Unsupported value: "rsa": supported values: "RSA", "ECDSA", "Ed25519""#.into(),
        ),
        (
            Box::new(key(|k| k.encoding = "SEC1".into())),
            r#"spec.privateKey.encoding: Unsupported value: "SEC1": supported values: "PKCS1", "PKCS8""#.into(),
        ),
        (
            Box::new(key(|k| k.rotation_policy = "Sometimes".into())),
            r#"spec.privateKey.rotationPolicy: Unsupported value: "Sometimes": supported values: "Never", "Always""#.into(),
        ),
        (
            Box::new(|s: &mut CertificateSpec| s.signature_algorithm = "MD5WithRSA".into()),
            r#"spec.signatureAlgorithm: Unsupported value: "MD5WithRSA": supported values: "SHA256WithRSA", "SHA384WithRSA", "SHA512WithRSA", "ECDSAWithSHA256", "ECDSAWithSHA384", "ECDSAWithSHA512", "PureEd25519""#.into(),
        ),
        (
            Box::new(|s: &mut CertificateSpec| s.usages = vec!["server auth".into(), "Server Auth".into()]),
            format!(r#"spec.usages[1]: Unsupported value: "Server Auth": supported values: {usages}"#),
        ),
        (
            Box::new(|s: &mut CertificateSpec| {
                s.additional_output_formats = vec![AdditionalOutputFormat {
                    type_: "PEM".into(),
                    ..AdditionalOutputFormat::default()
                }];
            }),
            r#"spec.additionalOutputFormats[0].type: Unsupported value: "PEM": supported values: "DER", "CombinedPEM""#.into(),
        ),
        (
            Box::new(|s: &mut CertificateSpec| {
                s.keystores = Some(Box::new(Keystores {
                    pkcs12: Some(Pkcs12Keystore {
                        profile: "Modern2099".into(),
                        password: Some("p".into()),
                        ..Pkcs12Keystore::default()
                    }),
                    ..Keystores::default()
                }));
            }),
            r#"spec.keystores.pkcs12.profile: Unsupported value: "Modern2099": supported values: "LegacyRC2", "LegacyDES", "Modern2023", "Modern2026""#.into(),
        ),
        (
            Box::new(|s: &mut CertificateSpec| {
                s.renewal = Some(Box::new(Renewal {
                    policy: "Sometimes".into(),
                    ..Renewal::default()
                }));
            }),
            r#"spec.renewal.policy: Unsupported value: "Sometimes": supported values: "RenewBefore", "Disabled""#.into(),
        ),
        (
            Box::new(window("0 2 * * *", "1d")),
            r#"spec.renewal.windows[0].windowDuration: Invalid value: "1d": spec.renewal.windows[0].windowDuration in body should match '^([0-9]+(\.[0-9]+)?(s|m|h))+$'"#.into(),
        ),
        (
            Box::new(window("", "1h")),
            r#"spec.renewal.windows[0].cron: Invalid value: "": spec.renewal.windows[0].cron in body should be at least 1 chars long"#.into(),
        ),
    ];
    for (change, want) in cases {
        assert_eq!(full(change), want);
    }
    // Values the enums and patterns accept.
    let accepted = full(|s| {
        s.private_key = Some(PrivateKey {
            algorithm: "Ed25519".into(),
            encoding: "PKCS8".into(),
            rotation_policy: "Never".into(),
            ..PrivateKey::default()
        });
        s.signature_algorithm = "PureEd25519".into();
        s.usages = vec!["digital signature".into(), "s/mime".into()];
        window("0 2 * * *", "1h30m")(s);
        s.renewal.as_mut().unwrap().windows.push(RenewalWindow {
            cron: "@daily".into(),
            window_duration: "1.5h".into(),
            ..RenewalWindow::default()
        });
    });
    assert_eq!(accepted, "");
}

#[test]
fn schema_errors_hide_the_webhook_ones() {
    let change = |s: &mut CertificateSpec| {
        s.secret_name = String::new();
        s.private_key = Some(PrivateKey {
            encoding: "DER".into(),
            ..PrivateKey::default()
        });
    };
    assert_eq!(
        full(change),
        r#"spec.privateKey.encoding: Unsupported value: "DER": supported values: "PKCS1", "PKCS8""#
    );
    assert_eq!(
        webhook(change),
        "spec.secretName: Required value: must be specified"
    );
}

#[test]
fn secret_template_keys_are_checked_in_key_order() {
    let got = webhook(|s| {
        s.secret_template = Some(Box::new(SecretTemplate {
            annotations: BTreeMap::from([
                ("cert-manager.io/z".into(), String::new()),
                ("cert-manager.io/a".into(), String::new()),
            ]),
            ..SecretTemplate::default()
        }));
    });
    assert_eq!(
        got,
        r#"[spec.secretTemplate.annotations: Invalid value: "cert-manager.io/a": cert-manager.io/* annotations are not allowed, spec.secretTemplate.annotations: Invalid value: "cert-manager.io/z": cert-manager.io/* annotations are not allowed]"#
    );
}

/// Builders the rule tables share.
fn subject(organizations: &[&str]) -> X509Subject {
    X509Subject {
        organizations: organizations.iter().map(ToString::to_string).collect(),
        ..X509Subject::default()
    }
}

fn other_name(oid: &str, value: &str) -> OtherName {
    OtherName {
        oid: oid.into(),
        utf8_value: value.into(),
        ..OtherName::default()
    }
}

fn constraints(permitted: Option<&[&str]>, excluded_ranges: Option<&[&str]>) -> NameConstraints {
    let strings = |l: &[&str]| l.iter().map(ToString::to_string).collect::<Vec<_>>();
    NameConstraints {
        permitted: permitted.map(|d| NameConstraintItem {
            dns_domains: strings(d),
            ..NameConstraintItem::default()
        }),
        excluded: excluded_ranges.map(|r| NameConstraintItem {
            ip_ranges: strings(r),
            ..NameConstraintItem::default()
        }),
        ..NameConstraints::default()
    }
}

fn jks(password: Option<&str>, secret: Option<&str>) -> JksKeystore {
    JksKeystore {
        create: true,
        password: password.map(str::to_string),
        password_secret_ref: secret.map(|name| SecretKeySelector {
            name: name.into(),
            ..SecretKeySelector::default()
        }),
        ..JksKeystore::default()
    }
}

fn pkcs12(password: Option<&str>, secret: Option<&str>) -> Pkcs12Keystore {
    let j = jks(password, secret);
    Pkcs12Keystore {
        create: true,
        password: j.password,
        password_secret_ref: j.password_secret_ref,
        ..Pkcs12Keystore::default()
    }
}
