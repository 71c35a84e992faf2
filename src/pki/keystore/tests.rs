//! Keystores checked by the tools that read them: `openssl pkcs12` (OpenSSL 3.0: RC2 needs
//! `-legacy`) and Java 17's `keytool`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

use super::*;
use crate::pki::keys::KeySpec;

mod pbmac1;

const PASSWORD: &str = "s3cret-pass";

/// A root CA, an intermediate and a leaf whose key is a [`Key`] of `spec`.
struct Fixture {
    key: Key,
    /// Leaf then intermediate (what the issuer returns as `tls.crt`).
    chain: Vec<Vec<u8>>,
    /// The root (`ca.crt`).
    ca: Vec<Vec<u8>>,
    dir: tempfile::TempDir,
}

fn ca_params(cn: &str) -> CertificateParams {
    let mut params = CertificateParams::new(vec![]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, cn);
    params
}

fn fixture(spec: KeySpec) -> Fixture {
    let root_key = KeyPair::generate().unwrap();
    let root = ca_params("Root CA").self_signed(&root_key).unwrap();
    let root_issuer = Issuer::new(ca_params("Root CA"), &root_key);
    let int_key = KeyPair::generate().unwrap();
    let int = ca_params("Intermediate")
        .signed_by(&int_key, &root_issuer)
        .unwrap();
    let int_issuer = Issuer::new(ca_params("Intermediate"), &int_key);
    let key = Key::generate(spec).unwrap();
    let leaf_key = KeyPair::try_from(key.pkcs8_der()).unwrap();
    let mut params = CertificateParams::new(vec!["app.example.com".into()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, "app");
    let leaf = params.signed_by(&leaf_key, &int_issuer).unwrap();
    Fixture {
        key,
        chain: vec![leaf.der().to_vec(), int.der().to_vec()],
        ca: vec![root.der().to_vec()],
        dir: tempfile::tempdir().unwrap(),
    }
}

impl Fixture {
    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} must be installed: {e}"))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `openssl pkcs12 -info -nodes`: its whole output, or `None` when it refused the store.
fn openssl_info(path: &Path, password: &str, legacy: bool) -> Option<String> {
    let pass = format!("pass:{password}");
    let mut args = vec!["pkcs12", "-info", "-nodes", "-in"];
    args.push(path.to_str().unwrap());
    args.extend(["-passin", &pass]);
    if legacy {
        args.push("-legacy");
    }
    let output = run("openssl", &args);
    output.status.success().then(|| text(&output))
}

/// The DER of each PEM block tagged `tag` in `text`, in order.
fn blocks(text: &str, tag: &str) -> Vec<Vec<u8>> {
    pem::parse_many(text)
        .unwrap()
        .into_iter()
        .filter(|block| block.tag() == tag)
        .map(pem::Pem::into_contents)
        .collect()
}

fn all_specs() -> Vec<KeySpec> {
    vec![
        KeySpec::Rsa(2048),
        KeySpec::Ecdsa(256),
        KeySpec::Ecdsa(384),
        KeySpec::Ecdsa(521),
        KeySpec::Ed25519,
    ]
}

#[test]
fn profile_names() {
    let cases: Vec<(Option<&str>, Result<Pkcs12Profile, &str>)> = vec![
        (None, Ok(Pkcs12Profile::LegacyRc2)),
        (Some(""), Ok(Pkcs12Profile::LegacyRc2)),
        (Some("LegacyRC2"), Ok(Pkcs12Profile::LegacyRc2)),
        (Some("LegacyDES"), Ok(Pkcs12Profile::LegacyDes)),
        (Some("Modern2023"), Ok(Pkcs12Profile::Modern2023)),
        (Some("Modern2026"), Ok(Pkcs12Profile::Modern2026)),
        (
            Some("modern2023"),
            Err(
                "unknown PKCS#12 profile \"modern2023\": use LegacyRC2 (the default), LegacyDES, Modern2023 or Modern2026",
            ),
        ),
    ];
    for (name, want) in cases {
        let got = Pkcs12Profile::parse(name).map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_string), "{name:?}");
        if let Ok(profile) = got {
            assert_eq!(Pkcs12Profile::parse(Some(profile.name())).unwrap(), profile);
        }
    }
}

