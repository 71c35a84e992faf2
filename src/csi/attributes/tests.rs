use std::collections::BTreeMap;

use jiff::SignedDuration;

use super::text::{csv, expand};
use super::*;
use crate::pki::keystore::Pkcs12Profile;

/// A table row's attributes.
type Pairs = &'static [(&'static str, &'static str)];

fn pod() -> PodInfo {
    PodInfo {
        name: "web-0".into(),
        namespace: "shop".into(),
        uid: "0b9d".into(),
        service_account: "web".into(),
    }
}

fn context(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    crate::csi::testing::pod_context(pairs)
}

fn parsed(pairs: &[(&str, &str)]) -> Result<Attributes, String> {
    parse(&context(pairs), &pod()).map_err(|e| e.to_string())
}

#[test]
fn defaults_are_csi_drivers_but_the_group_is_ours() {
    let got = parsed(&[]).unwrap();
    let want = Attributes {
        issuer: Issuer {
            name: "ca".into(),
            kind: "Issuer".into(),
            group: GROUP.into(),
        },
        subject: Subject::Fields(SubjectFields::default()),
        dns_names: vec![],
        ip_addresses: vec![],
        uris: vec![],
        duration: SignedDuration::from_hours(2160),
        renew_before: None,
        is_ca: false,
        usages: vec!["digital signature".into(), "key encipherment".into()],
        key: KeySpec::Rsa(2048),
        encoding: Encoding::Pkcs1,
        reuse_private_key: false,
        files: Files {
            certificate: "tls.crt".into(),
            private_key: "tls.key".into(),
            ca: "ca.crt".into(),
            pkcs12: None,
            pkcs12_profile: Pkcs12Profile::LegacyRc2,
            jks: None,
            bundle: None,
        },
        fs_group: None,
        annotations: BTreeMap::new(),
    };
    assert_eq!(got, want);
}

#[test]
fn every_value_read() {
    let got = parsed(&[
        (key::ISSUER_KIND, "ClusterIssuer"),
        (key::COMMON_NAME, "${POD_NAME}.${POD_NAMESPACE}"),
        (key::ORGANIZATIONS, "Acme, \"Acme, Inc.\""),
        (key::SERIAL_NUMBER, "42"),
        (key::DNS_NAMES, "$POD_NAME.svc, ${SERVICE_ACCOUNT_NAME}.example"),
        (key::IP_SANS, "10.0.0.1, ::1"),
        (
            key::URI_SANS,
            "spiffe://cluster/ns/${POD_NAMESPACE}/sa/${SERVICE_ACCOUNT_NAME}",
        ),
        (key::DURATION, "24h"),
        (key::RENEW_BEFORE, "8h"),
        (key::IS_CA, "true"),
        (key::KEY_USAGES, "server auth,client auth"),
        (key::KEY_ALGORITHM, "ecdsa"),
        (key::KEY_SIZE, "384"),
        (key::REUSE_PRIVATE_KEY, "true"),
        (key::CERTIFICATE_FILE, "cert.pem"),
        (key::PRIVATE_KEY_FILE, "key.pem"),
        (key::CA_FILE, "ca.pem"),
        (key::FS_GROUP, "2000"),
        (key::PKCS12_ENABLE, "true"),
        (key::PKCS12_PASSWORD, "changeit"),
        (own::PKCS12_PROFILE, "Modern2023"),
        (own::JKS_ENABLE, "true"),
        (own::JKS_FILENAME, "trust.jks"),
        (own::JKS_PASSWORD, "storepass"),
        (own::BUNDLE_FILE, "tls-combined.pem"),
        ("policy.example.com/team", "payments"),
        ("plain", "not an annotation"),
    ])
    .unwrap();
    assert_eq!(got.issuer.kind, "ClusterIssuer");
    let Subject::Fields(fields) = &got.subject else {
        panic!("fields")
    };
    assert_eq!(fields.common_name, "web-0.shop");
    assert_eq!(fields.organizations, ["Acme", "Acme, Inc."]);
    assert_eq!(fields.serial_number, "42");
    assert_eq!(got.dns_names, ["web-0.svc", "web.example"]);
    assert_eq!(
        got.ip_addresses,
        ["10.0.0.1".parse::<IpAddr>().unwrap(), "::1".parse().unwrap()]
    );
    assert_eq!(got.uris, ["spiffe://cluster/ns/shop/sa/web"]);
    assert_eq!(got.duration, SignedDuration::from_hours(24));
    assert_eq!(got.renew_before, Some(SignedDuration::from_hours(8)));
    assert!(got.is_ca && got.reuse_private_key);
    assert_eq!(got.usages, ["server auth", "client auth"]);
    assert_eq!((got.key, got.encoding), (KeySpec::Ecdsa(384), Encoding::Pkcs8));
    assert_eq!(
        got.files,
        Files {
            certificate: "cert.pem".into(),
            private_key: "key.pem".into(),
            ca: "ca.pem".into(),
            pkcs12: Some(Keystore {
                file: "keystore.p12".into(),
                password: "changeit".into()
            }),
            pkcs12_profile: Pkcs12Profile::Modern2023,
            jks: Some(Keystore {
                file: "trust.jks".into(),
                password: "storepass".into()
            }),
            bundle: Some("tls-combined.pem".into()),
        }
    );
    assert_eq!(got.fs_group, Some(2000));
    let annotations: Vec<_> = got.annotations.iter().collect();
    assert_eq!(
        annotations,
        [(&"policy.example.com/team".to_string(), &"payments".to_string())]
    );
}

