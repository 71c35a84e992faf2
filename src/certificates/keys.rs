//! The names cert-manager gives to annotations, labels and Secret data keys, one place for all
//! the Certificate controllers (pkg/apis/certmanager/v1/types.go).

/// Annotations on a Certificate's Secret that say which Certificate and issuer it came from.
pub mod annotation {
    pub const ISSUER_NAME: &str = "cert-manager.io/issuer-name";
    pub const ISSUER_KIND: &str = "cert-manager.io/issuer-kind";
    pub const ISSUER_GROUP: &str = "cert-manager.io/issuer-group";
    pub const CERTIFICATE_NAME: &str = "cert-manager.io/certificate-name";
    pub const COMMON_NAME: &str = "cert-manager.io/common-name";
    pub const ALT_NAMES: &str = "cert-manager.io/alt-names";
    pub const IP_SANS: &str = "cert-manager.io/ip-sans";
    pub const URI_SANS: &str = "cert-manager.io/uri-sans";
    pub const EMAIL_SANS: &str = "cert-manager.io/email-sans";
    pub const SUBJECT_ORGANIZATIONS: &str = "cert-manager.io/subject-organizations";
    pub const SUBJECT_ORGANIZATIONAL_UNITS: &str = "cert-manager.io/subject-organizationalunits";
    pub const SUBJECT_COUNTRIES: &str = "cert-manager.io/subject-countries";
    pub const SUBJECT_PROVINCES: &str = "cert-manager.io/subject-provinces";
    pub const SUBJECT_LOCALITIES: &str = "cert-manager.io/subject-localities";
    pub const SUBJECT_STREET_ADDRESSES: &str = "cert-manager.io/subject-streetaddresses";
    pub const SUBJECT_POSTAL_CODES: &str = "cert-manager.io/subject-postalcodes";
    pub const SUBJECT_SERIAL_NUMBER: &str = "cert-manager.io/subject-serialnumber";
    /// The only `cert-manager.io/` annotation a `secretTemplate` may set.
    pub const ALLOW_DIRECT_INJECTION: &str = "cert-manager.io/allow-direct-injection";
    /// On a Certificate: issue a temporary self-signed certificate while the real one is pending.
    pub const ISSUE_TEMPORARY_CERTIFICATE: &str = "cert-manager.io/issue-temporary-certificate";
    /// On a CertificateRequest: the Certificate revision it was made for.
    pub const CERTIFICATE_REVISION: &str = "cert-manager.io/certificate-revision";
    /// On a CertificateRequest: the Secret holding the private key its CSR was made with.
    pub const PRIVATE_KEY_SECRET_NAME: &str = "cert-manager.io/private-key-secret-name";
}

/// Labels cert-manager puts on the Secrets it manages.
pub mod label {
    /// Secrets cert-manager caches in full (everything else: metadata only).
    pub const PART_OF_CERT_MANAGER: &str = "controller.cert-manager.io/fao";
    /// The Secret holding the private key for the next revision.
    pub const NEXT_PRIVATE_KEY: &str = "cert-manager.io/next-private-key";
}

/// Keys of a Certificate's Secret `data`.
pub mod data {
    pub const TLS_CRT: &str = "tls.crt";
    pub const TLS_KEY: &str = "tls.key";
    pub const CA_CRT: &str = "ca.crt";
    /// `additionalOutputFormats: DER`.
    pub const KEY_DER: &str = "key.der";
    /// `additionalOutputFormats: CombinedPEM`.
    pub const COMBINED_PEM: &str = "tls-combined.pem";
    pub const PKCS12_KEYSTORE: &str = "keystore.p12";
    pub const PKCS12_TRUSTSTORE: &str = "truststore.p12";
    pub const JKS_KEYSTORE: &str = "keystore.jks";
    pub const JKS_TRUSTSTORE: &str = "truststore.jks";
}