/// What `openssl pkcs12 -info` reports for one profile: the MAC line, the certificates' and
/// the key's encryption, and whether it opens without `-legacy` (OpenSSL 3.0 keeps RC2 in its
/// legacy provider; 3DES stays in the default one). The legacy profiles are opened with
/// `-legacy`, as the issue asks; Modern2023 without.
struct ProfileRow {
    profile: Pkcs12Profile,
    mac: &'static str,
    certs: &'static str,
    key: &'static str,
    plain_opens: bool,
}

#[rustfmt::skip]
fn profile_table() -> Vec<ProfileRow> {
    vec![
        ProfileRow { profile: Pkcs12Profile::LegacyRc2,
            mac: "MAC: sha1, Iteration 1\nMAC length: 20, salt length: 8",
            certs: "PKCS7 Encrypted data: pbeWithSHA1And40BitRC2-CBC, Iteration 2048",
            key: "Shrouded Keybag: pbeWithSHA1And3-KeyTripleDES-CBC, Iteration 2048", plain_opens: false },
        ProfileRow { profile: Pkcs12Profile::LegacyDes,
            mac: "MAC: sha1, Iteration 1\nMAC length: 20, salt length: 8",
            certs: "PKCS7 Encrypted data: pbeWithSHA1And3-KeyTripleDES-CBC, Iteration 2048",
            key: "Shrouded Keybag: pbeWithSHA1And3-KeyTripleDES-CBC, Iteration 2048", plain_opens: true },
        ProfileRow { profile: Pkcs12Profile::Modern2023,
            mac: "MAC: sha256, Iteration 2048\nMAC length: 32, salt length: 16",
            certs: "PKCS7 Encrypted data: PBES2, PBKDF2, AES-256-CBC, Iteration 2048, PRF hmacWithSHA256",
            key: "Shrouded Keybag: PBES2, PBKDF2, AES-256-CBC, Iteration 2048, PRF hmacWithSHA256", plain_opens: true },
    ]
}

#[test]
fn pkcs12_keystore_opens_with_openssl_for_each_profile_and_key() {
    for spec in all_specs() {
        let f = fixture(spec);
        for ProfileRow {
            profile,
            mac,
            certs,
            key,
            plain_opens,
        } in profile_table()
        {
            let legacy = profile != Pkcs12Profile::Modern2023;
            let what = format!("{spec:?} {profile:?}");
            let store = pkcs12_keystore(&f.key, &f.chain, &f.ca, PASSWORD, profile).unwrap();
            let path = f.write("keystore.p12", &store);
            let info = openssl_info(&path, PASSWORD, legacy).unwrap_or_else(|| panic!("{what}"));
            for line in [mac, certs, key] {
                assert!(info.contains(line), "{what}: no {line:?} in\n{info}");
            }
            let want_certs: Vec<Vec<u8>> = f.chain.iter().chain(&f.ca).cloned().collect();
            assert_eq!(
                blocks(&info, "CERTIFICATE"),
                want_certs,
                "{what}: leaf, chain, CA in order"
            );
            let keys = blocks(&info, "PRIVATE KEY");
            assert_eq!(keys.len(), 1, "{what}");
            let extracted =
                Key::from_pem(pem::encode(&pem::Pem::new("PRIVATE KEY", keys[0].clone())).as_bytes())
                    .unwrap();
            assert_eq!(
                extracted, f.key,
                "{what}: the key openssl extracts is the input key"
            );
            let leaf_sha1 =
                aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, &f.chain[0]);
            let key_id = format!(
                "localKeyID: {}",
                hex::encode_upper(leaf_sha1)
                    .as_bytes()
                    .chunks(2)
                    .map(|c| std::str::from_utf8(c).unwrap())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            assert_eq!(
                info.matches(&key_id).count(),
                2,
                "{what}: key and leaf share {key_id}:\n{info}"
            );
            assert_eq!(
                info.matches("localKeyID").count(),
                2,
                "{what}: only key and leaf have one"
            );
            assert!(
                openssl_info(&path, "wrong", legacy).is_none(),
                "{what}: a wrong password opens it"
            );
            let plain = openssl_info(&path, PASSWORD, false).is_some();
            assert_eq!(plain, plain_opens, "{what}: opens without -legacy");
        }
    }
}

