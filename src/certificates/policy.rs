//! Policy chains as data: an ordered list of named checks, each a pure function of one input
//! that either passes or reports a violation (a reason and a message). The first violation
//! wins, as in cert-manager's `policies.Chain.Evaluate`.
//!
//! The reasons are cert-manager's own strings, so the conditions and Events our controllers
//! write read exactly as cert-manager's do.

/// Reasons a check reports, spelled as cert-manager spells them.
pub mod reason {
    pub const DOES_NOT_EXIST: &str = "DoesNotExist";
    pub const MISSING_DATA: &str = "MissingData";
    pub const INVALID_KEY_PAIR: &str = "InvalidKeyPair";
    pub const INVALID_CERTIFICATE: &str = "InvalidCertificate";
    pub const INVALID_CERTIFICATE_REQUEST: &str = "InvalidCertificateRequest";
    pub const SECRET_MISMATCH: &str = "SecretMismatch";
    pub const INCORRECT_ISSUER: &str = "IncorrectIssuer";
    pub const INCORRECT_CERTIFICATE: &str = "IncorrectCertificate";
    pub const REQUEST_CHANGED: &str = "RequestChanged";
    pub const RENEWING: &str = "Renewing";
    pub const EXPIRED: &str = "Expired";
    pub const WINDOW_ERROR: &str = "WindowError";
    pub const SECRET_TEMPLATE_MISMATCH: &str = "SecretTemplateMismatch";
    pub const SECRET_MANAGED_METADATA_MISMATCH: &str = "SecretManagedMetadataMismatch";
    pub const RENEWAL_DISABLED: &str = "Disabled";
    pub const ADDITIONAL_OUTPUT_FORMATS_MISMATCH: &str = "AdditionalOutputFormatsMismatch";
    pub const MANAGED_FIELDS_PARSE_ERROR: &str = "ManagedFieldsParseError";
    pub const SECRET_OWNER_REF_MISMATCH: &str = "SecretOwnerRefMismatch";
}

/// A failed check: why (a reason from [`reason`]) and what a person reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub reason: &'static str,
    pub message: String,
}

impl Violation {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// One named check of a chain.
pub struct Check<I> {
    /// cert-manager's name for the check, for logs and tests.
    pub name: &'static str,
    pub run: fn(&I) -> Option<Violation>,
}

/// The checks of a chain, in order.
pub type Chain<I> = [Check<I>];

/// The first violation in `chain` for `input`, with the name of the check that found it.
pub fn evaluate<I>(chain: &Chain<I>, input: &I) -> Option<(&'static str, Violation)> {
    chain
        .iter()
        .find_map(|check| (check.run)(input).map(|violation| (check.name, violation)))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A check takes its input by reference, whatever its size.
    #[allow(clippy::trivially_copy_pass_by_ref)]
    fn odd(n: &u32) -> Option<Violation> {
        (n % 2 == 1).then(|| Violation::new(reason::INVALID_KEY_PAIR, format!("{n} is odd")))
    }

    #[allow(clippy::trivially_copy_pass_by_ref)]
    fn big(n: &u32) -> Option<Violation> {
        (*n > 10).then(|| Violation::new(reason::EXPIRED, format!("{n} is big")))
    }

    const CHAIN: &Chain<u32> = &[
        Check {
            name: "Odd",
            run: odd,
        },
        Check {
            name: "Big",
            run: big,
        },
    ];

    #[test]
    fn the_first_violation_in_order_wins() {
        let table = [
            (2, None),
            (3, Some(("Odd", Violation::new("InvalidKeyPair", "3 is odd")))),
            (12, Some(("Big", Violation::new("Expired", "12 is big")))),
            (13, Some(("Odd", Violation::new("InvalidKeyPair", "13 is odd")))),
        ];
        for (input, expected) in table {
            assert_eq!(evaluate(CHAIN, &input), expected, "input {input}");
        }
    }
}
