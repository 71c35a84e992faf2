//! The issuer's `url` field: one or more base URLs, tried in order.

use reqwest::Url;

/// Ordered CFSSL base URLs, normalised so that `join` of an API path works whatever the user
/// wrote (spaces around commas, trailing slashes, a path prefix behind a proxy).
///
/// A `user:password@` in a URL is sent as HTTP basic auth (reqwest does so) but never shown:
/// `Display`, `Debug` and every error carry [`redact`]ed URLs.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoints(Vec<Url>);

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Endpoints").field(&self.to_string()).finish()
    }
}

/// The most URLs one issuer may list. Each call tries them in order, each with the full CFSSL
/// timeout, so a list of URLs that do not answer holds a reconcile for up to this many
/// timeouts (8 × 30 s: 4 minutes) and opens this many connections per check; an issuer made by
/// a tenant must not hold the manager longer than that. Eight is more than a CA deployment
/// needs (a primary and a few replicas or sites).
pub const MAX_URLS: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum EndpointsError {
    #[error("no CFSSL URL given")]
    Empty,
    #[error("{count} CFSSL URLs given; at most {MAX_URLS} are allowed")]
    TooMany { count: usize },
    /// `url` is [`redact`]ed.
    #[error("invalid CFSSL URL {url:?}: {problem}")]
    Invalid {
        url: String,
        #[source]
        problem: UrlProblem,
    },
}

/// What is wrong with one base URL.
#[derive(Debug, thiserror::Error)]
pub enum UrlProblem {
    /// The text is not a URL (the cause is a `url::ParseError`, whose messages are fixed texts).
    #[error("{0}")]
    Unparsable(#[source] super::BoxError),
    #[error("scheme must be http or https")]
    Scheme,
    /// `host:port` without `https://`: the Go issuer's URL parser assumed `http://`; we ask
    /// instead of sending credentials in clear. `suggestion` is [`redact`]ed.
    #[error("no scheme: write it as {suggestion}")]
    NoScheme { suggestion: String },
    #[error("no host")]
    NoHost,
    #[error("must not carry a query or fragment")]
    QueryOrFragment,
    /// A `,` inside `user:password@` split the list there: neither part is shown.
    #[error("a comma splits its user:password@ (write a comma in a password as %2C)")]
    CommaInCredentials,
}

impl Endpoints {
    pub fn parse(list: &str) -> Result<Self, EndpointsError> {
        let items: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        split_credentials(&items)?;
        if items.len() > MAX_URLS {
            return Err(EndpointsError::TooMany { count: items.len() });
        }
        let urls = items.into_iter().map(parse_one).collect::<Result<Vec<_>, _>>()?;
        if urls.is_empty() {
            return Err(EndpointsError::Empty);
        }
        Ok(Self(urls))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Url> {
        self.0.iter()
    }

    /// How many URLs there are (never zero).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true: parsing refuses an empty list.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The URLs reached over plain `http://`, as shown to people: neither the CA's identity
    /// nor the traffic (tokens, CSRs, certificates) is protected on them.
    pub fn plaintext(&self) -> Vec<String> {
        self.0
            .iter()
            .filter(|u| u.scheme() == "http")
            .map(display_base)
            .collect()
    }

    /// The full URL of an API endpoint such as `api/v1/cfssl/authsign` on `base`: `path` is
    /// appended to the base's path, which always ends in `/` (see [`Endpoints::parse`]).
    pub fn api(base: &Url, path: &str) -> Url {
        let mut url = base.clone();
        url.set_path(&format!("{}{path}", base.path()));
        url
    }
}

/// Pure: refuses a list where a comma fell inside a `user:password@`, before any item is shown
/// (the part before the comma would be quoted whole, password and all). Such an item is one
/// after the first with an `@` and no scheme.
fn split_credentials(items: &[&str]) -> Result<(), EndpointsError> {
    match items
        .iter()
        .skip(1)
        .find(|i| !i.contains("://") && i.contains('@'))
    {
        Some(item) => Err(EndpointsError::Invalid {
            url: redact_invalid(item),
            problem: UrlProblem::CommaInCredentials,
        }),
        None => Ok(()),
    }
}

fn parse_one(raw: &str) -> Result<Url, EndpointsError> {
    let invalid = |problem| EndpointsError::Invalid {
        url: redact_invalid(raw),
        problem,
    };
    if let Some(suggestion) = with_scheme(raw) {
        return Err(invalid(UrlProblem::NoScheme { suggestion }));
    }
    let mut url = Url::parse(raw).map_err(|e| invalid(UrlProblem::Unparsable(Box::new(e))))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(UrlProblem::Scheme));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid(UrlProblem::NoHost));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid(UrlProblem::QueryOrFragment));
    }
    // A base ending in '/' makes `join` append instead of replacing the last segment.
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

