//! Kubernetes API types: our Issuer/ClusterIssuer CRDs and cert-manager kinds.
