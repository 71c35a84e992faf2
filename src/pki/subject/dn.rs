//! RFC 4514 distinguished names read as go-ldap v3.4.14 `ParseDN` reads them (the parser behind
//! cert-manager's `literalSubject`): RDNs split on `,` or `;`, attributes of one RDN on `+`,
//! types and values trimmed of unescaped spaces and unescaped (`\,` or `\2C`), a value starting
//! with `#` read as the hex of one BER element whose content becomes the value. Error texts are
//! go-ldap's, since cert-manager reports them as they are.

use super::SubjectError;

/// One `type=value` pair as written: the unescaped type and the value's bytes (an escape such as
/// `\FF` may leave bytes that are not UTF-8; the encoder refuses those later, as Go does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TypeAndValue {
    pub(super) attribute_type: Vec<u8>,
    pub(super) value: Vec<u8>,
}

fn invalid(message: impl Into<String>) -> SubjectError {
    SubjectError::Invalid(message.into())
}

/// The RDNs in the order written (most significant last, as RFC 4514 writes them).
pub(super) fn parse_dn(text: &str) -> Result<Vec<Vec<TypeAndValue>>, SubjectError> {
    let mut dn = Vec::new();
    if text.trim().is_empty() {
        return Ok(dn);
    }
    let mut rdn = Vec::new();
    let mut attribute_type: Vec<u8> = Vec::new();
    let mut escaping = false;
    let mut start = 0;
    // Every position sliced at is an ASCII separator, so the slices stay on char boundaries.
    for (i, byte) in text.bytes().enumerate() {
        if escaping {
            escaping = false;
            continue;
        }
        match byte {
            b'\\' => escaping = true,
            b'=' if attribute_type.is_empty() => {
                attribute_type = decode_string(&text[start..i])?;
                start = i + 1;
            }
            b',' | b'+' | b';' => {
                if attribute_type.is_empty() {
                    return Err(invalid("incomplete type, value pair"));
                }
                rdn.push(TypeAndValue {
                    attribute_type: std::mem::take(&mut attribute_type),
                    value: decode_value(&text[start..i])?,
                });
                start = i + 1;
                if byte != b'+' {
                    dn.push(std::mem::take(&mut rdn));
                }
            }
            _ => {}
        }
    }
    if attribute_type.is_empty() {
        return Err(invalid("DN ended with incomplete type, value pair"));
    }
    rdn.push(TypeAndValue {
        attribute_type,
        value: decode_value(&text[start..])?,
    });
    dn.push(rdn);
    Ok(dn)
}

fn decode_value(raw: &str) -> Result<Vec<u8>, SubjectError> {
    match raw.strip_prefix('#') {
        Some(hex) => decode_ber_hex(hex),
        None => decode_string(raw),
    }
}

/// Unescaped spaces at both ends removed; a trailing space stays when an odd number of
/// backslashes escapes it.
fn strip_spaces(raw: &str) -> String {
    let mut stripped = raw.trim_matches(' ').to_string();
    if !stripped.is_empty() && raw.ends_with(' ') {
        let backslashes = stripped.bytes().rev().take_while(|b| *b == b'\\').count();
        if backslashes % 2 == 1 {
            stripped.push(' ');
        }
    }
    stripped
}

/// A type or value with its escapes resolved.
fn decode_string(raw: &str) -> Result<Vec<u8>, SubjectError> {
    let stripped = strip_spaces(raw);
    let chars: Vec<char> = stripped.chars().collect();
    let mut out = Vec::with_capacity(stripped.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            match c {
                '"' | ';' | '<' | '>' => {
                    return Err(invalid(format!("got unescaped character: '{c}'")));
                }
                '\0' => return Err(invalid("got unescaped NULL character")),
                _ => {}
            }
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            i += 1;
            continue;
        }
        let Some(&next) = chars.get(i + 1) else {
            return Err(invalid(format!("got corrupted escaped character: '{stripped}'")));
        };
        if matches!(next, ' ' | '"' | '#' | '+' | ',' | ';' | '<' | '=' | '>' | '\\') {
            out.push(u8::try_from(next).unwrap_or(b'?'));
            i += 2;
            continue;
        }
        if i + 2 >= chars.len() {
            return Err(invalid(format!(
                "failed to decode escaped character: encoding/hex: invalid byte: {next}"
            )));
        }
        let pair: String = chars[i + 1..i + 3].iter().collect();
        if pair.len() != 2 {
            return Err(invalid(format!(
                "failed to decode escaped character: invalid byte: {pair}"
            )));
        }
        let decoded = decode_hex(pair.as_bytes())
            .map_err(|e| invalid(format!("failed to decode escaped character: {e}")))?;
        out.extend_from_slice(&decoded);
        i += 3;
    }
    Ok(out)
}

fn hex_digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Go's `%#U` of an invalid hex byte, as `encoding/hex` reports it.
fn invalid_hex_byte(byte: u8) -> String {
    let printable = (0x20..0x7f).contains(&byte) || (0xa1..=0xff).contains(&byte) && byte != 0xad;
    if printable {
        format!("encoding/hex: invalid byte: U+{byte:04X} '{}'", char::from(byte))
    } else {
        format!("encoding/hex: invalid byte: U+{byte:04X}")
    }
}

/// Hex to bytes with Go `encoding/hex`'s checks and messages.
fn decode_hex(src: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(src.len() / 2);
    for pair in src.chunks(2) {
        let high = hex_digit(pair[0]).ok_or_else(|| invalid_hex_byte(pair[0]))?;
        let Some(&low) = pair.get(1) else {
            return Err("encoding/hex: odd length hex string".to_string());
        };
        let low = hex_digit(low).ok_or_else(|| invalid_hex_byte(low))?;
        out.push(high << 4 | low);
    }
    Ok(out)
}