#[test]
fn pkcs12_keystore_without_ca_holds_the_chain_only() {
    let f = fixture(KeySpec::Ecdsa(256));
    let store = pkcs12_keystore(&f.key, &f.chain, &[], PASSWORD, Pkcs12Profile::Modern2023).unwrap();
    let info = openssl_info(&f.write("keystore.p12", &store), PASSWORD, false).unwrap();
    assert_eq!(blocks(&info, "CERTIFICATE"), f.chain);
    assert_eq!(
        pkcs12_truststore(&[], PASSWORD, Pkcs12Profile::Modern2023).unwrap(),
        None
    );
    assert_eq!(
        jks_truststore(&[], PASSWORD, Timestamp::UNIX_EPOCH).unwrap(),
        None
    );
    let err = pkcs12_keystore(&f.key, &[], &f.ca, PASSWORD, Pkcs12Profile::LegacyRc2).unwrap_err();
    assert_eq!(err.to_string(), "no certificate to put in the keystore");
}

#[test]
fn pkcs12_truststore_holds_the_ca_only() {
    let f = fixture(KeySpec::Ecdsa(256));
    let two_cas = vec![f.ca[0].clone(), f.chain[1].clone()];
    for ProfileRow {
        profile, mac, certs, ..
    } in profile_table()
    {
        let legacy = profile != Pkcs12Profile::Modern2023;
        let store = pkcs12_truststore(&two_cas, PASSWORD, profile).unwrap().unwrap();
        let path = f.write("truststore.p12", &store);
        let info = openssl_info(&path, PASSWORD, legacy).unwrap();
        assert!(info.contains(mac) && info.contains(certs), "{profile:?}:\n{info}");
        assert_eq!(blocks(&info, "CERTIFICATE"), two_cas, "{profile:?}");
        assert!(blocks(&info, "PRIVATE KEY").is_empty(), "{profile:?}");
        assert!(!info.contains("Shrouded Keybag"), "{profile:?}");
        assert!(info.contains("friendlyName: CN=Root CA"), "{profile:?}:\n{info}");
        assert!(
            info.contains("friendlyName: CN=Intermediate"),
            "{profile:?}:\n{info}"
        );
        assert!(openssl_info(&path, "wrong", legacy).is_none(), "{profile:?}");
        let java_trusted = "2.16.840.1.113894.746875.1.1: <Unsupported tag 6>";
        assert_eq!(
            info.matches(java_trusted).count(),
            2,
            "{profile:?}: Java's trust mark on each"
        );
    }
}

/// `keytool -list -v`: each alias with its entry type (and chain length for key entries), or
/// `None` when keytool refused the store.
fn keytool_list(path: &Path, password: &str, store_type: &str) -> Option<Vec<(String, String)>> {
    let output = keytool(&[
        "-list",
        "-v",
        "-keystore",
        path.to_str().unwrap(),
        "-storepass",
        password,
        "-storetype",
        store_type,
    ]);
    if !output.status.success() {
        return None;
    }
    let listing = text(&output);
    let mut entries = Vec::new();
    for section in listing.split("Alias name: ").skip(1) {
        let alias = section.lines().next().unwrap().to_string();
        let field = |name: &str| {
            section
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .map(str::to_string)
        };
        let mut kind = field("Entry type: ").unwrap();
        if let Some(length) = field("Certificate chain length: ") {
            kind = format!("{kind} of {length}");
        }
        entries.push((alias, kind));
    }
    Some(entries)
}

