//! cert-manager's policy chains (internal/controller/certificates/policies/policies.go) as data:
//! the same checks, in the same order, under the same names.

use super::checks::{self, Input};
use super::{Chain, Check};

const SECRET_DOES_NOT_EXIST: Check<Input> = Check {
    name: "SecretDoesNotExist",
    run: checks::secret_does_not_exist,
};
const SECRET_IS_MISSING_DATA: Check<Input> = Check {
    name: "SecretIsMissingData",
    run: checks::secret_is_missing_data,
};
const SECRET_PUBLIC_KEYS_DIFFER: Check<Input> = Check {
    name: "SecretPublicKeysDiffer",
    run: checks::secret_public_keys_differ,
};
const SECRET_ISSUER_ANNOTATIONS_MISMATCH: Check<Input> = Check {
    name: "SecretIssuerAnnotationsMismatch",
    run: checks::secret_issuer_annotations_mismatch,
};
const SECRET_CERTIFICATE_NAME_ANNOTATIONS_MISMATCH: Check<Input> = Check {
    name: "SecretCertificateNameAnnotationsMismatch",
    run: checks::secret_certificate_name_annotations_mismatch,
};
const SECRET_PRIVATE_KEY_MISMATCHES_SPEC: Check<Input> = Check {
    name: "SecretPrivateKeyMismatchesSpec",
    run: checks::secret_private_key_mismatches_spec,
};
const SECRET_PUBLIC_KEY_DIFFERS_FROM_CURRENT_CERTIFICATE_REQUEST: Check<Input> = Check {
    name: "SecretPublicKeyDiffersFromCurrentCertificateRequest",
    run: checks::secret_public_key_differs_from_current_certificate_request,
};
const CURRENT_CERTIFICATE_REQUEST_MISMATCHES_SPEC: Check<Input> = Check {
    name: "CurrentCertificateRequestMismatchesSpec",
    run: checks::current_certificate_request_mismatches_spec,
};
const CURRENT_CERTIFICATE_NEARING_EXPIRY: Check<Input> = Check {
    name: "CurrentCertificateNearingExpiry",
    run: checks::current_certificate_nearing_expiry,
};
const CURRENT_CERTIFICATE_HAS_EXPIRED: Check<Input> = Check {
    name: "CurrentCertificateHasExpired",
    run: checks::current_certificate_has_expired,
};

/// Whether a Certificate must be issued (again): its first violation becomes the reason of
/// `Issuing=True`.
pub const TRIGGER: &Chain<Input> = &[
    SECRET_DOES_NOT_EXIST,
    SECRET_IS_MISSING_DATA,
    SECRET_PUBLIC_KEYS_DIFFER,
    SECRET_ISSUER_ANNOTATIONS_MISMATCH,
    SECRET_CERTIFICATE_NAME_ANNOTATIONS_MISMATCH,
    SECRET_PRIVATE_KEY_MISMATCHES_SPEC,
    SECRET_PUBLIC_KEY_DIFFERS_FROM_CURRENT_CERTIFICATE_REQUEST,
    CURRENT_CERTIFICATE_REQUEST_MISMATCHES_SPEC,
    CURRENT_CERTIFICATE_NEARING_EXPIRY,
];

/// Whether a Certificate is not Ready: the trigger chain, with expiry instead of renewal.
pub const READINESS: &Chain<Input> = &[
    SECRET_DOES_NOT_EXIST,
    SECRET_IS_MISSING_DATA,
    SECRET_PUBLIC_KEYS_DIFFER,
    SECRET_ISSUER_ANNOTATIONS_MISMATCH,
    SECRET_CERTIFICATE_NAME_ANNOTATIONS_MISMATCH,
    SECRET_PRIVATE_KEY_MISMATCHES_SPEC,
    SECRET_PUBLIC_KEY_DIFFERS_FROM_CURRENT_CERTIFICATE_REQUEST,
    CURRENT_CERTIFICATE_REQUEST_MISMATCHES_SPEC,
    CURRENT_CERTIFICATE_HAS_EXPIRED,
];

/// Whether a temporary certificate must be (re)written: the Secret exists with a key and a
/// certificate that belong together.
pub const TEMPORARY_CERTIFICATE: &Chain<Input> = &[
    SECRET_DOES_NOT_EXIST,
    SECRET_IS_MISSING_DATA,
    SECRET_PUBLIC_KEYS_DIFFER,
];

#[cfg(test)]
mod tests;
