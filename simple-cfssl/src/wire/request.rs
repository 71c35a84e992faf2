//! The three request bodies multirootca reads, decoded with Go's `json.Unmarshal` rules so that
//! every refusal carries multirootca's text:
//!
//! - keys match struct fields exactly, else case-insensitively; unknown keys are skipped and a
//!   repeated key is applied again;
//! - `null` leaves a field as it was;
//! - a value of the wrong type is remembered (the first one wins) and decoding goes on;
//! - `[]byte` fields are base64 strings (or arrays of bytes);
//! - the custom decoders of `big.Int` (`serial`) and cfssl's OID (`extensions[].id`) stop
//!   decoding at once, and their error replaces any remembered one.

use super::base64;
use super::json::{self, Node, Value};

/// Why a body could not be decoded, worded as Go words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

/// `auth.AuthenticatedRequest`: the outer authsign body.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AuthRequest {
    pub token: Vec<u8>,
    /// The exact inner request bytes the token signs.
    pub request: Vec<u8>,
}

/// `signer.SignRequest`: the inner authsign request.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SignRequest {
    pub certificate_request: String,
    pub label: String,
    pub profile: String,
    /// `Some` replaces the CSR's SANs, even when empty (Go tells `[]` from absent).
    pub hosts: Option<Vec<String>>,
    pub subject: Option<Subject>,
    /// How many extensions were asked for; no profile here allows any.
    pub extensions: usize,
    /// The wmf fork's field (cfssl PR #1218); stock multirootca does not know it.
    pub bundle: bool,
}

/// `signer.Subject`: overrides for the CSR's subject.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Subject {
    pub common_name: String,
    pub names: Vec<Name>,
    pub serial_number: String,
}

/// `csr.Name`: one group of subject attributes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Name {
    pub country: String,
    pub province: String,
    pub locality: String,
    pub organization: String,
    pub organizational_unit: String,
}

/// `info.Req`: the `/info` body.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    pub label: String,
    pub profile: String,
}

pub fn auth_request(body: &[u8]) -> Result<AuthRequest, DecodeError> {
    let node = syntax(body)?;
    let mut out = AuthRequest::default();
    let mut d = Decoder::default();
    d.top(
        &node,
        "auth.AuthenticatedRequest",
        "AuthenticatedRequest",
        |d, field, value| {
            match field {
                "timestamp" => d.int64(value),
                "remote_address" => {
                    d.bytes(value);
                }
                "token" => d.bytes_into(value, &mut out.token),
                "request" => d.bytes_into(value, &mut out.request),
                _ => {}
            }
            Ok(())
        },
    )?;
    d.finish(out)
}

/// Decodes the inner request; `bundle` is a known field only when the server supports bundles.
pub fn sign_request(body: &[u8], bundle_field: bool) -> Result<SignRequest, DecodeError> {
    let node = syntax(body)?;
    let mut out = SignRequest::default();
    let mut d = Decoder::default();
    d.top(&node, "signer.SignRequest", "SignRequest", |d, field, value| {
        match field {
            "hosts" => d.strings(value, &mut out.hosts),
            "certificate_request" => d.string(value, &mut out.certificate_request),
            "subject" => d.subject(value, &mut out.subject)?,
            "profile" => d.string(value, &mut out.profile),
            "crl_override" => d.string(value, &mut String::new()),
            "label" => d.string(value, &mut out.label),
            "serial" => big_int(value)?,
            "extensions" => out.extensions = d.extensions(value)?,
            "bundle" if bundle_field => d.bool(value, &mut out.bundle),
            _ => {}
        }
        Ok(())
    })?;
    d.finish(out)
}

pub fn info_request(body: &[u8]) -> Result<InfoRequest, DecodeError> {
    let node = syntax(body)?;
    let mut out = InfoRequest::default();
    let mut d = Decoder::default();
    d.top(&node, "info.Req", "Req", |d, field, value| {
        match field {
            "label" => d.string(value, &mut out.label),
            "profile" => d.string(value, &mut out.profile),
            _ => {}
        }
        Ok(())
    })?;
    d.finish(out)
}

