use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;

use crate::api::certmanager::{Certificate, JksKeystore, Pkcs12Keystore};
use crate::certificates::fixtures;
use crate::certificates::secret::{Input, KeystoreData, Passwords, SecretData, Store};
use crate::cfssl::AuthKey;
use crate::controllers::certificate::{issuing, keymanager};
use crate::controllers::kit::plan::{Announce, IfTaken, Write};
use crate::pki::keys::{Encoding, Key};

/// What every secret in the table holds; never in any `Debug` output.
const SECRET: &str = "hunter2-private-key-bytes";

fn key_secret() -> Secret {
    let mut secret = Secret::default();
    secret.metadata.name = Some("web-key".into());
    secret.metadata.namespace = Some("apps".into());
    secret.metadata.uid = Some("uid-key".into());
    secret.data = Some(BTreeMap::from([("tls.key".into(), ByteString(SECRET.into()))]));
    secret.string_data = Some(BTreeMap::from([("password".into(), SECRET.into())]));
    secret
}

fn certificate() -> Certificate {
    let mut crt = fixtures::certificate("web", fixtures::spec());
    crt.metadata.uid = Some("uid-web".into());
    crt
}

fn contents() -> issuing::decide::Contents {
    issuing::decide::Contents {
        private_key: SECRET.into(),
        certificate: b"CERT".to_vec(),
        ca: Vec::new(),
        certificate_name: "web".into(),
        issuer: Default::default(),
    }
}

fn passwords() -> Passwords {
    Passwords {
        pkcs12: Some(SECRET.into()),
        jks: Some(SECRET.into()),
    }
}

#[test]
fn debug_output_never_holds_the_secret() {
    let secret = key_secret();
    let crt = certificate();
    let key = Key::from_pem(fixtures::ec().to_pem(Encoding::Pkcs8).unwrap().as_bytes()).unwrap();
    let key_pem = key.to_pem(Encoding::Pkcs8).unwrap();
    let store = Store {
        keystore: SECRET.into(),
        truststore: None,
    };
    let stored = |s: &Secret| Write::apply(s);
    let created = Write::create(&secret, IfTaken::Done, Announce::default());
    let issuing_facts = issuing::decide::Facts {
        certificate: &crt,
        next_key: Some(&key),
        requests: Vec::new(),
        secret: Some(&secret),
        field_manager: "m",
        owner_ref_enabled: true,
        stale_keystore: None,
        passwords: Ok(passwords()),
        now: Timestamp::UNIX_EPOCH,
    };
    let key_facts = keymanager::Facts {
        certificate: &crt,
        owned: vec![&secret],
        target: Some(&secret),
        generated: Some(SECRET.as_bytes()),
    };
    let policy_input = crate::certificates::policy::checks::Input {
        certificate: Arc::new(crt.clone()),
        secret: Some(Arc::new(secret.clone())),
        current_request: None,
        next_request: None,
        now: Timestamp::UNIX_EPOCH,
        renewal_jitter: crate::certificates::renewal::Jitter::OFF,
    };
    let secret_input = Input {
        certificate: &crt,
        secret: &secret,
        field_manager: "m",
        owner_ref_enabled: false,
    };
    let auth = AuthKey::from_hex(&hex::encode(SECRET)).unwrap();
    // (type, its Debug output, what the output holds in the secret's place)
    let rows: Vec<(&str, String, &str)> = vec![
        (
            "JksKeystore",
            format!(
                "{:?}",
                JksKeystore {
                    password: Some(SECRET.into()),
                    ..Default::default()
                }
            ),
            "password: Some(<redacted>)",
        ),
        (
            "Pkcs12Keystore",
            format!(
                "{:?}",
                Pkcs12Keystore {
                    password: Some(SECRET.into()),
                    ..Default::default()
                }
            ),
            "password: Some(<redacted>)",
        ),
        (
            "Passwords",
            format!("{:?}", passwords()),
            "pkcs12: Some(<redacted>), jks: Some(<redacted>)",
        ),
        (
            "SecretData",
            format!(
                "{:?}",
                SecretData {
                    private_key: SECRET.as_bytes(),
                    ..Default::default()
                }
            ),
            "private_key: <redacted>",
        ),
        ("Store", format!("{store:?}"), "keystore: <redacted>"),
        (
            "KeystoreData",
            format!(
                "{:?}",
                KeystoreData {
                    pkcs12: Some(store.clone()),
                    jks: None
                }
            ),
            "keystore: <redacted>",
        ),
        ("Contents", format!("{:?}", contents()), "private_key: <redacted>"),
        (
            "issuing Facts",
            format!("{issuing_facts:?}"),
            r#"data: ["tls.key"], string_data: ["password"]"#,
        ),
        (
            "key manager Facts",
            format!("{key_facts:?}"),
            "generated: Some(<redacted>)",
        ),
        (
            "policy Input",
            format!("{policy_input:?}"),
            r#"data: ["tls.key"]"#,
        ),
        (
            "Secret check Input",
            format!("{secret_input:?}"),
            r#"data: ["tls.key"]"#,
        ),
        (
            "Write::Apply of a Secret",
            format!("{:?}", stored(&secret)),
            r#"String("<redacted>")"#,
        ),
        (
            "Write::Create of a Secret",
            format!("{created:?}"),
            r#"String("<redacted>")"#,
        ),
        ("Key", format!("{key:?}"), "Key"),
        ("AuthKey", format!("{auth:?}"), "AuthKey"),
    ];
    let secret_hex = hex::encode(SECRET);
    let secret_b64 = serde_json::to_string(&ByteString(SECRET.into())).unwrap();
    for (row, shown, placeholder) in rows {
        for needle in [
            SECRET,
            secret_hex.as_str(),
            secret_b64.trim_matches('"'),
            key_pem.trim(),
        ] {
            assert!(!shown.contains(needle), "{row}: {shown}");
        }
        assert!(shown.contains(placeholder), "{row}: {shown}");
    }
}