fn keytool(args: &[&str]) -> Output {
    Command::new("keytool")
        .args(args)
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap_or_else(|e| panic!("keytool must be installed: {e}"))
}

fn entries(list: &[(&str, &str)]) -> Option<Vec<(String, String)>> {
    Some(
        list.iter()
            .map(|(alias, kind)| ((*alias).to_string(), (*kind).to_string()))
            .collect(),
    )
}

/// Java recovers the key from the JKS store (Sun's KeyProtector, the entry password being the
/// store password) into a PKCS#12 store that openssl then opens: the key that comes out.
fn key_through_java(f: &Fixture, jks: &Path, password: &str, alias: &str) -> Key {
    let p12 = f.dir.path().join("from-java.p12");
    let _ = std::fs::remove_file(&p12);
    let output = keytool(&[
        "-importkeystore",
        "-noprompt",
        "-srckeystore",
        jks.to_str().unwrap(),
        "-srcstoretype",
        "JKS",
        "-srcstorepass",
        password,
        "-srcalias",
        alias,
        "-destkeystore",
        p12.to_str().unwrap(),
        "-deststoretype",
        "PKCS12",
        "-deststorepass",
        PASSWORD,
    ]);
    assert!(
        output.status.success(),
        "keytool -importkeystore: {}",
        text(&output)
    );
    let info = openssl_info(&p12, PASSWORD, false).unwrap();
    assert_eq!(blocks(&info, "CERTIFICATE"), f.chain, "the key entry's chain");
    let keys = blocks(&info, "PRIVATE KEY");
    Key::from_pem(pem::encode(&pem::Pem::new("PRIVATE KEY", keys[0].clone())).as_bytes()).unwrap()
}

fn jks_keystore_for(spec: KeySpec) {
    let f = fixture(spec);
    let created = Timestamp::from_second(1_700_000_000).unwrap();
    let two_cas = vec![f.ca[0].clone(), f.chain[1].clone()];
    let store = jks_keystore(&f.key, &f.chain, &two_cas, PASSWORD, None, created).unwrap();
    let path = f.write("keystore.jks", &store);
    let want = entries(&[
        ("ca", "trustedCertEntry"),
        ("ca-1", "trustedCertEntry"),
        ("certificate", "PrivateKeyEntry of 2"),
    ]);
    let mut listed = keytool_list(&path, PASSWORD, "JKS");
    if let Some(list) = listed.as_mut() {
        list.sort();
    }
    assert_eq!(listed, want, "{spec:?}");
    assert_eq!(
        keytool_list(&path, "wrong-pass", "JKS"),
        None,
        "{spec:?}: a wrong password opens it"
    );
    assert_eq!(
        key_through_java(&f, &path, PASSWORD, "certificate"),
        f.key,
        "{spec:?}"
    );
}

#[test]
fn jks_keystore_rsa() {
    jks_keystore_for(KeySpec::Rsa(2048));
}

#[test]
fn jks_keystore_ecdsa() {
    for bits in [256, 384, 521] {
        jks_keystore_for(KeySpec::Ecdsa(bits));
    }
}

#[test]
fn jks_keystore_ed25519() {
    jks_keystore_for(KeySpec::Ed25519);
}