fn syntax(body: &[u8]) -> Result<Node<'_>, DecodeError> {
    json::parse(body).map_err(|e| DecodeError(e.to_string()))
}

/// The JSON keys of each struct, as Go's field tags spell them.
fn fields_of(go_struct: &str) -> &'static [&'static str] {
    match go_struct {
        "AuthenticatedRequest" => &["timestamp", "remote_address", "token", "request"],
        "SignRequest" => &[
            "hosts",
            "certificate_request",
            "subject",
            "profile",
            "crl_override",
            "label",
            "serial",
            "extensions",
            "bundle",
        ],
        "Req" => &["label", "profile"],
        "Subject" => &["CN", "names", "SerialNumber"],
        "Name" => &["C", "ST", "L", "O", "OU"],
        "Extension" => &["id", "critical", "value"],
        _ => &[],
    }
}

/// Go's key matching: the exact name, else the first one equal under case folding (which also
/// folds the Kelvin sign into `k` and the long s into `s`).
fn match_field(go_struct: &str, key: &str) -> Option<&'static str> {
    let fields = fields_of(go_struct);
    let fold = |s: &str| -> String {
        s.chars()
            .map(|c| match c {
                '\u{212a}' => 'k',
                '\u{17f}' => 's',
                c => c.to_ascii_lowercase(),
            })
            .collect()
    };
    fields
        .iter()
        .find(|f| **f == key)
        .or_else(|| fields.iter().find(|f| fold(f) == fold(key)))
        .copied()
}

type Fatal = DecodeError;

/// Go's decoder state: the first type error, and where in the document decoding is.
#[derive(Default)]
struct Decoder {
    saved: Option<DecodeError>,
    go_struct: Option<&'static str>,
    path: Vec<&'static str>,
}

impl Decoder {
    fn finish<T>(self, out: T) -> Result<T, DecodeError> {
        match self.saved {
            Some(err) => Err(err),
            None => Ok(out),
        }
    }

    /// Remembers a type error unless an earlier one is already remembered.
    fn mismatch(&mut self, found: &str, go_type: &str) {
        if self.saved.is_some() {
            return;
        }
        let message = match self.go_struct {
            None => format!("json: cannot unmarshal {found} into Go value of type {go_type}"),
            Some(name) => format!(
                "json: cannot unmarshal {found} into Go struct field {name}.{} of type {go_type}",
                self.path.join(".")
            ),
        };
        self.saved = Some(DecodeError(message));
    }

    fn save(&mut self, err: impl ToString) {
        if self.saved.is_none() {
            self.saved = Some(DecodeError(err.to_string()));
        }
    }

    /// Decodes the document's top value into the struct `go_type`.
    fn top(
        &mut self,
        node: &Node<'_>,
        go_type: &str,
        go_struct: &'static str,
        each: impl FnMut(&mut Self, &'static str, &Node<'_>) -> Result<(), Fatal>,
    ) -> Result<(), Fatal> {
        match &node.value {
            Value::Object(entries) => self.fields(entries, go_struct, each),
            Value::Null => Ok(()),
            other => {
                self.mismatch(other.kind(), go_type);
                Ok(())
            }
        }
    }

