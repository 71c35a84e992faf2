//! The allow-list's parsing and matching, and the trust each issuer's URLs get.

use std::sync::Arc;

use super::*;

fn list(text: &str) -> AllowList {
    text.parse().unwrap()
}

#[test]
fn parse_table() {
    let cases: [(&str, Result<Vec<Entry>, AllowListError>); 12] = [
        ("ca.example", Ok(vec![Entry::Name("ca.example".into())])),
        ("CA.Example", Ok(vec![Entry::Name("ca.example".into())])),
        (
            "*.svc.cluster.local",
            Ok(vec![Entry::Suffix(".svc.cluster.local".into())]),
        ),
        (
            " 10.0.0.0/8 , ,fd00::/8",
            Ok(vec![
                Entry::Net {
                    addr: "10.0.0.0".parse().unwrap(),
                    prefix: 8,
                },
                Entry::Net {
                    addr: "fd00::".parse().unwrap(),
                    prefix: 8,
                },
            ]),
        ),
        (
            "10.1.2.3",
            Ok(vec![Entry::Net {
                addr: "10.1.2.3".parse().unwrap(),
                prefix: 32,
            }]),
        ),
        (
            "[::1]",
            Ok(vec![Entry::Net {
                addr: "::1".parse().unwrap(),
                prefix: 128,
            }]),
        ),
        ("", Err(AllowListError::Empty)),
        (" , ", Err(AllowListError::Empty)),
        (
            "10.0.0.0/33",
            Err(AllowListError::Prefix {
                entry: "10.0.0.0/33".into(),
            }),
        ),
        (
            "ca.example:8443",
            Err(AllowListError::Entry {
                entry: "ca.example:8443".into(),
            }),
        ),
        (
            "https://ca.example",
            Err(AllowListError::Entry {
                entry: "https://ca.example".into(),
            }),
        ),
        (
            "ca.*.example",
            Err(AllowListError::Entry {
                entry: "ca.*.example".into(),
            }),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(text.parse::<AllowList>().map(|l| l.0), want, "{text:?}");
    }
    assert_eq!(
        AllowListError::Entry {
            entry: "ca.example:8443".into()
        }
        .to_string(),
        r#""ca.example:8443" is not a host name, *.suffix, IP address or CIDR"#
    );
}

/// A name matches only a name or a wildcard, never an address (nothing is resolved); an IP
/// literal matches only an address or network of its family.
#[test]
fn allows_table() {
    let allowed = list("ca.example,*.svc.cluster.local,10.0.0.0/8,192.168.1.7,fd00::/8");
    let cases = [
        ("https://ca.example", true),
        ("https://CA.EXAMPLE:8443/cfssl", true),
        ("https://other.example", false),
        ("https://ca.example.evil", false),
        ("https://cfssl.pki.svc.cluster.local", true),
        ("https://a.b.svc.cluster.local", true),
        ("https://svc.cluster.local", false),
        ("https://evilsvc.cluster.local", false),
        ("https://10.200.0.1", true),
        ("https://11.0.0.1", false),
        ("https://0x0a.1", true),
        ("https://192.168.1.7", true),
        ("https://192.168.1.8", false),
        ("https://[fd00::1]", true),
        ("https://[fe80::1]", false),
        ("https://[::ffff:10.0.0.1]", false),
        ("https://localhost", false),
    ];
    for (url, want) in cases {
        let host = CaHost::of(&Url::parse(url).unwrap()).unwrap();
        assert_eq!(allowed.allows(&host), want, "{url}");
    }
    let everything = list("0.0.0.0/0,::/0");
    for url in ["http://1.2.3.4", "http://[2001:db8::1]"] {
        let host = CaHost::of(&Url::parse(url).unwrap()).unwrap();
        assert!(everything.allows(&host), "{url}");
    }
}

/// Who may reach what, and whose answers are quoted: a ClusterIssuer anything, quoted; a
/// namespaced Issuer anything unquoted without a list, and with one only hosts on it, quoted.
#[rustfmt::skip]
#[test]
fn trust_table() {
    let cases = [
        (false, None, "https://anything.example", Trust::Quoted),
        (false, Some("127.0.0.0/8"), "https://10.0.0.1", Trust::Quoted),
        (true, None, "https://anything.example", Trust::Unquoted),
        (true, None, "https://10.0.0.1", Trust::Unquoted),
        (true, Some("127.0.0.0/8,*.pki.svc"), "https://127.0.0.1:8888", Trust::Quoted),
        (true, Some("127.0.0.0/8,*.pki.svc"), "https://ca.pki.svc,http://127.0.0.2", Trust::Quoted),
        (true, Some("127.0.0.0/8,*.pki.svc"), "https://localhost:8888", Trust::Refused { host: "localhost".into() }),
        (
            true, Some("127.0.0.0/8,*.pki.svc"), "https://ca.pki.svc,https://10.0.0.1,https://kubernetes.default",
            Trust::Refused { host: "10.0.0.1".into() },
        ),
        (true, Some("127.0.0.0/8"), "https://[::1]", Trust::Refused { host: "::1".into() }),
    ];
    for (namespaced, allowed, urls, want) in cases {
        let allowed = allowed.map(|text| Arc::new(list(text)));
        let policy = HostPolicy::for_issuer(namespaced, allowed.as_ref());
        let urls = crate::cfssl::Endpoints::parse(urls).unwrap();
        assert_eq!(trust(&policy, urls.iter()), want, "{namespaced} {allowed:?} {urls}");
    }
}
