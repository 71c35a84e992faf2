//! The objects the Certificate controllers created that the cache may not show yet.
//!
//! A request or next-key Secret is created by one pass of the Certificate's controllers; the
//! next pass, woken by another change, can run before the watch brings the new object to the
//! cache, decide that it is missing, and create it again: a create refused as existing and a
//! read to see whose it is. So a create is remembered for a short while, and a plan that would
//! create the same object again in that while leaves it out and looks again when the while is
//! over. A controller's own delete of the object forgets it at once: a next-key Secret is
//! deleted at issuance and may be made again under the same name straight after. A create is
//! a repeat only for the same Certificate (the object's controlling owner): a Certificate
//! deleted and made again under its name plans its first request under the name the old
//! one's first had, and must not wait out the old one's while.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::clock::lock;
use crate::controllers::kit::plan::{FullPlan, Next, Write};

/// How long a create is taken to be on its way to the cache. A watch brings it in
/// milliseconds; this only bounds how late an object someone else deleted in that time is
/// made again.
pub const CREATED_WHILE: Duration = Duration::from_secs(10);

/// Entries beyond which the memory starts over (an entry outlives its while only until the
/// same object is planned again).
const CREATED_MAX: usize = 65_536;

/// `Kind`, namespace, name.
type Key = (String, String, String);

/// When it was created, and for which owner (UID).
type Made = (Timestamp, Option<String>);

#[derive(Default)]
pub struct Created(Mutex<HashMap<Key, Made>>);

fn key(write: &Write) -> Key {
    let object = write.object();
    let namespace = object.namespace.clone().unwrap_or_default();
    (object.kind.clone(), namespace, object.name.clone())
}

/// The UID of a create's controlling owner.
fn owner(write: &Write) -> Option<String> {
    let Write::Create(create) = write else {
        return None;
    };
    let references = create.body.pointer("/metadata/ownerReferences")?.as_array()?;
    let controller = references
        .iter()
        .find(|r| r.get("controller").and_then(serde_json::Value::as_bool) == Some(true))?;
    Some(controller.get("uid")?.as_str()?.to_owned())
}

/// Pure: how much longer a create made `at` keeps `now`'s plan from making it again.
pub fn still_coming(at: Timestamp, now: Timestamp) -> Option<Duration> {
    let age = Duration::try_from(now.duration_since(at)).unwrap_or_default();
    CREATED_WHILE.checked_sub(age).filter(|left| !left.is_zero())
}

impl Created {
    /// `plan` without the creates of objects created moments ago; when one is left out, the
    /// plan looks again by the end of its while at the latest.
    pub fn without_repeats<W>(&self, mut plan: FullPlan<W>, now: Timestamp) -> FullPlan<W> {
        if !plan.writes().any(|w| matches!(w, Write::Create(_))) {
            return plan;
        }
        // A plan that deletes the object it creates (a key Secret that no longer fits) makes
        // a new one, not a repeat.
        let replaced: Vec<Key> = plan
            .writes()
            .filter(|w| matches!(w, Write::Delete { .. }))
            .map(key)
            .collect();
        let created = lock(&self.0);
        let mut wait: Option<Duration> = None;
        let mut keep = |write: &Write| {
            let Write::Create(_) = write else {
                return true;
            };
            let k = key(write);
            if replaced.contains(&k) {
                return true;
            }
            let left = created
                .get(&k)
                .filter(|(_, by)| *by == owner(write))
                .and_then(|(at, _)| still_coming(*at, now));
            if let Some(left) = left {
                wait = Some(wait.map_or(left, |w| w.min(left)));
            }
            left.is_none()
        };
        plan.before_status.retain(&mut keep);
        plan.after_status.retain(&mut keep);
        drop(created);
        plan.plan.next = match (wait, plan.plan.next) {
            (Some(left), Next::AwaitChange) => Next::After(left),
            (Some(left), Next::After(after)) => Next::After(after.min(left)),
            (_, next) => next,
        };
        plan
    }

    /// What carrying out `plan` will change here, taken before it is carried out.
    pub fn marks<W>(plan: &FullPlan<W>) -> Marks {
        Marks(
            plan.writes()
                .filter_map(|write| match write {
                    Write::Create(_) => Some((key(write), Mark::Made(owner(write)))),
                    Write::Delete { .. } => Some((key(write), Mark::Deleted)),
                    Write::Apply { .. } => None,
                })
                .collect(),
        )
    }

    /// A plan with `marks` was carried out at `now`: its creates are remembered, its deletes
    /// forget.
    pub fn record(&self, marks: Marks, now: Timestamp) {
        if marks.0.is_empty() {
            return;
        }
        let mut created = lock(&self.0);
        for (k, mark) in marks.0 {
            let Mark::Made(by) = mark else {
                created.remove(&k);
                continue;
            };
            if created.len() >= CREATED_MAX {
                created.clear();
            }
            prune(&mut created, now);
            created.insert(k, (now, by));
        }
    }
}

/// Past 1,024 entries, at each doubling, drops those whose while is over and the memory they
/// held: a request is created once and never deleted by these controllers, so without this
/// every create of a mass issuance stayed until [`CREATED_MAX`]. O(1) per create, amortised.
fn prune(created: &mut HashMap<Key, Made>, now: Timestamp) {
    let len = created.len();
    if len < 1024 || !len.is_power_of_two() {
        return;
    }
    created.retain(|_, (at, _)| still_coming(*at, now).is_some());
    created.shrink_to(created.len() * 2);
}

