use super::*;
use crate::api::certmanager::X509Subject;

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

// The vectors below were derived once with `openssl asn1parse -genconf` (OpenSSL 3.0), not with
// this encoder: each RDN a `SET`, each attribute a `SEQUENCE { OID, <type> }` with the string
// type written out explicitly (`PRINTABLESTRING:` or `UTF8STRING:`, `FORMAT:UTF8`), the RDNs
// listed most significant first and the attributes of a multi-valued RDN in the order written
// (OpenSSL sorts a DER SET itself). The comment on each vector is that configuration, compactly
// (P: PRINTABLESTRING, U: UTF8STRING); a `'` in a value is written `\'` in the configuration, and a value with
// spaces at its ends is quoted (`"FORMAT:UTF8,PRINTABLESTRING: padded "`).
const KEEP_ORDER: &str = "3073310b3009060355040613025553310e300c060355040a1305436f72702e310e300c060355040b1305446570742e310c300a060355040b130342617a310d300b060355040b1304426172713110300e060355040b1307466f6f4c6f6e67311530130603550403130c666f6f2d6c6f6e672e636f6d";
const WILDCARD: &str = "3027310d300b060355040a130441636d653116301406035504030c0d2a2e6578616d706c652e636f6d";
const AMPERSAND: &str = "300e310c300a060355040a0c03412642";
const AT_SIGN: &str = "301b3119301706035504030c1075736572406578616d706c652e636f6d";
const UNDERSCORE: &str = "300e310c300a06035504030c03615f62";
const NON_ASCII: &str = "301e3110300e06035504070c075ac3bc72696368310a30080603550403130178";
const PRINTABLE_PUNCT: &str =
    "302531233021060355040a131a45782c20496e632e2028612b623d632f642d653a663f67276829";
const MULTI_VALUED: &str =
    "3027310b300906035504061302555331183008060355040a130161300c060355040313056262626262";
const ESCAPED_SPACES: &str = "30133111300f060355040313082070616464656420";
const DC_UID: &str = "304431143012060a0992268993f22c64010113046a646f6531133011060a0992268993f22c6401191303636f6d31173015060a0992268993f22c64011913076578616d706c65";
const OID_TYPE_AND_HEX: &str = "301c310c300a06035504031303666f6f310c300a06032a03040c03784079";
const SERIAL_STREET: &str =
    "302e310b3009060355040513023432311230100603550409130931204d61696e205374310b3009060355040813024341";
const EMPTY: &str = "3000";

#[test]
fn literal_subject_der_equals_the_vectors() {
    let table: &[(&str, &str)] = &[
        // cert-manager pkg/util/pki/subject_test.go TestMustKeepOrderInRawDerBytes's subject;
        // { C P:US } { O P:Corp. } { OU P:Dept. } { OU P:Baz } { OU P:Barq } { OU P:FooLong }
        // { CN P:foo-long.com }
        (
            "CN=foo-long.com,OU=FooLong,OU=Barq,OU=Baz,OU=Dept.,O=Corp.,C=US",
            KEEP_ORDER,
        ),
        // { O P:Acme } { CN U:*.example.com }: `*` forces UTF8String.
        ("CN=*.example.com,O=Acme", WILDCARD),
        // { O U:A&B }
        ("O=A&B", AMPERSAND),
        // { CN U:user@example.com }
        ("CN=user@example.com", AT_SIGN),
        // { CN U:a_b }
        ("CN=a_b", UNDERSCORE),
        // { L U:Zürich } { CN P:x }, written as text and as escaped UTF-8 bytes.
        ("CN=x,L=Zürich", NON_ASCII),
        ("CN=x,L=Z\\C3\\BCrich", NON_ASCII),
        // { O P:Ex, Inc. (a+b=c/d-e:f?g'h) }: all in PrintableString's set.
        ("O=Ex\\, Inc. (a\\+b=c/d-e:f?g'h)", PRINTABLE_PUNCT),
        ("O=Ex\\2C Inc. (a\\2Bb\\3Dc/d-e:f?g'h)", PRINTABLE_PUNCT),
        // { C P:US } { CN P:bbbbb + O P:a }: one SET, sorted whichever order it is written in.
        ("CN=bbbbb+O=a,C=US", MULTI_VALUED),
        ("O=a+CN=bbbbb,C=US", MULTI_VALUED),
        // { CN P:" padded " }: escaped spaces stay, unescaped ones go.
        ("CN=\\ padded\\ ", ESCAPED_SPACES),
        (" CN = \\ padded\\   ", ESCAPED_SPACES),
        // { UID P:jdoe } { DC P:com } { DC P:example }
        ("DC=example,DC=com,UID=jdoe", DC_UID),
        // { 2.5.4.3 P:foo } { 1.2.3.4 U:x@y }: dotted types; `#0c03666f6f` is a BER UTF8String
        // whose content "foo" becomes the value (then PrintableString); `;` separates too.
        ("1.2.3.4=x@y,2.5.4.3=#0c03666f6f", OID_TYPE_AND_HEX),
        ("1.2.3.4=x@y;2.5.4.3=#0C03666F6F", OID_TYPE_AND_HEX),
        // { SERIALNUMBER P:42 } { STREET P:1 Main St } { ST P:CA }
        ("ST=CA,STREET=1 Main St,SERIALNUMBER=42", SERIAL_STREET),
        // SEQUENCE {}
        ("", EMPTY),
        ("   ", EMPTY),
    ];
    for (literal, hex) in table {
        assert_eq!(literal_subject_der(literal).unwrap(), unhex(hex), "{literal}");
    }
}

