//! JSON read the way Go's `encoding/json` reads it, so that a malformed request gets the very
//! message multirootca sends back (`invalid character 'x' looking for beginning of value`,
//! `unexpected end of JSON input`, ...). Go validates the whole document before decoding any of
//! it, so a syntax error anywhere wins over every type error.
//!
//! The parser is iterative: a request body may nest ten thousand arrays deep (Go's limit) and
//! must not exhaust a worker thread's stack.

use std::fmt;

/// Go refuses documents nested deeper than this.
const MAX_DEPTH: usize = 10_000;

/// One parsed value and the exact input bytes it came from (Go hands those raw bytes to custom
/// decoders such as `big.Int`, whose error messages quote them).
#[derive(Debug, Clone, PartialEq)]
pub struct Node<'a> {
    pub value: Value<'a>,
    pub raw: &'a [u8],
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    /// A number; its literal is the node's `raw` text, which Go's messages quote (`number 1.5`).
    Number,
    String(String),
    Array(Vec<Node<'a>>),
    /// Keys in document order, duplicates kept: Go applies each in turn.
    Object(Vec<(String, Node<'a>)>),
}

impl Value<'_> {
    /// The word Go's `UnmarshalTypeError` uses for this kind of value.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
}

/// A syntax error, displayed exactly as Go's `*json.SyntaxError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(String);

impl SyntaxError {
    fn eof() -> SyntaxError {
        SyntaxError("unexpected end of JSON input".into())
    }

    fn at(byte: u8, context: &str) -> SyntaxError {
        SyntaxError(format!("invalid character {} {context}", quote_byte(byte)))
    }
}

/// Go's `quoteChar`: the offending byte, read as a Latin-1 rune, in single quotes.
fn quote_byte(byte: u8) -> String {
    match byte {
        b'\'' => r"'\''".to_string(),
        b'"' => "'\"'".to_string(),
        _ => format!("'{}'", go_escape_rune(char::from(byte))),
    }
}

/// How Go's `strconv.Quote` writes one rune below U+0100 between its quotes.
pub(crate) fn go_escape_rune(c: char) -> String {
    match c {
        '\\' => r"\\".into(),
        '\u{7}' => r"\a".into(),
        '\u{8}' => r"\b".into(),
        '\u{c}' => r"\f".into(),
        '\n' => r"\n".into(),
        '\r' => r"\r".into(),
        '\t' => r"\t".into(),
        '\u{b}' => r"\v".into(),
        c if (c as u32) < 0x20 || c == '\u{7f}' => format!(r"\x{:02x}", c as u32),
        // Latin-1 controls, the no-break space and the soft hyphen are not printable to Go.
        c if ('\u{80}'..='\u{a0}').contains(&c) || c == '\u{ad}' => format!(r"\u{:04x}", c as u32),
        c => c.to_string(),
    }
}

/// Parses one complete JSON document (surrounding whitespace allowed).
pub fn parse(input: &[u8]) -> Result<Node<'_>, SyntaxError> {
    Parser { input, pos: 0 }.document()
}

enum Frame<'a> {
    Array {
        start: usize,
        items: Vec<Node<'a>>,
    },
    Object {
        start: usize,
        entries: Vec<(String, Node<'a>)>,
        key: String,
    },
}

