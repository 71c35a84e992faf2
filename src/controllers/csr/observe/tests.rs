use std::collections::BTreeMap;

use super::*;

fn spec(expiration: Option<i32>, usages: &[&str]) -> CertificateSigningRequestSpec {
    CertificateSigningRequestSpec {
        expiration_seconds: expiration,
        usages: Some(usages.iter().map(ToString::to_string).collect()),
        signer_name: "clusterissuers.cfssl-issuer.wikimedia.org/ca".into(),
        ..CertificateSigningRequestSpec::default()
    }
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ok(seconds: u64, is_ca: bool, usages: &[&str]) -> Result<Asks, Invalid> {
    Ok(Asks {
        duration: Duration::from_secs(seconds),
        is_ca,
        usages: usages.iter().map(ToString::to_string).collect(),
    })
}

#[test]
fn asks_table() {
    let parse_error = |text: &str| {
        Err(Invalid {
            reason: "ErrorParseDuration",
            message: format!(
                "Failed to parse requested duration: experimental.cert-manager.io/request-duration {text:?} is not a duration"
            ),
        })
    };
    let sign = ["digital signature"];
    // (row, annotations, spec, want)
    let cases = [
        (
            "nothing asked: 90 days, default usages",
            annotations(&[]),
            spec(None, &[]),
            ok(2160 * 3600, false, &["digital signature", "key encipherment"]),
        ),
        (
            "expirationSeconds",
            annotations(&[]),
            spec(Some(3600), &sign),
            ok(3600, false, &sign),
        ),
        (
            "the annotation wins over expirationSeconds",
            annotations(&[(REQUEST_DURATION, "2h30m")]),
            spec(Some(3600), &sign),
            ok(9000, false, &sign),
        ),
        (
            "is-ca true",
            annotations(&[(REQUEST_IS_CA, "true")]),
            spec(None, &sign),
            ok(2160 * 3600, true, &sign),
        ),
        (
            "is-ca anything else",
            annotations(&[(REQUEST_IS_CA, "yes")]),
            spec(None, &sign),
            ok(2160 * 3600, false, &sign),
        ),
        (
            "unparseable annotation",
            annotations(&[(REQUEST_DURATION, "ten days")]),
            spec(None, &sign),
            parse_error("ten days"),
        ),
        (
            "negative annotation",
            annotations(&[(REQUEST_DURATION, "-1h")]),
            spec(None, &sign),
            parse_error("-1h"),
        ),
        (
            "annotation under ten minutes",
            annotations(&[(REQUEST_DURATION, "5m")]),
            spec(None, &sign),
            Err(Invalid {
                reason: "InvalidDuration",
                message: "CertificateSigningRequest minimum allowed duration is 10m0s, requested 5m0s".into(),
            }),
        ),
        (
            "expirationSeconds under ten minutes (a lax server)",
            annotations(&[]),
            spec(Some(60), &sign),
            Err(Invalid {
                reason: "InvalidDuration",
                message: "CertificateSigningRequest minimum allowed duration is 10m0s, requested 1m0s".into(),
            }),
        ),
        (
            "unknown usage (a lax server)",
            annotations(&[]),
            spec(None, &["digital signature", "time travel"]),
            Err(Invalid {
                reason: "Failed",
                message: "CertificateSigningRequest has failed permanently: unknown usage \"time travel\""
                    .into(),
            }),
        ),
    ];
    for (row, annotations, spec, want) in cases {
        assert_eq!(asks(Some(&annotations), &spec), want, "{row}");
    }
}

#[test]
fn the_review_asks_for_reference_on_signers_as_the_requester() {
    let mut spec = spec(None, &[]);
    spec.username = Some("alice".into());
    spec.groups = Some(vec!["team-a".into(), "system:authenticated".into()]);
    spec.uid = Some("u-1".into());
    spec.extra = Some(BTreeMap::from([("scopes".to_string(), vec!["x".to_string()])]));
    let review = review(&spec, "team-a", "ca");
    assert_eq!(
        serde_json::to_value(&review).unwrap(),
        serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "metadata": {},
            "spec": {
                "user": "alice",
                "groups": ["team-a", "system:authenticated"],
                "uid": "u-1",
                "extra": {"scopes": ["x"]},
                "resourceAttributes": {
                    "group": "cfssl-issuer.wikimedia.org",
                    "resource": "signers",
                    "verb": "reference",
                    "namespace": "team-a",
                    "name": "ca",
                    "version": "*",
                },
            },
        })
    );
}