    /// Runs `each` for every key that names a field of `go_struct`, with Go's error context.
    fn fields(
        &mut self,
        entries: &[(String, Node<'_>)],
        go_struct: &'static str,
        mut each: impl FnMut(&mut Self, &'static str, &Node<'_>) -> Result<(), Fatal>,
    ) -> Result<(), Fatal> {
        for (key, value) in entries {
            let Some(field) = match_field(go_struct, key) else {
                continue;
            };
            let outer = self.go_struct.replace(go_struct);
            self.path.push(field);
            let result = each(self, field, value);
            self.path.pop();
            self.go_struct = outer;
            result?;
        }
        Ok(())
    }

    fn string(&mut self, node: &Node<'_>, out: &mut String) {
        match &node.value {
            Value::String(s) => *out = s.clone(),
            Value::Null => {}
            other => self.mismatch(other.kind(), "string"),
        }
    }

    fn bool(&mut self, node: &Node<'_>, out: &mut bool) {
        match &node.value {
            Value::Bool(b) => *out = *b,
            Value::Null => {}
            other => self.mismatch(other.kind(), "bool"),
        }
    }

    fn int64(&mut self, node: &Node<'_>) {
        match &node.value {
            Value::Number => {
                if std::str::from_utf8(node.raw)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .is_none()
                {
                    self.mismatch(&format!("number {node}"), "int64");
                }
            }
            Value::Null => {}
            other => self.mismatch(other.kind(), "int64"),
        }
    }

    fn bytes_into(&mut self, node: &Node<'_>, out: &mut Vec<u8>) {
        if let Some(bytes) = self.bytes(node) {
            *out = bytes;
        }
    }

    /// A `[]byte`: a base64 string, or an array of numbers 0..=255; `None` for null or error.
    fn bytes(&mut self, node: &Node<'_>) -> Option<Vec<u8>> {
        match &node.value {
            Value::String(s) => match base64::decode(s.as_bytes()) {
                Ok(bytes) => Some(bytes),
                Err(err) => {
                    self.save(err);
                    None
                }
            },
            Value::Array(items) => Some(items.iter().map(|item| self.byte(item)).collect()),
            Value::Null => Some(Vec::new()),
            other => {
                self.mismatch(other.kind(), "[]uint8");
                None
            }
        }
    }

    fn byte(&mut self, node: &Node<'_>) -> u8 {
        match &node.value {
            Value::Number => {
                let parsed = std::str::from_utf8(node.raw)
                    .ok()
                    .and_then(|s| s.parse::<u8>().ok());
                parsed.unwrap_or_else(|| {
                    self.mismatch(&format!("number {node}"), "uint8");
                    0
                })
            }
            Value::Null => 0,
            other => {
                self.mismatch(other.kind(), "uint8");
                0
            }
        }
    }

    fn strings(&mut self, node: &Node<'_>, out: &mut Option<Vec<String>>) {
        match &node.value {
            Value::Array(items) => {
                let mut list = Vec::with_capacity(items.len());
                for item in items {
                    let mut s = String::new();
                    self.string(item, &mut s);
                    list.push(s);
                }
                *out = Some(list);
            }
            Value::Null => *out = None,
            other => self.mismatch(other.kind(), "[]string"),
        }
    }

    fn subject(&mut self, node: &Node<'_>, out: &mut Option<Subject>) -> Result<(), Fatal> {
        let entries = match &node.value {
            Value::Object(entries) => entries,
            Value::Null => {
                *out = None;
                return Ok(());
            }
            other => {
                self.mismatch(other.kind(), "signer.Subject");
                return Ok(());
            }
        };
        let subject = out.get_or_insert_with(Subject::default);
        self.fields(entries, "Subject", |d, field, value| {
            match field {
                "CN" => d.string(value, &mut subject.common_name),
                "names" => d.names(value, &mut subject.names),
                "SerialNumber" => d.string(value, &mut subject.serial_number),
                _ => {}
            }
            Ok(())
        })
    }

    fn names(&mut self, node: &Node<'_>, out: &mut Vec<Name>) {
        let items = match &node.value {
            Value::Array(items) => items,
            Value::Null => {
                out.clear();
                return;
            }
            other => {
                self.mismatch(other.kind(), "[]csr.Name");
                return;
            }
        };
        out.clear();
        for item in items {
            let mut name = Name::default();
            match &item.value {
                Value::Object(entries) => {
                    let _ = self.fields(entries, "Name", |d, field, value| {
                        let slot = match field {
                            "C" => &mut name.country,
                            "ST" => &mut name.province,
                            "L" => &mut name.locality,
                            "O" => &mut name.organization,
                            _ => &mut name.organizational_unit,
                        };
                        d.string(value, slot);
                        Ok(())
                    });
                }
                Value::Null => {}
                other => self.mismatch(other.kind(), "csr.Name"),
            }
            out.push(name);
        }
    }

    /// `[]signer.Extension`; returns how many there are.
    fn extensions(&mut self, node: &Node<'_>) -> Result<usize, Fatal> {
        let items = match &node.value {
            Value::Array(items) => items,
            Value::Null => return Ok(0),
            other => {
                self.mismatch(other.kind(), "[]signer.Extension");
                return Ok(0);
            }
        };
        for item in items {
            match &item.value {
                Value::Object(entries) => self.fields(entries, "Extension", |d, field, value| {
                    match field {
                        "id" => oid(value)?,
                        "critical" => d.bool(value, &mut false),
                        _ => d.string(value, &mut String::new()),
                    }
                    Ok(())
                })?,
                Value::Null => {}
                other => self.mismatch(other.kind(), "signer.Extension"),
            }
        }
        Ok(items.len())
    }
}

/// `*big.Int`'s own decoder: only an integer literal (or null) is accepted.
fn big_int(node: &Node<'_>) -> Result<(), Fatal> {
    let integer = match &node.value {
        Value::Null => true,
        Value::Number => !node.raw.iter().any(|b| matches!(b, b'.' | b'e' | b'E')),
        _ => false,
    };
    if integer {
        return Ok(());
    }
    Err(DecodeError(format!(
        "math/big: cannot unmarshal {} into a *big.Int",
        go_quote(&node.to_string())
    )))
}

/// cfssl's OID decoder: a quoted, dotted list of integers, read without unescaping.
fn oid(node: &Node<'_>) -> Result<(), Fatal> {
    let raw = node.to_string();
    let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
        return Err(DecodeError(format!(
            "OID JSON string not wrapped in quotes.{raw}"
        )));
    };
    if !inner.bytes().any(|b| b.is_ascii_digit()) {
        return Err(DecodeError("Invalid OID".into()));
    }
    for part in inner.split('.') {
        if let Some(err) = go_atoi_error(part) {
            return Err(DecodeError(err));
        }
    }
    Ok(())
}

/// The error Go's `strconv.Atoi` gives for `s`, if any.
fn go_atoi_error(s: &str) -> Option<String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Some(format!("strconv.Atoi: parsing {}: invalid syntax", go_quote(s)));
    }
    if s.parse::<i64>().is_err() {
        return Some(format!(
            "strconv.Atoi: parsing {}: value out of range",
            go_quote(s)
        ));
    }
    None
}

