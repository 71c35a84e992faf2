//! What this process holds for the objects it signs (CertificateRequests and Kubernetes
//! CertificateSigningRequests), by UID: at most one call to the CA at a time and ever for each,
//! and the signed chain until the cache shows its write.

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::metrics::gauge::Gauge;

use crate::clock::lock;
use crate::pki::Chain;

/// What this process holds for one request it signs, by request UID (`Context::unsaved`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signing {
    /// A sign is in flight: no second one starts.
    InFlight,
    /// Signed, and the Issued write has not landed: a retry writes this chain, never signs.
    Unsaved(Chain),
    /// The Issued (or, after a sign, Failed) write landed as `resource_version`; held until
    /// the cache shows it, so a reconcile from a stale cache neither signs again nor applies a
    /// status without it.
    Saved { resource_version: Option<String> },
}

/// What [`hold`] makes of a [`Signing`] entry against the object the reconcile sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// Nothing held (or the cache already shows the write: the entry can go).
    Nothing,
    InFlight,
    /// Signed; the write of this chain has not landed.
    Unsaved(Chain),
    Saved,
}

/// Pure: what an entry means for the observed request, and whether it can be dropped (the
/// cache shows our Issued write: the certificate is there, or the object is the one the write
/// returned). Resource versions are opaque, so only equality is used.
pub fn hold(entry: Option<&Signing>, observed_version: Option<&str>, has_certificate: bool) -> (Held, bool) {
    let seen = |written: Option<&str>| has_certificate || (written.is_some() && written == observed_version);
    match entry {
        None => (Held::Nothing, false),
        Some(Signing::InFlight) => (Held::InFlight, false),
        Some(Signing::Unsaved(_)) if seen(None) => (Held::Nothing, true),
        Some(Signing::Unsaved(chain)) => (Held::Unsaved(chain.clone()), false),
        Some(Signing::Saved { resource_version }) if seen(resource_version.as_deref()) => {
            (Held::Nothing, true)
        }
        Some(Signing::Saved { .. }) => (Held::Saved, false),
    }
}

/// What this process holds for the requests it signs, by request UID: a retry writes the kept
/// chain instead of asking the CA again, and a reconcile from a stale cache neither signs again
/// nor drops the certificate. `unsaved` counts the entries that are [`Signing::Unsaved`] (the
/// `cfssl_issuer_signed_unsaved_certificates` gauge): every change goes through [`Self::put`].
#[derive(Debug, Default)]
pub struct Signings {
    by_uid: Mutex<HashMap<String, Signing>>,
    unsaved: Gauge,
}

fn is_unsaved(entry: Option<&Signing>) -> i64 {
    i64::from(matches!(entry, Some(Signing::Unsaved(_))))
}

impl Signings {
    /// Reports the count of signed-but-unsaved entries on `gauge`.
    pub fn counted_on(gauge: Gauge) -> Self {
        Signings {
            by_uid: Mutex::default(),
            unsaved: gauge,
        }
    }

    /// Sets (`Some`) or removes (`None`) the entry of `uid`, keeping the gauge true.
    fn put(&self, by_uid: &mut HashMap<String, Signing>, uid: &str, entry: Option<Signing>) {
        let added = is_unsaved(entry.as_ref());
        let old = match entry {
            Some(entry) => by_uid.insert(uid.to_string(), entry),
            None => by_uid.remove(uid),
        };
        let delta = added - is_unsaved(old.as_ref());
        if delta != 0 {
            self.unsaved.inc_by(delta);
        }
    }

    /// Observe: what is held for `uid` against the object seen at `version`; forgets the entry
    /// once the cache shows the write.
    pub fn held(&self, uid: &str, version: Option<&str>, has_certificate: bool) -> Held {
        let mut by_uid = lock(&self.by_uid);
        let (held, forget) = hold(by_uid.get(uid), version, has_certificate);
        if forget {
            self.put(&mut by_uid, uid, None);
        }
        held
    }

    /// The Issued write landed as `resource_version`: hold that until the cache shows it.
    pub fn saved(&self, uid: &str, resource_version: Option<String>) {
        self.insert(uid, Signing::Saved { resource_version });
    }

    /// Puts `entry` in place for `uid` (tests and benches start from a given state).
    pub fn insert(&self, uid: &str, entry: Signing) {
        self.put(&mut lock(&self.by_uid), uid, Some(entry));
    }

    pub fn forget(&self, uid: &str) {
        self.put(&mut lock(&self.by_uid), uid, None);
    }

    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        let mut by_uid = lock(&self.by_uid);
        let mut dropped = 0;
        by_uid.retain(|uid, entry| {
            let kept = keep(uid);
            if !kept {
                dropped += is_unsaved(Some(entry));
            }
            kept
        });
        if dropped != 0 {
            self.unsaved.dec_by(dropped);
        }
    }

    /// A copy of every entry, for tests and benches.
    pub fn snapshot(&self) -> HashMap<String, Signing> {
        lock(&self.by_uid).clone()
    }

    /// Signed entries whose write has not landed (what the gauge shows).
    pub fn unsaved(&self) -> i64 {
        self.unsaved.get()
    }

    /// Starts a sign for `uid` unless one is in flight or done.
    pub(crate) fn begin(&self, uid: &str) -> Option<Flight<'_>> {
        let mut by_uid = lock(&self.by_uid);
        if by_uid.contains_key(uid) {
            return None;
        }
        self.put(&mut by_uid, uid, Some(Signing::InFlight));
        Some(Flight {
            signings: self,
            uid: uid.to_string(),
        })
    }
}

