//! Go's `net/mail.ParseAddress` as far as cert-manager's email check sees it: the address it
//! finds in a single mailbox (`a@b`, `Name <a@b>`, `a@b (comment)`) or Go's error text.
//! Not covered: groups (`name: a@b;`, reported as "no angle-addr") and RFC 2047 encoded words
//! in display names (kept literally; any display name already fails cert-manager's check).

struct Parser<'a> {
    s: &'a str,
}

/// Go's `isAtext`: visible characters other than specials, and `.` when `dot`.
fn is_atext(c: char, dot: bool) -> bool {
    if c == '.' {
        return dot;
    }
    if "()<>[]:;@\\,\"".contains(c) {
        return false;
    }
    is_vchar(c)
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        self.s = self.s.trim_start_matches([' ', '\t']);
    }

    fn peek(&self) -> Option<char> {
        self.s.chars().next()
    }

    fn consume(&mut self, c: char) -> bool {
        match self.s.strip_prefix(c) {
            Some(rest) => {
                self.s = rest;
                true
            }
            None => false,
        }
    }

    /// Spaces and (nested) comments; false on an unclosed comment.
    fn skip_cfws(&mut self) -> bool {
        self.skip_space();
        while self.consume('(') {
            if self.comment().is_none() {
                return false;
            }
            self.skip_space();
        }
        true
    }

    /// The rest of a comment whose `(` was consumed.
    fn comment(&mut self) -> Option<String> {
        let (mut depth, mut text) = (1, String::new());
        let mut chars = self.s.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                self.s = &self.s[i + 1..];
                return Some(text);
            }
            text.push(c);
        }
        None
    }

    fn atom(&mut self, dot: bool, permissive: bool) -> Result<String, String> {
        let len = self.s.find(|c| !is_atext(c, dot)).unwrap_or(self.s.len());
        if len == 0 {
            return Err("mail: invalid string".to_string());
        }
        let atom = &self.s[..len];
        self.s = &self.s[len..];
        if !permissive {
            if atom.starts_with('.') {
                return Err("mail: leading dot in atom".to_string());
            }
            if atom.contains("..") {
                return Err("mail: double dot in atom".to_string());
            }
            if atom.ends_with('.') {
                return Err("mail: trailing dot in atom".to_string());
            }
        }
        Ok(atom.to_string())
    }

    fn quoted_string(&mut self) -> Result<String, String> {
        let mut chars = self.s.char_indices().skip(1);
        let mut out = String::new();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.s = &self.s[i + 1..];
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, escaped)) if is_vchar(escaped) || is_wsp(escaped) => out.push(escaped),
                    Some((_, bad)) => {
                        let bad = go_quote_rune(bad);
                        return Err(format!("mail: bad character in quoted-string: {bad}"));
                    }
                    None => return Err("mail: unclosed quoted-string".to_string()),
                },
                c if is_vchar(c) || is_wsp(c) => out.push(c),
                c => {
                    return Err(format!(
                        "mail: bad character in quoted-string: {}",
                        go_quote_rune(c)
                    ));
                }
            }
        }
        Err("mail: unclosed quoted-string".to_string())
    }

    fn domain_literal(&mut self) -> Result<String, String> {
        self.consume('[');
        let mut end = None;
        for (i, c) in self.s.char_indices() {
            if c == ']' {
                end = Some(i);
                break;
            }
            if !is_vchar(c) || c == '[' || c == '\\' {
                let bad = go_quote_rune(c);
                return Err(format!("mail: bad character in domain-literal: {bad}"));
            }
        }
        let end = end.ok_or("mail: unclosed domain-literal")?;
        let text = &self.s[..end];
        self.s = &self.s[end + 1..];
        let quoted = crate::certificates::go::strconv_quote(text);
        match text.strip_prefix("IPv6:") {
            // Go checks for a 16-byte address, which any address it parses is.
            Some(ip) if !super::names::is_ip(ip) => {
                Err(format!("mail: invalid IPv6 address in domain-literal: {quoted}"))
            }
            Some(_) => Ok(format!("[{text}]")),
            // Otherwise only IPv4 (or IPv4-mapped IPv6) is accepted.
            None if !is_ipv4(text) => Err(format!("mail: invalid IP address in domain-literal: {quoted}")),
            None => Ok(format!("[{text}]")),
        }
    }

    /// `local@domain`; the position is restored on error by the caller.
    fn addr_spec(&mut self) -> Result<String, String> {
        self.skip_space();
        if self.s.is_empty() {
            return Err("mail: no addr-spec".to_string());
        }
        let local = if self.peek() == Some('"') {
            // Go replaces any error here by this one when nothing was read.
            let local = self.quoted_string().unwrap_or_default();
            if local.is_empty() {
                return Err("mail: empty quoted string in addr-spec".to_string());
            }
            local
        } else {
            self.atom(true, false)?
        };
        if !self.consume('@') {
            return Err("mail: missing @ in addr-spec".to_string());
        }
        self.skip_space();
        if self.s.is_empty() {
            return Err("mail: no domain in addr-spec".to_string());
        }
        let domain = if self.peek() == Some('[') {
            self.domain_literal()?
        } else {
            self.atom(true, false)?
        };
        Ok(format!("{local}@{domain}"))
    }

    fn phrase(&mut self) -> Result<String, String> {
        let mut words: Vec<String> = Vec::new();
        let mut error = None;
        loop {
            if !words.is_empty() && !self.skip_cfws() {
                return Err("mail: misformatted parenthetical comment".to_string());
            }
            self.skip_space();
            if self.s.is_empty() {
                break;
            }
            let word = if self.peek() == Some('"') {
                self.quoted_string()
            } else {
                self.atom(true, true)
            };
            match word {
                Ok(word) => words.push(word),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        match error {
            Some(e) if words.is_empty() => Err(format!("mail: missing word in phrase: {e}")),
            _ => Ok(words.join(" ")),
        }
    }

    fn address(&mut self) -> Result<String, String> {
        self.skip_space();
        if self.s.is_empty() {
            return Err("mail: no address".to_string());
        }
        let saved = self.s;
        match self.addr_spec() {
            Ok(spec) => {
                self.skip_space();
                if self.consume('(') && self.comment().is_none() {
                    return Err("mail: misformatted parenthetical comment".to_string());
                }
                return Ok(spec);
            }
            Err(_) => self.s = saved,
        }
        let name = if self.peek() == Some('<') {
            String::new()
        } else {
            self.phrase()?
        };
        self.skip_space();
        if !self.consume('<') {
            if name.chars().all(|c| is_atext(c, true)) {
                return Err("mail: missing '@' or angle-addr".to_string());
            }
            return Err("mail: no angle-addr".to_string());
        }
        let spec = self.addr_spec()?;
        if !self.consume('>') {
            return Err("mail: unclosed angle-addr".to_string());
        }
        Ok(spec)
    }
}

/// RFC 5322 VCHAR as Go reads it: visible ASCII and any non-ASCII character.
fn is_vchar(c: char) -> bool {
    ('!'..='~').contains(&c) || !c.is_ascii()
}

fn is_wsp(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Whether Go's `net.ParseIP(text).To4()` is non-nil: IPv4, or IPv4-mapped IPv6.
fn is_ipv4(text: &str) -> bool {
    match text.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => true,
        Ok(std::net::IpAddr::V6(v6)) => v6.to_ipv4_mapped().is_some(),
        Err(_) => false,
    }
}

/// Go's `%q` of a rune.
fn go_quote_rune(c: char) -> String {
    let quoted = crate::certificates::go::strconv_quote(&c.to_string());
    let inner = &quoted[1..quoted.len() - 1];
    let inner = if inner == "\\\"" {
        "\""
    } else if c == '\'' {
        "\\'"
    } else {
        inner
    };
    format!("'{inner}'")
}

/// The address `ParseAddress` finds in `text`, or Go's error.
pub fn parse_address(text: &str) -> Result<String, String> {
    let mut parser = Parser { s: text };
    let address = parser.address()?;
    if !parser.skip_cfws() {
        return Err("mail: misformatted parenthetical comment".to_string());
    }
    if !parser.s.is_empty() {
        return Err(format!(
            "mail: expected single address, got {}",
            crate::certificates::go::strconv_quote(parser.s)
        ));
    }
    Ok(address)
}
