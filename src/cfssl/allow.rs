//! Which CA hosts an issuer may reach, and whether what answers may be quoted back to it.
//!
//! A namespaced Issuer is made by a tenant and names any URL: without limits it makes the
//! manager POST to any host the manager can reach (server-side request forgery) and reports
//! what answered in its status. `--namespaced-issuer-allowed-hosts` lists the CA hosts such
//! Issuers may use; ClusterIssuers are made by the cluster's administrators and are never
//! restricted.
//!
//! Host names are matched as written, never resolved: a DNS answer can change between the
//! check and the connection (and differs by resolver), so a name is allowed only by a name or
//! `*.suffix` entry, and only an IP literal in the URL can match an address or CIDR entry.

use std::net::IpAddr;

use reqwest::Url;

/// One entry of the allow-list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// Exactly this host name (lower case, as URLs are normalised).
    Name(String),
    /// Any name ending in this suffix, written `*.example.com` and kept as `.example.com`: a
    /// subdomain at any depth, not `example.com` itself.
    Suffix(String),
    /// An address or a network: `10.0.0.0/8`, `fd00::/8`; a bare address is its own `/32` or
    /// `/128`.
    Net { addr: IpAddr, prefix: u8 },
}

/// The CA hosts namespaced Issuers may reach (`--namespaced-issuer-allowed-hosts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList(Vec<Entry>);

/// A list entry that is not a host name, `*.suffix`, IP address or CIDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowListError {
    #[error("the list is empty; leave it unset to let namespaced Issuers reach any host")]
    Empty,
    #[error("{entry:?} is not a host name, *.suffix, IP address or CIDR")]
    Entry { entry: String },
    #[error("{entry:?}: the prefix length is longer than the address")]
    Prefix { entry: String },
}

impl std::str::FromStr for AllowList {
    type Err = AllowListError;

    /// Comma-separated entries; spaces around them and empty items are ignored.
    fn from_str(list: &str) -> Result<Self, Self::Err> {
        let entries = list
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(entry)
            .collect::<Result<Vec<_>, _>>()?;
        if entries.is_empty() {
            return Err(AllowListError::Empty);
        }
        Ok(AllowList(entries))
    }
}

fn entry(text: &str) -> Result<Entry, AllowListError> {
    let bad = || AllowListError::Entry { entry: text.into() };
    if let Some((addr, prefix)) = text.split_once('/') {
        let addr = ip(addr).ok_or_else(bad)?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if prefix > full_prefix(addr) {
            return Err(AllowListError::Prefix { entry: text.into() });
        }
        return Ok(Entry::Net { addr, prefix });
    }
    if let Some(addr) = ip(text) {
        return Ok(Entry::Net {
            addr,
            prefix: full_prefix(addr),
        });
    }
    match text.strip_prefix("*.") {
        Some(suffix) => Ok(Entry::Suffix(format!(".{}", name(suffix).ok_or_else(bad)?))),
        None => Ok(Entry::Name(name(text).ok_or_else(bad)?)),
    }
}

/// An IP literal, IPv6 with or without brackets.
fn ip(text: &str) -> Option<IpAddr> {
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    bare.parse().ok()
}

/// A host name as a URL's host would spell it (lower case, IDNs in punycode), or `None` for
/// anything that is not only a host name (a port, a path, a wildcard left inside).
fn name(text: &str) -> Option<String> {
    if text.is_empty() || text.contains(['/', ':', '@', '?', '#', '*', '[', ']']) {
        return None;
    }
    let url = Url::parse(&format!("http://{text}/")).ok()?;
    match CaHost::of(&url)? {
        CaHost::Name(name) => Some(name),
        CaHost::Ip(_) => None,
    }
}

fn full_prefix(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// Whether `addr` is inside `net/prefix` (both of one family).
fn in_net(addr: IpAddr, net: IpAddr, prefix: u8) -> bool {
    let (addr, net, bits) = match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => (u128::from(a.to_bits()), u128::from(n.to_bits()), 32),
        (IpAddr::V6(a), IpAddr::V6(n)) => (a.to_bits(), n.to_bits(), 128),
        _ => return false,
    };
    let shift = bits - u32::from(prefix);
    // A /0 compares nothing; `>> 128` would overflow.
    shift >= bits || (addr >> shift) == (net >> shift)
}

/// A URL's host: an IP literal or a name, as the URL parser normalised it (`http://0x7f.1/`
/// is 127.0.0.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaHost {
    Ip(IpAddr),
    Name(String),
}

impl CaHost {
    pub fn of(url: &Url) -> Option<CaHost> {
        let host = url.host_str().filter(|h| !h.is_empty())?;
        Some(match ip(host) {
            Some(addr) => CaHost::Ip(addr),
            None => CaHost::Name(host.to_string()),
        })
    }
}

impl std::fmt::Display for CaHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaHost::Ip(addr) => write!(f, "{addr}"),
            CaHost::Name(name) => f.write_str(name),
        }
    }
}

impl AllowList {
    pub fn allows(&self, host: &CaHost) -> bool {
        self.0.iter().any(|entry| match (entry, host) {
            (Entry::Name(want), CaHost::Name(name)) => want == name,
            (Entry::Suffix(suffix), CaHost::Name(name)) => name.ends_with(suffix.as_str()),
            (Entry::Net { addr, prefix }, CaHost::Ip(ip)) => in_net(*ip, *addr, *prefix),
            _ => false,
        })
    }
}

/// Whose issuer a client is for, and so which hosts it may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HostPolicy {
    /// An administrator's (a ClusterIssuer, or a client made outside the controllers): any host,
    /// and what answers is quoted.
    #[default]
    Admin,
    /// A tenant's namespaced Issuer, limited to the list when one is configured.
    Tenant(Option<std::sync::Arc<AllowList>>),
}

impl HostPolicy {
    /// Pure: a namespaced Issuer is a tenant's, limited by `allowed` when set; a ClusterIssuer
    /// is an administrator's.
    pub fn for_issuer(namespaced: bool, allowed: Option<&std::sync::Arc<AllowList>>) -> HostPolicy {
        if namespaced {
            HostPolicy::Tenant(allowed.cloned())
        } else {
            HostPolicy::Admin
        }
    }
}

/// What a client may do with its URLs' hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Reach them, and quote what answers in messages.
    Quoted,
    /// Reach them, but never quote what answers (only its status and length): a tenant could
    /// point the URL at an in-cluster service and read its answers in the Issuer's status.
    Unquoted,
    /// Reach none of them: this host is not on the list.
    Refused { host: String },
}

/// Pure: the trust `policy` gives a client for `urls`. A tenant's issuer is quoted only when an
/// allow-list is configured and every host is on it; one host off the list refuses them all.
pub fn trust<'a>(policy: &HostPolicy, urls: impl IntoIterator<Item = &'a Url>) -> Trust {
    let list = match policy {
        HostPolicy::Admin => return Trust::Quoted,
        HostPolicy::Tenant(None) => return Trust::Unquoted,
        HostPolicy::Tenant(Some(list)) => list,
    };
    for url in urls {
        match CaHost::of(url) {
            Some(host) if list.allows(&host) => {}
            Some(host) => {
                return Trust::Refused {
                    host: host.to_string(),
                };
            }
            None => return Trust::Refused { host: String::new() },
        }
    }
    Trust::Quoted
}

#[cfg(test)]
mod tests;