#[test]
fn literal_subject_errors_have_the_go_messages() {
    let table: &[(&str, &str)] = &[
        // cert-manager's webhook message for a type that is neither a name nor an OID; names are
        // case-sensitive.
        (
            "cn=foo",
            "Literal subject contains unrecognized key with value [foo]",
        ),
        (
            "CN=foo,FOO=bar",
            "Literal subject contains unrecognized key with value [bar]",
        ),
        // go-ldap's messages.
        ("CN=a\"b", "got unescaped character: '\"'"),
        ("CN=a<b", "got unescaped character: '<'"),
        ("CN=foo\\", "got corrupted escaped character: 'foo\\'"),
        (
            "CN=\\4",
            "failed to decode escaped character: encoding/hex: invalid byte: 4",
        ),
        (
            "CN=\\zz",
            "failed to decode escaped character: encoding/hex: invalid byte: U+007A 'z'",
        ),
        ("CN=foo,bar", "DN ended with incomplete type, value pair"),
        ("CN=a,+O=b", "incomplete type, value pair"),
        // cert-manager subject_test.go TestShouldFailForHexDER.
        (
            "DF=#6666666666665006838820013100000746939546349182108463491821809FBFFFFFFFFF",
            "failed to decode BER encoding: unexpected EOF",
        ),
        (
            "CN=#0c03666f6f00",
            "failed to decode BER encoding: trailing bytes after value",
        ),
        (
            "CN=#0c0",
            "failed to decode BER encoding: encoding/hex: odd length hex string",
        ),
        (
            "CN=#0c03666f6g",
            "failed to decode BER encoding: encoding/hex: invalid byte: U+0067 'g'",
        ),
        (
            "CN=#0c02ff00",
            "failed to decode BER encoding: invalid UTF-8 string",
        ),
        (
            "CN=#1303612a62",
            "failed to decode BER encoding: invalid character in position 1",
        ),
        (
            "CN=#1602c3a9",
            "failed to decode BER encoding: invalid character for IA5String at pos 0: é",
        ),
        ("CN=#", "failed to decode BER encoding: EOF"),
        ("CN=#0c05616263", "failed to decode BER encoding: unexpected EOF"),
        (
            "CN=#1f0001",
            "failed to decode BER encoding: invalid first high-tag-number tag byte",
        ),
        (
            "CN=#0480",
            "failed to decode BER encoding: indefinite length used with primitive type",
        ),
        // Go's marshaller refuses these OIDs and non-UTF-8 values.
        ("5=x", "asn1: structure error: invalid object identifier"),
        ("1.40=x", "asn1: structure error: invalid object identifier"),
        ("1.-2=x", "asn1: structure error: invalid object identifier"),
        ("CN=\\FF", "asn1: string not valid UTF-8"),
    ];
    for (literal, message) in table {
        let error = literal_subject_der(literal).unwrap_err();
        assert_eq!(error.to_string(), *message, "{literal}");
    }
}

#[test]
fn literal_rdns_match_cert_managers_parse_test() {
    // cert-manager pkg/util/pki/subject_test.go TestMustParseRDN: the attribute list (that
    // test's OID 123.544.555 cannot be DER-encoded, so only the parse is compared).
    let subject = "SERIALNUMBER=42, L=some-locality, ST=some-state-or-province, STREET=some-street, CN=foo-long.com, OU=FooLong, OU=Barq, OU=Baz, OU=Dept., O=Corp., C=US+123.544.555= A Test Value ";
    let attribute = |oid: &[u64], value: &str| Attribute {
        oid: oid.to_vec(),
        value: value.as_bytes().to_vec(),
    };
    let expected = vec![
        vec![
            attribute(COUNTRY, "US"),
            attribute(&[123, 544, 555], "A Test Value"),
        ],
        vec![attribute(ORGANIZATION, "Corp.")],
        vec![attribute(ORGANIZATIONAL_UNIT, "Dept.")],
        vec![attribute(ORGANIZATIONAL_UNIT, "Baz")],
        vec![attribute(ORGANIZATIONAL_UNIT, "Barq")],
        vec![attribute(ORGANIZATIONAL_UNIT, "FooLong")],
        vec![attribute(COMMON_NAME, "foo-long.com")],
        vec![attribute(STREET_ADDRESS, "some-street")],
        vec![attribute(PROVINCE, "some-state-or-province")],
        vec![attribute(LOCALITY, "some-locality")],
        vec![attribute(SERIAL_NUMBER, "42")],
    ];
    assert_eq!(literal_rdns(subject).unwrap(), expected);
    assert_eq!(
        literal_subject_der(subject).unwrap_err(),
        SubjectError::InvalidObjectIdentifier
    );
}