#[test]
fn jks_alias_password_and_no_ca() {
    let f = fixture(KeySpec::Ecdsa(256));
    let password = "pässwörd-€";
    let created = Timestamp::UNIX_EPOCH;
    let store = jks_keystore(&f.key, &f.chain, &[], password, Some("My-Key"), created).unwrap();
    let path = f.write("keystore.jks", &store);
    let listed = keytool_list(&path, password, "JKS");
    assert_eq!(
        listed,
        entries(&[("my-key", "PrivateKeyEntry of 2")]),
        "Java lower-cases JKS aliases"
    );
    assert_eq!(key_through_java(&f, &path, password, "my-key"), f.key);
    let err = jks_keystore(&f.key, &f.chain, &[], password, Some(""), created).unwrap_err();
    assert_eq!(err.to_string(), "the JKS alias must not be empty");
    let err = jks_keystore(&f.key, &f.chain, &f.ca, password, Some("CA"), created).unwrap_err();
    let want = "the JKS alias \"ca\" is the name of a CA certificate entry (ca, ca-1, ...)";
    assert_eq!(err.to_string(), want);
    assert!(jks_keystore(&f.key, &f.chain, &[], password, Some("ca"), created).is_ok());
    let err = jks_keystore(&f.key, &[], &f.ca, password, None, created).unwrap_err();
    assert_eq!(err.to_string(), "no certificate to put in the keystore");
}

#[test]
fn jks_truststore_holds_the_ca_only() {
    let f = fixture(KeySpec::Ecdsa(256));
    let two_cas = vec![f.ca[0].clone(), f.chain[1].clone()];
    let store = jks_truststore(&two_cas, PASSWORD, Timestamp::UNIX_EPOCH)
        .unwrap()
        .unwrap();
    let path = f.write("truststore.jks", &store);
    let want = entries(&[("ca", "trustedCertEntry"), ("ca-1", "trustedCertEntry")]);
    assert_eq!(keytool_list(&path, PASSWORD, "JKS"), want);
    assert_eq!(keytool_list(&path, "wrong-pass", "JKS"), None);
}

/// Java 17 reads every PKCS#12 profile written here: the key entry, and the truststore's
/// certificates as trusted entries (named by their friendlyName, lower-cased).
#[test]
fn pkcs12_stores_open_in_java() {
    let f = fixture(KeySpec::Rsa(2048));
    for ProfileRow { profile, .. } in profile_table() {
        let store = pkcs12_keystore(&f.key, &f.chain, &f.ca, PASSWORD, profile).unwrap();
        let path = f.write("keystore.p12", &store);
        let listed = keytool_list(&path, PASSWORD, "PKCS12").unwrap();
        let kinds: Vec<&str> = listed.iter().map(|(_, kind)| kind.as_str()).collect();
        assert_eq!(kinds, ["PrivateKeyEntry of 3"], "{profile:?}: {listed:?}");
        assert_eq!(keytool_list(&path, "wrong-pass", "PKCS12"), None, "{profile:?}");

        let store = pkcs12_truststore(&f.ca, PASSWORD, profile).unwrap().unwrap();
        let path = f.write("truststore.p12", &store);
        let want = entries(&[("cn=root ca", "trustedCertEntry")]);
        assert_eq!(keytool_list(&path, PASSWORD, "PKCS12"), want, "{profile:?}");
    }
}

/// openssl reads a non-ASCII password as UTF-8: BMP code units for the PKCS#12 KDF (legacy
/// profiles and every MAC), UTF-8 bytes for PBKDF2 (Modern2023).
#[test]
fn pkcs12_non_ascii_password() {
    let f = fixture(KeySpec::Ecdsa(256));
    let password = "pässwörd-€";
    for ProfileRow { profile, .. } in profile_table() {
        let store = pkcs12_keystore(&f.key, &f.chain, &f.ca, password, profile).unwrap();
        let path = f.write("keystore.p12", &store);
        let legacy = profile != Pkcs12Profile::Modern2023;
        let info = openssl_info(&path, password, legacy).unwrap_or_else(|| panic!("{profile:?}"));
        assert_eq!(blocks(&info, "PRIVATE KEY").len(), 1, "{profile:?}");
        assert!(openssl_info(&path, "passwörd-€", legacy).is_none(), "{profile:?}");
    }
    let err = pkcs12_keystore(
        &f.key,
        &f.chain,
        &f.ca,
        "emoji \u{1F511}",
        Pkcs12Profile::LegacyRc2,
    );
    assert_eq!(
        err.unwrap_err().to_string(),
        "the keystore password has a character outside Unicode's Basic Multilingual Plane"
    );
}

