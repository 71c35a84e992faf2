//! Namespace-scoped installs (`--namespace`, the chart's `scope.namespaces`, kustomize's
//! `namespace-scoped` components): the manager's exact grants, with Roles in the served
//! namespaces and no ClusterRole on Secrets; and no cert-manager approver binding in
//! standalone installs.

use super::*;

/// What a namespace-scoped manager may do: in each of `served`, what the base ClusterRole
/// grants for namespaced kinds (and standalone, the Certificate controllers'); ClusterIssuers
/// and our CRDs cluster-wide; Secrets read in `home` (the cluster resource namespace);
/// Events of cluster-scoped objects in `default`.
fn scoped_grants(served: &[&str], home: &str, standalone: bool) -> BTreeSet<Grant> {
    const READ: &[&str] = &["get", "list", "watch"];
    let mut set = grants(
        "*",
        &[
            ("cfssl-issuer.wikimedia.org", &["clusterissuers"], READ),
            (
                "cfssl-issuer.wikimedia.org",
                &["clusterissuers/status"],
                &["patch"],
            ),
        ],
    );
    set.extend(issuer_crd_grants());
    set.extend(grants(home, &[("", &["secrets"], READ)]));
    set.extend(grants(
        "default",
        &[("events.k8s.io", &["events"], &["create", "patch"])],
    ));
    for namespace in served {
        set.extend(grants(
            namespace,
            &[
                ("cfssl-issuer.wikimedia.org", &["issuers"], READ),
                ("cfssl-issuer.wikimedia.org", &["issuers/status"], &["patch"]),
                ("cert-manager.io", &["certificaterequests"], READ),
                ("cert-manager.io", &["certificaterequests/status"], &["patch"]),
                ("", &["secrets"], READ),
                ("events.k8s.io", &["events"], &["create", "patch"]),
            ],
        ));
        if standalone {
            set.extend(grants(
                namespace,
                &[
                    ("cert-manager.io", &["certificates"], READ),
                    ("cert-manager.io", &["certificates/status"], &["patch"]),
                    ("cert-manager.io", &["certificates/finalizers"], &["update"]),
                    ("cert-manager.io", &["certificaterequests"], &["create", "delete"]),
                    ("", &["secrets"], &["create", "update", "patch", "delete"]),
                    ("", &["pods"], &["get"]),
                ],
            ));
        }
    }
    if standalone {
        for signers in [
            "issuers.cfssl-issuer.wikimedia.org/*",
            "clusterissuers.cfssl-issuer.wikimedia.org/*",
        ] {
            set.insert((
                "*".into(),
                "cert-manager.io".into(),
                "signers".into(),
                "approve".into(),
                signers.into(),
            ));
        }
        for verb in READ {
            set.insert((
                "kube-system".into(),
                "coordination.k8s.io".into(),
                "leases".into(),
                (*verb).into(),
                "cert-manager-controller".into(),
            ));
        }
    }
    set
}

/// The manager of a namespace-scoped rendering: `--namespace` for each of `served`, exactly
/// [`scoped_grants`] (with leader election's and the CSR controller's), no ClusterRole
/// granting anything on Secrets.
fn assert_namespace_scoped(docs: &[Value], served: &[&str], standalone: bool) {
    assert_no_wildcards(docs);
    for role in kind(docs, "ClusterRole") {
        let secrets: Vec<_> = expand(role, "*")
            .into_iter()
            .filter(|(_, group, resource, ..)| group.is_empty() && resource == "secrets")
            .collect();
        assert!(
            secrets.is_empty(),
            "ClusterRole {} grants {secrets:?}",
            name(role)
        );
    }
    let deploy = one(docs, "Deployment");
    assert_hardened(deploy, true);
    assert_binary_accepts(deploy);
    let args = strings(&deploy["spec"]["template"]["spec"]["containers"][0]["args"]);
    let flags: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| a.starts_with("--namespace"))
        .collect();
    let want: Vec<String> = served.iter().map(|ns| format!("--namespace={ns}")).collect();
    assert_eq!(flags, want, "in {args:?}");
    let sa = one(docs, "ServiceAccount");
    let namespace = sa["metadata"]["namespace"].as_str().expect("namespace");
    let mut expected = scoped_grants(served, NAMESPACE, standalone);
    expected.extend(leader_election_grants(namespace));
    expected.extend(kubernetes_csr_grants(KubernetesCsr::AllSigners));
    let actual = grants_of(docs, namespace, name(sa));
    let extra: Vec<_> = actual.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&actual).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "RBAC: extra {extra:?}, missing {missing:?}"
    );
}

/// No binding lets cert-manager's ServiceAccount approve anything.
fn assert_no_approver(docs: &[Value]) {
    let approvers: Vec<&str> = kind(docs, "ClusterRoleBinding")
        .into_iter()
        .filter(|b| binds(b, "cert-manager", "cert-manager"))
        .map(name)
        .collect();
    assert!(approvers.is_empty(), "approver bindings {approvers:?}");
}

#[test]
fn kustomize_namespace_scoped_component_grants_no_secrets_cluster_wide() {
    let docs = overlay_with("namespace-scoped", &["namespace-scoped"]);
    assert_namespace_scoped(&docs, &["team-a"], false);
    assert_standalone_parts(&docs, false, false);
    assert_approver(&docs, "cert-manager", "cert-manager");
}

#[test]
fn kustomize_namespace_scoped_standalone_grants_no_secrets_cluster_wide() {
    let docs = overlay_with(
        "namespace-scoped-standalone",
        &[
            "certificate-controllers",
            "namespace-scoped",
            "namespace-scoped-certificate-controllers",
        ],
    );
    assert_namespace_scoped(&docs, &["team-a"], true);
    assert_standalone_parts(&docs, true, true);
    assert_no_approver(&docs);
}

/// Standalone mode approves its own requests: no binding for cert-manager's approver, and its
/// ClusterRole and binding are named as the rest of the install.
#[test]
fn kustomize_standalone_has_no_approver_binding_and_prefixed_names() {
    let docs = overlay_with("standalone-names", &["certificate-controllers"]);
    assert_no_approver(&docs);
    for kind_ in ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"] {
        for doc in kind(&docs, kind_) {
            assert!(name(doc).starts_with("cfssl-issuer-"), "{kind_} {}", name(doc));
        }
    }
}

#[test]
fn chart_namespace_scoped_values_grant_no_secrets_cluster_wide() {
    let docs = chart_case("namespace-scoped");
    assert_namespace_scoped(&docs, &["team-a", "team-b"], false);
    assert_standalone_parts(&docs, false, false);
    assert_approver(&docs, "cert-manager", "cert-manager");
}

#[test]
fn chart_namespace_scoped_standalone_values_grant_no_secrets_cluster_wide() {
    let docs = chart_case("namespace-scoped-standalone");
    assert_namespace_scoped(&docs, &["team-a"], true);
    assert_standalone_parts(&docs, true, true);
    assert_no_approver(&docs);
}

#[test]
fn chart_standalone_renders_no_approver_binding_unless_asked() {
    assert_no_approver(&chart_case("standalone"));
}