#[test]
fn literal_common_name_is_the_first_in_sequence_order() {
    let table: &[(&str, &str)] = &[
        ("CN=a,O=b", "a"),
        ("O=b", ""),
        // The sequence is the string reversed, so the CN written last comes first.
        ("CN=x,CN=y", "y"),
        ("O=o+CN=multi,C=US", "multi"),
        ("CN=\\2A.example.com", "*.example.com"),
    ];
    for (literal, cn) in table {
        assert_eq!(literal_subject_common_name(literal).unwrap(), *cn, "{literal}");
    }
    assert_eq!(
        literal_subject_common_name("cn=x").unwrap_err().to_string(),
        "Literal subject contains unrecognized key with value [x]"
    );
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(ToString::to_string).collect()
}

#[test]
fn subject_der_follows_gos_to_rdn_sequence() {
    // Vectors from `openssl asn1parse -genconf` as above.
    // { C P:US + C P:DE } { ST P:CA } { L P:San Francisco } { STREET P:1 Main St }
    // { POSTALCODE P:94000 } { O P:B Org + O P:A Org } { OU U:ops_team } { CN P:example.com }
    // { SERIALNUMBER P:1234 }
    let full = "3081b7311630090603550406130244453009060355040613025553310b3009060355040813024341311630140603550407130d53616e204672616e636973636f311230100603550409130931204d61696e205374310e300c060355041113053934303030311c300c060355040a130541204f7267300c060355040a130542204f72673111300f060355040b0c086f70735f7465616d311430120603550403130b6578616d706c652e636f6d310d300b0603550405130431323334";
    // { CN U:*.example.com }
    let cn_only = "30183116301406035504030c0d2a2e6578616d706c652e636f6d";
    // { O P:Acme } { SERIALNUMBER P:7 }
    let org_serial = "301b310d300b060355040a130441636d65310a30080603550405130137";

    let subject = X509Subject {
        countries: strings(&["US", "DE"]),
        provinces: strings(&["CA"]),
        localities: strings(&["San Francisco"]),
        street_addresses: strings(&["1 Main St"]),
        postal_codes: strings(&["94000"]),
        organizations: strings(&["B Org", "A Org"]),
        organizational_units: strings(&["ops_team"]),
        serial_number: "1234".into(),
        ..X509Subject::default()
    };
    let table: Vec<(CertificateSpec, &str)> = vec![
        (
            CertificateSpec {
                common_name: "example.com".into(),
                subject: Some(Box::new(subject)),
                ..CertificateSpec::default()
            },
            full,
        ),
        (
            CertificateSpec {
                common_name: "*.example.com".into(),
                ..CertificateSpec::default()
            },
            cn_only,
        ),
        (
            CertificateSpec {
                subject: Some(Box::new(X509Subject {
                    organizations: strings(&["Acme"]),
                    serial_number: "7".into(),
                    ..X509Subject::default()
                })),
                ..CertificateSpec::default()
            },
            org_serial,
        ),
        (CertificateSpec::default(), EMPTY),
        // A literal subject wins over commonName and subject.
        (
            CertificateSpec {
                common_name: "ignored".into(),
                literal_subject: "CN=*.example.com,O=Acme".into(),
                ..CertificateSpec::default()
            },
            WILDCARD,
        ),
    ];
    for (spec, hex) in table {
        assert_eq!(subject_der(&spec).unwrap(), unhex(hex), "{spec:?}");
    }
}

#[test]
fn common_name_comes_from_the_literal_subject_when_set() {
    let plain = CertificateSpec {
        common_name: "a.example.com".into(),
        ..CertificateSpec::default()
    };
    let literal = CertificateSpec {
        literal_subject: "CN=b.example.com,O=x".into(),
        ..CertificateSpec::default()
    };
    assert_eq!(common_name(&plain).unwrap(), "a.example.com");
    assert_eq!(common_name(&literal).unwrap(), "b.example.com");
}

#[test]
fn go_printable_set() {
    let table: &[(&str, bool)] = &[
        ("AZaz09", true),
        (" '()+,-./:=?", true),
        ("*", false),
        ("&", false),
        ("@", false),
        ("_", false),
        ("!", false),
        ("\"", false),
        ("#", false),
        ("é", false),
        ("", true),
    ];
    for (value, printable) in table {
        assert_eq!(is_go_printable(value.as_bytes()), *printable, "{value:?}");
    }
}
