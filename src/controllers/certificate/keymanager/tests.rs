use super::*;
use crate::certificates::fixtures::{self, key, key_pem};
use crate::controllers::certificate::testing::{deleted, event, with_condition, with_status};
use crate::controllers::kit::plan::Create;
use sha2::{Digest, Sha256};

fn crt(issuing: bool, named: Option<&str>, policy: &str) -> Certificate {
    let mut crt = fixtures::certificate("web", fixtures::spec());
    crt.metadata.uid = Some("uid-1".into());
    if let Some(k) = crt.spec.private_key.as_mut() {
        k.rotation_policy = policy.to_string();
    }
    let crt = with_status(crt, |s| {
        s.next_private_key_secret_name = named.map(str::to_string);
    });
    if issuing {
        with_condition(crt, ISSUING, "True", "DoesNotExist", "2026-02-01T00:00:00Z")
    } else {
        crt
    }
}

fn key_secret_named(name: &str, pem: &[u8]) -> Secret {
    let mut secret = fixtures::secret(&[(data::TLS_KEY, pem)], &[]);
    secret.metadata.name = Some(name.to_string());
    secret.metadata.uid = Some(format!("uid-{name}"));
    secret
}

fn ec_pem() -> Vec<u8> {
    key_pem(fixtures::ec())
}

fn rsa_pem() -> Vec<u8> {
    key_pem(key(KeySpec::Rsa(2048), false))
}

/// The key a generated key Secret holds in the tables (what `generate` would have made).
const FRESH: &[u8] = b"FRESH KEY PEM";

/// Where a key Secret's key comes from.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    Generate(KeySpec),
    Reuse(Vec<u8>),
}

/// What a plan writes besides status: the key Secrets it deletes, in order, then the one it
/// creates (name and the source of its key), if any.
#[derive(Debug, Clone, PartialEq, Default)]
struct Then {
    gone: Vec<String>,
    made: Option<(String, Source)>,
}

impl Then {
    fn nothing() -> Self {
        Then::default()
    }

    /// These deleted, then this created.
    fn and_create(mut self, name: &str, source: Source) -> Self {
        self.made = Some((name.to_string(), source));
        self
    }
}

fn create(name: &str, source: Source) -> Then {
    Then::nothing().and_create(name, source)
}

fn delete(names: &[&str]) -> Then {
    Then {
        gone: names.iter().map(|n| (*n).to_string()).collect(),
        made: None,
    }
}

/// The name and `tls.key` of the key Secret `plan` creates, if it creates one.
fn created(plan: &FullPlan<KeyNeeded>) -> Option<(String, Vec<u8>)> {
    use base64::Engine;
    plan.writes().find_map(|w| match w {
        Write::Create(Create { object, body, .. }) => {
            let key = body["data"]["tls.key"].as_str().unwrap_or_default();
            let key = base64::engine::general_purpose::STANDARD
                .decode(key)
                .unwrap_or_default();
            Some((object.name.clone(), key))
        }
        _ => None,
    })
}

/// Decides on `facts` as the reconcile does: once, and when a key is asked for, again with
/// [`FRESH`]. Checks what each step wrote against `then` (a create after every delete);
/// returns the final plan.
fn decide_as_reconcile(name: &str, facts: Facts<'_>, then: &Then) -> FullPlan<KeyNeeded> {
    let first = decide(&facts);
    let plan = match (&first.plan.next, &then.made) {
        (Next::Work(KeyNeeded(spec)), Some((_, Source::Generate(want)))) => {
            assert_eq!(spec, want, "{name}");
            assert_eq!(first, FullPlan::idle(Next::Work(KeyNeeded(*spec))), "{name}");
            decide(&Facts {
                generated: Some(FRESH),
                ..facts
            })
        }
        _ => first,
    };
    let want_made = then.made.as_ref().map(|(secret, source)| match source {
        Source::Generate(_) => (secret.clone(), FRESH.to_vec()),
        Source::Reuse(pem) => (secret.clone(), pem.clone()),
    });
    let want_gone: Vec<&str> = then.gone.iter().map(String::as_str).collect();
    assert_eq!((created(&plan), deleted(&plan)), (want_made, want_gone), "{name}");
    if then.made.is_some() {
        assert!(
            matches!(plan.writes().last(), Some(Write::Create(_))),
            "{name}: the create comes last"
        );
    }
    assert_eq!(plan.plan.next, Next::AwaitChange, "{name}");
    plan
}

