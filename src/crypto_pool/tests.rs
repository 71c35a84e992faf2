use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

use super::{CryptoError, CryptoPool};

/// Long enough for free work to finish on a loaded machine.
const FINISHES: Duration = Duration::from_secs(10);
/// How long work that must wait is seen not to finish.
const WAITS: Duration = Duration::from_millis(200);

/// Work in `namespace` that holds its slot until the returned sender is dropped; returns once
/// it runs.
async fn busy(pool: &Arc<CryptoPool>, namespace: &str) -> (mpsc::Sender<()>, JoinHandle<()>) {
    let (release, gate) = mpsc::channel::<()>();
    let (started, running) = oneshot::channel();
    let (pool, namespace) = (pool.clone(), namespace.to_string());
    let job = tokio::spawn(async move {
        pool.run(&namespace, move || {
            let _ = started.send(());
            let _ = gate.recv();
        })
        .await
        .expect("busy work");
    });
    timeout(FINISHES, running)
        .await
        .expect("busy work starts")
        .expect("started");
    (release, job)
}

fn quick(pool: &Arc<CryptoPool>, namespace: &str) -> JoinHandle<Result<u8, CryptoError>> {
    let (pool, namespace) = (pool.clone(), namespace.to_string());
    tokio::spawn(async move { pool.run(&namespace, || 7).await })
}

/// With `busy` namespaces each holding a job, whether a job of `then` runs at once; it runs
/// once they are released, in every row.
#[tokio::test]
async fn slots_and_lanes() {
    struct Row {
        name: &'static str,
        slots: usize,
        busy: &'static [&'static str],
        then: &'static str,
        runs_now: bool,
    }
    let rows = [
        Row {
            name: "a free pool runs work at once",
            slots: 2,
            busy: &[],
            then: "a",
            runs_now: true,
        },
        Row {
            name: "a busy tenant leaves the other slot to another",
            slots: 2,
            busy: &["a"],
            then: "b",
            runs_now: true,
        },
        Row {
            name: "a tenant's second job waits for its first, a slot free or not",
            slots: 2,
            busy: &["a"],
            then: "a",
            runs_now: false,
        },
        Row {
            name: "every slot taken: a third tenant waits",
            slots: 2,
            busy: &["a", "b"],
            then: "c",
            runs_now: false,
        },
        Row {
            name: "four slots, two tenants busy: a third runs",
            slots: 4,
            busy: &["a", "b"],
            then: "c",
            runs_now: true,
        },
        Row {
            name: "three slots: a tenant alone runs two jobs",
            slots: 3,
            busy: &["a"],
            then: "a",
            runs_now: true,
        },
        Row {
            name: "three slots: a tenant's third job waits, a slot free or not",
            slots: 3,
            busy: &["a", "a"],
            then: "a",
            runs_now: false,
        },
        Row {
            name: "three slots: the last one is another tenant's",
            slots: 3,
            busy: &["a", "a"],
            then: "b",
            runs_now: true,
        },
        Row {
            name: "no slots asked for means one",
            slots: 0,
            busy: &["a"],
            then: "b",
            runs_now: false,
        },
    ];
    for row in rows {
        let pool = Arc::new(CryptoPool::new(row.slots));
        let mut held = Vec::new();
        for namespace in row.busy {
            held.push(busy(&pool, namespace).await);
        }
        let mut job = quick(&pool, row.then);
        let now = timeout(if row.runs_now { FINISHES } else { WAITS }, &mut job).await;
        assert_eq!(now.is_ok(), row.runs_now, "{}", row.name);
        for (release, busy) in held {
            drop(release);
            busy.await.expect("busy work ends");
        }
        let result = match now {
            Ok(done) => done,
            Err(_) => timeout(FINISHES, job).await.expect(row.name),
        };
        assert_eq!(result.expect("joined").expect("ran"), 7, "{}", row.name);
        assert_eq!(pool.lanes(), 0, "{}: lanes left", row.name);
    }
}

/// A caller that stops waiting does not free the slot its work still runs on.
#[tokio::test]
async fn abandoned_work_holds_its_slot_until_it_ends() {
    let pool = Arc::new(CryptoPool::new(1));
    let (release, job) = busy(&pool, "a").await;
    job.abort();
    let mut next = quick(&pool, "b");
    assert!(
        timeout(WAITS, &mut next).await.is_err(),
        "ran beside abandoned work"
    );
    drop(release);
    let ran = timeout(FINISHES, next).await.expect("runs once the work ends");
    assert_eq!(ran.expect("joined").expect("ran"), 7);
}

/// Work that panics is an error, and frees its slot and lane.
#[tokio::test]
async fn panicking_work_is_an_error_and_frees_its_slot() {
    let pool = Arc::new(CryptoPool::new(1));
    let failed = pool.run("a", || -> u8 { panic!("boom") }).await;
    assert!(matches!(failed, Err(CryptoError::Panicked(_))), "{failed:?}");
    let ran = timeout(FINISHES, quick(&pool, "a")).await.expect("slot freed");
    assert_eq!(ran.expect("joined").expect("ran"), 7);
}

#[test]
fn this_machine_has_at_least_three_slots() {
    assert!(CryptoPool::for_this_machine().slots() >= 3);
}
