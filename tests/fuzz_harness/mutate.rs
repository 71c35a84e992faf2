//! Mutations of real inputs: bit flips, byte changes, truncations, insertions, deletions,
//! duplications and, for DER, edits of the length fields themselves (found by walking the
//! TLVs), plus the ways PEM around DER can vary.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

/// One change to a byte string; positions are relative to its length when applied.
#[derive(Debug, Clone)]
pub enum Mutation {
    FlipBit(Index, u8),
    SetByte(Index, u8),
    Truncate(Index),
    Insert(Index, Vec<u8>),
    Delete(Index, usize),
    Duplicate(Index, usize),
    /// Rewrites one DER length field (picked among those [`length_fields`] finds).
    DerLength(Index, LengthEdit),
}

/// What a DER length field becomes.
#[derive(Debug, Clone)]
pub enum LengthEdit {
    /// The length it had, plus this, re-encoded in the shortest form.
    Delta(i16),
    /// These octets instead: indefinite form, overlong forms, huge values.
    Raw(Vec<u8>),
}

fn length_edit() -> impl Strategy<Value = LengthEdit> {
    prop_oneof![
        (-3i16..=3).prop_map(LengthEdit::Delta),
        any::<i16>().prop_map(LengthEdit::Delta),
        prop::sample::select(vec![
            vec![0x80],
            vec![0x00],
            vec![0x7f],
            vec![0x81, 0x00],
            vec![0x81, 0xff],
            vec![0x82, 0xff, 0xff],
            vec![0x84, 0xff, 0xff, 0xff, 0xff],
            vec![0x84, 0x7f, 0xff, 0xff, 0xff],
            vec![0x88, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            vec![0xff],
        ])
        .prop_map(LengthEdit::Raw),
    ]
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => (any::<Index>(), 0u8..8).prop_map(|(i, bit)| Mutation::FlipBit(i, bit)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::SetByte(i, b)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => (any::<Index>(), vec(any::<u8>(), 1..16)).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => (any::<Index>(), 1usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => (any::<Index>(), 1usize..64).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
        3 => (any::<Index>(), length_edit()).prop_map(|(i, e)| Mutation::DerLength(i, e)),
    ]
}

/// Up to `max` mutations (none at all too: the real input must pass as well).
pub fn mutations(max: usize) -> impl Strategy<Value = Vec<Mutation>> {
    vec(mutation(), 0..=max)
}

/// `input` with `mutations` applied in order.
pub fn apply(input: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut data = input.to_vec();
    for m in mutations {
        apply_one(&mut data, m);
    }
    data
}

fn apply_one(data: &mut Vec<u8>, m: &Mutation) {
    if data.is_empty() {
        if let Mutation::Insert(_, bytes) = m {
            data.extend_from_slice(bytes);
        }
        return;
    }
    let len = data.len();
    match m {
        Mutation::FlipBit(i, bit) => data[i.index(len)] ^= 1 << bit,
        Mutation::SetByte(i, b) => data[i.index(len)] = *b,
        Mutation::Truncate(i) => data.truncate(i.index(len)),
        Mutation::Insert(i, bytes) => {
            let at = i.index(len + 1);
            data.splice(at..at, bytes.iter().copied());
        }
        Mutation::Delete(i, n) => {
            let at = i.index(len);
            data.drain(at..(at + n).min(len));
        }
        Mutation::Duplicate(i, n) => {
            let at = i.index(len);
            let copy = data[at..(at + n).min(len)].to_vec();
            data.splice(at..at, copy);
        }
        Mutation::DerLength(i, edit) => {
            let fields = length_fields(data);
            if fields.is_empty() {
                return;
            }
            let (at, size, value) = fields[i.index(fields.len())];
            let octets = match edit {
                LengthEdit::Delta(d) => encode_length(value.saturating_add_signed(isize::from(*d))),
                LengthEdit::Raw(raw) => raw.clone(),
            };
            data.splice(at..at + size, octets);
        }
    }
}

/// DER length octets for `len`, shortest form.
pub fn encode_length(len: usize) -> Vec<u8> {
    if len < 0x80 {
        return vec![u8::try_from(len).unwrap()];
    }
    let bytes = len.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    let mut out = vec![0x80 | u8::try_from(bytes.len() - skip).unwrap()];
    out.extend_from_slice(&bytes[skip..]);
    out
}

/// Every DER length field in `der`: (offset, size in octets, value), walking into constructed
/// values and, opportunistically, into OCTET and BIT STRINGs (extensions and keys hold DER).
pub fn length_fields(der: &[u8]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    walk(der, 0, der.len(), 0, &mut out);
    out
}

fn walk(der: &[u8], mut i: usize, end: usize, depth: usize, out: &mut Vec<(usize, usize, usize)>) {
    while i < end {
        let tag = der[i];
        i += 1;
        if tag & 0x1f == 0x1f {
            while i < end && der[i] & 0x80 != 0 {
                i += 1;
            }
            i += 1;
        }
        let Some((size, len)) = read_length(der.get(i..end).unwrap_or_default()) else {
            return;
        };
        out.push((i, size, len));
        let content = i + size;
        let Some(stop) = content.checked_add(len).filter(|s| *s <= end) else {
            return;
        };
        if depth < 32 {
            match tag {
                t if t & 0x20 != 0 => walk(der, content, stop, depth + 1, out),
                0x04 => walk(der, content, stop, depth + 1, out),
                0x03 if len > 1 => walk(der, content + 1, stop, depth + 1, out),
                _ => {}
            }
        }
        i = stop;
    }
}

/// (octets, value) of the length at the start of `bytes`, definite forms up to 4 octets.
fn read_length(bytes: &[u8]) -> Option<(usize, usize)> {
    let first = *bytes.first()?;
    if first < 0x80 {
        return Some((1, usize::from(first)));
    }
    let n = usize::from(first & 0x7f);
    if n == 0 || n > 4 || bytes.len() <= n {
        return None;
    }
    let value = bytes[1..=n]
        .iter()
        .fold(0usize, |v, b| (v << 8) | usize::from(*b));
    Some((1 + n, value))
}

/// How DER is armoured as PEM.
#[derive(Debug, Clone)]
pub enum Armour {
    /// 64-column lines, `\n`.
    Lf,
    Crlf,
    /// The base64 on one line.
    OneLine,
    /// Text before the block (openssl writes such).
    LeadingText(String),
    TrailingText(String),
    /// The same block twice.
    Twice,
    /// No END line.
    Unterminated,
    /// Another label.
    Label(String),
    /// One character of the base64 replaced.
    BadBase64(Index, char),
}

pub fn armour() -> impl Strategy<Value = Armour> {
    prop_oneof![
        4 => Just(Armour::Lf),
        1 => Just(Armour::Crlf),
        1 => Just(Armour::OneLine),
        1 => "[ -~\n]{0,40}".prop_map(Armour::LeadingText),
        1 => "[ -~\n]{0,40}".prop_map(Armour::TrailingText),
        1 => Just(Armour::Twice),
        1 => Just(Armour::Unterminated),
        1 => prop::sample::select(vec!["CERTIFICATE", "CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST", "", "PRIVATE KEY", "X"])
            .prop_map(|l| Armour::Label(l.to_string())),
        1 => (any::<Index>(), prop::sample::select(vec!['!', '=', '-', ' ', '\n', '\u{e9}', '*']))
            .prop_map(|(i, c)| Armour::BadBase64(i, c)),
    ]
}

/// `der` armoured as `label` PEM in the given way.
pub fn pem(label: &str, der: &[u8], armour: &Armour) -> Vec<u8> {
    let block = |label: &str, eol: &str| {
        let body: Vec<String> = STANDARD
            .encode(der)
            .as_bytes()
            .chunks(64)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        format!(
            "-----BEGIN {label}-----{eol}{}{eol}-----END {label}-----{eol}",
            body.join(eol)
        )
    };
    let text = match armour {
        Armour::Lf => block(label, "\n"),
        Armour::Crlf => block(label, "\r\n"),
        Armour::OneLine => format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            STANDARD.encode(der)
        ),
        Armour::LeadingText(t) => format!("{t}\n{}", block(label, "\n")),
        Armour::TrailingText(t) => format!("{}{t}", block(label, "\n")),
        Armour::Twice => block(label, "\n").repeat(2),
        Armour::Unterminated => block(label, "\n")
            .split("-----END")
            .next()
            .unwrap_or_default()
            .to_string(),
        Armour::Label(other) => block(other, "\n"),
        Armour::BadBase64(i, c) => {
            let text = block(label, "\n");
            let header = format!("-----BEGIN {label}-----\n").len();
            let body = STANDARD.encode(der).len().max(1);
            let at = header + i.index(body);
            let mut chars: Vec<char> = text.chars().collect();
            if at < chars.len() {
                chars[at] = *c;
            }
            chars.into_iter().collect()
        }
    };
    text.into_bytes()
}
