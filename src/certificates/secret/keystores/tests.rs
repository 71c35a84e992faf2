use std::process::Command;

use k8s_openapi::ByteString;

use super::*;
use crate::api::certmanager::{CertificateSpec, JksKeystore, Keystores, Pkcs12Keystore};
use crate::certificates::secret::tests::{Leaf, certificate, leaf};
use crate::certificates::secret::{BodyOptions, secret_body};

fn selector(name: &str, key: &str) -> SecretKeySelector {
    SecretKeySelector {
        name: name.into(),
        key: key.into(),
        ..SecretKeySelector::default()
    }
}

fn password_secret(key: &str, value: &[u8]) -> Secret {
    Secret {
        data: Some([(key.to_string(), ByteString(value.to_vec()))].into()),
        ..Secret::default()
    }
}

/// One keystore password lookup: the keystore's kind, its literal password and Secret
/// reference, the Secret found (if any), and the password or error message.
struct PasswordRow<'a> {
    kind: Kind,
    literal: Option<&'a str>,
    secret_ref: Option<&'a SecretKeySelector>,
    secret: Option<&'a Secret>,
    want: Result<&'a str, &'a str>,
}

#[rustfmt::skip]
#[test]
fn passwords_resolve_as_cert_manager_does() {
    let with_pw = password_secret("pw", b"s3cret");
    let empty = password_secret("pw", b"");
    let latin1 = password_secret("pw", b"caf\xe9");
    let named = selector("jks-pw", "pw");
    let unnamed = selector("", "pw");
    let rows = [
        PasswordRow { kind: Kind::Jks, literal: None, secret_ref: Some(&named), secret: Some(&with_pw), want: Ok("s3cret") },
        // The Secret wins over the literal.
        PasswordRow {
            kind: Kind::Jks, literal: Some("lit"), secret_ref: Some(&named), secret: Some(&with_pw), want: Ok("s3cret"),
        },
        PasswordRow { kind: Kind::Pkcs12, literal: Some("lit"), secret_ref: Some(&unnamed), secret: None, want: Ok("lit") },
        PasswordRow {
            kind: Kind::Pkcs12, literal: None, secret_ref: Some(&named), secret: Some(&latin1), want: Ok("caf\u{fffd}"),
        },
        PasswordRow {
            kind: Kind::Pkcs12, literal: None, secret_ref: Some(&named), secret: None,
            want: Err("PKCS12 keystore password Secret \"jks-pw\" not found"),
        },
        PasswordRow {
            kind: Kind::Jks, literal: None, secret_ref: Some(&named), secret: Some(&empty),
            want: Err("JKS keystore password Secret contains no data for key \"pw\""),
        },
        PasswordRow {
            kind: Kind::Pkcs12, literal: None, secret_ref: Some(&selector("jks-pw", "other")), secret: Some(&with_pw),
            want: Err("PKCS12 keystore password Secret contains no data for key \"other\""),
        },
        PasswordRow {
            kind: Kind::Jks, literal: Some(""), secret_ref: None, secret: None,
            want: Err("JKS literal password cannot be empty"),
        },
        PasswordRow {
            kind: Kind::Pkcs12, literal: None, secret_ref: None, secret: None,
            want: Err("either passwordSecretRef or password must be set for PKCS#12 keystore"),
        },
    ];
    for PasswordRow { kind, literal, secret_ref, secret, want } in rows {
        let got = keystore_password(kind, literal, secret_ref, secret).map_err(|e| e.to_string());
        let want = want.map(str::to_string).map_err(str::to_string);
        assert_eq!(got, want, "{kind:?} {literal:?} {secret_ref:?}");
    }
}

fn tool(program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(program).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The stores a Certificate asks for land in the Secret body and open with their password:
/// `openssl pkcs12 -legacy` for the default LegacyRC2 profile, `keytool` for JKS.
#[test]
fn encoded_stores_open_with_their_password() {
    let (crt_pem, key_pem) = leaf(&Leaf {
        cn: "web.example.com",
        dns: vec!["web.example.com"],
        ..Leaf::default()
    });
    let (ca_pem, _) = leaf(&Leaf {
        cn: "Example CA",
        ..Leaf::default()
    });
    let crt = certificate(CertificateSpec {
        secret_name: "web-tls".into(),
        keystores: Some(Box::new(Keystores {
            pkcs12: Some(Pkcs12Keystore {
                create: true,
                password: Some("p12-pass".into()),
                ..Pkcs12Keystore::default()
            }),
            jks: Some(JksKeystore {
                create: true,
                alias: Some("web".into()),
                password: Some("jks-pass".into()),
                ..JksKeystore::default()
            }),
            ..Keystores::default()
        })),
        ..CertificateSpec::default()
    });
    let data = SecretData {
        private_key: key_pem.as_bytes(),
        certificate: crt_pem.as_bytes(),
        ca: ca_pem.as_bytes(),
        ..SecretData::default()
    };
    let passwords = Passwords {
        pkcs12: Some("p12-pass".into()),
        jks: Some("jks-pass".into()),
    };
    let now = Timestamp::from_second(1_790_000_000).unwrap();
    let stores = encode_keystores(&crt, &data, &passwords, now).unwrap();
    let body = secret_body(&crt, &data, &stores, BodyOptions::default()).unwrap();
    let body_data = body.data.unwrap();
    let keys: Vec<&str> = body_data.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "ca.crt",
            "keystore.jks",
            "keystore.p12",
            "tls.crt",
            "tls.key",
            "truststore.jks",
            "truststore.p12"
        ]
    );

    let dir = std::env::temp_dir().join(format!("secret-keystores-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str| {
        let path = dir.join(name);
        std::fs::write(&path, &body_data[name].0).unwrap();
        path.to_str().unwrap().to_string()
    };
    let p12 = write("keystore.p12");
    let jks = write("keystore.jks");
    let (ok, text) = tool(
        "openssl",
        &[
            "pkcs12",
            "-legacy",
            "-in",
            &p12,
            "-passin",
            "pass:p12-pass",
            "-nodes",
            "-info",
        ],
    );
    assert!(ok, "{text}");
    assert!(text.contains("subject=CN = web.example.com"), "{text}");
    assert!(text.contains("subject=CN = Example CA"), "{text}");
    let (ok, text) = tool(
        "openssl",
        &[
            "pkcs12",
            "-legacy",
            "-in",
            &p12,
            "-passin",
            "pass:wrong",
            "-nodes",
            "-info",
        ],
    );
    assert!(!ok, "a wrong password opened it: {text}");
    let (ok, text) = tool(
        "keytool",
        &[
            "-list",
            "-keystore",
            &jks,
            "-storetype",
            "JKS",
            "-storepass",
            "jks-pass",
        ],
    );
    assert!(ok, "{text}");
    assert!(
        text.contains("web, ") && text.contains("PrivateKeyEntry"),
        "{text}"
    );
    assert!(
        text.contains("ca, ") && text.contains("trustedCertEntry"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    // Without the CA: no truststores; a store asked for without its password is refused.
    let no_ca = SecretData { ca: b"", ..data };
    let stores = encode_keystores(&crt, &no_ca, &passwords, now).unwrap();
    assert_eq!(stores.pkcs12.unwrap().truststore, None);
    assert_eq!(stores.jks.unwrap().truststore, None);
    let err = encode_keystores(&crt, &no_ca, &Passwords::default(), now).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to add keystores to Secret: either passwordSecretRef or password must be set for PKCS#12 keystore"
    );
}
