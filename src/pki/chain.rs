//! Certificate chains: what goes into `status.certificate` (leaf first, then intermediates) and
//! what goes into `status.ca` (the root, only when known).

use x509_parser::error::X509Error;
use x509_parser::prelude::{FromDer, ParsedExtension, X509Certificate};

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("no PEM certificate found")]
    Empty,
    #[error("not PEM: {0}")]
    NotPem(#[source] rustls_pki_types::pem::Error),
    #[error("certificate {index} does not parse: {source}")]
    Malformed {
        index: usize,
        #[source]
        source: x509_parser::nom::Err<X509Error>,
    },
    #[error("the certificate is for a different key than the CSR")]
    KeyMismatch,
    /// In the CA's own chain (leaf first), certificate `index` did not issue the one before it.
    #[error("certificate {index} of the CA's chain did not issue certificate {}", .index - 1)]
    Unchained { index: usize },
    #[error("the certificate expired at {not_after}")]
    Expired { not_after: k8s_openapi::jiff::Timestamp },
}

/// A leaf with its intermediates and, when known, the root that anchors them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// PEM, leaf first, then intermediates; never the root.
    pub certificates: String,
    /// PEM root CA, when the CA told us or we could prove it.
    pub ca: Option<String>,
}

impl Chain {
    /// Whether anything beyond the bare leaf is known: an intermediate or the root.
    pub fn has_issuer(&self) -> bool {
        self.ca.is_some() || pem_blocks(&self.certificates).is_ok_and(|d| d.len() > 1)
    }
}

/// The DER of every `CERTIFICATE` block in `pem_text`, in order, each checked to parse.
pub fn certificates_in(pem_text: &str) -> Result<Vec<Vec<u8>>, ChainError> {
    let ders = pem_blocks(pem_text)?;
    for (index, der) in ders.iter().enumerate() {
        parse_at(der, index)?;
    }
    Ok(ders)
}

/// The leaf's `notAfter` (seconds since the epoch): the first certificate only, for metrics.
pub fn leaf_not_after(pem_text: &str) -> Option<i64> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let leaf = CertificateDer::pem_slice_iter(pem_text.as_bytes()).next()?.ok()?;
    let cert = parse_at(&leaf, 0).ok()?;
    Some(cert.validity().not_after.timestamp())
}

/// The DER of every `CERTIFICATE` block, unparsed; at least one. Other blocks are skipped.
/// (rustls-pki-types' PEM reader: on every sign, and several times faster than the `pem`
/// crate's.)
fn pem_blocks(pem_text: &str) -> Result<Vec<Vec<u8>>, ChainError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let ders: Vec<Vec<u8>> = CertificateDer::pem_slice_iter(pem_text.as_bytes())
        .map(|der| der.map(|d| d.to_vec()))
        .collect::<Result<_, _>>()
        .map_err(ChainError::NotPem)?;
    if ders.is_empty() {
        return Err(ChainError::Empty);
    }
    Ok(ders)
}

fn parse_at(der: &[u8], index: usize) -> Result<X509Certificate<'_>, ChainError> {
    X509Certificate::from_der(der)
        .map(|(_, cert)| cert)
        .map_err(|source| ChainError::Malformed { index, source })
}

/// PEM with `\n` line endings, whatever the CA sent.
fn to_pem(ders: &[Vec<u8>]) -> String {
    ders.iter()
        .map(|d| super::pem_lf(&pem::Pem::new("CERTIFICATE", d.clone())))
        .collect()
}

/// Whether `parent` names and identifies the key that issued `child`: subject/issuer names and,
/// when both carry them, authority/subject key identifiers. This picks chain members; it does
/// not authenticate them (the CA is authenticated by TLS and the HMAC exchange, and every relying
/// party verifies the chain), so it skips a signature check that would cost as much as the rest
/// of a sign call.
fn issued_by(child: &X509Certificate, parent: &X509Certificate) -> bool {
    if child.issuer().as_raw() != parent.subject().as_raw() {
        return false;
    }
    match (authority_key_id(child), subject_key_id(parent)) {
        (Some(aki), Some(ski)) => aki == ski,
        _ => true,
    }
}

fn authority_key_id<'a>(cert: &'a X509Certificate) -> Option<&'a [u8]> {
    cert.extensions()
        .iter()
        .find_map(|ext| match ext.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(aki) => aki.key_identifier.as_ref().map(|k| k.0),
            _ => None,
        })
}