/// A sign in flight for one request. Dropped before [`Flight::signed`], it frees the request
/// for the next attempt; after, the chain stays until the cache shows the write.
pub(crate) struct Flight<'a> {
    signings: &'a Signings,
    uid: String,
}

impl Flight<'_> {
    pub(crate) fn signed(&self, chain: Chain) {
        self.signings.insert(&self.uid, Signing::Unsaved(chain));
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        let mut by_uid = lock(&self.signings.by_uid);
        if by_uid.get(&self.uid) == Some(&Signing::InFlight) {
            self.signings.put(&mut by_uid, &self.uid, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::Chain;

    fn chain() -> Chain {
        Chain {
            certificates: String::new(),
            ca: None,
        }
    }

    fn unsaved() -> Signing {
        Signing::Unsaved(chain())
    }

    /// Each step and the gauge after it: only `Unsaved` entries count, whichever way they go.
    #[test]
    fn the_gauge_counts_unsaved_entries_through_every_change() {
        let signings = Signings::counted_on(Gauge::default());
        let saved = || Signing::Saved {
            resource_version: Some("7".into()),
        };
        type Step = Box<dyn Fn(&Signings)>;
        let steps: Vec<(&str, Step, i64)> = vec![
            ("a in flight", Box::new(|s| s.insert("a", Signing::InFlight)), 0),
            ("a signed", Box::new(|s| s.insert("a", unsaved())), 1),
            ("b signed", Box::new(|s| s.insert("b", unsaved())), 2),
            (
                "a signed again (replaced)",
                Box::new(|s| s.insert("a", unsaved())),
                2,
            ),
            ("a saved", Box::new(move |s| s.saved("a", Some("7".into()))), 1),
            ("c saved", Box::new(move |s| s.insert("c", saved())), 1),
            (
                "b seen with its certificate",
                Box::new(|s| drop(s.held("b", None, true))),
                0,
            ),
            ("d signed", Box::new(|s| s.insert("d", unsaved())), 1),
            ("e signed", Box::new(|s| s.insert("e", unsaved())), 2),
            (
                "relist keeps a, c, e",
                Box::new(|s| s.retain(|uid| uid != "d")),
                1,
            ),
            ("e deleted", Box::new(|s| s.forget("e")), 0),
            ("forget of nothing", Box::new(|s| s.forget("zz")), 0),
        ];
        for (step, apply, want) in steps {
            apply(&signings);
            assert_eq!(signings.unsaved(), want, "{step}");
        }
        assert_eq!(signings.snapshot().len(), 2, "a and c stay");
    }

    #[test]
    fn a_flight_dropped_before_its_signature_leaves_nothing() {
        let signings = Signings::counted_on(Gauge::default());
        let flight = signings.begin("a").expect("free");
        assert!(signings.begin("a").is_none(), "one flight at a time");
        drop(flight);
        assert!(signings.snapshot().is_empty());
        let flight = signings.begin("a").expect("free again");
        flight.signed(chain());
        drop(flight);
        assert_eq!(signings.unsaved(), 1, "the signature stays, unsaved");
    }

    #[test]
    fn hold_table() {
        let chain = Chain {
            certificates: "leaf".into(),
            ca: None,
        };
        let unsaved = Signing::Unsaved(chain.clone());
        let saved = |rv: Option<&str>| Signing::Saved {
            resource_version: rv.map(str::to_string),
        };
        let saved_7 = saved(Some("7"));
        let saved_unknown = saved(None);
        struct Case<'a> {
            name: &'static str,
            entry: Option<&'a Signing>,
            version: Option<&'static str>,
            has_certificate: bool,
            want: (Held, bool),
        }
        let cases = vec![
            Case {
                name: "nothing held",
                entry: None,
                version: Some("5"),
                has_certificate: false,
                want: (Held::Nothing, false),
            },
            Case {
                name: "in flight stays",
                entry: Some(&Signing::InFlight),
                version: Some("5"),
                has_certificate: true,
                want: (Held::InFlight, false),
            },
            Case {
                name: "unsaved, stale cache",
                entry: Some(&unsaved),
                version: Some("5"),
                has_certificate: false,
                want: (Held::Unsaved(chain.clone()), false),
            },
            Case {
                name: "unsaved, but the write landed after all",
                entry: Some(&unsaved),
                version: Some("8"),
                has_certificate: true,
                want: (Held::Nothing, true),
            },
            Case {
                name: "saved, stale cache",
                entry: Some(&saved_7),
                version: Some("5"),
                has_certificate: false,
                want: (Held::Saved, false),
            },
            Case {
                name: "saved, stale cache without a version",
                entry: Some(&saved_7),
                version: None,
                has_certificate: false,
                want: (Held::Saved, false),
            },
            Case {
                name: "saved, cache shows the write",
                entry: Some(&saved_7),
                version: Some("7"),
                has_certificate: false,
                want: (Held::Nothing, true),
            },
            Case {
                name: "saved, cache shows a later write",
                entry: Some(&saved_7),
                version: Some("9"),
                has_certificate: true,
                want: (Held::Nothing, true),
            },
            Case {
                name: "saved, version unknown, stale",
                entry: Some(&saved_unknown),
                version: None,
                has_certificate: false,
                want: (Held::Saved, false),
            },
            Case {
                name: "saved, version unknown, certificate seen",
                entry: Some(&saved_unknown),
                version: Some("3"),
                has_certificate: true,
                want: (Held::Nothing, true),
            },
        ];
        for Case {
            name: row,
            entry,
            version,
            has_certificate,
            want,
        } in cases
        {
            assert_eq!(hold(entry, version, has_certificate), want, "{row}");
        }
    }
}
