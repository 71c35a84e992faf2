//! The CFSSL response envelope, written byte for byte as Go's `json.Encoder` writes it: struct
//! fields in declaration order, `<`, `>`, `&`, U+2028 and U+2029 escaped, `\b` and `\f` as
//! `\u0008` and `\u000c` (Go 1.19), and a trailing newline.

use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};

/// `{"success":..,"result":..,"errors":[..],"messages":[]}`.
#[derive(Debug, Serialize)]
pub struct Envelope<T> {
    pub success: bool,
    pub result: Option<T>,
    pub errors: Vec<ApiMessage>,
    pub messages: Vec<ApiMessage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiMessage {
    pub code: u32,
    pub message: String,
}

impl<T: Serialize> Envelope<T> {
    pub fn success(result: T) -> Self {
        Envelope {
            success: true,
            result: Some(result),
            errors: Vec::new(),
            messages: Vec::new(),
        }
    }
}

impl Envelope<()> {
    pub fn failure(code: u32, message: impl Into<String>) -> Self {
        Envelope {
            success: false,
            result: None,
            errors: vec![ApiMessage {
                code,
                message: message.into(),
            }],
            messages: Vec::new(),
        }
    }
}

/// Encodes `value` as Go would, newline included.
pub fn to_go_json<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
    // Serializing plain structs of strings, numbers and lists into memory cannot fail.
    if let Err(err) = value.serialize(&mut serializer) {
        tracing::error!(error = %err, "encoding a response failed");
    }
    out.push(b'\n');
    out
}

struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut rest = fragment;
        while let Some(at) = rest.find(['<', '>', '&', '\u{2028}', '\u{2029}']) {
            writer.write_all(&rest.as_bytes()[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            write!(writer, "\\u{:04x}", c as u32)?;
            rest = &rest[at + c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        let text: &[u8] = match escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::Backspace => b"\\u0008",
            CharEscape::FormFeed => b"\\u000c",
            CharEscape::Solidus => b"/",
            CharEscape::AsciiControl(byte) => return write!(writer, "\\u{:04x}", byte),
        };
        writer.write_all(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_is_byte_identical_to_multirootca() {
        let body = to_go_json(&Envelope::failure(1, "invalid token"));
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "{\"success\":false,\"result\":null,\"errors\":[{\"code\":1,\"message\":\"invalid token\"}],\"messages\":[]}\n"
        );
    }

    #[test]
    fn strings_are_escaped_as_go_does() {
        let body = to_go_json(&"a<b>&c\u{2028}\u{8}\u{c}\u{1}\n\"\\/é");
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "\"a\\u003cb\\u003e\\u0026c\\u2028\\u0008\\u000c\\u0001\\n\\\"\\\\/é\"\n"
        );
    }
}