fn subject_key_id<'a>(cert: &'a X509Certificate) -> Option<&'a [u8]> {
    cert.extensions()
        .iter()
        .find_map(|ext| match ext.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(ski) => Some(ski.0),
            _ => None,
        })
}

/// A root: issued by itself, proven by its own signature (only checked on the rare `/info` path).
fn is_self_signed(cert: &X509Certificate) -> bool {
    issued_by(cert, cert) && cert.verify_signature(None).is_ok()
}

/// Each certificate of a CA's bundle (leaf first, every one parsed before) issued by the next,
/// signature included: names alone cannot tell a foreign intermediate that shares our
/// intermediate's name and carries no key identifiers. Bundles come from opt-in servers only,
/// so the cost stays off the common sign path.
fn check_links(ders: &[Vec<u8>]) -> Result<(), ChainError> {
    for (index, pair) in ders.windows(2).enumerate() {
        let child = parse_at(&pair[0], index)?;
        let parent = parse_at(&pair[1], index + 1)?;
        let signed = super::signature::verify(
            parent.public_key(),
            &child.signature_algorithm,
            &child.signature_value.data,
            child.tbs_certificate.as_ref(),
        );
        if !issued_by(&child, &parent) || signed.is_err() {
            return Err(ChainError::Unchained { index: index + 1 });
        }
    }
    Ok(())
}

/// Pure: refuses a chain whose leaf is no longer valid at `now` (seconds since the epoch): a
/// CA with a wrong clock or a profile with a past expiry. Gives the leaf's `notAfter` back, so
/// the sign path reads the leaf once for this check and the expiry metric.
pub fn check_not_expired(chain: &Chain, now: i64) -> Result<Option<i64>, ChainError> {
    match leaf_not_after(&chain.certificates) {
        Some(not_after) if not_after <= now => Err(ChainError::Expired {
            not_after: k8s_openapi::jiff::Timestamp::from_second(not_after).unwrap_or_default(),
        }),
        not_after => Ok(not_after),
    }
}