/// Go's `%q` for the short, mostly ASCII texts quoted in error messages.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            c if (c as u32) < 0x100 => out.push_str(&json::go_escape_rune(c)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth_err(body: &str) -> String {
        auth_request(body.as_bytes()).unwrap_err().0
    }

    fn sign_err(body: &str) -> String {
        sign_request(body.as_bytes(), true).unwrap_err().0
    }

    fn info_err(body: &str) -> String {
        info_request(body.as_bytes()).unwrap_err().0
    }

    /// Every message below was read back from Debian's multirootca for the same body.
    #[test]
    fn outer_errors_match_multirootca() {
        for (body, want) in [
            (
                "[1]",
                "json: cannot unmarshal array into Go value of type auth.AuthenticatedRequest",
            ),
            (
                "\"abc\"",
                "json: cannot unmarshal string into Go value of type auth.AuthenticatedRequest",
            ),
            (
                r#"{"token":1,"request":"e30="}"#,
                "json: cannot unmarshal number into Go struct field AuthenticatedRequest.token of type []uint8",
            ),
            (
                r#"{"token":"AAAA","request":"!!!"}"#,
                "illegal base64 data at input byte 0",
            ),
            (
                r#"{"token":"!!!","request":"e30="}"#,
                "illegal base64 data at input byte 0",
            ),
            (
                r#"{"token":[1,300],"request":"e30="}"#,
                "json: cannot unmarshal number 300 into Go struct field AuthenticatedRequest.token of type uint8",
            ),
            (
                r#"{"timestamp":"x","request":"e30="}"#,
                "json: cannot unmarshal string into Go struct field AuthenticatedRequest.timestamp of type int64",
            ),
            (
                r#"{"timestamp":1.5,"request":"e30="}"#,
                "json: cannot unmarshal number 1.5 into Go struct field AuthenticatedRequest.timestamp of type int64",
            ),
            (
                r#"{"request":"!!","request":"e30="}"#,
                "illegal base64 data at input byte 0",
            ),
            (
                r#"{"token":"!!","timestamp":"x"}"#,
                "illegal base64 data at input byte 0",
            ),
            (
                r#"{"timestamp":"x","token":"!!"}"#,
                "json: cannot unmarshal string into Go struct field AuthenticatedRequest.timestamp of type int64",
            ),
            (
                r#"{"token":{},"request":"e30="}"#,
                "json: cannot unmarshal object into Go struct field AuthenticatedRequest.token of type []uint8",
            ),
            (
                r#"{"token":true,"request":"e30="}"#,
                "json: cannot unmarshal bool into Go struct field AuthenticatedRequest.token of type []uint8",
            ),
            (
                r#"{"remote_address":"!!","request":"e30="}"#,
                "illegal base64 data at input byte 0",
            ),
        ] {
            assert_eq!(auth_err(body), want, "{body}");
        }
    }

    #[test]
    fn outer_fields_decode() {
        let ok = auth_request(br#"{"TOKEN":[1,2],"Request":"e30=","timestamp":5,"x":[]}"#).unwrap();
        assert_eq!(ok.token, [1, 2]);
        assert_eq!(ok.request, b"{}");
        assert_eq!(auth_request(b"null").unwrap(), AuthRequest::default());
        let later_wins = auth_request(br#"{"request":"e30=","request":"W10="}"#).unwrap();
        assert_eq!(later_wins.request, b"[]");
    }

    #[test]
    fn inner_errors_match_multirootca() {
        let field = |rest: &str| format!("json: cannot unmarshal {rest}");
        for (body, want) in [
            (
                r#"{"label":5}"#,
                field("number into Go struct field SignRequest.label of type string"),
            ),
            (
                r#"{"hosts":"x"}"#,
                field("string into Go struct field SignRequest.hosts of type []string"),
            ),
            (
                r#"{"hosts":[1]}"#,
                field("number into Go struct field SignRequest.hosts of type string"),
            ),
            (
                r#"{"subject":"x"}"#,
                field("string into Go struct field SignRequest.subject of type signer.Subject"),
            ),
            (
                r#"{"subject":{"CN":5}}"#,
                field("number into Go struct field Subject.subject.CN of type string"),
            ),
            (
                r#"{"subject":{"names":[{"O":5}]}}"#,
                field("number into Go struct field Name.subject.names.O of type string"),
            ),
            (
                r#"{"subject":{"names":"x"}}"#,
                field("string into Go struct field Subject.subject.names of type []csr.Name"),
            ),
            (
                r#"{"subject":{"names":[5]}}"#,
                field("number into Go struct field Subject.subject.names of type csr.Name"),
            ),
            (
                r#"{"subject":{"SerialNumber":5}}"#,
                field("number into Go struct field Subject.subject.SerialNumber of type string"),
            ),
            (
                r#"{"serial":"x"}"#,
                r#"math/big: cannot unmarshal "\"x\"" into a *big.Int"#.into(),
            ),
            (
                r#"{"serial":1.5}"#,
                r#"math/big: cannot unmarshal "1.5" into a *big.Int"#.into(),
            ),
            (
                r#"{"serial":{"a":1}}"#,
                r#"math/big: cannot unmarshal "{\"a\":1}" into a *big.Int"#.into(),
            ),
            (
                r#"{"hosts":"x","serial":"y"}"#,
                r#"math/big: cannot unmarshal "\"y\"" into a *big.Int"#.into(),
            ),
            (
                r#"{"extensions":"x"}"#,
                field("string into Go struct field SignRequest.extensions of type []signer.Extension"),
            ),
            (
                r#"{"extensions":[5]}"#,
                field("number into Go struct field SignRequest.extensions of type signer.Extension"),
            ),
            (
                r#"{"extensions":[{"critical":"x"}]}"#,
                field("string into Go struct field Extension.extensions.critical of type bool"),
            ),
            (
                r#"{"extensions":[{"id":"1.2.3","value":5}]}"#,
                field("number into Go struct field Extension.extensions.value of type string"),
            ),
            (
                r#"{"extensions":[{"id":[1,2,3,4]}]}"#,
                "OID JSON string not wrapped in quotes.[1,2,3,4]".into(),
            ),
            (
                r#"{"extensions":[{"id":null}]}"#,
                "OID JSON string not wrapped in quotes.null".into(),
            ),
            (r#"{"extensions":[{"id":"x"}]}"#, "Invalid OID".into()),
            (r#"{"extensions":[{"id":""}]}"#, "Invalid OID".into()),
            (
                r#"{"extensions":[{"id":"1.x"}]}"#,
                r#"strconv.Atoi: parsing "x": invalid syntax"#.into(),
            ),
            (
                r#"{"crl_override":5}"#,
                field("number into Go struct field SignRequest.crl_override of type string"),
            ),
            (
                r#"{"certificate_request":5}"#,
                field("number into Go struct field SignRequest.certificate_request of type string"),
            ),
            ("[]", field("array into Go value of type signer.SignRequest")),
            ("5", field("number into Go value of type signer.SignRequest")),
            ("true", field("bool into Go value of type signer.SignRequest")),
            ("", "unexpected end of JSON input".into()),
            (
                "xx",
                "invalid character 'x' looking for beginning of value".into(),
            ),
        ] {
            assert_eq!(sign_err(body), want, "{body}");
        }
    }

    #[test]
    fn inner_fields_decode() {
        let body = r#"{"certificate_request":"CSR","label":"l","profile":"p","hosts":["a","b"],
            "subject":{"cn":"x","names":[{"o":"O1","OU":"U"},null]},"serial":12,
            "extensions":[],"bundle":true,"metadata":5,"not_before":5}"#;
        let req = sign_request(body.as_bytes(), true).unwrap();
        assert_eq!(req.certificate_request, "CSR");
        assert_eq!((req.label.as_str(), req.profile.as_str()), ("l", "p"));
        assert_eq!(
            req.hosts.as_deref(),
            Some(&["a".to_string(), "b".to_string()][..])
        );
        let subject = req.subject.unwrap();
        assert_eq!(subject.common_name, "x");
        assert_eq!(subject.names.len(), 2);
        assert_eq!(subject.names[0].organizational_unit, "U");
        assert!(req.bundle);
        assert_eq!(
            sign_request(br#"{"hosts":[]}"#, true).unwrap().hosts,
            Some(vec![])
        );
        assert_eq!(sign_request(br#"{"hosts":null}"#, true).unwrap().hosts, None);
        assert_eq!(
            sign_request(br#"{"label":"a","label":null}"#, true)
                .unwrap()
                .label,
            "a"
        );
    }

    #[test]
    fn bundle_is_unknown_to_stock_multirootca() {
        assert!(!sign_request(br#"{"bundle":"x"}"#, false).unwrap().bundle);
        assert_eq!(
            sign_err(r#"{"bundle":"x"}"#),
            "json: cannot unmarshal string into Go struct field SignRequest.bundle of type bool"
        );
    }

    #[test]
    fn info_errors_match_multirootca() {
        for (body, want) in [
            (
                "[]",
                "json: cannot unmarshal array into Go value of type info.Req",
            ),
            (
                "5",
                "json: cannot unmarshal number into Go value of type info.Req",
            ),
            (
                r#"{"label":[]}"#,
                "json: cannot unmarshal array into Go struct field Req.label of type string",
            ),
            (
                r#"{"profile":5}"#,
                "json: cannot unmarshal number into Go struct field Req.profile of type string",
            ),
        ] {
            assert_eq!(info_err(body), want, "{body}");
        }
        let req = info_request(br#"{"LABEL":"a","label":"b","bare":"x"}"#).unwrap();
        assert_eq!(req.label, "b");
    }
}
