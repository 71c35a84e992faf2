//! `--tmpfs-size`: a Kubernetes quantity (`64Mi`, `100M`, `1048576`) as tmpfs's `size=` in bytes.

/// Why a size is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("{0:?} is not a quantity like 64Mi")]
    Syntax(String),
    #[error("{0:?} is not between 1Mi and 1Ti")]
    Range(String),
}

const MI: u64 = 1 << 20;
const TI: u64 = 1 << 40;

/// Pure: the bytes of a whole-number quantity with a binary or decimal suffix. A tmpfs under
/// 1Mi could not hold a few volumes; one over 1Ti is a typo (tmpfs takes memory).
pub fn parse(text: &str) -> Result<u64, SizeError> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, suffix) = text.split_at(digits);
    let factor: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => MI,
        "Gi" => 1 << 30,
        "Ti" => TI,
        _ => return Err(SizeError::Syntax(text.to_string())),
    };
    let number: u64 = number.parse().map_err(|_| SizeError::Syntax(text.to_string()))?;
    number
        .checked_mul(factor)
        .filter(|bytes| (MI..=TI).contains(bytes))
        .ok_or_else(|| SizeError::Range(text.to_string()))
}
