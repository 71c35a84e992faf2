//! Which of our issuers a Kubernetes CertificateSigningRequest's `signerName` names.
//!
//! `clusterissuers.<group>/<name>` names a ClusterIssuer (its name may hold dots);
//! `issuers.<group>/<namespace>.<name>` an Issuer (a namespace never holds a dot, so the first
//! one splits). Anything else is another signer's, never touched.

use crate::api::{GROUP, IssuerKind};
use crate::controllers::signing::IssuerName;

/// Pure: the issuer `signer_name` names, when it is one of ours. `namespaced`: whether
/// namespaced Issuers sign CSRs here (when not, their names are foreign, as in issuer-lib).
pub fn parse(signer_name: &str, namespaced: bool) -> Option<IssuerName> {
    let (type_, name) = signer_name.split_once('/')?;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let (plural, group) = type_.split_once('.')?;
    if group != GROUP {
        return None;
    }
    match plural {
        "clusterissuers" => Some(IssuerName {
            kind: IssuerKind::ClusterIssuer,
            namespace: None,
            name: name.to_string(),
        }),
        "issuers" if namespaced => {
            let (namespace, name) = name.split_once('.')?;
            (!namespace.is_empty() && !name.is_empty()).then(|| IssuerName {
                kind: IssuerKind::Issuer,
                namespace: Some(namespace.to_string()),
                name: name.to_string(),
            })
        }
        _ => None,
    }
}

/// What the API server's NotFound error says of a missing one.
pub fn not_found(issuer: &IssuerName) -> String {
    let plural = match issuer.kind {
        IssuerKind::Issuer => "issuers",
        IssuerKind::ClusterIssuer => "clusterissuers",
    };
    format!("{plural}.{GROUP} {:?} not found", issuer.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str) -> Option<IssuerName> {
        Some(IssuerName {
            kind: IssuerKind::ClusterIssuer,
            namespace: None,
            name: name.into(),
        })
    }

    fn issuer(ns: &str, name: &str) -> Option<IssuerName> {
        Some(IssuerName {
            kind: IssuerKind::Issuer,
            namespace: Some(ns.into()),
            name: name.into(),
        })
    }

    #[test]
    fn parse_table() {
        // (signer name, namespaced signers on, want)
        let cases = [
            (
                "clusterissuers.cfssl-issuer.wikimedia.org/ca",
                true,
                cluster("ca"),
            ),
            (
                "clusterissuers.cfssl-issuer.wikimedia.org/ca.internal",
                true,
                cluster("ca.internal"),
            ),
            (
                "clusterissuers.cfssl-issuer.wikimedia.org/ca",
                false,
                cluster("ca"),
            ),
            (
                "issuers.cfssl-issuer.wikimedia.org/team-a.ca",
                true,
                issuer("team-a", "ca"),
            ),
            (
                "issuers.cfssl-issuer.wikimedia.org/team-a.ca.v2",
                true,
                issuer("team-a", "ca.v2"),
            ),
            ("issuers.cfssl-issuer.wikimedia.org/team-a.ca", false, None),
            ("issuers.cfssl-issuer.wikimedia.org/ca", true, None),
            ("issuers.cfssl-issuer.wikimedia.org/.ca", true, None),
            ("issuers.cfssl-issuer.wikimedia.org/team-a.", true, None),
            ("clusterissuers.cfssl-issuer.wikimedia.org/", true, None),
            ("clusterissuers.cfssl-issuer.wikimedia.org/a/b", true, None),
            ("clusterissuers.cert-manager.io/ca", true, None),
            ("issuers.cert-manager.io/team-a.ca", true, None),
            ("certificaterequests.cfssl-issuer.wikimedia.org/ca", true, None),
            ("kubernetes.io/kube-apiserver-client", true, None),
            ("example.com/x", true, None),
            ("clusterissuers.cfssl-issuer.wikimedia.org", true, None),
            ("", true, None),
        ];
        for (name, namespaced, want) in cases {
            assert_eq!(parse(name, namespaced), want, "{name} namespaced={namespaced}");
        }
    }

    #[test]
    fn describe_and_not_found() {
        for (name, described, missing) in [
            (
                "clusterissuers.cfssl-issuer.wikimedia.org/ca.internal",
                "ClusterIssuer ca.internal",
                "clusterissuers.cfssl-issuer.wikimedia.org \"ca.internal\" not found",
            ),
            (
                "issuers.cfssl-issuer.wikimedia.org/team-a.ca",
                "Issuer team-a/ca",
                "issuers.cfssl-issuer.wikimedia.org \"ca\" not found",
            ),
        ] {
            let signer = parse(name, true).expect(name);
            assert_eq!(signer.describe(), described);
            assert_eq!(not_found(&signer), missing);
        }
    }
}
