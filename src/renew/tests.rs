use super::*;

fn args(names: &[&str], all: bool, all_namespaces: bool, selector: &str) -> RenewArgs {
    RenewArgs {
        names: names.iter().map(ToString::to_string).collect(),
        namespace: None,
        all,
        all_namespaces,
        selector: selector.into(),
    }
}

#[test]
fn validate_takes_exactly_one_way_to_choose_as_cmctl() {
    let both = "cannot specify the Certificate resource names [\"a\"] in conjunction with the --all flag and a label selector";
    let cases: [(RenewArgs, Option<&str>); 7] = [
        (args(&["a"], false, false, ""), None),
        (args(&[], true, false, ""), None),
        (args(&[], false, true, "app=x"), None),
        (args(&[], true, true, ""), None),
        (
            args(&[], false, false, ""),
            Some(
                "please either supply one or more Certificate resource names, label selectors, or use the --all flag to renew all Certificate resources",
            ),
        ),
        (args(&["a"], true, false, "app=x"), Some(both)),
        (
            args(&["a"], false, true, ""),
            Some("cannot specify Certificate names in conjunction with --all-namespaces flag"),
        ),
    ];
    for (args, want) in cases {
        let got = validate(&args).err().map(|e| e.to_string());
        assert_eq!(got.as_deref(), want, "{args:?}");
    }
}

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn condition(type_: &str, status: &str, reason: &str, at: &str) -> serde_json::Value {
    serde_json::json!({
        "type": type_, "status": status, "reason": reason, "message": "m",
        "lastTransitionTime": at, "observedGeneration": 1,
    })
}

fn crt(conditions: Vec<serde_json::Value>) -> Certificate {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": { "name": "web", "namespace": "ns", "generation": 3, "resourceVersion": "42" },
        "spec": { "secretName": "web-tls", "issuerRef": { "name": "ca" } },
        "status": { "conditions": conditions },
    }))
    .expect("certificate")
}

fn issuing(at: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "Issuing", "status": "True", "reason": REASON, "message": MESSAGE,
        "lastTransitionTime": at, "observedGeneration": 3,
    })
}

#[test]
fn the_patch_keeps_other_conditions_and_sets_issuing_as_cmctl() {
    let now = "2026-01-02T03:04:05Z";
    let then = "2025-12-01T00:00:00Z";
    let ready = condition("Ready", "True", "Ready", then);
    let cases = [
        // No status: Issuing appended.
        (vec![], vec![issuing(now)]),
        // Ready kept, Issuing appended after it.
        (vec![ready.clone()], vec![ready.clone(), issuing(now)]),
        // Issuing=False (after an issuance or a failure): replaced in place, a transition now.
        (
            vec![condition("Issuing", "False", "Failed", then), ready.clone()],
            vec![issuing(now), ready.clone()],
        ),
        // Already Issuing=True: reason and message overwritten, transition time kept.
        (
            vec![ready.clone(), condition("Issuing", "True", "DoesNotExist", then)],
            vec![ready.clone(), issuing(then)],
        ),
    ];
    for (before, want) in cases {
        let got = issuing_patch(&crt(before.clone()), ts(now));
        let want = serde_json::json!({
            "metadata": { "resourceVersion": "42" },
            "status": { "conditions": want },
        });
        assert_eq!(got, want, "{before:?}");
    }
}