#[test]
fn literal_subject_is_expanded_and_checked() {
    let got = parsed(&[(key::LITERAL_SUBJECT, "CN=${POD_NAME},O=Acme")]).unwrap();
    assert_eq!(got.subject, Subject::Literal("CN=web-0,O=Acme".into()));
}

#[test]
fn key_defaults_follow_the_algorithm() {
    let cases: &[(&str, Pairs, KeySpec, Encoding)] = &[
        (
            "rsa",
            &[(key::KEY_ALGORITHM, "RSA")],
            KeySpec::Rsa(2048),
            Encoding::Pkcs1,
        ),
        (
            "rsa pkcs8",
            &[(key::KEY_ENCODING, "pkcs8")],
            KeySpec::Rsa(2048),
            Encoding::Pkcs8,
        ),
        (
            "rsa 4096",
            &[(key::KEY_SIZE, "4096")],
            KeySpec::Rsa(4096),
            Encoding::Pkcs1,
        ),
        (
            "ecdsa",
            &[(key::KEY_ALGORITHM, "ECDSA")],
            KeySpec::Ecdsa(256),
            Encoding::Pkcs8,
        ),
        (
            "ed25519",
            &[(key::KEY_ALGORITHM, "Ed25519")],
            KeySpec::Ed25519,
            Encoding::Pkcs8,
        ),
    ];
    for (name, pairs, spec, encoding) in cases {
        let got = parsed(pairs).unwrap();
        assert_eq!((got.key, got.encoding), (*spec, *encoding), "{name}");
    }
}