/// What a plan does to an object here.
enum Mark {
    /// Created, for this owner (UID).
    Made(Option<String>),
    Deleted,
}

/// The objects a plan creates and deletes.
pub struct Marks(Vec<(Key, Mark)>);

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::controllers::kit::plan::{Announce, IfTaken, Plan};

    fn secret(name: &str) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("apps".into()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        }
    }

    fn create(name: &str) -> Write {
        Write::create(&secret(name), IfTaken::Done, Announce::default())
    }

    fn delete(name: &str) -> Write {
        Write::delete(&secret(name)).unwrap()
    }

    fn plan(writes: Vec<Write>) -> FullPlan<()> {
        Plan::idle(Next::AwaitChange).preceded_by(writes)
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    /// The while a create keeps its repeat out: from its full length down to nothing.
    #[test]
    fn still_coming_table() {
        let cases = [
            (0, Some(Duration::from_secs(10))),
            (4, Some(Duration::from_secs(6))),
            (10, None),
            (60, None),
            // A clock that went back: the whole while, never more.
            (-5, Some(Duration::from_secs(10))),
        ];
        for (age, want) in cases {
            assert_eq!(still_coming(at(0), at(age)), want, "age {age}");
        }
    }

    /// A create made moments ago is left out, and the plan looks again when its while is over;
    /// other creates, and every create once its while is over, or the object was deleted by
    /// us, or is deleted by the same plan, are kept.
    #[test]
    fn repeats_are_left_out_until_the_while_ends_or_a_delete() {
        let created = Created::default();
        created.record(Created::marks(&plan(vec![create("a"), create("b")])), at(0));
        let out = created.without_repeats(plan(vec![create("a"), create("c")]), at(3));
        assert_eq!(out.before_status, vec![create("c")]);
        assert_eq!(out.plan.next, Next::After(Duration::from_secs(7)));

        let out = created.without_repeats(plan(vec![create("a")]), at(10));
        assert_eq!(out.before_status, vec![create("a")]);
        assert_eq!(out.plan.next, Next::AwaitChange);

        let replace = plan(vec![delete("a"), create("a")]);
        assert_eq!(created.without_repeats(replace.clone(), at(5)), replace);

        created.record(Created::marks(&plan(vec![delete("b")])), at(4));
        let out = created.without_repeats(plan(vec![create("b"), delete("a")]), at(5));
        assert_eq!(out.before_status, vec![create("b"), delete("a")]);
        assert_eq!(out.plan.next, Next::AwaitChange);
    }

    fn owned(name: &str, owner: &str) -> Write {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let mut secret = secret(name);
        secret.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "cert-manager.io/v1".into(),
            kind: "Certificate".into(),
            name: "web".into(),
            uid: owner.into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        Write::create(&secret, IfTaken::Done, Announce::default())
    }

    /// A create is a repeat only for the same owner: a Certificate made again under its name
    /// (a new UID) creates its first request at once, under the name the old one's had.
    #[test]
    fn a_create_for_another_owner_is_no_repeat() {
        let created = Created::default();
        created.record(Created::marks(&plan(vec![owned("web-1", "old")])), at(0));
        let out = created.without_repeats(plan(vec![owned("web-1", "new")]), at(1));
        assert_eq!(out.before_status, vec![owned("web-1", "new")]);
        assert_eq!(out.plan.next, Next::AwaitChange);
        let out = created.without_repeats(plan(vec![owned("web-1", "old")]), at(1));
        assert!(out.before_status.is_empty());
        assert_eq!(out.plan.next, Next::After(Duration::from_secs(9)));
        let out = created.without_repeats(plan(vec![create("web-1")]), at(1));
        assert_eq!(
            out.before_status,
            vec![create("web-1")],
            "no owner is another owner"
        );
    }

    /// Past 1,024 creates, at each doubling, those whose while is over are dropped and those
    /// still coming kept.
    #[test]
    fn creates_past_their_while_are_dropped_at_each_doubling() {
        let created = Created::default();
        let many = |n: usize, from: usize| plan((from..from + n).map(|i| create(&format!("s{i}"))).collect());
        let len = || lock(&created.0).len();
        created.record(Created::marks(&many(1023, 0)), at(0));
        created.record(Created::marks(&many(1, 1023)), at(11));
        assert_eq!(len(), 1024, "below 1,024 nothing is dropped");
        created.record(Created::marks(&many(1, 1024)), at(11));
        assert_eq!(
            len(),
            2,
            "the 1,023 made at 0 are over at 11; the one made at 11 is not"
        );
        created.record(Created::marks(&many(1022, 2000)), at(12));
        created.record(Created::marks(&many(1, 3022)), at(13));
        assert_eq!(len(), 1025, "all still coming at the doubling");
    }

    /// A plan's own next look is kept when sooner than the while's end, and brought forward
    /// to it when later; a backoff stays a backoff.
    #[test]
    fn the_next_look_table() {
        let secs = Duration::from_secs;
        let cases = [
            (Next::<()>::After(secs(1)), Next::After(secs(1))),
            (Next::After(secs(60)), Next::After(secs(9))),
            (Next::AwaitChange, Next::After(secs(9))),
            (Next::Backoff, Next::Backoff),
        ];
        for (next, want) in cases {
            let created = Created::default();
            created.record(Created::marks(&plan(vec![create("a")])), at(0));
            let plan = Plan::idle(next.clone()).preceded_by(vec![create("a")]);
            let out = created.without_repeats(plan, at(1));
            assert!(out.before_status.is_empty(), "{next:?}");
            assert_eq!(out.plan.next, want, "{next:?}");
        }
    }
}
