//! The name of a Certificate's next-private-key Secret: derived from its UID, so a retry after
//! a crash finds the Secret it made instead of making a second one, and so the controllers
//! find it without `status.nextPrivateKeySecretName`, which they neither write nor trust:
//! whoever may write a Certificate's status cannot point it at another Secret's key.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use sha2::{Digest, Sha256};

use crate::api::certmanager::Certificate;
use crate::certificates::keys::data;
use crate::certificates::rotation::RotationPolicy;
use crate::certificates::secret::data_of;
use crate::pki::keys::{Key, KeyError, KeySpec};

/// The deterministic name of `crt`'s next-key Secret. Never the target Secret's name, which
/// anyone who reads the Certificate's UID could give it: that Secret is never taken for a key
/// Secret, so the key Secret could then never be made.
pub fn next_key_name(crt: &Certificate) -> String {
    let name = crt.name_any();
    let digest = hex::encode(Sha256::digest(crt.uid().unwrap_or_default().as_bytes()));
    let prefix: String = name.chars().take(253 - 9).collect();
    let prefix = prefix.trim_end_matches(['-', '.']);
    let first = format!("{prefix}-{}", &digest[..8]);
    if first == crt.spec.secret_name {
        format!("{prefix}-{}", &digest[8..16])
    } else {
        first
    }
}

/// Whether `secret` carries cert-manager's next-private-key label (`true`): what makes it a
/// key Secret, once its owner and name say it is one of the Certificate's.
pub fn labelled(secret: &Secret) -> bool {
    secret
        .labels()
        .get(crate::certificates::keys::label::NEXT_PRIVATE_KEY)
        .is_some_and(|v| v == "true")
}

/// Why no next key can be made for `crt`: its spec asks for an RSA size the crypto provider
/// cannot generate ([`KeySpec::can_generate`]) and no key fitting the spec is reused from the
/// target Secret (`rotationPolicy: Never`). `None` when a key can be had (or the key spec is
/// invalid, which validation reports).
pub fn cannot_make(crt: &Certificate, target: Option<&Secret>) -> Option<KeyError> {
    let private_key = crt.spec.private_key.as_ref();
    let spec = KeySpec::of(private_key).ok()?;
    let refusal = spec.can_generate().err()?;
    let reused = RotationPolicy::of(private_key) == Some(RotationPolicy::Never)
        && target
            .and_then(|s| Key::from_pem(data_of(s, data::TLS_KEY)).ok())
            .is_some_and(|key| key.matches(spec));
    (!reused).then_some(refusal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::certmanager::PrivateKey;
    use crate::certificates::fixtures;

    /// A 2500-bit RSA key in PEM: AWS-LC cannot make one, openssl can (cert-manager's Go too).
    fn rsa_2500_pem() -> Vec<u8> {
        let out = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2500"])
            .output()
            .expect("openssl");
        assert!(out.status.success());
        out.stdout
    }

    #[test]
    fn only_an_rsa_size_not_a_multiple_of_128_without_a_key_to_reuse_cannot_be_made() {
        let pem = rsa_2500_pem();
        let with_key = fixtures::secret(&[(data::TLS_KEY, &pem)], &[]);
        let other_key = fixtures::secret(&[(data::TLS_KEY, &fixtures::key_pem(fixtures::ec()))], &[]);
        // (row, algorithm, size, rotationPolicy, target Secret, refused size)
        type Row<'a> = (&'a str, &'a str, i64, &'a str, Option<&'a Secret>, Option<u32>);
        let rows: [Row<'_>; 8] = [
            ("RSA 2560 is made", "RSA", 2560, "", None, None),
            ("RSA 6144 is made", "RSA", 6144, "", None, None),
            ("RSA 2500 is refused", "RSA", 2500, "", None, Some(2500)),
            (
                "Never reuses a fitting key",
                "RSA",
                2500,
                "Never",
                Some(&with_key),
                None,
            ),
            ("Never with no Secret", "RSA", 2500, "Never", None, Some(2500)),
            (
                "Never with a key of another spec",
                "RSA",
                2500,
                "Never",
                Some(&other_key),
                Some(2500),
            ),
            (
                "Always makes a new key",
                "RSA",
                2500,
                "Always",
                Some(&with_key),
                Some(2500),
            ),
            ("an invalid size is validation's", "RSA", 1024, "", None, None),
        ];
        for (row, algorithm, size, policy, target, want) in rows {
            let mut spec = fixtures::spec();
            spec.private_key = Some(PrivateKey {
                algorithm: algorithm.into(),
                size,
                rotation_policy: policy.into(),
                ..PrivateKey::default()
            });
            let crt = fixtures::certificate("c", spec);
            assert_eq!(
                cannot_make(&crt, target),
                want.map(KeyError::CannotGenerate),
                "{row}"
            );
        }
    }
}