/// `#` followed by the hex of one BER element: the element's content is the value (empty for a
/// constructed element, as go-asn1-ber leaves its data empty).
fn decode_ber_hex(hex: &str) -> Result<Vec<u8>, SubjectError> {
    let ber_error = |e: String| invalid(format!("failed to decode BER encoding: {e}"));
    let der = decode_hex(hex.as_bytes()).map_err(ber_error)?;
    let mut reader = ber::Reader { data: &der, pos: 0 };
    let element = reader.element(0).map_err(ber_error)?;
    if reader.pos != der.len() {
        return Err(ber_error("trailing bytes after value".to_string()));
    }
    Ok(element.content.unwrap_or_default())
}

mod ber {
    /// The reader recurses; a DN value never nests deeply, so the depth is bounded.
    const MAX_DEPTH: usize = 64;
    const INDEFINITE: Option<usize> = None;

    pub(super) struct Reader<'a> {
        pub(super) data: &'a [u8],
        pub(super) pos: usize,
    }

    pub(super) struct Element {
        /// The content of a primitive element; `None` for a constructed one.
        pub(super) content: Option<Vec<u8>>,
        end_of_contents: bool,
    }

    const EOF: &str = "unexpected EOF";

    /// The string checks go-asn1-ber makes while reading (UTF8String, PrintableString,
    /// IA5String), with its messages; positions are byte offsets, as Go's `range` gives them.
    fn check_string(tag: u64, content: &[u8]) -> Result<(), String> {
        let text = String::from_utf8_lossy(content);
        match tag {
            12 if std::str::from_utf8(content).is_err() => Err("invalid UTF-8 string".to_string()),
            19 => match text.char_indices().find(|(_, c)| !printable(*c)) {
                Some((i, _)) => Err(format!("invalid character in position {i}")),
                None => Ok(()),
            },
            22 => match text.char_indices().find(|(_, c)| u32::from(*c) >= 0x7f) {
                Some((i, c)) => Err(format!("invalid character for IA5String at pos {i}: {c}")),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn printable(c: char) -> bool {
        c.is_ascii_alphanumeric() || "'()+,-.=/:? ".contains(c)
    }

    impl Reader<'_> {
        fn byte(&mut self) -> Result<u8, String> {
            let byte = *self.data.get(self.pos).ok_or(EOF)?;
            self.pos += 1;
            Ok(byte)
        }

        /// Identifier octets: class and tag bits of the first, more octets for a high tag.
        fn identifier(&mut self, depth: usize) -> Result<(u8, bool, u64), String> {
            // An empty value at the top is plain EOF to go-asn1-ber, not an unexpected one.
            let first = match self.byte() {
                Err(_) if depth == 0 => return Err("EOF".to_string()),
                other => other?,
            };
            let mut tag = u64::from(first & 0x1f);
            if tag == 0x1f {
                tag = 0;
                for count in 1.. {
                    let byte = self.byte()?;
                    tag = tag << 7 | u64::from(byte & 0x7f);
                    if count == 1 && tag == 0 {
                        return Err("invalid first high-tag-number tag byte".to_string());
                    }
                    if count > 9 {
                        return Err("high-tag-number tag overflow".to_string());
                    }
                    if byte & 0x80 == 0 {
                        break;
                    }
                }
            }
            Ok((first >> 6, first & 0x20 != 0, tag))
        }

        fn length(&mut self) -> Result<Option<usize>, String> {
            let first = self.byte()?;
            match first {
                0xff => Err("invalid length byte 0xff".to_string()),
                0x80 => Ok(INDEFINITE),
                short if short & 0x80 == 0 => Ok(Some(usize::from(short))),
                long => {
                    let count = usize::from(long & 0x7f);
                    if count > 8 {
                        return Err("long-form length overflow".to_string());
                    }
                    let mut length: u64 = 0;
                    for _ in 0..count {
                        length = length << 8 | u64::from(self.byte()?);
                    }
                    usize::try_from(length)
                        .ok()
                        .filter(|l| i64::try_from(*l).is_ok())
                        .map(Some)
                        .ok_or_else(|| "long-form length overflow".to_string())
                }
            }
        }

        pub(super) fn element(&mut self, depth: usize) -> Result<Element, String> {
            if depth >= MAX_DEPTH {
                return Err(format!("nesting depth {depth} exceeds maximum {MAX_DEPTH}"));
            }
            let (class, constructed, tag) = self.identifier(depth)?;
            let length = self.length()?;
            if constructed {
                self.children(length, depth)?;
                return Ok(Element {
                    content: None,
                    end_of_contents: false,
                });
            }
            let length = length.ok_or("indefinite length used with primitive type")?;
            let end = self.pos.checked_add(length).ok_or(EOF)?;
            let content = self.data.get(self.pos..end).ok_or(EOF)?.to_vec();
            self.pos = end;
            if class == 0 {
                check_string(tag, &content)?;
            }
            Ok(Element {
                end_of_contents: class == 0 && tag == 0 && content.is_empty(),
                content: Some(content),
            })
        }

        fn children(&mut self, length: Option<usize>, depth: usize) -> Result<(), String> {
            let start = self.pos;
            loop {
                if let Some(length) = length {
                    let read = self.pos - start;
                    if read == length {
                        return Ok(());
                    }
                    if read > length {
                        return Err(format!("expected to read {length} bytes, read {read}"));
                    }
                }
                let child = self.element(depth + 1)?;
                if child.end_of_contents {
                    if length.is_none() {
                        return Ok(());
                    }
                    return Err("eoc child not allowed with definite length".to_string());
                }
            }
        }
    }
}
