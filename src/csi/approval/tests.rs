use k8s_openapi::ByteString;

use super::*;
use crate::csi::attributes::key;
use crate::csi::testing::{plugin_request, pod};
use crate::pki::keys::KeySpec;

/// Computed apart with `sha256sum` of the UID and name concatenated.
#[test]
fn volume_handle_is_kubelets() {
    let rows = [
        (
            ("0b9d", "tls"),
            "csi-028f171a6cae1add512fadad7500a4630abb669b5303ac006f4d19c11f3bba84",
        ),
        (
            ("0b9d", "certs"),
            "csi-e21e94724da2289ffcbb0b136b446086ad1f23a78c18142532ccf90a3c935d02",
        ),
    ];
    for ((uid, volume), want) in rows {
        assert_eq!(volume_handle(uid, volume), want, "{uid} {volume}");
    }
}

#[test]
fn the_context_is_the_attributes_under_kubelets_pod_info() {
    let pod = pod(&[(kubelet::POD_NAME, "forged"), (key::ISSUER_NAME, "ca")]);
    let given = BTreeMap::from([
        (kubelet::POD_NAME.to_string(), "forged".to_string()),
        (key::ISSUER_NAME.to_string(), "ca".to_string()),
    ]);
    let context = volume_context(&given, &pod_info(&pod));
    let want: BTreeMap<String, String> = [
        (kubelet::POD_NAME, "web-0"),
        (kubelet::POD_NAMESPACE, "shop"),
        (kubelet::POD_UID, "0b9d"),
        (kubelet::SERVICE_ACCOUNT_NAME, "web"),
        (kubelet::EPHEMERAL, "true"),
        (key::ISSUER_NAME, "ca"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(context, want);
}

#[test]
fn the_volume_is_found_by_its_hashed_id_and_driver_only() {
    let pod = pod(&[(key::ISSUER_NAME, "ca"), (key::DNS_NAMES, "${POD_NAME}.svc")]);
    let tls = hash_identifier(&volume_handle("0b9d", "tls"));
    let found = volume_of(&pod, &tls).expect("tls is found");
    assert_eq!(
        (found.name.as_str(), found.id.as_str()),
        ("tls", volume_handle("0b9d", "tls").as_str())
    );
    assert_eq!(found.attributes.expect("valid").dns_names, ["web-0.svc"]);

    let mut foreign = pod.clone();
    for volume in foreign.spec.as_mut().unwrap().volumes.as_mut().unwrap() {
        if let Some(csi) = volume.csi.as_mut() {
            csi.driver = "csi.cert-manager.io".into();
        }
    }
    let rows = [
        (
            "the emptyDir's ID",
            &pod,
            hash_identifier(&volume_handle("0b9d", "cache")),
        ),
        ("another driver's volume", &foreign, tls.clone()),
        (
            "another pod's volume",
            &pod,
            hash_identifier(&volume_handle("0b9e", "tls")),
        ),
    ];
    for (why, pod, hash) in rows {
        assert_eq!(volume_of(pod, &hash), None, "{why}");
    }
}

#[test]
fn invalid_attributes_are_found_with_their_problems() {
    let pod = pod(&[(key::ISSUER_NAME, "ca"), (key::IS_CA, "maybe")]);
    let found = volume_of(&pod, &hash_identifier(&volume_handle("0b9d", "tls"))).expect("found");
    let message = found.attributes.expect_err("invalid").to_string();
    assert!(message.contains(key::IS_CA), "{message}");
}

/// A case: why, what changes in the request, the fields named.
type Row<'a> = (&'a str, &'a dyn Fn(&mut CertificateRequest), &'a [&'a str]);

/// The plugin's own request matches; each field a forger changes is named.
#[test]
fn request_differs_table() {
    let attrs = [
        (key::ISSUER_NAME, "ca"),
        (key::DNS_NAMES, "${POD_NAME}.svc"),
        (key::KEY_ALGORITHM, "ECDSA"),
    ];
    let pod = pod(&attrs);
    let attributes = volume_of(&pod, &hash_identifier(&volume_handle("0b9d", "tls")))
        .expect("found")
        .attributes
        .expect("valid");
    let genuine = plugin_request(&pod, "tls", "node-1");
    let other_dns = {
        let mut asked = attrs.to_vec();
        asked[1] = (key::DNS_NAMES, "admin.svc");
        plugin_request(&crate::csi::testing::pod(&asked), "tls", "node-1")
            .spec
            .request
    };
    let rsa = {
        let mut asked = attrs.to_vec();
        asked[2] = (key::KEY_ALGORITHM, "RSA");
        plugin_request(&crate::csi::testing::pod(&asked), "tls", "node-1")
            .spec
            .request
    };
    let set_dns = |r: &mut CertificateRequest| r.spec.request = other_dns.clone();
    let set_key = |r: &mut CertificateRequest| r.spec.request = rsa.clone();
    let rows: [Row; 8] = [
        ("the plugin's own", &|_| {}, &[]),
        ("another DNS name", &set_dns, &["spec.dnsNames"]),
        ("another key algorithm", &set_key, &["spec.privateKey"]),
        (
            "another issuer",
            &|r| r.spec.issuer_ref.name = "root".into(),
            &["spec.issuerRef"],
        ),
        ("a CA", &|r| r.spec.is_ca = true, &["spec.isCA"]),
        (
            "other usages",
            &|r| r.spec.usages = vec!["client auth".into()],
            &["spec.usages"],
        ),
        (
            "a longer duration",
            &|r| r.spec.duration = Some("8760h0m0s".into()),
            &["spec.duration"],
        ),
        ("no duration", &|r| r.spec.duration = None, &["spec.duration"]),
    ];
    for (why, edit, want) in rows {
        let mut request = genuine.clone();
        edit(&mut request);
        assert_eq!(
            request_differs(&request, &attributes),
            Ok(want.iter().map(ToString::to_string).collect()),
            "{why}"
        );
    }
    let mut unreadable = genuine.clone();
    unreadable.spec.request = ByteString(b"not a CSR".to_vec());
    assert!(request_differs(&unreadable, &attributes).is_err());
    assert_eq!(attributes.key, KeySpec::Ecdsa(256));
}