#[test]
fn key_manager_table() {
    let derived = next_key_name(&crt(true, None, ""));
    let good = key_secret_named(&derived, &ec_pem());
    let good_rsa = key_secret_named(&derived, &rsa_pem());
    let good_garbage = key_secret_named(&derived, b"not a key");
    let k1 = key_secret_named("k1", &ec_pem());
    let k2 = key_secret_named("k2", &ec_pem());
    let target_ec = fixtures::secret(&[(data::TLS_KEY, &ec_pem())], &[]);
    let target_rsa = fixtures::secret(&[(data::TLS_KEY, &rsa_pem())], &[]);
    let target_garbage = fixtures::secret(&[(data::TLS_KEY, b"garbage")], &[]);
    let generate = Source::Generate(KeySpec::Ecdsa(256));
    struct Case<'a> {
        name: &'static str,
        crt: Certificate,
        owned: Vec<&'a Secret>,
        target: Option<&'a Secret>,
        /// Whether the plan applies the status document that drops `nextPrivateKeySecretName`
        /// (otherwise: no status apply at all).
        clears: bool,
        reason: Option<&'static str>,
        then: Then,
    }
    let rows = vec![
        Case {
            name: "not issuing: delete the key Secrets, drop a name an earlier version wrote",
            crt: crt(false, Some(&derived), ""),
            owned: vec![&good],
            target: None,
            clears: true,
            reason: None,
            then: delete(&[&derived]),
        },
        Case {
            name: "not issuing, no name in status: delete the key Secrets, no status",
            crt: crt(false, None, ""),
            owned: vec![&good, &k2],
            target: None,
            clears: false,
            reason: None,
            then: delete(&[&derived, "k2"]),
        },
        Case {
            name: "not issuing, nothing there",
            crt: crt(false, None, ""),
            owned: vec![],
            target: None,
            clears: false,
            reason: None,
            then: Then::nothing(),
        },
        Case {
            name: "issuing, no key yet: a new key under the derived name, no status",
            crt: crt(true, None, ""),
            owned: vec![],
            target: None,
            clears: false,
            reason: None,
            then: create(&derived, generate.clone()),
        },
        Case {
            name: "a name in status is neither used nor written while issuing",
            crt: crt(true, Some("x"), ""),
            owned: vec![],
            target: None,
            clears: false,
            reason: None,
            then: create(&derived, generate.clone()),
        },
        Case {
            name: "the derived name in status (an earlier version's): only the Secret is made",
            crt: crt(true, Some(&derived), ""),
            owned: vec![],
            target: None,
            clears: false,
            reason: None,
            then: create(&derived, generate.clone()),
        },
        Case {
            name: "the key Secret of the derived name is good",
            crt: crt(true, None, ""),
            owned: vec![&good],
            target: None,
            clears: false,
            reason: None,
            then: Then::nothing(),
        },
        Case {
            name: "a key Secret of another name, named in status (cert-manager's): replaced",
            crt: crt(true, Some("k1"), ""),
            owned: vec![&k1],
            target: None,
            clears: false,
            reason: None,
            then: delete(&["k1"]).and_create(&derived, generate.clone()),
        },
        Case {
            name: "the key no longer matches the spec",
            crt: crt(true, None, ""),
            owned: vec![&good_rsa],
            target: None,
            clears: false,
            reason: Some("Deleted"),
            then: delete(&[&derived]),
        },
        Case {
            name: "the key does not decode",
            crt: crt(true, None, ""),
            owned: vec![&good_garbage],
            target: None,
            clears: false,
            reason: None,
            then: delete(&[&derived]),
        },
        Case {
            name: "two key Secrets: keep the derived one",
            crt: crt(true, Some("k2"), ""),
            owned: vec![&good, &k2],
            target: None,
            clears: false,
            reason: None,
            then: delete(&["k2"]),
        },
        Case {
            name: "two key Secrets, the derived one stale: the other first, then it",
            crt: crt(true, None, ""),
            owned: vec![&good_rsa, &k2],
            target: None,
            clears: false,
            reason: Some("Deleted"),
            then: delete(&["k2", &derived]),
        },
        Case {
            name: "Never: reuse the Secret's key",
            crt: crt(true, None, "Never"),
            owned: vec![],
            target: Some(&target_ec),
            clears: false,
            reason: Some("Reused"),
            then: create(&derived, Source::Reuse(ec_pem())),
        },
        Case {
            name: "Never, a key Secret of another name: deleted, the Secret's key reused",
            crt: crt(true, None, "Never"),
            owned: vec![&k1],
            target: Some(&target_ec),
            clears: false,
            reason: Some("Reused"),
            then: delete(&["k1"]).and_create(&derived, Source::Reuse(ec_pem())),
        },
        Case {
            name: "Never, key undecodable: a new one",
            crt: crt(true, None, "Never"),
            owned: vec![],
            target: Some(&target_garbage),
            clears: false,
            reason: Some("DecodeFailed"),
            then: create(&derived, generate.clone()),
        },
        Case {
            name: "Never, key of another algorithm: stop",
            crt: crt(true, None, "Never"),
            owned: vec![],
            target: Some(&target_rsa),
            clears: false,
            reason: Some("CannotRegenerateKey"),
            then: Then::nothing(),
        },
        Case {
            name: "Never, no Secret yet: a new key",
            crt: crt(true, None, "Never"),
            owned: vec![],
            target: None,
            clears: false,
            reason: None,
            then: create(&derived, generate.clone()),
        },
        Case {
            name: "Always ignores the Secret's key",
            crt: crt(true, None, "Always"),
            owned: vec![],
            target: Some(&target_ec),
            clears: false,
            reason: None,
            then: create(&derived, generate.clone()),
        },
    ];
    for Case {
        name,
        crt,
        owned,
        target,
        clears,
        reason,
        then,
    } in rows
    {
        let facts = Facts {
            certificate: &crt,
            owned,
            target,
            generated: None,
        };
        let FullPlan { plan, .. } = decide_as_reconcile(name, facts, &then);
        assert_eq!(plan.status, clears.then(|| document(json!({}))), "{name}");
        assert_eq!(event(&plan).map(|e| e.1).as_deref(), reason, "{name}");
    }
}

