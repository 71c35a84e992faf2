//! Standard padded base64 as Go's `encoding/base64.StdEncoding` decodes it: line breaks are
//! skipped anywhere, unused trailing bits are tolerated, and an error names the input offset the
//! way Go computes it (multirootca echoes that text to the client).

/// Go's `base64.CorruptInputError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal base64 data at input byte {0}")]
pub struct CorruptInput(pub usize);

const PAD: u8 = b'=';

fn sextet(byte: u8) -> Option<u32> {
    let value = match byte {
        b'A'..=b'Z' => byte - b'A',
        b'a'..=b'z' => byte - b'a' + 26,
        b'0'..=b'9' => byte - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(value))
}

fn is_newline(byte: u8) -> bool {
    byte == b'\n' || byte == b'\r'
}

pub fn decode(src: &[u8]) -> Result<Vec<u8>, CorruptInput> {
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    loop {
        let mut quantum = [0u32; 4];
        let mut filled = 0;
        while filled < 4 {
            if si == src.len() {
                if filled == 0 {
                    return Ok(out);
                }
                // A partial quantum without its padding.
                return Err(CorruptInput(si - filled));
            }
            let byte = src[si];
            si += 1;
            if let Some(value) = sextet(byte) {
                quantum[filled] = value;
                filled += 1;
                continue;
            }
            if is_newline(byte) {
                continue;
            }
            if byte != PAD || filled < 2 {
                return Err(CorruptInput(si - 1));
            }
            si = end_of_padding(src, si, filled)?;
            break;
        }
        let bits = quantum[0] << 18 | quantum[1] << 12 | quantum[2] << 6 | quantum[3];
        let bytes = [(bits >> 16) as u8, (bits >> 8) as u8, bits as u8];
        out.extend_from_slice(&bytes[..filled - 1]);
        if filled < 4 {
            return Ok(out);
        }
    }
}

/// Checks what follows the first `=` of a quantum holding `filled` symbols; padding must end the
/// input, apart from line breaks. Returns the position after it.
fn end_of_padding(src: &[u8], mut si: usize, filled: usize) -> Result<usize, CorruptInput> {
    let skip_newlines = |mut si: usize| {
        while si < src.len() && is_newline(src[si]) {
            si += 1;
        }
        si
    };
    if filled == 2 {
        // Two symbols need "==": the second '=' must follow.
        si = skip_newlines(si);
        if si == src.len() {
            return Err(CorruptInput(src.len()));
        }
        if src[si] != PAD {
            return Err(CorruptInput(si - 1));
        }
        si += 1;
    }
    si = skip_newlines(si);
    if si < src.len() {
        return Err(CorruptInput(si));
    }
    Ok(si)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets read back from Debian's multirootca for the same `request` strings.
    #[test]
    fn errors_name_go_s_offsets() {
        for (input, at) in [
            ("!!!", 0),
            ("AAA", 0),
            ("e30", 0),
            ("AA=A", 2),
            ("AA=", 3),
            ("A===", 1),
            ("e30=e30=", 4),
            ("AAAA!", 4),
            ("AA\nA", 1),
        ] {
            assert_eq!(decode(input.as_bytes()), Err(CorruptInput(at)), "{input}");
        }
    }

    #[test]
    fn decodes_what_go_accepts() {
        for (input, want) in [
            ("", &b""[..]),
            ("e30=", b"{}"),
            ("e3\n0=", b"{}"),
            ("e30=\r\n", b"{}"),
            ("AB==", b"\x00"),
            ("aGk=", b"hi"),
            ("aGVsbG8h", b"hello!"),
        ] {
            assert_eq!(decode(input.as_bytes()).as_deref(), Ok(want), "{input}");
        }
    }

    #[test]
    fn message_matches_go() {
        assert_eq!(CorruptInput(7).to_string(), "illegal base64 data at input byte 7");
    }
}