/// Each rule alone, with the exact message a user sees.
#[test]
fn each_rule_has_its_message() {
    let cases: &[(&str, (&str, &str), &str)] = &[
        (
            "issuer name",
            (key::ISSUER_NAME, ""),
            "csi.cert-manager.io/issuer-name: required",
        ),
        (
            "our kinds",
            (key::ISSUER_KIND, "CA"),
            "csi.cert-manager.io/issuer-kind: \"CA\" is not a kind of cfssl-issuer.wikimedia.org: use Issuer or ClusterIssuer",
        ),
        (
            "typo under csi-driver's prefix",
            ("csi.cert-manager.io/dns-name", "a"),
            "csi.cert-manager.io/dns-name: not an attribute this driver knows (a typo?)",
        ),
        (
            "our prefix",
            ("csi.cfssl-issuer.wikimedia.org/jks", "true"),
            "csi.cfssl-issuer.wikimedia.org/jks: not an attribute this driver knows (a typo?)",
        ),
        (
            "unknown variable",
            (key::COMMON_NAME, "${POD_IP}"),
            "csi.cert-manager.io/common-name: unknown variable \"POD_IP\" (known: POD_NAME, POD_NAMESPACE, POD_UID, SERVICE_ACCOUNT_NAME)",
        ),
        (
            "literal subject",
            (key::LITERAL_SUBJECT, "CN=a,FOO=${POD_NAME}"),
            "csi.cert-manager.io/literal-subject: Literal subject contains unrecognized key with value [web-0]",
        ),
        (
            "csv quote",
            (key::ORGANIZATIONS, "a\"b"),
            "csi.cert-manager.io/organizations: a quote inside an unquoted item (quote the whole item)",
        ),
        (
            "empty dns item",
            (key::DNS_NAMES, "a,,b"),
            "csi.cert-manager.io/dns-names: an empty item in the comma-separated list",
        ),
        (
            "ip",
            (key::IP_SANS, "10.0.0.1,nope,300.1.1.1"),
            "csi.cert-manager.io/ip-sans: not an IP address: \"nope\", \"300.1.1.1\"",
        ),
        (
            "uri",
            (key::URI_SANS, "/relative,ok:x"),
            "csi.cert-manager.io/uri-sans: not an absolute URI: \"/relative\"",
        ),
        (
            "duration",
            (key::DURATION, "90d"),
            "csi.cert-manager.io/duration: time: unknown unit \"d\" in duration \"90d\"",
        ),
        (
            "negative renew-before",
            (key::RENEW_BEFORE, "-1h"),
            "csi.cert-manager.io/renew-before: \"-1h\" is not a positive duration",
        ),
        (
            "is-ca",
            (key::IS_CA, "yes"),
            "csi.cert-manager.io/is-ca: must be \"true\" or \"false\", not \"yes\"",
        ),
        (
            "reuse",
            (key::REUSE_PRIVATE_KEY, "True"),
            "csi.cert-manager.io/reuse-private-key: must be \"true\" or \"false\", not \"True\"",
        ),
        (
            "usages",
            (key::KEY_USAGES, "server auth,serverauth"),
            "csi.cert-manager.io/key-usages: not a key usage: \"serverauth\"",
        ),
        (
            "algorithm",
            (key::KEY_ALGORITHM, "DSA"),
            "csi.cert-manager.io/key-algorithm: \"DSA\" is not RSA, ECDSA or Ed25519",
        ),
        (
            "rsa size",
            (key::KEY_SIZE, "1024"),
            "csi.cert-manager.io/key-size: an RSA key is 2048 to 8192 bits, not 1024",
        ),
        (
            "size text",
            (key::KEY_SIZE, "big"),
            "csi.cert-manager.io/key-size: \"big\" is not a number of bits",
        ),
        (
            "encoding",
            (key::KEY_ENCODING, "DER"),
            "csi.cert-manager.io/key-encoding: \"DER\" is not PKCS1 or PKCS8",
        ),
        (
            "fs-group zero",
            (key::FS_GROUP, "0"),
            "csi.cert-manager.io/fs-group: \"0\" is not a group ID from 1 to 4294967295",
        ),
        (
            "absolute file",
            (key::CA_FILE, "/etc/ca.crt"),
            "csi.cert-manager.io/ca-file: \"/etc/ca.crt\" must be a file name, not an absolute path",
        ),
        (
            "file with slash",
            (key::CA_FILE, "a/ca.crt"),
            "csi.cert-manager.io/ca-file: \"a/ca.crt\" must be a file name without '/'",
        ),
        (
            "store's names",
            (key::CA_FILE, "..data"),
            "csi.cert-manager.io/ca-file: \"..data\" must not start with '..' (the store's own names)",
        ),
        (
            "spaces",
            (key::CA_FILE, " ca.crt"),
            "csi.cert-manager.io/ca-file: \" ca.crt\" must not start or end with spaces",
        ),
        (
            "one file twice",
            (key::CA_FILE, "tls.crt"),
            "csi.cert-manager.io/ca-file: \"tls.crt\" is already the file of csi.cert-manager.io/certificate-file",
        ),
        (
            "pkcs12 password",
            (key::PKCS12_ENABLE, "true"),
            "csi.cert-manager.io/pkcs12-password: required when pkcs12-enable is \"true\"",
        ),
        (
            "pkcs12 enable",
            (key::PKCS12_ENABLE, "on"),
            "csi.cert-manager.io/pkcs12-enable: must be \"true\" or \"false\", not \"on\"",
        ),
        (
            "pkcs12 alone",
            (key::PKCS12_FILENAME, "k.p12"),
            "csi.cert-manager.io/pkcs12-filename: set without pkcs12-enable",
        ),
        (
            "pkcs12 profile alone",
            (own::PKCS12_PROFILE, "Modern2023"),
            "csi.cfssl-issuer.wikimedia.org/pkcs12-profile: set without pkcs12-enable",
        ),
        (
            "jks password",
            (own::JKS_ENABLE, "true"),
            "csi.cfssl-issuer.wikimedia.org/jks-password: required when jks-enable is \"true\"",
        ),
        (
            "jks enable",
            (own::JKS_ENABLE, "yes"),
            "csi.cfssl-issuer.wikimedia.org/jks-enable: must be \"true\" or \"false\", not \"yes\"",
        ),
        (
            "jks alone",
            (own::JKS_PASSWORD, "changeit"),
            "csi.cfssl-issuer.wikimedia.org/jks-password: set without jks-enable",
        ),
        (
            "bundle path",
            (own::BUNDLE_FILE, "certs/all.pem"),
            "csi.cfssl-issuer.wikimedia.org/bundle-file: \"certs/all.pem\" must be a file name without '/'",
        ),
        (
            "bundle over the key",
            (own::BUNDLE_FILE, "tls.key"),
            "csi.cfssl-issuer.wikimedia.org/bundle-file: \"tls.key\" is already the file of csi.cert-manager.io/privatekey-file",
        ),
    ];
    for (name, pair, message) in cases {
        let got = parsed(&[*pair]).unwrap_err();
        let want = format!("invalid volume attributes: {message}");
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn key_rules_that_need_two_attributes() {
    let cases: &[(&str, Pairs, &str)] = &[
        (
            "pkcs1 ecdsa",
            &[(key::KEY_ALGORITHM, "ECDSA"), (key::KEY_ENCODING, "PKCS1")],
            "csi.cert-manager.io/key-encoding: PKCS1 is for RSA keys; a ECDSA key is PKCS8",
        ),
        (
            "ecdsa size",
            &[(key::KEY_ALGORITHM, "ECDSA"), (key::KEY_SIZE, "2048")],
            "csi.cert-manager.io/key-size: an ECDSA key is 256, 384 or 521 bits, not 2048",
        ),
        (
            "ed25519 size",
            &[(key::KEY_ALGORITHM, "ed25519"), (key::KEY_SIZE, "256")],
            "csi.cert-manager.io/key-size: must be empty for an Ed25519 key",
        ),
        (
            "rsa 3000",
            &[(key::KEY_SIZE, "3000")],
            "csi.cert-manager.io/key-size: cannot generate an RSA key of 3000 bits: this manager's crypto provider (AWS-LC) makes RSA keys in multiples of 128 bits; use a size from 2048 to 8192 that is a multiple of 128 (2048, 2176, 2304, ..., 3072, ..., 4096, ..., 8192)",
        ),
        (
            "fields beside a literal subject",
            &[(key::LITERAL_SUBJECT, "CN=a"), (key::COMMON_NAME, "b")],
            "csi.cert-manager.io/common-name: cannot be set with literal-subject, which replaces it",
        ),
        (
            "other kinds are another group's",
            &[(key::ISSUER_GROUP, "cert-manager.io"), (key::ISSUER_KIND, "CA")],
            "",
        ),
    ];
    for (name, pairs, message) in cases {
        let got = parsed(pairs).err().unwrap_or_default();
        let want = if message.is_empty() {
            String::new()
        } else {
            format!("invalid volume attributes: {message}")
        };
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn every_problem_in_one_message_sorted_by_key() {
    let got = parsed(&[
        (key::ISSUER_NAME, ""),
        (key::IS_CA, "1"),
        ("csi.cert-manager.io/commonname", "x"),
        (key::DURATION, "1y"),
    ])
    .unwrap_err();
    assert_eq!(
        got,
        "invalid volume attributes: \
         csi.cert-manager.io/commonname: not an attribute this driver knows (a typo?); \
         csi.cert-manager.io/duration: time: unknown unit \"y\" in duration \"1y\"; \
         csi.cert-manager.io/is-ca: must be \"true\" or \"false\", not \"1\"; \
         csi.cert-manager.io/issuer-name: required"
    );
}

#[test]
fn expansion() {
    let cases: &[(&str, Result<&str, &str>)] = &[
        ("${POD_NAME}", Ok("web-0")),
        ("$POD_NAMESPACE.svc", Ok("shop.svc")),
        ("${POD_UID}-${SERVICE_ACCOUNT_NAME}", Ok("0b9d-web")),
        ("no variables", Ok("no variables")),
        (
            "cost $5 or $",
            Err("unknown variable \"5\" (known: POD_NAME, POD_NAMESPACE, POD_UID, SERVICE_ACCOUNT_NAME)"),
        ),
        ("a $-b $", Ok("a $-b $")),
        (
            "${A}${B}",
            Err(
                "unknown variable \"A\", \"B\" (known: POD_NAME, POD_NAMESPACE, POD_UID, SERVICE_ACCOUNT_NAME)",
            ),
        ),
        ("${POD_NAME", Err("\"${\" without a closing \"}\"")),
        ("${}", Err("an empty variable name \"${}\"")),
        ("é${POD_NAME}é", Ok("éweb-0é")),
    ];
    for (text, want) in cases {
        let got = expand(text, &pod());
        assert_eq!(
            got.as_deref(),
            want.map_err(ToString::to_string).as_deref(),
            "{text}"
        );
    }
}

#[test]
fn subject_lists_read_as_cert_manager_does() {
    let cases: &[(&str, Result<&[&str], &str>)] = &[
        ("a", Ok(&["a"])),
        ("a, b ,c", Ok(&["a", "b ", "c"])),
        ("\"a, b\",c", Ok(&["a, b", "c"])),
        ("\"say \"\"hi\"\"\"", Ok(&["say \"hi\""])),
        ("a,", Ok(&["a", ""])),
        ("\"a", Err("a quoted item without its closing quote")),
        ("\"a\"b", Err("text after a quoted item's closing quote")),
    ];
    for (text, want) in cases {
        let got = csv(text);
        let want = want.map(|w| w.iter().map(ToString::to_string).collect::<Vec<_>>());
        assert_eq!(got, want.map_err(str::to_string), "{text}");
    }
}

#[test]
fn pod_info_needs_kubelets_keys() {
    assert_eq!(PodInfo::from_context(&context(&[])), Some(pod()));
    let mut without_uid = context(&[]);
    without_uid.remove(kubelet::POD_UID);
    assert_eq!(PodInfo::from_context(&without_uid), None);
}

#[test]
fn keystore_password_never_in_debug() {
    let p = Keystore {
        file: "k.p12".into(),
        password: "hunter2".into(),
    };
    assert!(!format!("{p:?}").contains("hunter2"));
}
