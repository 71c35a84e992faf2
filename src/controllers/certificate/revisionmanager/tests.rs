use super::*;
use crate::certificates::fixtures;
use crate::certificates::keys::annotation;
use crate::controllers::certificate::testing::{deleted, with_condition};

fn request(name: &str, revision: Option<&str>) -> CertificateRequest {
    let mut cr = fixtures::request_for(&fixtures::spec(), fixtures::ec());
    cr.metadata.name = Some(name.to_string());
    cr.metadata.uid = Some(format!("uid-{name}"));
    if let Some(r) = revision {
        cr.metadata.annotations =
            Some([(annotation::CERTIFICATE_REVISION.to_string(), r.to_string())].into());
    }
    cr
}

#[test]
fn revision_history_table() {
    let requests = [
        request("r3", Some("3")),
        request("r1", Some("1")),
        request("r10", Some("10")),
        request("r2", Some("2")),
        request("bad", Some("x")),
        request("none", None),
    ];
    let all: Vec<&CertificateRequest> = requests.iter().collect();
    let ready = |limit: Option<i32>| {
        let mut crt = fixtures::certificate("web", fixtures::spec());
        crt.spec.revision_history_limit = limit;
        with_condition(crt, READY, "True", "Ready", "2026-02-01T00:00:00Z")
    };
    let not_ready = with_condition(
        fixtures::certificate("web", fixtures::spec()),
        READY,
        "False",
        "Expired",
        "2026-02-01T00:00:00Z",
    );
    let rows: [(&str, Certificate, Vec<&str>); 5] = [
        ("unset limit keeps one", ready(None), vec!["r1", "r2", "r3"]),
        ("limit 2", ready(Some(2)), vec!["r1", "r2"]),
        ("limit above the count", ready(Some(9)), vec![]),
        ("limit 0 counts as 1", ready(Some(0)), vec!["r1", "r2", "r3"]),
        ("not Ready: nothing", not_ready, vec![]),
    ];
    for (name, crt, doomed) in rows {
        assert_eq!(deleted(&decide(&crt, &all)), doomed, "{name}");
    }
}