#[test]
fn event_messages_are_cert_managers() {
    let crt_rsa = crt(true, None, "");
    let derived_rsa = key_secret_named(&next_key_name(&crt_rsa), &rsa_pem());
    let plan = decide(&Facts {
        certificate: &crt_rsa,
        owned: vec![&derived_rsa],
        target: None,
        generated: None,
    });
    assert_eq!(
        event(&plan.plan).map(|e| e.2),
        Some("Regenerating private key due to change in fields: [spec.privateKey.algorithm]".to_string())
    );
    let target = fixtures::secret(&[(data::TLS_KEY, &ec_pem())], &[]);
    let plan = decide(&Facts {
        certificate: &crt(true, None, "Never"),
        owned: vec![],
        target: Some(&target),
        generated: None,
    });
    assert_eq!(
        event(&plan.plan).map(|e| e.2),
        Some("Reusing private key stored in existing Secret resource \"tls\"".to_string())
    );
}

#[test]
fn the_key_secret_is_labelled_owned_and_named_from_the_uid() {
    let crt = crt(true, None, "");
    assert_eq!(
        next_key_name(&crt),
        format!("web-{}", &hex::encode(Sha256::digest(b"uid-1"))[..8])
    );
    let long = {
        let mut c = crt.clone();
        c.metadata.name = Some("a".repeat(253));
        next_key_name(&c)
    };
    assert_eq!(long.len(), 253);
    let secret = key_secret(&crt, "web-key", b"PEM".to_vec());
    let labels = secret.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(label::NEXT_PRIVATE_KEY).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        labels.get(label::PART_OF_CERT_MANAGER).map(String::as_str),
        Some("true")
    );
    let owner = &secret.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller, owner.kind.as_str()),
        ("uid-1", Some(true), "Certificate")
    );
    assert_eq!(
        secret
            .data
            .unwrap_or_default()
            .get(data::TLS_KEY)
            .map(|b| b.0.clone()),
        Some(b"PEM".to_vec())
    );
}