/// A store opens with the password it was written with and with no other, for ours and for
/// stores openssl and keytool write (so the check reads the formats, not just our bytes).
#[test]
fn stores_open_only_with_their_password() {
    let f = fixture(KeySpec::Ecdsa(256));
    for ProfileRow { profile, .. } in profile_table() {
        let p12 = pkcs12_keystore(&f.key, &f.chain, &f.ca, "right", profile).unwrap();
        assert_eq!(
            (pkcs12_opens_with(&p12, "right"), pkcs12_opens_with(&p12, "wrong")),
            (true, false),
            "{profile:?}"
        );
    }
    let jks = jks_keystore(&f.key, &f.chain, &f.ca, "right", None, Timestamp::UNIX_EPOCH).unwrap();
    assert_eq!(
        (jks_opens_with(&jks, "right"), jks_opens_with(&jks, "wrong")),
        (true, false)
    );
    let key = f.write(
        "key.pem",
        f.key
            .to_pem(crate::pki::keys::Encoding::Pkcs8)
            .unwrap()
            .as_bytes(),
    );
    let leaf = f.write("leaf.der", &f.chain[0]);
    let leaf_pem = f.dir.path().join("leaf.pem");
    let out = run(
        "openssl",
        &[
            "x509",
            "-inform",
            "DER",
            "-in",
            path(&leaf),
            "-out",
            path(&leaf_pem),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let theirs = f.dir.path().join("theirs.p12");
    let out = run(
        "openssl",
        &[
            "pkcs12",
            "-export",
            "-inkey",
            path(&key),
            "-in",
            path(&leaf_pem),
            "-passout",
            "pass:right",
            "-out",
            path(&theirs),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let theirs = std::fs::read(&theirs).unwrap();
    assert_eq!(
        (
            pkcs12_opens_with(&theirs, "right"),
            pkcs12_opens_with(&theirs, "wrong")
        ),
        (true, false)
    );
    let jks_path = f.dir.path().join("theirs.jks");
    let out = keytool(&[
        "-genkeypair",
        "-alias",
        "a",
        "-keyalg",
        "EC",
        "-dname",
        "CN=a",
        "-storetype",
        "JKS",
        "-keystore",
        path(&jks_path),
        "-storepass",
        "right-one",
        "-keypass",
        "right-one",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let theirs = std::fs::read(&jks_path).unwrap();
    assert_eq!(
        (
            jks_opens_with(&theirs, "right-one"),
            jks_opens_with(&theirs, "wrong")
        ),
        (true, false)
    );
    assert!(!pkcs12_opens_with(b"junk", "right") && !jks_opens_with(b"junk", "right"));
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `der` with its MacData changed by `change` (the MAC itself left as it was).
fn with_mac_data(der: &[u8], change: impl Fn(&mut ::pkcs12::MacData)) -> Vec<u8> {
    use der::{Decode, Encode};
    let mut pfx = ::pkcs12::pfx::Pfx::from_der(der).unwrap();
    change(pfx.mac_data.as_mut().unwrap());
    pfx.to_der().unwrap()
}

/// What a stored keystore may make its check cost is capped before it is paid: over a cap the
/// store is not checked, and says which cap; at a cap it is checked.
#[test]
fn checks_refuse_costs_over_the_caps() {
    struct Row {
        name: &'static str,
        store: Vec<u8>,
        want: Result<(), Unopened>,
    }
    let f = fixture(KeySpec::Ecdsa(256));
    let modern = pkcs12_keystore(&f.key, &f.chain, &f.ca, "right", Pkcs12Profile::Modern2023).unwrap();
    let legacy = pkcs12_keystore(&f.key, &f.chain, &f.ca, "right", Pkcs12Profile::LegacyRc2).unwrap();
    let iterations = |n: i32| with_mac_data(&legacy, move |m| m.iterations = n);
    let salt = |len: usize| {
        with_mac_data(&legacy, move |m| {
            m.mac_salt = der::asn1::OctetString::new(vec![7; len]).unwrap();
        })
    };
    let mut huge = modern.clone();
    huge.resize(MAX_STORE_BYTES + 1, 0);
    let rows = [
        Row {
            name: "Modern2023: 2048 iterations, at the cap, opens",
            store: modern.clone(),
            want: Ok(()),
        },
        Row {
            name: "LegacyRC2: 1 iteration opens",
            store: legacy.clone(),
            want: Ok(()),
        },
        Row {
            name: "2048 claimed on a 1-iteration MAC: checked, does not open",
            store: iterations(2048),
            want: Err(Unopened::Password),
        },
        Row {
            name: "2049: over the cap, not checked",
            store: iterations(2049),
            want: Err(Unopened::MacIterations {
                count: 2049,
                max: 2048,
            }),
        },
        Row {
            name: "2^31-1: over the cap, not checked",
            store: iterations(i32::MAX),
            want: Err(Unopened::MacIterations {
                count: i32::MAX,
                max: 2048,
            }),
        },
        Row {
            name: "0 iterations: unreadable",
            store: iterations(0),
            want: Err(Unopened::Unreadable),
        },
        Row {
            name: "negative iterations: unreadable",
            store: iterations(-5),
            want: Err(Unopened::Unreadable),
        },
        Row {
            name: "a 64-byte salt, at the cap: checked",
            store: salt(64),
            want: Err(Unopened::Password),
        },
        Row {
            name: "a 65-byte salt: over the cap",
            store: salt(65),
            want: Err(Unopened::MacSalt { len: 65, max: 64 }),
        },
        Row {
            name: "a store over 1 MiB: over the cap",
            store: huge,
            want: Err(Unopened::Size {
                size: 1_048_577,
                max: 1_048_576,
            }),
        },
    ];
    for row in rows {
        let started = std::time::Instant::now();
        assert_eq!(pkcs12_check(&row.store, "right"), row.want, "{}", row.name);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "{}: took {:?}",
            row.name,
            started.elapsed()
        );
    }
    assert_eq!(MAX_PKCS12_MAC_ITERATIONS, 2048);
    assert_eq!(MAX_PKCS12_MAC_SALT, 64);
}

/// JKS: its check is one hash over the store, so only its size is capped.
#[test]
fn jks_checks_refuse_stores_over_the_size_cap() {
    let f = fixture(KeySpec::Ecdsa(256));
    let jks = jks_keystore(&f.key, &f.chain, &f.ca, "right", None, Timestamp::UNIX_EPOCH).unwrap();
    let mut huge = jks.clone();
    huge.resize(MAX_STORE_BYTES + 1, 0);
    let rows = [
        ("ours opens", jks.clone(), Ok(())),
        ("wrong password", jks, Err(Unopened::Password)),
        (
            "over 1 MiB",
            huge,
            Err(Unopened::Size {
                size: 1_048_577,
                max: 1_048_576,
            }),
        ),
        ("junk", b"junk".to_vec(), Err(Unopened::Unreadable)),
    ];
    for (name, store, want) in rows {
        let password = if name == "wrong password" {
            "wrong"
        } else {
            "right"
        };
        assert_eq!(jks_check(&store, password), want, "{name}");
    }
}

#[test]
fn over_limit_is_the_caps_only() {
    let rows = [
        (Unopened::Unreadable, false),
        (Unopened::Password, false),
        (Unopened::Size { size: 2, max: 1 }, true),
        (Unopened::MacIterations { count: 2, max: 1 }, true),
        (Unopened::MacSalt { len: 2, max: 1 }, true),
    ];
    for (unopened, over) in rows {
        assert_eq!(unopened.over_limit(), over, "{unopened:?}");
    }
    assert_eq!(
        format!(
            "keystore.p12 {}",
            Unopened::MacIterations {
                count: i32::MAX,
                max: 2048
            }
        ),
        "keystore.p12 claims 2147483647 MAC iterations, over the 2048 this manager checks"
    );
}