/// Builds the chain for a freshly signed `leaf_pem`.
///
/// `bundle` is the CA's own chain when it sent one (leaf first; cfssl PR #1218 shape) with its
/// root; otherwise `signer_der` (from `/info`) is appended when it provably issued the leaf, and
/// becomes the CA when it is itself a root. `csr_key` is the CSR's SubjectPublicKeyInfo: a
/// certificate for another key is refused.
pub fn complete_chain(
    leaf_pem: &str,
    bundle: Option<(&str, Option<&str>)>,
    signer_der: Option<&[u8]>,
    csr_key: &[u8],
) -> Result<Chain, ChainError> {
    let leaf_der = pem_blocks(leaf_pem)?.swap_remove(0);
    let leaf = parse_at(&leaf_der, 0)?;
    if leaf.public_key().raw != csr_key {
        return Err(ChainError::KeyMismatch);
    }
    if let Some((bundle_pem, root)) = bundle {
        let mut ders = certificates_in(bundle_pem)?;
        if ders[0] != leaf_der {
            ders.insert(0, leaf_der.clone());
        }
        check_links(&ders)?;
        // Re-encoded for `\n` line endings; a root that does not parse is dropped, not the leaf.
        let root = root
            .and_then(|r| certificates_in(r).ok())
            .map(|ders| to_pem(&ders));
        return Ok(Chain {
            certificates: to_pem(&ders),
            ca: root,
        });
    }
    let mut ders = vec![leaf_der.clone()];
    let mut ca = None;
    if let Some(signer_der) = signer_der {
        let signer = parse_at(signer_der, 1)?;
        if issued_by(&leaf, &signer) {
            if is_self_signed(&signer) {
                ca = Some(to_pem(&[signer_der.to_vec()]));
            } else {
                ders.push(signer_der.to_vec());
            }
        }
    }
    Ok(Chain {
        certificates: to_pem(&ders),
        ca,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

    struct Pki {
        root_pem: String,
        int_pem: String,
        leaf_pem: String,
        leaf_by_root_pem: String,
        rotated_int_pem: String,
        leaf_key: Vec<u8>,
    }

    fn ca_params(cn: &str) -> CertificateParams {
        let mut p = CertificateParams::new(vec![]).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        p
    }

    fn pki() -> Pki {
        let root_key = KeyPair::generate().unwrap();
        let root = ca_params("root").self_signed(&root_key).unwrap();
        let root_issuer = Issuer::new(ca_params("root"), &root_key);
        let int_key = KeyPair::generate().unwrap();
        let int = ca_params("int").signed_by(&int_key, &root_issuer).unwrap();
        let int_issuer = Issuer::new(ca_params("int"), &int_key);
        let leaf_key = KeyPair::generate().unwrap();
        // Same name, new key: what a CA shows after rotating its intermediate.
        let rotated = ca_params("int")
            .signed_by(&KeyPair::generate().unwrap(), &root_issuer)
            .unwrap();
        let mut leaf_params = CertificateParams::new(vec!["svc".into()]).unwrap();
        leaf_params.use_authority_key_identifier_extension = true;
        let leaf = leaf_params.signed_by(&leaf_key, &int_issuer).unwrap();
        let leaf_by_root = leaf_params.signed_by(&leaf_key, &root_issuer).unwrap();
        Pki {
            root_pem: root.pem(),
            int_pem: int.pem(),
            leaf_pem: leaf.pem(),
            leaf_by_root_pem: leaf_by_root.pem(),
            rotated_int_pem: rotated.pem(),
            leaf_key: rcgen::PublicKeyData::subject_public_key_info(&leaf_key),
        }
    }

    fn der(pem_text: &str) -> Vec<u8> {
        certificates_in(pem_text).unwrap().swap_remove(0)
    }

    fn count(pem_text: &str) -> usize {
        certificates_in(pem_text).map_or(0, |d| d.len())
    }

    /// One chain to complete: the leaf, the CA's bundle (chain and root) if it sent one, the
    /// signer certificate known from `/info`, and the number of certificates and CA expected.
    struct Case<'a> {
        name: &'a str,
        leaf: &'a str,
        bundle: Option<(&'a str, Option<&'a str>)>,
        signer: Option<&'a str>,
        want_len: usize,
        want_ca: Option<&'a str>,
    }

    #[rustfmt::skip]
    #[test]
    fn chain_completion_table() {
        let p = pki();
        let bundle = format!("{}{}", p.leaf_pem, p.int_pem);
        let cases = [
            Case { name: "intermediate signer is appended",
                leaf: &p.leaf_pem, bundle: None, signer: Some(&p.int_pem), want_len: 2, want_ca: None },
            Case { name: "root signer becomes the CA",
                leaf: &p.leaf_by_root_pem, bundle: None, signer: Some(&p.root_pem), want_len: 1, want_ca: Some(&p.root_pem) },
            Case { name: "unrelated signer is ignored",
                leaf: &p.leaf_by_root_pem, bundle: None, signer: Some(&p.int_pem), want_len: 1, want_ca: None },
            Case { name: "same-named signer with another key is ignored",
                leaf: &p.leaf_pem, bundle: None, signer: Some(&p.rotated_int_pem), want_len: 1, want_ca: None },
            Case { name: "no signer known",
                leaf: &p.leaf_pem, bundle: None, signer: None, want_len: 1, want_ca: None },
            Case { name: "bundle with root",
                leaf: &p.leaf_pem, bundle: Some((&bundle, Some(&p.root_pem))), signer: None, want_len: 2,
                want_ca: Some(&p.root_pem) },
            Case { name: "bundle with empty root",
                leaf: &p.leaf_pem, bundle: Some((&bundle, Some(""))), signer: None, want_len: 2, want_ca: None },
            Case { name: "bundle without leaf",
                leaf: &p.leaf_pem, bundle: Some((&p.int_pem, None)), signer: None, want_len: 2, want_ca: None },
        ];
        for Case { name, leaf, bundle, signer, want_len, want_ca } in cases {
            let signer = signer.map(der);
            let chain = complete_chain(leaf, bundle, signer.as_deref(), &p.leaf_key).unwrap();
            assert_eq!(count(&chain.certificates), want_len, "{name}");
            assert_eq!(
                certificates_in(&chain.certificates).unwrap()[0],
                certificates_in(leaf).unwrap()[0]
            );
            let want_ca = want_ca.map(|c| certificates_in(c).unwrap());
            assert_eq!(
                chain.ca.as_deref().map(|c| certificates_in(c).unwrap()),
                want_ca,
                "{name}"
            );
        }
    }

    /// CFSSL's PEM uses `\n`; so do `status.certificate` and `status.ca`, even when the CA (or a
    /// proxy) sent CRLF.
    #[test]
    fn chain_pem_has_lf_line_endings() {
        let p = pki();
        let crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
        let bundle = crlf(&format!("{}{}", p.leaf_pem, p.int_pem));
        let root = crlf(&p.root_pem);
        let leaf = crlf(&p.leaf_pem);
        let leaf_by_root = crlf(&p.leaf_by_root_pem);
        let chains = [
            complete_chain(&leaf, Some((&bundle, Some(&root))), None, &p.leaf_key),
            complete_chain(&leaf, None, Some(&der(&p.int_pem)), &p.leaf_key),
            complete_chain(&leaf_by_root, None, Some(&der(&p.root_pem)), &p.leaf_key),
        ];
        for chain in chains {
            let chain = chain.unwrap();
            let texts = [Some(&chain.certificates), chain.ca.as_ref()];
            for text in texts.into_iter().flatten() {
                assert!(!text.contains('\r'), "{text:?}");
                assert!(text.starts_with("-----BEGIN CERTIFICATE-----\n"), "{text:?}");
                assert!(text.ends_with("-----END CERTIFICATE-----\n"), "{text:?}");
            }
        }
    }

    #[test]
    fn certificate_for_another_key_is_refused() {
        let p = pki();
        let other = rcgen::PublicKeyData::subject_public_key_info(&KeyPair::generate().unwrap());
        let got = complete_chain(&p.leaf_pem, None, Some(&der(&p.int_pem)), &other);
        assert!(matches!(got, Err(ChainError::KeyMismatch)), "{got:?}");
    }

    /// A bundle from the CA must hold together, leaf to last intermediate: the index of the
    /// first certificate that did not issue the one before it.
    #[test]
    fn bundle_links_table() {
        let p = pki();
        let foreign = pki();
        let cases: Vec<(&str, String, Option<usize>)> = vec![
            (
                "leaf, its intermediate",
                format!("{}{}", p.leaf_pem, p.int_pem),
                None,
            ),
            (
                "leaf, intermediate, its root",
                format!("{}{}{}", p.leaf_pem, p.int_pem, p.root_pem),
                None,
            ),
            (
                "leaf, a foreign intermediate",
                format!("{}{}", p.leaf_pem, foreign.int_pem),
                Some(1),
            ),
            (
                "intermediate only, another CA's",
                foreign.int_pem.clone(),
                Some(1),
            ),
            (
                "leaf, same-named intermediate with another key",
                format!("{}{}", p.leaf_pem, p.rotated_int_pem),
                Some(1),
            ),
            (
                "leaf, intermediate, a foreign root",
                format!("{}{}{}", p.leaf_pem, p.int_pem, foreign.root_pem),
                Some(2),
            ),
        ];
        for (name, bundle, want) in cases {
            let got = complete_chain(&p.leaf_pem, Some((&bundle, None)), None, &p.leaf_key);
            match want {
                None => assert!(got.is_ok(), "{name}: {got:?}"),
                Some(index) => assert!(
                    matches!(got, Err(ChainError::Unchained { index: i }) if i == index),
                    "{name}: {got:?}"
                ),
            }
        }
    }

    /// A leaf is refused from its `notAfter` on.
    #[test]
    fn expiry_table() {
        let p = pki();
        let chain = complete_chain(&p.leaf_pem, None, None, &p.leaf_key).unwrap();
        let not_after = leaf_not_after(&p.leaf_pem).unwrap();
        let expired = Err(k8s_openapi::jiff::Timestamp::from_second(not_after).unwrap());
        let cases = [
            ("a second before", not_after - 1, Ok(Some(not_after))),
            ("at notAfter", not_after, expired),
            ("a day after", not_after + 86_400, expired),
        ];
        for (name, now, want) in cases {
            let got = check_not_expired(&chain, now).map_err(|e| match e {
                ChainError::Expired { not_after } => not_after,
                other => panic!("{name}: {other}"),
            });
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn leaf_not_after_reads_the_first_certificate() {
        let p = pki();
        let chain = format!("{}{}", p.leaf_pem, p.int_pem);
        let leaf_der = der(&p.leaf_pem);
        let leaf = X509Certificate::from_der(&leaf_der).unwrap().1;
        let want = leaf.validity().not_after.timestamp();
        assert_eq!(leaf_not_after(&chain), Some(want));
        assert_eq!(leaf_not_after("nothing"), None);
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(matches!(certificates_in("nothing"), Err(ChainError::Empty)));
        let unterminated = "-----BEGIN CERTIFICATE-----\naGVsbG8=\n";
        assert!(matches!(
            certificates_in(unterminated),
            Err(ChainError::NotPem(_))
        ));
        let bad = "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n";
        assert!(matches!(
            certificates_in(bad),
            Err(ChainError::Malformed { index: 0, .. })
        ));
    }
}
