//! What validation needs of a `literalSubject`: go-ldap's `ParseDN` (its errors word for word)
//! and cert-manager's mapping of attribute names to OIDs. Only the attribute types and values
//! are kept; building the subject itself is the CSR builder's business.

/// An attribute of the subject: its OID when known (a name from cert-manager's table, or a
/// dotted OID), and its decoded value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    pub oid: Option<Vec<i64>>,
    pub value: String,
}

const COMMON_NAME: &[i64] = &[2, 5, 4, 3];

impl Attribute {
    pub fn is_common_name(&self) -> bool {
        self.oid.as_deref() == Some(COMMON_NAME)
    }
}

/// cert-manager's `attributeTypeNames`: case-sensitive, and without `POSTALCODE`.
fn known_oid(name: &str) -> Option<Vec<i64>> {
    let oid: &[i64] = match name {
        "C" => &[2, 5, 4, 6],
        "O" => &[2, 5, 4, 10],
        "OU" => &[2, 5, 4, 11],
        "CN" => COMMON_NAME,
        "SERIALNUMBER" => &[2, 5, 4, 5],
        "L" => &[2, 5, 4, 7],
        "ST" => &[2, 5, 4, 8],
        "STREET" => &[2, 5, 4, 9],
        "DC" => &[0, 9, 2342, 19_200_300, 100, 1, 25],
        "UID" => &[0, 9, 2342, 19_200_300, 100, 1, 1],
        _ => return None,
    };
    Some(oid.to_vec())
}

fn parse_oid(text: &str) -> Option<Vec<i64>> {
    if !super::names::is_oid(text) {
        return None;
    }
    text.split('.').map(|part| part.parse::<i64>().ok()).collect()
}

/// The RDNs of `subject` as written (each a list of attributes joined by `+`), or go-ldap's
/// parse error.
pub fn parse(subject: &str) -> Result<Vec<Vec<Attribute>>, String> {
    let mut rdns = Vec::new();
    let mut attributes = Vec::new();
    if subject.trim().is_empty() {
        return Ok(rdns);
    }
    let bytes = subject.as_bytes();
    let (mut escaping, mut start) = (false, 0);
    let mut attr_type: Option<String> = None;
    for (i, &c) in bytes.iter().enumerate() {
        if escaping {
            escaping = false;
        } else if c == b'\\' {
            escaping = true;
        } else if c == b'=' && attr_type.as_deref().is_none_or(str::is_empty) {
            attr_type = Some(decode_string(&subject[start..i])?);
            start = i + 1;
        } else if matches!(c, b',' | b'+' | b';') {
            let Some(name) = attr_type.take().filter(|t| !t.is_empty()) else {
                return Err("incomplete type, value pair".to_string());
            };
            attributes.push(attribute(&name, &subject[start..i])?);
            start = i + 1;
            if c != b'+' {
                rdns.push(std::mem::take(&mut attributes));
            }
        }
    }
    let Some(name) = attr_type.filter(|t| !t.is_empty()) else {
        return Err("DN ended with incomplete type, value pair".to_string());
    };
    attributes.push(attribute(&name, &subject[start..])?);
    rdns.push(attributes);
    Ok(rdns)
}

fn attribute(name: &str, raw_value: &str) -> Result<Attribute, String> {
    let value = match raw_value.strip_prefix('#') {
        Some(hex) => decode_ber(hex)?,
        None => decode_string(raw_value)?,
    };
    let oid = known_oid(name).or_else(|| parse_oid(name));
    Ok(Attribute { oid, value })
}

/// go-ldap's `stripLeadingAndTrailingSpaces`: trims spaces but keeps an escaped final one.
fn strip_spaces(text: &str) -> String {
    let trimmed = text.trim_matches(' ');
    if !trimmed.is_empty() && text.ends_with(' ') {
        let backslashes = trimmed.bytes().rev().take_while(|b| *b == b'\\').count();
        if backslashes % 2 == 1 {
            return format!("{trimmed} ");
        }
    }
    trimmed.to_string()
}

/// go-ldap's `decodeString`: escapes resolved, unescaped specials refused.
fn decode_string(text: &str) -> Result<String, String> {
    let chars: Vec<char> = strip_spaces(text).chars().collect();
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            match c {
                '"' | ';' | '<' | '>' => return Err(format!("got unescaped character: '{c}'")),
                '\0' => return Err("got unescaped NULL character".to_string()),
                _ => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            }
            i += 1;
            continue;
        }
        let Some(&next) = chars.get(i + 1) else {
            let all: String = chars.iter().collect();
            return Err(format!("got corrupted escaped character: '{all}'"));
        };
        if matches!(next, ' ' | '"' | '#' | '+' | ',' | ';' | '<' | '=' | '>' | '\\') {
            out.extend_from_slice(next.encode_utf8(&mut [0; 4]).as_bytes());
            i += 2;
            continue;
        }
        if i + 2 >= chars.len() {
            return Err(format!(
                "failed to decode escaped character: encoding/hex: invalid byte: {next}"
            ));
        }
        let pair: String = chars[i + 1..i + 3].iter().collect();
        if pair.len() != 2 {
            return Err(format!(
                "failed to decode escaped character: invalid byte: {pair}"
            ));
        }
        let byte =
            hex_decode(pair.as_bytes()).map_err(|e| format!("failed to decode escaped character: {e}"))?;
        out.push(byte[0]);
        i += 3;
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `hex.DecodeString`, with its errors.
fn hex_decode(text: &[u8]) -> Result<Vec<u8>, String> {
    let nibble = |b: u8| (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    let invalid = |b: u8| {
        let c = b as char;
        if c.is_control() {
            format!("encoding/hex: invalid byte: U+{b:04X}")
        } else {
            format!("encoding/hex: invalid byte: U+{b:04X} '{c}'")
        }
    };
    let mut out = Vec::with_capacity(text.len() / 2);
    for pair in text.chunks(2) {
        let high = nibble(pair[0]).ok_or_else(|| invalid(pair[0]))?;
        let Some(&low) = pair.get(1) else {
            return Err("encoding/hex: odd length hex string".to_string());
        };
        let low = nibble(low).ok_or_else(|| invalid(low))?;
        out.push(high << 4 | low);
    }
    Ok(out)
}

/// A `#`-prefixed value: the hex of one BER element, whose content is the value. Malformed
/// BER reads `unexpected EOF` (what go-asn1-ber reports for a truncated element).
fn decode_ber(hex: &str) -> Result<String, String> {
    let der = hex_decode(hex.as_bytes()).map_err(|e| format!("failed to decode BER encoding: {e}"))?;
    let eof = || "failed to decode BER encoding: unexpected EOF".to_string();
    let (&_tag, rest) = der.split_first().ok_or_else(eof)?;
    let (&first, rest) = rest.split_first().ok_or_else(eof)?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err(eof());
        }
        let len = rest[..n].iter().fold(0usize, |acc, b| acc << 8 | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return Err(eof());
    }
    if rest.len() > len {
        return Err("failed to decode BER encoding: trailing bytes after value".to_string());
    }
    Ok(String::from_utf8_lossy(rest).into_owned())
}
