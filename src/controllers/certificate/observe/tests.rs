use std::collections::BTreeMap;

use super::*;
use crate::certificates::fixtures;

fn request(revision: Option<&str>) -> Arc<CertificateRequest> {
    let mut cr = fixtures::request_for(&fixtures::spec(), fixtures::ec());
    cr.metadata.annotations = revision
        .map(|r| BTreeMap::from([("cert-manager.io/certificate-revision".to_string(), r.to_string())]));
    Arc::new(cr)
}

fn at_revision(revision: Option<i64>) -> Certificate {
    let mut crt = fixtures::certificate("web", fixtures::spec());
    crt.status = revision.map(|r| crate::api::certmanager::CertificateStatus {
        revision: Some(r),
        ..Default::default()
    });
    crt
}

/// cert-manager's gatherer: two requests for the current or the next revision skip the sync
/// with its error; one each, or duplicates of other revisions, do not.
#[test]
fn duplicate_requests_as_cert_managers_gatherer() {
    let current = "multiple CertificateRequests were found for the 'current' revision 2, \
                   issuance is skipped until there are no more duplicates";
    let next = |n: i64| {
        format!(
            "multiple CertificateRequests were found for the 'next' revision {n}, \
             issuance is skipped until there are no more duplicates"
        )
    };
    let rows = [
        ("none", None, vec![], None),
        ("one next", None, vec![request(Some("1"))], None),
        (
            "two next, no revision yet",
            None,
            vec![request(Some("1")), request(Some("1"))],
            Some(next(1)),
        ),
        (
            "two current",
            Some(2),
            vec![request(Some("2")), request(Some("2"))],
            Some(current.to_string()),
        ),
        (
            "two current and two next: current first",
            Some(2),
            vec![
                request(Some("3")),
                request(Some("2")),
                request(Some("3")),
                request(Some("2")),
            ],
            Some(current.to_string()),
        ),
        (
            "two next",
            Some(2),
            vec![request(Some("2")), request(Some("3")), request(Some("3"))],
            Some(next(3)),
        ),
        (
            "two of an old revision",
            Some(2),
            vec![request(Some("1")), request(Some("1"))],
            None,
        ),
        (
            "two without a revision",
            Some(2),
            vec![request(None), request(None)],
            None,
        ),
    ];
    for (name, revision, requests, want) in rows {
        assert_eq!(
            duplicate_requests(&at_revision(revision), &requests),
            want,
            "{name}"
        );
    }
}
