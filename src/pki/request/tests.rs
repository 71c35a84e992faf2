use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, ParsedCriAttribute, X509CertificationRequest};

use super::*;
use crate::api::certmanager::{NameConstraintItem, NameConstraints, OtherName, X509Subject};
use crate::pki::check_csr_pem;
use crate::pki::keys::KeySpec;

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(ToString::to_string).collect()
}

fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

fn ec_key() -> &'static Key {
    static KEY: OnceLock<Key> = OnceLock::new();
    KEY.get_or_init(|| Key::generate(KeySpec::Ecdsa(256)).unwrap())
}

fn rsa_key() -> &'static Key {
    static KEY: OnceLock<Key> = OnceLock::new();
    KEY.get_or_init(|| Key::generate(KeySpec::Rsa(2048)).unwrap())
}

/// `openssl req -verify -noout` on the PEM: whether openssl accepts the self-signature.
fn openssl_verifies(pem: &str) -> bool {
    let mut child = Command::new("openssl")
        .args(["req", "-verify", "-noout"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(pem.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr).to_string() + &String::from_utf8_lossy(&output.stdout);
    output.status.success() && said.contains("verify OK")
}

/// What a CSR says, read back with x509-parser.
#[derive(Debug, PartialEq)]
struct ReadBack {
    subject_der: String,
    /// Each RDN's attributes as `type/tag/value` (tag 19 PrintableString, 12 UTF8String).
    subject: Vec<Vec<String>>,
    signature_algorithm: String,
    /// Each extension: OID, critical, and what it holds.
    extensions: Vec<(String, bool, Vec<String>)>,
}

fn general_name(name: &GeneralName<'_>) -> String {
    match name {
        GeneralName::DNSName(s) => format!("DNS:{s}"),
        GeneralName::RFC822Name(s) => format!("email:{s}"),
        GeneralName::IPAddress(b) => format!("IP:{}", hex(b)),
        GeneralName::URI(s) => format!("URI:{s}"),
        GeneralName::OtherName(oid, value) => format!("otherName:{oid}:{}", hex(value)),
        other => format!("unexpected {other:?}"),
    }
}

fn extension_summary(ext: &x509_parser::extensions::X509Extension<'_>) -> Vec<String> {
    match ext.parsed_extension() {
        ParsedExtension::SubjectAlternativeName(san) => san.general_names.iter().map(general_name).collect(),
        ParsedExtension::KeyUsage(ku) => vec![format!("flags:{:#x}", ku.flags), hex(ext.value)],
        ParsedExtension::ExtendedKeyUsage(_) => {
            let (_, seq) = x509_parser::der_parser::parse_der(ext.value).unwrap();
            seq.as_sequence()
                .unwrap()
                .iter()
                .map(|o| o.as_oid().unwrap().to_id_string())
                .collect()
        }
        ParsedExtension::NameConstraints(nc) => {
            let side = |name: &str, trees: &Option<Vec<_>>| -> Vec<String> {
                trees
                    .iter()
                    .flatten()
                    .map(|t: &x509_parser::extensions::GeneralSubtree<'_>| {
                        format!("{name} {}", general_name(&t.base))
                    })
                    .collect()
            };
            let mut all = side("permitted", &nc.permitted_subtrees);
            all.extend(side("excluded", &nc.excluded_subtrees));
            all
        }
        other => vec![format!("unexpected {other:?}")],
    }
}

fn read_back(pem: &str) -> ReadBack {
    let block = pem::parse(pem).unwrap();
    assert_eq!(block.tag(), "CERTIFICATE REQUEST");
    let (rest, csr) = X509CertificationRequest::from_der(block.contents()).unwrap();
    assert!(rest.is_empty());
    let info = &csr.certification_request_info;
    let subject = info
        .subject
        .iter_rdn()
        .map(|rdn| {
            rdn.iter()
                .map(|a| {
                    format!(
                        "{}/{}/{}",
                        a.attr_type().to_id_string(),
                        a.attr_value().header.tag().0,
                        a.as_str().unwrap()
                    )
                })
                .collect()
        })
        .collect();
    let mut extensions = Vec::new();
    for attribute in info.attributes() {
        match attribute.parsed_attribute() {
            ParsedCriAttribute::ExtensionRequest(request) => {
                for ext in &request.extensions {
                    extensions.push((ext.oid.to_id_string(), ext.critical, extension_summary(ext)));
                }
            }
            other => panic!("unexpected attribute {other:?}"),
        }
    }
    ReadBack {
        subject_der: hex(info.subject.as_raw()),
        subject,
        signature_algorithm: csr.signature_algorithm.algorithm.to_id_string(),
        extensions,
    }
}

const SAN: &str = "2.5.29.17";
const KU: &str = "2.5.29.15";
const EKU: &str = "2.5.29.37";
const NC: &str = "2.5.29.30";

fn ext(oid: &str, critical: bool, items: &[&str]) -> (String, bool, Vec<String>) {
    (oid.to_string(), critical, strings(items))
}

#[test]
fn every_key_type_and_size_makes_a_csr_openssl_and_our_check_accept() {
    let table = [
        (KeySpec::Rsa(2048), "1.2.840.113549.1.1.11"),
        (KeySpec::Rsa(3072), "1.2.840.113549.1.1.12"),
        (KeySpec::Rsa(4096), "1.2.840.113549.1.1.13"),
        (KeySpec::Rsa(8192), "1.2.840.113549.1.1.13"),
        (KeySpec::Ecdsa(256), "1.2.840.10045.4.3.2"),
        (KeySpec::Ecdsa(384), "1.2.840.10045.4.3.3"),
        (KeySpec::Ecdsa(521), "1.2.840.10045.4.3.4"),
        (KeySpec::Ed25519, "1.3.101.112"),
    ];
    let spec = CertificateSpec {
        common_name: "example.com".into(),
        dns_names: strings(&["example.com"]),
        ..CertificateSpec::default()
    };
    for (key_spec, signature_oid) in table {
        let key = Key::generate(key_spec).unwrap();
        let pem = build_csr(&spec, &key).unwrap();
        assert!(openssl_verifies(&pem), "{key_spec:?}\n{pem}");
        let checked = check_csr_pem(pem.as_bytes()).unwrap();
        assert_eq!(checked.public_key_der, key.public_key_der());
        assert_eq!(read_back(&pem).signature_algorithm, signature_oid, "{key_spec:?}");
    }
}

#[test]
fn a_signature_algorithm_asked_for_is_used() {
    let table: [(KeySpec, &str, &str); 11] = [
        (KeySpec::Rsa(2048), "SHA512WithRSA", "1.2.840.113549.1.1.13"),
        (KeySpec::Rsa(2048), "SHA384WithRSA", "1.2.840.113549.1.1.12"),
        (KeySpec::Rsa(2560), "SHA256WithRSA", "1.2.840.113549.1.1.11"),
        (KeySpec::Ecdsa(256), "ECDSAWithSHA256", "1.2.840.10045.4.3.2"),
        (KeySpec::Ecdsa(256), "ECDSAWithSHA384", "1.2.840.10045.4.3.3"),
        (KeySpec::Ecdsa(256), "ECDSAWithSHA512", "1.2.840.10045.4.3.4"),
        (KeySpec::Ecdsa(384), "ECDSAWithSHA256", "1.2.840.10045.4.3.2"),
        (KeySpec::Ecdsa(384), "ECDSAWithSHA384", "1.2.840.10045.4.3.3"),
        (KeySpec::Ecdsa(384), "ECDSAWithSHA512", "1.2.840.10045.4.3.4"),
        (KeySpec::Ecdsa(521), "ECDSAWithSHA256", "1.2.840.10045.4.3.2"),
        (KeySpec::Ecdsa(521), "ECDSAWithSHA384", "1.2.840.10045.4.3.3"),
    ];
    for (key_spec, name, oid) in table {
        let key = Key::generate(key_spec).unwrap();
        let spec = CertificateSpec {
            common_name: "example.com".into(),
            signature_algorithm: name.into(),
            ..CertificateSpec::default()
        };
        let pem = build_csr(&spec, &key).unwrap();
        assert!(openssl_verifies(&pem), "{name}");
        check_csr_pem(pem.as_bytes()).unwrap();
        assert_eq!(read_back(&pem).signature_algorithm, oid, "{name}");
    }
}

fn full_sans_spec() -> CertificateSpec {
    CertificateSpec {
        common_name: "cn.example.com".into(),
        subject: Some(Box::new(X509Subject {
            organizations: strings(&["Acme"]),
            ..X509Subject::default()
        })),
        dns_names: strings(&["a.example.com", "b.example.com"]),
        email_addresses: strings(&["ops@example.com"]),
        ip_addresses: strings(&["10.0.0.1", "2001:db8::1", "::ffff:192.0.2.7"]),
        uris: strings(&["spiffe://cluster.local/ns/default/sa/app"]),
        other_names: vec![OtherName {
            oid: "1.3.6.1.4.1.311.20.2.3".into(),
            utf8_value: "upn@example.com".into(),
            ..OtherName::default()
        }],
        duration: Some("2160h".into()),
        ..CertificateSpec::default()
    }
}

fn name_constraints_spec() -> CertificateSpec {
    CertificateSpec {
        common_name: "Sub CA".into(),
        is_ca: true,
        name_constraints: Some(Box::new(NameConstraints {
            critical: true,
            permitted: Some(NameConstraintItem {
                dns_domains: strings(&["example.com"]),
                ip_ranges: strings(&["10.1.2.3/8", "2001:db8::/32"]),
                email_addresses: strings(&["example.com"]),
                uri_domains: strings(&[".example.com"]),
                ..NameConstraintItem::default()
            }),
            excluded: Some(NameConstraintItem {
                dns_domains: strings(&["bad.example.com"]),
                ..NameConstraintItem::default()
            }),
            ..NameConstraints::default()
        })),
        ..CertificateSpec::default()
    }
}

// Every `subject_der` below was derived with `openssl asn1parse -genconf` (string types written
// out, as in `pki/subject/tests.rs`), not with this crate's encoder.
#[allow(clippy::too_many_lines)]
fn read_back_table() -> Vec<(&'static str, CertificateSpec, ReadBack)> {
    let default_ku = ext(KU, true, &["flags:0x5", "030205a0"]);
    vec![
        (
            "SANs in cert-manager's order, not critical with a subject; default usages",
            full_sans_spec(),
            ReadBack {
                // { O P:Acme } { CN P:cn.example.com }
                subject_der: "3028310d300b060355040a130441636d65311730150603550403130e636e2e6578616d706c652e636f6d".into(),
                subject: vec![
                    strings(&["2.5.4.10/19/Acme"]),
                    strings(&["2.5.4.3/19/cn.example.com"]),
                ],
                signature_algorithm: "1.2.840.10045.4.3.2".into(),
                extensions: vec![
                    ext(
                        SAN,
                        false,
                        &[
                            "DNS:a.example.com",
                            "DNS:b.example.com",
                            "email:ops@example.com",
                            "IP:0a000001",
                            "IP:20010db8000000000000000000000001",
                            "IP:c0000207",
                            "URI:spiffe://cluster.local/ns/default/sa/app",
                            "otherName:1.3.6.1.4.1.311.20.2.3:a0110c0f75706e406578616d706c652e636f6d",
                        ],
                    ),
                    default_ku.clone(),
                ],
            },
        ),
        (
            "no subject: SAN critical; only EKUs asked for: no KeyUsage",
            CertificateSpec {
                dns_names: strings(&["only.example.com"]),
                usages: strings(&["server auth", "client auth"]),
                ..CertificateSpec::default()
            },
            ReadBack {
                subject_der: "3000".into(),
                subject: vec![],
                signature_algorithm: "1.2.840.10045.4.3.2".into(),
                extensions: vec![
                    ext(SAN, true, &["DNS:only.example.com"]),
                    ext(EKU, false, &["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]),
                ],
            },
        ),
        (
            "a CA: cert sign added to the defaults; no BasicConstraints in the CSR",
            CertificateSpec {
                common_name: "ca".into(),
                is_ca: true,
                ..CertificateSpec::default()
            },
            ReadBack {
                subject_der: "300d310b3009060355040313026361".into(),
                subject: vec![strings(&["2.5.4.3/19/ca"])],
                signature_algorithm: "1.2.840.10045.4.3.2".into(),
                extensions: vec![ext(KU, true, &["flags:0x25", "030202a4"])],
            },
        ),
        (
            "encodeUsagesInRequest false: no usage extensions at all",
            CertificateSpec {
                common_name: "ca".into(),
                is_ca: true,
                usages: strings(&["server auth"]),
                encode_usages_in_request: Some(false),
                ..CertificateSpec::default()
            },
            ReadBack {
                subject_der: "300d310b3009060355040313026361".into(),
                subject: vec![strings(&["2.5.4.3/19/ca"])],
                signature_algorithm: "1.2.840.10045.4.3.2".into(),
                extensions: vec![],
            },
        ),
        (
            "a second KeyUsage byte; synonyms map to the same bit or OID, repeats kept",
            CertificateSpec {
                common_name: "x".into(),
                usages: strings(&["decipher only", "signing", "s/mime", "email protection"]),
                ..CertificateSpec::default()
            },
            ReadBack {
                subject_der: "300c310a30080603550403130178".into(),
                subject: vec![strings(&["2.5.4.3/19/x"])],
                signature_algorithm: "1.2.840.10045.4.3.2".into(),
                extensions: vec![
                    ext(KU, true, &["flags:0x101", "0303078080"]),
                    ext(EKU, false, &["1.3.6.1.5.5.7.3.4", "1.3.6.1.5.5.7.3.4"]),
                ],
            },
        ),
        (
            "name constraints after the usages, critical as asked",
            name_constraints_spec(),
            ReadBack {
                subject_der: "3011310f300d06035504031306537562204341".into(),
                subject: vec![strings(&["2.5.4.3/19/Sub CA"])],
                signature_algorithm: "1.2.840.10045.4.3.2".into(),
                extensions: vec![
                    ext(KU, true, &["flags:0x25", "030202a4"]),
                    ext(
                        NC,
                        true,
                        &[
                            "permitted DNS:example.com",
                            "permitted IP:0a000000ff000000",
                            "permitted IP:20010db8000000000000000000000000ffffffff000000000000000000000000",
                            "permitted email:example.com",
                            "permitted URI:.example.com",
                            "excluded DNS:bad.example.com",
                        ],
                    ),
                ],
            },
        ),
        (
            "a literal subject: multi-valued RDN, string types as Go picks them",
            CertificateSpec {
                literal_subject: "CN=*.example.com+O=Acme,C=US".into(),
                ..CertificateSpec::default()
            },
            ReadBack {
                // { C P:US } { CN U:*.example.com + O P:Acme }: DER sorts the SET, O first.
                subject_der: "3032310b30090603550406130255533123300b060355040a130441636d65301406035504030c0d2a2e6578616d706c652e636f6d".into(),
                subject: vec![
                    strings(&["2.5.4.6/19/US"]),
                    strings(&["2.5.4.10/19/Acme", "2.5.4.3/12/*.example.com"]),
                ],
                signature_algorithm: "1.2.840.10045.4.3.2".into(),
                extensions: vec![default_ku],
            },
        ),
    ]
}

#[test]
fn csrs_read_back_as_specified() {
    for (name, spec, expected) in read_back_table() {
        let pem = build_csr(&spec, ec_key()).unwrap();
        check_csr_pem(pem.as_bytes()).unwrap();
        assert_eq!(read_back(&pem), expected, "{name}");
        assert_eq!(
            request_extensions_for(&spec).unwrap().len(),
            expected.extensions.len(),
            "{name}"
        );
    }
}

#[test]
fn rsa_csr_carries_the_null_parameter_and_reads_back() {
    let spec = CertificateSpec {
        common_name: "rsa.example.com".into(),
        ..CertificateSpec::default()
    };
    let pem = build_csr(&spec, rsa_key()).unwrap();
    let der = pem::parse(&pem).unwrap().into_contents();
    // The outer AlgorithmIdentifier: sha256WithRSAEncryption followed by NULL.
    let algorithm = [
        0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00,
    ];
    assert!(der.windows(algorithm.len()).any(|w| w == algorithm));
    assert!(openssl_verifies(&pem));

    // A flipped signature bit: both openssl and our check refuse it (the checks can fail).
    let mut bad = der.clone();
    *bad.last_mut().unwrap() ^= 1;
    let bad = crate::pki::pem_lf(&pem::Pem::new("CERTIFICATE REQUEST", bad));
    assert!(!openssl_verifies(&bad));
    assert!(check_csr_pem(bad.as_bytes()).is_err());
}

fn error_of(spec: CertificateSpec, key: &Key) -> String {
    build_csr(&spec, key).unwrap_err().to_string()
}

#[test]
fn errors_have_cert_managers_messages() {
    let cn = |spec: CertificateSpec| CertificateSpec {
        common_name: "x".into(),
        ..spec
    };
    let other = |oid: &str, value: &str| OtherName {
        oid: oid.into(),
        utf8_value: value.into(),
        ..OtherName::default()
    };
    let no_name = "at least one of commonName (from the commonName field or from a literalSubject), dnsNames, emailSANs, ipAddresses, otherNames, or uriSANs must be set";
    let table: Vec<(CertificateSpec, &str)> = vec![
        (CertificateSpec::default(), no_name),
        (
            CertificateSpec {
                literal_subject: "O=x".into(),
                ..CertificateSpec::default()
            },
            no_name,
        ),
        (
            cn(CertificateSpec {
                usages: strings(&["foo", "server auth", "bar"]),
                ..CertificateSpec::default()
            }),
            "failed to build key usages: unknown key usages: [foo bar]",
        ),
        (
            cn(CertificateSpec {
                ip_addresses: strings(&["not-an-ip"]),
                ..CertificateSpec::default()
            }),
            "ParseAddr(\"not-an-ip\"): unable to parse IP",
        ),
        (
            cn(CertificateSpec {
                dns_names: strings(&["bücher.example"]),
                ..CertificateSpec::default()
            }),
            "x509: \"bücher.example\" cannot be encoded as an IA5String",
        ),
        (
            cn(CertificateSpec {
                other_names: vec![other("", "v")],
                ..CertificateSpec::default()
            }),
            "zero length OBJECT IDENTIFIER",
        ),
        (
            cn(CertificateSpec {
                other_names: vec![other("1.x", "v")],
                ..CertificateSpec::default()
            }),
            "strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        (
            cn(CertificateSpec {
                other_names: vec![other("1.2.3", "")],
                ..CertificateSpec::default()
            }),
            "UniversalValue should have exactly one field set",
        ),
        (
            cn(CertificateSpec {
                name_constraints: Some(Box::new(NameConstraints {
                    permitted: Some(NameConstraintItem {
                        ip_ranges: strings(&["10.0.0.0"]),
                        ..NameConstraintItem::default()
                    }),
                    ..NameConstraints::default()
                })),
                ..CertificateSpec::default()
            }),
            "invalid CIDR address: 10.0.0.0",
        ),
        (
            CertificateSpec {
                literal_subject: "cn=x".into(),
                ..CertificateSpec::default()
            },
            "Literal subject contains unrecognized key with value [x]",
        ),
        (
            cn(CertificateSpec {
                signature_algorithm: "SHA256WithRSA".into(),
                ..CertificateSpec::default()
            }),
            "signature algorithm SHA256WithRSA does not fit a ECDSA key",
        ),
    ];
    for (spec, message) in table {
        assert_eq!(error_of(spec.clone(), ec_key()), message, "{spec:?}");
    }
}

#[test]
fn usage_names_map_to_key_usage_bits_or_eku_oids() {
    type Row = (&'static str, Option<u16>, Option<&'static [u64]>);
    let table: &[Row] = &[
        ("signing", Some(key_usage::DIGITAL_SIGNATURE), None),
        ("digital signature", Some(key_usage::DIGITAL_SIGNATURE), None),
        ("content commitment", Some(key_usage::CONTENT_COMMITMENT), None),
        ("key encipherment", Some(key_usage::KEY_ENCIPHERMENT), None),
        ("key agreement", Some(key_usage::KEY_AGREEMENT), None),
        ("data encipherment", Some(key_usage::DATA_ENCIPHERMENT), None),
        ("cert sign", Some(key_usage::CERT_SIGN), None),
        ("crl sign", Some(key_usage::CRL_SIGN), None),
        ("encipher only", Some(key_usage::ENCIPHER_ONLY), None),
        ("decipher only", Some(key_usage::DECIPHER_ONLY), None),
        ("any", None, Some(&[2, 5, 29, 37, 0])),
        ("server auth", None, Some(&[1, 3, 6, 1, 5, 5, 7, 3, 1])),
        ("client auth", None, Some(&[1, 3, 6, 1, 5, 5, 7, 3, 2])),
        ("code signing", None, Some(&[1, 3, 6, 1, 5, 5, 7, 3, 3])),
        ("email protection", None, Some(&[1, 3, 6, 1, 5, 5, 7, 3, 4])),
        ("s/mime", None, Some(&[1, 3, 6, 1, 5, 5, 7, 3, 4])),
        ("ipsec end system", None, Some(&[1, 3, 6, 1, 5, 5, 7, 3, 5])),
        ("ipsec tunnel", None, Some(&[1, 3, 6, 1, 5, 5, 7, 3, 6])),
        ("ipsec user", None, Some(&[1, 3, 6, 1, 5, 5, 7, 3, 7])),
        ("timestamping", None, Some(&[1, 3, 6, 1, 5, 5, 7, 3, 8])),
        ("ocsp signing", None, Some(&[1, 3, 6, 1, 5, 5, 7, 3, 9])),
        ("microsoft sgc", None, Some(&[1, 3, 6, 1, 4, 1, 311, 10, 3, 3])),
        ("netscape sgc", None, Some(&[2, 16, 840, 1, 113_730, 4, 1])),
        ("Server Auth", None, None),
    ];
    for (name, bit, oid) in table {
        assert_eq!(key_usage_bit(name), *bit, "{name}");
        assert_eq!(ext_key_usage_oid(name), *oid, "{name}");
    }
    assert_eq!(
        key_usages(&[], false).unwrap(),
        Usages {
            key_usage: key_usage::DIGITAL_SIGNATURE | key_usage::KEY_ENCIPHERMENT,
            ext_key_usages: vec![],
        }
    );
    assert_eq!(
        key_usages(&strings(&["server auth"]), true).unwrap(),
        Usages {
            key_usage: key_usage::CERT_SIGN,
            ext_key_usages: vec![&[1, 3, 6, 1, 5, 5, 7, 3, 1]],
        }
    );
}