/// Pure: for a `host[:port][/path]` written without a scheme (which `Url` reads as a scheme
/// `host:` or no URL at all), the URL meant, with `https://`, redacted.
fn with_scheme(raw: &str) -> Option<String> {
    if raw.contains("://") {
        return None;
    }
    let meant = format!("https://{raw}");
    let url = Url::parse(&meant).ok()?;
    url.host_str().filter(|h| !h.is_empty())?;
    Some(redact_invalid(&meant))
}

/// A base URL as shown to people: no trailing `/`, credentials replaced by `***`.
pub fn display_base(base: &Url) -> String {
    redact(base.as_str().trim_end_matches('/'))
}

/// [`redact`] of each URL in a comma-separated list; the whole list is hidden when a comma fell
/// inside a `user:password@` (see [`Endpoints::parse`]).
pub fn redact_list(list: &str) -> String {
    let items: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if split_credentials(&items).is_err() {
        return "***".to_string();
    }
    list.split(',').map(redact).collect::<Vec<_>>().join(",")
}

/// `scheme://user:password@host/...` becomes `scheme://***@host/...`. Works on text that does
/// not parse as a URL too, so that an invalid `url` can be named in an error: there everything
/// up to the last `@` goes, since a `/`, `?` or `#` may sit inside the password.
pub fn redact(raw: &str) -> String {
    if Url::parse(raw.trim()).is_err() {
        return redact_invalid(raw);
    }
    let Some(scheme_end) = raw.find("://").map(|i| i + 3) else {
        return match raw.rfind('@') {
            Some(at) => format!("***{}", &raw[at..]),
            None => raw.to_string(),
        };
    };
    let rest = &raw[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &raw[..scheme_end], &rest[at..]),
        None => raw.to_string(),
    }
}

/// [`redact`] for text that is not a valid URL, where `/`, `?` or `#` may sit inside a password
/// (`http://u:pa/ss@ca` does not parse): everything between the scheme and the last `@` goes.
fn redact_invalid(raw: &str) -> String {
    let scheme_end = raw.find("://").map_or(0, |i| i + 3);
    match raw[scheme_end..].rfind('@') {
        Some(at) => format!("{}***{}", &raw[..scheme_end], &raw[scheme_end + at..]),
        None => raw.to_string(),
    }
}

