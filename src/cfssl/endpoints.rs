//! The issuer's `url` field: one or more base URLs, tried in order.

use reqwest::Url;

/// Ordered CFSSL base URLs, normalised so that `join` of an API path works whatever the user
/// wrote (spaces around commas, trailing slashes, a path prefix behind a proxy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints(Vec<Url>);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EndpointsError {
    #[error("no CFSSL URL given")]
    Empty,
    #[error("invalid CFSSL URL {url:?}: {reason}")]
    Invalid { url: String, reason: String },
}

impl Endpoints {
    pub fn parse(list: &str) -> Result<Self, EndpointsError> {
        let urls = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(parse_one)
            .collect::<Result<Vec<_>, _>>()?;
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

    /// The URL at `position` in the configured order.
    pub fn get(&self, position: usize) -> Option<&Url> {
        self.0.get(position)
    }

    /// The full URL of an API endpoint such as `api/v1/cfssl/authsign` on `base`.
    pub fn api(base: &Url, path: &str) -> Url {
        base.join(path)
            .expect("a relative API path always joins onto an http(s) base")
    }
}

fn parse_one(raw: &str) -> Result<Url, EndpointsError> {
    let invalid = |reason: &str| EndpointsError::Invalid {
        url: raw.to_string(),
        reason: reason.into(),
    };
    let mut url = Url::parse(raw).map_err(|e| invalid(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("scheme must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("must not carry a query or fragment"));
    }
    // A base ending in '/' makes `join` append instead of replacing the last segment.
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

impl std::fmt::Display for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<&str> = self.0.iter().map(|u| u.as_str().trim_end_matches('/')).collect();
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
    fn display_is_the_normalised_list() {
        let eps = Endpoints::parse(" http://a/ ,https://b:1").unwrap();
        assert_eq!(eps.to_string(), "http://a,https://b:1");
    }
}