/// What `value` found at the current position.
enum Step<'a> {
    /// A complete value.
    Done(Node<'a>),
    /// An opened container whose first value comes next.
    Opened,
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn next(&mut self) -> Result<u8, SyntaxError> {
        let byte = self.peek().ok_or_else(SyntaxError::eof)?;
        self.pos += 1;
        Ok(byte)
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn node(&self, start: usize, value: Value<'a>) -> Node<'a> {
        Node {
            value,
            raw: &self.input[start..self.pos],
        }
    }

    fn document(mut self) -> Result<Node<'a>, SyntaxError> {
        let mut stack: Vec<Frame<'a>> = Vec::new();
        loop {
            let mut done = match self.value(&mut stack)? {
                Step::Opened => continue,
                Step::Done(node) => node,
            };
            // Hand the finished value to its container; close containers as they end.
            loop {
                let Some(mut frame) = stack.pop() else {
                    self.skip_space();
                    return match self.peek() {
                        None => Ok(done),
                        Some(byte) => Err(SyntaxError::at(byte, "after top-level value")),
                    };
                };
                self.skip_space();
                let more = match &mut frame {
                    Frame::Array { items, .. } => {
                        items.push(done);
                        match self.next()? {
                            b',' => true,
                            b']' => false,
                            byte => return Err(SyntaxError::at(byte, "after array element")),
                        }
                    }
                    Frame::Object { entries, key, .. } => {
                        entries.push((std::mem::take(key), done));
                        match self.next()? {
                            b',' => {
                                self.skip_space();
                                *key = self.key()?;
                                true
                            }
                            b'}' => false,
                            byte => {
                                return Err(SyntaxError::at(byte, "after object key:value pair"));
                            }
                        }
                    }
                };
                if more {
                    stack.push(frame);
                    break;
                }
                done = self.finish(frame);
            }
        }
    }

    /// The node of a container that has just seen its closing bracket.
    fn finish(&self, frame: Frame<'a>) -> Node<'a> {
        // A finished container gives back the spare room its growth left (a vector grows to
        // at least four slots): `[{"a":0},...]` held ~48 bytes per byte of body without this,
        // ~20 with it (tests/fuzz_requests.rs).
        match frame {
            Frame::Array { start, mut items } => {
                items.shrink_to_fit();
                self.node(start, Value::Array(items))
            }
            Frame::Object {
                start, mut entries, ..
            } => {
                entries.shrink_to_fit();
                self.node(start, Value::Object(entries))
            }
        }
    }

    /// Reads an object key and its colon; the cursor is on the opening quote.
    fn key(&mut self) -> Result<String, SyntaxError> {
        match self.next()? {
            b'"' => {}
            byte => {
                return Err(SyntaxError::at(
                    byte,
                    "looking for beginning of object key string",
                ));
            }
        }
        let key = self.string_body()?;
        self.skip_space();
        match self.next()? {
            b':' => Ok(key),
            byte => Err(SyntaxError::at(byte, "after object key")),
        }
    }

    /// Enters a container at `start` (whose bracket is `byte`); empty ones finish at once.
    fn open(&mut self, stack: &mut Vec<Frame<'a>>, start: usize, byte: u8) -> Result<Step<'a>, SyntaxError> {
        // Go counts the depth as it reads the bracket, before looking inside.
        if stack.len() >= MAX_DEPTH {
            return Err(SyntaxError::at(byte, "exceeded max depth"));
        }
        let (frame, closing) = match byte {
            b'{' => (
                Frame::Object {
                    start,
                    entries: Vec::new(),
                    key: String::new(),
                },
                b'}',
            ),
            _ => (
                Frame::Array {
                    start,
                    items: Vec::new(),
                },
                b']',
            ),
        };
        self.skip_space();
        if self.peek() == Some(closing) {
            self.pos += 1;
            return Ok(Step::Done(self.finish(frame)));
        }
        let frame = match frame {
            Frame::Object { start, entries, .. } => Frame::Object {
                start,
                entries,
                key: self.key()?,
            },
            array => array,
        };
        stack.push(frame);
        Ok(Step::Opened)
    }

    fn value(&mut self, stack: &mut Vec<Frame<'a>>) -> Result<Step<'a>, SyntaxError> {
        self.skip_space();
        let start = self.pos;
        let byte = self.next()?;
        let value = match byte {
            b'{' | b'[' => return self.open(stack, start, byte),
            b'"' => Value::String(self.string_body()?),
            b'-' | b'0'..=b'9' => {
                self.number(byte)?;
                Value::Number
            }
            b't' => {
                self.literal("true")?;
                Value::Bool(true)
            }
            b'f' => {
                self.literal("false")?;
                Value::Bool(false)
            }
            b'n' => {
                self.literal("null")?;
                Value::Null
            }
            _ => return Err(SyntaxError::at(byte, "looking for beginning of value")),
        };
        Ok(Step::Done(self.node(start, value)))
    }

    /// The rest of `true`, `false` or `null` after its first letter.
    fn literal(&mut self, word: &str) -> Result<(), SyntaxError> {
        for want in word.bytes().skip(1) {
            let byte = self.next()?;
            if byte != want {
                let context = format!("in literal {word} (expecting {})", quote_byte(want));
                return Err(SyntaxError::at(byte, &context));
            }
        }
        Ok(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    /// Requires one digit, reporting `context` otherwise.
    fn digit(&mut self, context: &str) -> Result<(), SyntaxError> {
        match self.next()? {
            b'0'..=b'9' => Ok(()),
            byte => Err(SyntaxError::at(byte, context)),
        }
    }

    fn number(&mut self, first: u8) -> Result<(), SyntaxError> {
        let first = if first == b'-' {
            let byte = self.next()?;
            if !byte.is_ascii_digit() {
                return Err(SyntaxError::at(byte, "in numeric literal"));
            }
            byte
        } else {
            first
        };
        // A leading zero stands alone: "01" is the number 0 followed by a stray '1'.
        if first != b'0' {
            self.digits();
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.digit("after decimal point in numeric literal")?;
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.digit("in exponent of numeric literal")?;
            self.digits();
        }
        Ok(())
    }

    /// A string's contents up to and including its closing quote, unescaped as Go does:
    /// broken surrogates and invalid UTF-8 become U+FFFD.
    fn string_body(&mut self) -> Result<String, SyntaxError> {
        let mut bytes = Vec::new();
        loop {
            match self.next()? {
                b'"' => return Ok(lossy_per_byte(&bytes)),
                b'\\' => self.escape(&mut bytes)?,
                byte if byte < 0x20 => return Err(SyntaxError::at(byte, "in string literal")),
                byte => bytes.push(byte),
            }
        }
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), SyntaxError> {
        let simple = match self.next()? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                let c = self.utf16(unit)?;
                out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                return Ok(());
            }
            byte => return Err(SyntaxError::at(byte, "in string escape code")),
        };
        out.extend_from_slice(simple.encode_utf8(&mut [0; 4]).as_bytes());
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let mut unit = 0;
        for _ in 0..4 {
            let byte = self.next()?;
            let digit = char::from(byte)
                .to_digit(16)
                .ok_or_else(|| SyntaxError::at(byte, r"in \u hexadecimal character escape"))?;
            unit = unit * 16 + digit;
        }
        Ok(unit)
    }

    /// Completes a `\uXXXX` escape: a high surrogate pairs with an immediately following low one.
    fn utf16(&mut self, unit: u32) -> Result<char, SyntaxError> {
        if !(0xd800..0xe000).contains(&unit) {
            return Ok(char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER));
        }
        let pair_follows = self.input[self.pos..].starts_with(b"\\u");
        if (0xd800..0xdc00).contains(&unit) && pair_follows {
            let rest = &self.input[self.pos + 2..];
            let low = rest
                .get(..4)
                .and_then(|h| u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
            if let Some(low @ 0xdc00..=0xdfff) = low {
                self.pos += 6;
                let c = 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
                return Ok(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
        }
        // A lone surrogate; a following escape is read on its own.
        Ok(char::REPLACEMENT_CHARACTER)
    }
}

/// UTF-8 decoding where, as in Go, every byte of an invalid sequence becomes one U+FFFD.
fn lossy_per_byte(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for _ in chunk.invalid() {
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }
    out
}

impl fmt::Display for Node<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(input: &[u8]) -> String {
        parse(input).expect_err("must not parse").to_string()
    }

    /// Every message below was read back from Debian's multirootca (Go 1.19).
    #[test]
    fn syntax_errors_read_as_go_writes_them() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "unexpected end of JSON input"),
            (b"  ", "unexpected end of JSON input"),
            (b"xx", "invalid character 'x' looking for beginning of value"),
            (b"<", "invalid character '<' looking for beginning of value"),
            (b"{} x", "invalid character 'x' after top-level value"),
            (b"01", "invalid character '1' after top-level value"),
            (
                b"{\"a\":tru}",
                "invalid character '}' in literal true (expecting 'e')",
            ),
            (b"{\"a\" 1}", "invalid character '1' after object key"),
            (
                b"{1}",
                "invalid character '1' looking for beginning of object key string",
            ),
            (b"[1 2]", "invalid character '2' after array element"),
            (
                b"{\"a\":1 \"b\"}",
                "invalid character '\"' after object key:value pair",
            ),
            (b"\"\\q\"", "invalid character 'q' in string escape code"),
            (
                b"\"\\u12g4\"",
                r"invalid character 'g' in \u hexadecimal character escape",
            ),
            (b"-x", "invalid character 'x' in numeric literal"),
            (
                b"1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            (b"1ex", "invalid character 'x' in exponent of numeric literal"),
            (
                b"\x01",
                r"invalid character '\x01' looking for beginning of value",
            ),
            (
                b"\xff",
                "invalid character '\u{ff}' looking for beginning of value",
            ),
            (
                b"\xc2\xa0",
                "invalid character '\u{c2}' looking for beginning of value",
            ),
            (b"{\"a\":\"\x01\"}", r"invalid character '\x01' in string literal"),
            (b"'", r"invalid character '\'' looking for beginning of value"),
            (b"[1,]", "invalid character ']' looking for beginning of value"),
            (
                b"{\"a\":1,}",
                "invalid character '}' looking for beginning of object key string",
            ),
            (b"{\"a\"", "unexpected end of JSON input"),
            (b"[1", "unexpected end of JSON input"),
            (b"-", "unexpected end of JSON input"),
            (b"nul", "unexpected end of JSON input"),
        ];
        for (input, want) in cases {
            assert_eq!(error(input), *want, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn depth_limit_is_go_s() {
        let deep = |n| "[".repeat(n) + &"]".repeat(n);
        assert!(parse(deep(10_000).as_bytes()).is_ok());
        assert_eq!(
            error(deep(10_001).as_bytes()),
            "invalid character '[' exceeded max depth"
        );
        assert_eq!(error(&b"[".repeat(9_999)), "unexpected end of JSON input");
    }

    /// Found by tests/fuzz_requests.rs: `{"token":[{"a":0},...]}` held ~48 bytes per byte of
    /// body, as every container kept the four slots a vector first grows to.
    #[test]
    fn finished_containers_hold_no_spare_room() {
        fn spare(node: &Node<'_>) -> usize {
            match &node.value {
                Value::Array(items) => {
                    items.capacity() - items.len() + items.iter().map(spare).sum::<usize>()
                }
                Value::Object(entries) => {
                    entries.capacity() - entries.len() + entries.iter().map(|(_, v)| spare(v)).sum::<usize>()
                }
                _ => 0,
            }
        }
        let cases: [&[u8]; 3] = [
            br#"{"token":[{"a":0},{"a":0},{"a":0}]}"#,
            b"[[1],[2,3],[]]",
            br#"{"a":{"b":[0]}}"#,
        ];
        for input in cases {
            assert_eq!(
                spare(&parse(input).unwrap()),
                0,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn values_keep_order_duplicates_and_raw_text() {
        let node = parse(br#" {"b": [1, 2.5e3, true, null], "a": "x", "a": {"k": -0}} "#).unwrap();
        let Value::Object(entries) = &node.value else {
            panic!("{node:?}")
        };
        let keys: Vec<_> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "a"]);
        let Value::Array(items) = &entries[0].1.value else {
            panic!()
        };
        assert_eq!(items[1].raw, b"2.5e3");
        assert_eq!(entries[2].1.raw, br#"{"k": -0}"#);
    }

    #[test]
    fn strings_unescape_like_go() {
        let text = |input: &[u8]| match parse(input).unwrap().value {
            Value::String(s) => s,
            other => panic!("{other:?}"),
        };
        assert_eq!(text(br#""a\"\\\/\b\f\n\r\t""#), "a\"\\/\u{8}\u{c}\n\r\t");
        assert_eq!(text(br#""\u00e9\ud83d\ude00""#), "é😀");
        assert_eq!(text(br#""\ud83dx""#), "\u{fffd}x");
        assert_eq!(text(b"\"a\xe2\x84z\""), "a\u{fffd}\u{fffd}z");
    }
}
