use super::*;
use crate::certificates::fixtures;
use crate::certificates::keys::annotation;
use crate::controllers::certificate::testing::{event, with_condition, with_status};
use crate::pki::keys::KeySpec;

/// One of our Certificates, issuing its revision 2.
fn ours() -> Certificate {
    let mut crt = fixtures::certificate("web", fixtures::spec());
    crt.metadata.uid = Some("uid-1".into());
    crt.spec.issuer_ref.group = crate::api::GROUP.into();
    let crt = with_status(crt, |s| s.revision = Some(1));
    with_condition(crt, ISSUING, "True", "Renewing", "2026-02-01T00:00:00Z")
}

/// What the request manager makes for `crt`: its spec, `key`, the next revision, controlled.
fn made_with(
    crt: &Certificate,
    spec: &crate::api::certmanager::CertificateSpec,
    key: &Key,
) -> CertificateRequest {
    let mut cr = fixtures::request_for(spec, key);
    cr.metadata.owner_references = Some(vec![crate::certificates::secret::certificate_owner_reference(
        crt,
    )]);
    cr.metadata.annotations = Some(
        [(
            annotation::CERTIFICATE_REVISION.to_string(),
            next_revision(crt).to_string(),
        )]
        .into(),
    );
    cr
}

fn request_of(crt: &Certificate) -> CertificateRequest {
    made_with(crt, &crt.spec, fixtures::ec())
}

fn with(mut cr: CertificateRequest, type_: &str) -> CertificateRequest {
    cr.status
        .get_or_insert_with(Default::default)
        .conditions
        .push(CertificateRequestCondition {
            type_: type_.into(),
            status: "True".into(),
            ..Default::default()
        });
    cr
}

fn revision(mut cr: CertificateRequest, revision: Option<&str>) -> CertificateRequest {
    let annotations = cr.metadata.annotations.get_or_insert_with(Default::default);
    annotations.remove(annotation::CERTIFICATE_REVISION);
    if let Some(r) = revision {
        annotations.insert(annotation::CERTIFICATE_REVISION.into(), r.into());
    }
    cr
}

fn not_genuine(why: &str) -> Verdict {
    Verdict::NotGenuine(format!("{why}: not approved by cfssl-issuer"))
}

struct Row<'a> {
    name: &'a str,
    request: CertificateRequest,
    owner: Option<&'a Certificate>,
    next_key: Option<&'a Key>,
    want: Verdict,
}

