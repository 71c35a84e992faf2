use super::*;
use crate::certificates::fixtures;

fn ours() -> Certificate {
    let mut crt = fixtures::certificate("web", fixtures::spec());
    crt.metadata.uid = Some("uid-1".into());
    crt.spec.issuer_ref.group = crate::api::GROUP.into();
    crt
}

fn request_of(crt: &Certificate) -> CertificateRequest {
    let mut cr = fixtures::request_for(&crt.spec, fixtures::ec());
    cr.metadata.owner_references = Some(vec![crate::certificates::secret::certificate_owner_reference(
        crt,
    )]);
    cr
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

#[test]
fn approval_table() {
    let now = fixtures::at("2026-02-01T00:00:00Z");
    let crt = ours();
    let mut theirs = fixtures::certificate("web", fixtures::spec());
    theirs.metadata.uid = Some("uid-1".into());
    let mut other_uid = ours();
    other_uid.metadata.uid = Some("uid-2".into());
    let mut other_issuer = request_of(&crt);
    other_issuer.spec.issuer_ref.name = "elsewhere".into();
    let rows: [(&str, CertificateRequest, Option<&Certificate>, bool); 7] = [
        ("ours, undecided", request_of(&crt), Some(&crt), true),
        (
            "already approved",
            with(request_of(&crt), APPROVED),
            Some(&crt),
            false,
        ),
        ("denied", with(request_of(&crt), DENIED), Some(&crt), false),
        ("owner unknown", request_of(&crt), None, false),
        (
            "owner for another issuer group",
            request_of(&theirs),
            Some(&theirs),
            false,
        ),
        (
            "owner of the same name, another UID",
            request_of(&crt),
            Some(&other_uid),
            false,
        ),
        (
            "request names another issuer than its Certificate",
            other_issuer,
            Some(&crt),
            false,
        ),
    ];
    for (name, cr, owner, approve) in rows {
        assert_eq!(decide(&cr, owner, now).status.is_some(), approve, "{name}");
    }
}

#[test]
fn the_approval_is_one_condition() {
    let crt = ours();
    let plan = decide(
        &request_of(&crt),
        Some(&crt),
        fixtures::at("2026-02-01T00:00:00Z"),
    );
    assert_eq!((&plan.event, &plan.next), (&None, &Next::AwaitChange));
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
fn a_request_whose_certificate_is_not_cached_yet_is_looked_at_again() {
    let crt = ours();
    let mine = request_of(&crt);
    let mut no_owner = request_of(&crt);
    no_owner.metadata.owner_references = None;
    let mut foreign = request_of(&crt);
    foreign.spec.issuer_ref.group = "cert-manager.io".into();
    let rows = [
        ("ours, Certificate not cached yet", &mine, None, true),
        ("ours, Certificate cached", &mine, Some(&crt), false),
        ("already approved", &with(mine.clone(), APPROVED), None, false),
        ("already denied", &with(mine.clone(), DENIED), None, false),
        ("made by hand, no owner", &no_owner, None, false),
        ("another issuer group", &foreign, None, false),
    ];
    for (name, cr, owner, want) in rows {
        assert_eq!(owner_not_seen_yet(cr, owner), want, "{name}");
        let next = if want { Next::Backoff } else { Next::AwaitChange };
        assert_eq!(
            decide(cr, owner, fixtures::at("2026-02-01T00:00:00Z")).next,
            next,
            "{name}"
        );
    }
}