#[test]
fn a_key_secret_made_for_the_last_revision_is_deleted_not_used() {
    // Revision 1 is in the Secret: the next key is for revision 2.
    let crt = with_status(crt(true, None, "Always"), |s| s.revision = Some(1));
    let derived = next_key_name(&crt);
    let annotated = |revision: &str| {
        let mut secret = key_secret_named(&derived, &ec_pem());
        secret.metadata.annotations = Some(
            [(observe::KEY_REVISION.to_string(), revision.to_string())]
                .into_iter()
                .collect(),
        );
        secret
    };
    let rows = [
        (
            "made for revision 1, already used",
            annotated("1"),
            delete(&[&derived]),
        ),
        ("made for revision 2", annotated("2"), Then::nothing()),
        ("not a number", annotated("two"), delete(&[&derived])),
        (
            "no revision annotation: kept as it is",
            key_secret_named(&derived, &ec_pem()),
            Then::nothing(),
        ),
    ];
    for (name, secret, then) in rows {
        let facts = Facts {
            certificate: &crt,
            owned: vec![&secret],
            target: None,
            generated: None,
        };
        decide_as_reconcile(name, facts, &then);
        assert_eq!(
            observe::made_for_another_revision(&secret, &crt),
            then != Then::nothing(),
            "{name}"
        );
    }
    let made = key_secret(&crt, "web-key", b"PEM".to_vec());
    assert!(!observe::made_for_another_revision(&made, &crt));
    assert_eq!(
        made.metadata
            .annotations
            .unwrap_or_default()
            .get(observe::KEY_REVISION)
            .map(String::as_str),
        Some("2")
    );
}

#[test]
fn the_target_secret_is_never_a_key_secret() {
    let crt = crt(true, Some("tls"), "");
    let other = {
        let mut c = crt.clone();
        c.metadata.uid = Some("uid-2".into());
        c
    };
    let unlabelled = |name: &str| {
        let mut s = key_secret(&crt, name, b"PEM".to_vec());
        s.metadata.labels = None;
        s
    };
    // (row, Secret, whether it is `crt`'s key Secret)
    let rows = [
        (
            "labelled, controlled, not the target",
            key_secret(&crt, "web-1", b"PEM".to_vec()),
            true,
        ),
        (
            "the target, labelled through secretTemplate",
            key_secret(&crt, "tls", b"PEM".to_vec()),
            false,
        ),
        (
            "controlled by another Certificate",
            key_secret(&other, "web-1", b"PEM".to_vec()),
            false,
        ),
        ("not labelled", unlabelled("web-1"), false),
    ];
    for (row, secret, want) in rows {
        assert_eq!(observe::is_next_key_of(&secret, &crt), want, "{row}");
    }
    // Not issuing: the key manager deletes every key Secret it is given, never the target.
    let idle = with_status(crt.clone(), |s| s.conditions.clear());
    let read = |name: &str| {
        let mut s = key_secret(&crt, name, b"PEM".to_vec());
        s.metadata.uid = Some(format!("uid-{name}"));
        s
    };
    let secrets = [read("tls"), read("web-1")];
    let owned: Vec<&Secret> = secrets
        .iter()
        .filter(|s| observe::is_next_key_of(s, &idle))
        .collect();
    let plan = decide(&Facts {
        certificate: &idle,
        owned,
        target: None,
        generated: None,
    });
    assert_eq!(deleted(&plan), vec!["web-1"]);
}

#[test]
fn the_key_secret_is_never_named_as_the_target() {
    let mut crt = crt(true, None, "");
    let usual = next_key_name(&crt);
    crt.spec.secret_name.clone_from(&usual);
    let other = next_key_name(&crt);
    // sha256("uid-1") begins 4a49acf8 a6bd7277: the second eight hex digits name it instead.
    assert_eq!((usual.as_str(), other.as_str()), ("web-4a49acf8", "web-a6bd7277"));
}