#[test]
fn verdict_table() {
    let crt = ours();
    let key = Some(fixtures::ec());
    let mut theirs = fixtures::certificate("web", fixtures::spec());
    theirs.metadata.uid = Some("uid-1".into());
    let mut other_uid = ours();
    other_uid.metadata.uid = Some("uid-2".into());
    let mut other_issuer = request_of(&crt);
    other_issuer.spec.issuer_ref.name = "elsewhere".into();
    let mut other_names = crt.spec.clone();
    other_names.dns_names = vec!["bank.example".into()];
    let not_issuing = with_condition(ours(), ISSUING, "False", "Issued", "2026-02-01T00:00:00Z");
    let mut no_owner = request_of(&crt);
    no_owner.metadata.owner_references = None;
    let mut foreign = request_of(&crt);
    foreign.spec.issuer_ref.group = "cert-manager.io".into();
    let another_key = fixtures::key(KeySpec::Ecdsa(256), true);
    let rows = [
        Row {
            name: "the next request",
            request: request_of(&crt),
            owner: Some(&crt),
            next_key: key,
            want: Verdict::Approve,
        },
        Row {
            name: "already approved",
            request: with(request_of(&crt), APPROVED),
            owner: Some(&crt),
            next_key: key,
            want: Verdict::NotOurs,
        },
        Row {
            name: "finished, as the cache keeps it (a summary)",
            request: request_of(&crt).summary(annotation::CERTIFICATE_REVISION),
            owner: Some(&crt),
            next_key: key,
            want: Verdict::NotOurs,
        },
        Row {
            name: "denied",
            request: with(request_of(&crt), DENIED),
            owner: Some(&crt),
            next_key: key,
            want: Verdict::NotOurs,
        },
        Row {
            name: "Certificate not cached yet",
            request: request_of(&crt),
            owner: None,
            next_key: None,
            want: Verdict::NotSeenYet,
        },
        Row {
            name: "no owner, not cached",
            request: no_owner,
            owner: None,
            next_key: None,
            want: Verdict::NotOurs,
        },
        Row {
            name: "another issuer group, not cached",
            request: foreign,
            owner: None,
            next_key: None,
            want: Verdict::NotOurs,
        },
        Row {
            name: "owner for another issuer group",
            request: request_of(&theirs),
            owner: Some(&theirs),
            next_key: key,
            want: Verdict::NotOurs,
        },
        Row {
            name: "owner of the same name, another UID",
            request: request_of(&crt),
            owner: Some(&other_uid),
            next_key: key,
            want: Verdict::NotOurs,
        },
        Row {
            name: "names another issuer",
            request: other_issuer,
            owner: Some(&crt),
            next_key: key,
            want: not_genuine("its fields differ from the Certificate's: spec.issuerRef"),
        },
        Row {
            name: "a CSR for other names",
            request: made_with(&crt, &other_names, fixtures::ec()),
            owner: Some(&crt),
            next_key: key,
            want: not_genuine("its fields differ from the Certificate's: spec.dnsNames"),
        },
        Row {
            name: "signed by another key",
            request: made_with(&crt, &crt.spec, another_key),
            owner: Some(&crt),
            next_key: key,
            want: not_genuine("its CSR is not signed by the Certificate's next private key"),
        },
        Row {
            name: "the current revision",
            request: revision(request_of(&crt), Some("1")),
            owner: Some(&crt),
            next_key: key,
            want: not_genuine("it is for revision 1, the next is 2"),
        },
        Row {
            name: "no revision",
            request: revision(request_of(&crt), None),
            owner: Some(&crt),
            next_key: key,
            want: not_genuine("it carries no revision annotation"),
        },
        Row {
            name: "next key not cached yet",
            request: request_of(&crt),
            owner: Some(&crt),
            next_key: None,
            want: Verdict::NotSeenYet,
        },
        Row {
            name: "not issuing, no next key",
            request: request_of(&not_issuing),
            owner: Some(&not_issuing),
            next_key: None,
            want: not_genuine("its Certificate is not issuing"),
        },
    ];
    for row in rows {
        assert_eq!(
            verdict(&row.request, row.owner, || row.next_key.cloned()),
            row.want,
            "{}",
            row.name
        );
    }
}

#[test]
fn the_approval_is_one_condition() {
    let crt = ours();
    let plan = decide(
        &request_of(&crt),
        Verdict::Approve,
        fixtures::at("2026-02-01T00:00:00Z"),
    );
    assert_eq!(plan.next, Next::AwaitChange);
    assert_eq!(
        event(&plan),
        Some((
            "Normal".to_string(),
            "cfssl-issuer.wikimedia.org".to_string(),
            "Certificate request has been approved by cfssl-issuer (standalone mode)".to_string(),
        ))
    );
    let body = plan.status;
    assert_eq!(
        body,
        Some(serde_json::json!({
            "apiVersion": "cert-manager.io/v1",
            "kind": "CertificateRequest",
            "status": { "conditions": [{
                "type": "Approved", "status": "True", "reason": REASON, "message": MESSAGE,
                "lastTransitionTime": "2026-02-01T00:00:00Z",
            }]},
        }))
    );
}

#[test]
fn plans_for_each_verdict() {
    let cr = request_of(&ours());
    let now = fixtures::at("2026-02-01T00:00:00Z");
    let rows = [
        (Verdict::NotOurs, Next::AwaitChange, None),
        (Verdict::NotSeenYet, Next::Backoff, None),
        (
            Verdict::NotGenuine("why".into()),
            Next::AwaitChange,
            Some((
                "Warning".to_string(),
                "NotApproved".to_string(),
                "Not the next request of Certificate \"web\" (why)".to_string(),
            )),
        ),
    ];
    for (verdict, next, want_event) in rows {
        let name = format!("{verdict:?}");
        let plan = decide(&cr, verdict, now);
        assert_eq!(plan.status, None, "{name}");
        assert_eq!(plan.next, next, "{name}");
        assert_eq!(event(&plan), want_event, "{name}");
    }
}
