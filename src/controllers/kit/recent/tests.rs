use super::*;
use crate::certificates::keys::label;
use crate::controllers::kit::testing::labelled_secret as secret;

fn applied(event: watcher::Event<Secret>) -> Secret {
    match event {
        watcher::Event::Apply(s) | watcher::Event::InitApply(s) => s,
        other => panic!("not an apply: {other:?}"),
    }
}

/// The summary these tests give: the name and version of a Secret with the issued label, none
/// of a next-key one.
fn summary(secret: &Secret) -> Option<Secret> {
    let labels = secret.metadata.labels.as_ref()?;
    if labels.contains_key(label::NEXT_PRIVATE_KEY) {
        return None;
    }
    let mut summary = Secret::default();
    summary.metadata.name.clone_from(&secret.metadata.name);
    summary
        .metadata
        .resource_version
        .clone_from(&secret.metadata.resource_version);
    Some(summary)
}

trait Summarise {
    fn pass(&self, event: watcher::Event<Secret>) -> watcher::Event<Secret>;
}

impl Summarise for Recent<Secret> {
    fn pass(&self, event: watcher::Event<Secret>) -> watcher::Event<Secret> {
        self.summarise(event, summary)
    }
}

/// An object with a summary goes on as that summary and stays here whole; one without goes on
/// whole and not here.
#[test]
fn summarised_objects_are_kept_whole_here_and_the_rest_passed_on() {
    let recent = Recent::default();
    let whole = secret("tls", "7", false, 10);
    let stored = applied(recent.pass(watcher::Event::Apply(whole.clone())));
    assert_eq!(stored, summary(&whole).unwrap());
    assert_eq!(recent.get("ns", "tls", Some("7"), false).as_deref(), Some(&whole));

    let key = secret("key", "3", true, 10);
    let stored = applied(recent.pass(watcher::Event::InitApply(key.clone())));
    assert_eq!(stored, key);
    assert_eq!(recent.get("ns", "key", Some("3"), false), None);
}

/// A request weighs its CSR, chain and CA.
#[test]
fn a_request_weighs_its_pem() {
    let cr: CertificateRequest = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "r", "namespace": "ns" },
        "spec": { "request": "Q1NS", "issuerRef": { "name": "ca" } },
        "status": { "certificate": "Q0VSVA==", "ca": "Q0E=" },
    }))
    .unwrap();
    assert_eq!(cr.weight(), "CSR".len() + "CERT".len() + "CA".len());
}

/// A whole copy answers for its own version only, and a delete forgets it.
#[test]
fn answers_for_its_version_until_deleted() {
    let recent = Recent::default();
    let _ = recent.pass(watcher::Event::Apply(secret("tls", "7", false, 10)));
    let rows: [(&str, &str, Option<&str>, bool); 5] = [
        ("ns", "tls", Some("7"), true),
        ("ns", "tls", Some("8"), false),
        ("ns", "tls", None, false),
        ("other", "tls", Some("7"), false),
        ("ns", "other", Some("7"), false),
    ];
    for (namespace, name, version, found) in rows {
        let got = recent.get(namespace, name, version, false).is_some();
        assert_eq!(got, found, "{namespace}/{name} at {version:?}");
    }
    let _ = recent.pass(watcher::Event::Apply(secret("tls", "8", false, 10)));
    assert!(recent.get("ns", "tls", Some("7"), false).is_none(), "replaced");
    assert!(recent.get("ns", "tls", Some("8"), false).is_some());
    let _ = recent.pass(watcher::Event::Delete(secret("tls", "8", false, 10)));
    assert!(recent.get("ns", "tls", Some("8"), false).is_none(), "deleted");
}

/// Two generations: a full one becomes the older, and the older before it goes; so the last
/// `GENERATION` seen are always here, and never more than twice that.
#[test]
fn keeps_two_generations_by_count() {
    let recent = Recent::default();
    let total = 2 * GENERATION + 1;
    for i in 0..total {
        let _ = recent.pass(watcher::Event::Apply(secret(&format!("s{i}"), "1", false, 10)));
    }
    let here: Vec<bool> = (0..total)
        .map(|i| recent.get("ns", &format!("s{i}"), Some("1"), false).is_some())
        .collect();
    // The first generation went when the third began.
    assert_eq!(here.iter().filter(|h| **h).count(), GENERATION + 1);
    assert!(here[..GENERATION].iter().all(|h| !h));
    assert!(here[GENERATION..].iter().all(|h| *h));
}

/// Large Secrets turn the generations over by their bytes before their count.
#[test]
fn keeps_two_generations_by_bytes() {
    let recent = Recent::default();
    let size = GENERATION_BYTES / 4;
    for i in 0..9 {
        recent.remember(Arc::new(secret(&format!("s{i}"), "1", false, size)), false);
    }
    let here: Vec<usize> = (0..9)
        .filter(|i| recent.get("ns", &format!("s{i}"), Some("1"), false).is_some())
        .collect();
    // Generations of three (a fourth would pass the bound): s6..s8 now, s3..s5 before.
    assert_eq!(here, vec![3, 4, 5, 6, 7, 8]);
}

/// A copy read for a Certificate in flight stays through any number of others, the watch's
/// newer version of it replaces it pinned, and once unpinned it ages like the rest.
#[test]
fn pinned_copies_stay_until_unpinned() {
    let recent = Recent::default();
    let _ = recent.pass(watcher::Event::Apply(secret("tls", "7", false, 10)));
    assert!(recent.get("ns", "tls", Some("7"), true).is_some());
    let flood = |from: usize| {
        for i in from..=from + 2 * GENERATION {
            let _ = recent.pass(watcher::Event::Apply(secret(&format!("s{i}"), "1", false, 10)));
        }
    };
    flood(0);
    assert!(
        recent.get("ns", "tls", Some("7"), false).is_some(),
        "pinned through the flood"
    );
    let _ = recent.pass(watcher::Event::Apply(secret("tls", "8", false, 10)));
    flood(1000);
    assert!(
        recent.get("ns", "tls", Some("8"), false).is_some(),
        "the newer version, pinned too"
    );
    recent.unpin("ns", "tls");
    assert!(
        recent.get("ns", "tls", Some("8"), false).is_some(),
        "unpinned, still here"
    );
    flood(2000);
    assert!(recent.get("ns", "tls", Some("8"), false).is_none(), "aged out");
    // A live read for a Certificate in flight pins what it remembers.
    recent.remember(Arc::new(secret("live", "1", false, 10)), true);
    flood(3000);
    assert!(recent.get("ns", "live", Some("1"), false).is_some());
}

/// Pins stop at their byte bound: past it, a copy read for a Certificate in flight ages.
#[test]
fn pins_stop_at_their_bytes() {
    let recent = Recent::default();
    let size = PINNED_BYTES / 2;
    for i in 0..2 {
        recent.remember(Arc::new(secret(&format!("big{i}"), "1", false, size)), true);
    }
    // Each holds half the bound and its data key's name: the second would pass it.
    let pinned: Vec<String> = recent.lock().pinned.keys().map(|k| k.1.clone()).collect();
    assert_eq!(pinned, vec!["big0".to_string()]);
    assert!(
        recent.get("ns", "big1", Some("1"), false).is_some(),
        "aging instead"
    );
    recent.unpin("ns", "big0");
    assert_eq!(recent.lock().pinned_bytes, 0);
}