impl std::fmt::Display for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<String> = self.0.iter().map(display_base).collect();
        f.write_str(&list.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authsign_urls(list: &str) -> Result<Vec<String>, EndpointsError> {
        let eps = Endpoints::parse(list)?;
        Ok(eps
            .iter()
            .map(|b| Endpoints::api(b, "api/v1/cfssl/authsign").to_string())
            .collect())
    }

    #[test]
    fn parse_table() {
        let ok = [
            ("http://ca:8888", vec!["http://ca:8888/api/v1/cfssl/authsign"]),
            ("http://ca:8888/", vec!["http://ca:8888/api/v1/cfssl/authsign"]),
            (
                " https://a:8888/ , http://b ",
                vec![
                    "https://a:8888/api/v1/cfssl/authsign",
                    "http://b/api/v1/cfssl/authsign",
                ],
            ),
            (
                "https://proxy/cfssl",
                vec!["https://proxy/cfssl/api/v1/cfssl/authsign"],
            ),
            (
                "https://proxy/cfssl/,",
                vec!["https://proxy/cfssl/api/v1/cfssl/authsign"],
            ),
            (
                "http://[::1]:8888",
                vec!["http://[::1]:8888/api/v1/cfssl/authsign"],
            ),
        ];
        for (input, want) in ok {
            assert_eq!(authsign_urls(input).unwrap(), want, "input {input:?}");
        }
        let bad = [
            "",
            " , ",
            "ca:8888",
            "ftp://ca",
            "http://",
            "http://ca?x=1",
            "not a url",
        ];
        for input in bad {
            assert!(
                authsign_urls(input).is_err(),
                "input {input:?} should be rejected"
            );
        }
    }

    #[test]
    fn credentials_are_never_shown() {
        let cases = [
            ("https://user:s3cret@ca:8888/", "https://***@ca:8888/"),
            ("https://s3cret@ca", "https://***@ca"),
            ("http://u:s3cret@ca/path@x", "http://***@ca/path@x"),
            ("http://u:p@ss:s3cret@ca", "http://***@ca"),
            ("http://ca/p@th", "http://ca/p@th"),
            ("u:s3cret@ca:8888", "***@ca:8888"),
            ("https://ca:8888", "https://ca:8888"),
        ];
        for (raw, want) in cases {
            assert_eq!(redact(raw), want, "{raw}");
        }
        assert_eq!(
            redact_list("http://a:s3cret@x, https://b:s3cret@y/p"),
            "http://***@x, https://***@y/p"
        );
        let eps = Endpoints::parse("https://user:s3cret@a:1/, http://b").unwrap();
        assert_eq!(eps.to_string(), "https://***@a:1,http://b");
        assert_eq!(format!("{eps:?}"), r#"Endpoints("https://***@a:1,http://b")"#);
        let err = Endpoints::parse("u:s3cret@ca:8888").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid CFSSL URL "***@ca:8888": no scheme: write it as https://***@ca:8888"#
        );
        // A comma, slash or hash inside a password: the URL does not parse, nothing of it shows.
        for (list, want) in [
            (
                "http://u:s3,cret@ca",
                r#"invalid CFSSL URL "***@ca": a comma splits its user:password@ (write a comma in a password as %2C)"#,
            ),
            (
                "https://a, http://u:s3,cret@ca/p",
                r#"invalid CFSSL URL "***@ca/p": a comma splits its user:password@ (write a comma in a password as %2C)"#,
            ),
            (
                "http://u:s3/cret@ca",
                r#"invalid CFSSL URL "http://***@ca": invalid port number"#,
            ),
            (
                "http://u:s3#cret@ca",
                r#"invalid CFSSL URL "http://***@ca": invalid port number"#,
            ),
        ] {
            let err = Endpoints::parse(list).unwrap_err().to_string();
            assert_eq!(err, want, "{list}");
            assert!(!err.contains("s3") && !err.contains("cret"), "{err}");
        }
        assert_eq!(redact("http://u:s3/cret@ca"), "http://***@ca");
        assert_eq!(redact_list("https://a, http://u:s3,cret@ca"), "***");
        let err = Endpoints::parse("ftp://user:s3cret@ca").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid CFSSL URL "ftp://***@ca": scheme must be http or https"#
        );
    }

    /// What each invalid URL is told: a missing scheme gets the URL meant, with https://.
    #[test]
    fn error_table() {
        let cases = [
            ("", "no CFSSL URL given"),
            (
                "ca.example:8888",
                r#"invalid CFSSL URL "ca.example:8888": no scheme: write it as https://ca.example:8888"#,
            ),
            (
                "10.0.0.1:8888/cfssl",
                r#"invalid CFSSL URL "10.0.0.1:8888/cfssl": no scheme: write it as https://10.0.0.1:8888/cfssl"#,
            ),
            (
                "https://a, localhost:1",
                r#"invalid CFSSL URL "localhost:1": no scheme: write it as https://localhost:1"#,
            ),
            (
                "not a url",
                r#"invalid CFSSL URL "not a url": relative URL without a base"#,
            ),
            (
                "ftp://ca",
                r#"invalid CFSSL URL "ftp://ca": scheme must be http or https"#,
            ),
            (
                "https://ca/?label=x",
                r#"invalid CFSSL URL "https://ca/?label=x": must not carry a query or fragment"#,
            ),
        ];
        for (input, want) in cases {
            let err = Endpoints::parse(input).unwrap_err();
            assert_eq!(err.to_string(), want, "{input:?}");
        }
    }

    /// At most [`MAX_URLS`] URLs; empty items between commas do not count.
    #[test]
    fn url_cap_table() {
        let list = |n: usize| vec!["https://ca:8888"; n].join(",");
        let cases: [(String, Result<usize, String>); 6] = [
            (list(1), Ok(1)),
            (list(8), Ok(8)),
            (format!("{}, , ,", list(8)), Ok(8)),
            (
                list(9),
                Err("9 CFSSL URLs given; at most 8 are allowed".to_string()),
            ),
            (
                format!("{},not a url", list(8)),
                Err("9 CFSSL URLs given; at most 8 are allowed".to_string()),
            ),
            (
                list(1000),
                Err("1000 CFSSL URLs given; at most 8 are allowed".to_string()),
            ),
        ];
        for (input, want) in cases {
            let got = Endpoints::parse(&input)
                .map(|eps| eps.len())
                .map_err(|e| e.to_string());
            assert_eq!(got, want, "{input:?}");
        }
    }

    #[test]
    fn plaintext_table() {
        let cases: [(&str, &[&str]); 4] = [
            ("https://a:8888", &[]),
            ("http://a:8888", &["http://a:8888"]),
            ("https://a, http://u:s3cret@b/p/", &["http://***@b/p"]),
            ("http://a,http://b", &["http://a", "http://b"]),
        ];
        for (list, want) in cases {
            assert_eq!(Endpoints::parse(list).unwrap().plaintext(), want, "{list}");
        }
    }

    #[test]
    fn display_is_the_normalised_list() {
        let eps = Endpoints::parse(" http://a/ ,https://b:1").unwrap();
        assert_eq!(eps.to_string(), "http://a,https://b:1");
    }
}
