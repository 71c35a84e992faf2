//! The leader's renew deadline, as client-go's leader election keeps it: a leader that has not
//! renewed its Lease for the renew deadline stops leading, while a standby may take the Lease
//! only once the whole Lease duration passed since the last renewal it saw. The gap between
//! the two (`lease duration - renew deadline`) is the time the stopped leader has to drop its
//! in-flight writes before anyone else may lead.
//!
//! kube-lease-manager renews the Lease but reports neither a renewal nor a failed one (it
//! retries until another holder shows up), so the leader reads the Lease every retry period
//! and counts from the `renewTime` it last saw it hold the Lease with: that time is taken
//! before the renewal is sent, so the deadline never starts later than a standby's count does.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;

use crate::clock::Clock;

/// client-go's defaults (`LeaseDuration` 15 s, `RenewDeadline` 10 s, `RetryPeriod` 2 s).
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// When the leader renews, gives up, and looks again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long the Lease is valid after a renewal: a standby waits this long.
    pub lease_duration: Duration,
    /// How long the leader goes on without a renewal that landed before it stops.
    pub renew_deadline: Duration,
    /// How often the Lease is renewed, read and retried.
    pub retry_period: Duration,
}

/// Leader-election durations that cannot work together; a usage error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    #[error(
        "--leader-election-renew-deadline ({renew_deadline:?}) must be shorter than \
         --leader-election-lease-duration ({lease_duration:?}): a leader must stop before a \
         standby may take over"
    )]
    DeadlineNotBelowLease {
        renew_deadline: Duration,
        lease_duration: Duration,
    },
    #[error(
        "--leader-election-retry-period ({retry_period:?}) must be shorter than \
         --leader-election-renew-deadline ({renew_deadline:?}): a leader must get to retry a \
         failed renewal before it gives up"
    )]
    RetryNotBelowDeadline {
        retry_period: Duration,
        renew_deadline: Duration,
    },
    #[error("--leader-election-retry-period must be more than zero")]
    ZeroRetry,
}

impl Timing {
    /// Pure: the timing the flags ask for. Unset, the renew deadline is client-go's 10 s, or two
    /// thirds of a Lease too short for it, and the retry period is 2 s, or half of such a deadline.
    pub fn new(
        lease_duration: Duration,
        renew_deadline: Option<Duration>,
        retry_period: Option<Duration>,
    ) -> Result<Timing, TimingError> {
        let renew_deadline =
            renew_deadline.unwrap_or_else(|| DEFAULT_RENEW_DEADLINE.min(lease_duration * 2 / 3));
        let retry_period = retry_period.unwrap_or_else(|| DEFAULT_RETRY_PERIOD.min(renew_deadline / 2));
        if renew_deadline >= lease_duration {
            return Err(TimingError::DeadlineNotBelowLease {
                renew_deadline,
                lease_duration,
            });
        }
        if retry_period.is_zero() {
            return Err(TimingError::ZeroRetry);
        }
        if retry_period >= renew_deadline {
            return Err(TimingError::RetryNotBelowDeadline {
                retry_period,
                renew_deadline,
            });
        }
        Ok(Timing {
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }

    /// The Lease duration in kube-lease-manager's whole seconds, at least 2 (it needs a grace
    /// period shorter than the duration).
    pub fn lease_seconds(&self) -> u64 {
        self.lease_duration.as_secs().max(2)
    }

    /// Pure: kube-lease-manager's grace, in whole seconds: it renews `grace` before the Lease
    /// ends, so this makes it renew every retry period (rounded up to a second).
    pub fn renew_grace_seconds(&self) -> u64 {
        let lease = self.lease_seconds();
        let retry = self.retry_period.as_secs() + u64::from(self.retry_period.subsec_nanos() > 0);
        lease.saturating_sub(retry.max(1)).clamp(1, lease - 1)
    }
}

/// What the leader does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Still leading: read the Lease again in `next_read_in`; the deadline is `deadline_in` away.
    Lead {
        next_read_in: Duration,
        deadline_in: Duration,
    },
    /// The renew deadline passed: stop leading now.
    StepDown { since_renewal: Duration },
}

/// Pure: whether a leader whose last renewal that landed was at `renewed` still leads at `now`.
/// A renewal time ahead of `now` (the wall clock stepped back) counts as just renewed.
pub fn decide(timing: &Timing, renewed: Timestamp, now: Timestamp) -> Decision {
    let since_renewal = Duration::try_from(now.duration_since(renewed)).unwrap_or(Duration::ZERO);
    match timing.renew_deadline.checked_sub(since_renewal) {
        Some(deadline_in) if !deadline_in.is_zero() => Decision::Lead {
            next_read_in: timing.retry_period.min(deadline_in),
            deadline_in,
        },
        _ => Decision::StepDown { since_renewal },
    }
}

/// What one read of the Lease says about this replica's leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Held by this replica, last renewed at this time.
    Renewed(Timestamp),
    /// Held by this replica without a renewal time: no renewal to count from.
    Unrenewed,
    /// Held by someone else (or by no one): no longer ours.
    Holder(Option<String>),
}

/// Pure: what `lease` says about `identity`'s leadership.
pub fn observe(lease: &Lease, identity: &str) -> Seen {
    let spec = lease.spec.as_ref();
    let holder = spec.and_then(|s| s.holder_identity.clone());
    if holder.as_deref() != Some(identity) {
        return Seen::Holder(holder);
    }
    match spec.and_then(|s| s.renew_time.as_ref()) {
        Some(renewed) => Seen::Renewed(renewed.0),
        None => Seen::Unrenewed,
    }
}

/// Why the leader stopped leading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepDown {
    #[error("no Lease renewal landed for {since_renewal:?}, past the renew deadline of {renew_deadline:?}")]
    Deadline {
        since_renewal: Duration,
        renew_deadline: Duration,
    },
    #[error("the Lease is held by {}", .0.as_deref().unwrap_or("no one"))]
    Taken(Option<String>),
    #[error("the Lease is no longer held by this replica")]
    NotHolder,
}

/// Reads the Lease every retry period until this replica must stop leading, and says why.
/// `renewed` is when it started leading (just after the renewal that won the Lease landed);
/// each read that shows the Lease still ours sets it to the renewal time that read shows.
pub async fn watch_deadline(
    leases: Api<Lease>,
    name: &str,
    identity: &str,
    timing: Timing,
    clock: Clock,
    mut renewed: Timestamp,
) -> StepDown {
    loop {
        let deadline_in = match decide(&timing, renewed, clock()) {
            Decision::StepDown { since_renewal } => {
                return StepDown::Deadline {
                    since_renewal,
                    renew_deadline: timing.renew_deadline,
                };
            }
            Decision::Lead { deadline_in, .. } => deadline_in,
        };
        let started = tokio::time::Instant::now();
        // A read still in flight at the deadline does not hold the deadline back.
        match tokio::time::timeout(deadline_in, leases.get(name)).await {
            Ok(Ok(lease)) => match observe(&lease, identity) {
                Seen::Renewed(at) => renewed = at,
                Seen::Unrenewed => {}
                Seen::Holder(holder) => return StepDown::Taken(holder),
            },
            Ok(Err(err)) => tracing::warn!(error = %err, lease = name, "cannot read the Lease"),
            Err(_) => {}
        }
        if let Decision::Lead { next_read_in, .. } = decide(&timing, renewed, clock()) {
            let period = next_read_in.min(timing.retry_period);
            tokio::time::sleep_until(started + period).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;
    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn client_go() -> Timing {
        Timing::new(S(15), None, None).unwrap()
    }

    #[test]
    fn timing_table() {
        struct Row {
            lease: Duration,
            deadline: Option<Duration>,
            retry: Option<Duration>,
            want: Result<(Duration, Duration), TimingError>,
            grace: u64,
        }
        let rows = [
            Row {
                lease: S(15),
                deadline: None,
                retry: None,
                want: Ok((S(10), S(2))),
                grace: 13,
            },
            Row {
                lease: S(60),
                deadline: None,
                retry: None,
                want: Ok((S(10), S(2))),
                grace: 58,
            },
            Row {
                lease: S(3),
                deadline: None,
                retry: None,
                want: Ok((S(2), S(1))),
                grace: 2,
            },
            Row {
                lease: S(6),
                deadline: None,
                retry: None,
                want: Ok((S(4), S(2))),
                grace: 4,
            },
            Row {
                lease: S(15),
                deadline: Some(S(12)),
                retry: Some(MS(1500)),
                want: Ok((S(12), MS(1500))),
                grace: 13,
            },
            Row {
                lease: S(15),
                deadline: Some(S(5)),
                retry: None,
                want: Ok((S(5), S(2))),
                grace: 13,
            },
            Row {
                lease: S(15),
                deadline: Some(S(15)),
                retry: None,
                want: Err(TimingError::DeadlineNotBelowLease {
                    renew_deadline: S(15),
                    lease_duration: S(15),
                }),
                grace: 0,
            },
            Row {
                lease: S(15),
                deadline: Some(S(10)),
                retry: Some(S(10)),
                want: Err(TimingError::RetryNotBelowDeadline {
                    retry_period: S(10),
                    renew_deadline: S(10),
                }),
                grace: 0,
            },
            Row {
                lease: S(15),
                deadline: None,
                retry: Some(S(0)),
                want: Err(TimingError::ZeroRetry),
                grace: 0,
            },
        ];
        for row in rows {
            let got = Timing::new(row.lease, row.deadline, row.retry);
            let summary = got.clone().map(|t| (t.renew_deadline, t.retry_period));
            assert_eq!(summary, row.want.clone(), "{:?}", row.lease);
            if let Ok(timing) = got {
                assert_eq!(timing.renew_grace_seconds(), row.grace, "{timing:?}");
            }
        }
    }

    #[test]
    fn the_usage_error_names_both_flags() {
        let err = Timing::new(S(15), Some(S(20)), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--leader-election-renew-deadline (20s) must be shorter than \
             --leader-election-lease-duration (15s): a leader must stop before a standby may take over"
        );
    }

    #[test]
    fn decision_table() {
        let renewed: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let at = |ms: i64| renewed + k8s_openapi::jiff::SignedDuration::from_millis(ms);
        let lead = |next: Duration, deadline: Duration| Decision::Lead {
            next_read_in: next,
            deadline_in: deadline,
        };
        let cases = [
            (at(0), lead(S(2), S(10))),
            (at(-3000), lead(S(2), S(10))),
            (at(1500), lead(S(2), MS(8500))),
            (at(8500), lead(MS(1500), MS(1500))),
            (at(9999), lead(MS(1), MS(1))),
            (at(10_000), Decision::StepDown { since_renewal: S(10) }),
            (
                at(14_999),
                Decision::StepDown {
                    since_renewal: MS(14_999),
                },
            ),
            (at(33_000), Decision::StepDown { since_renewal: S(33) }),
        ];
        for (now, want) in cases {
            assert_eq!(decide(&client_go(), renewed, now), want, "{now}");
        }
    }

    #[test]
    fn observe_table() {
        let lease = |holder: Option<&str>, renewed: Option<&str>| -> Lease {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "l"},
                "spec": {"holderIdentity": holder, "renewTime": renewed},
            }))
            .unwrap()
        };
        let t = "2026-01-01T00:00:05.250000Z";
        let cases = [
            (lease(Some("me_1"), Some(t)), Seen::Renewed(t.parse().unwrap())),
            (lease(Some("you_2"), Some(t)), Seen::Holder(Some("you_2".into()))),
            (lease(None, None), Seen::Holder(None)),
            (lease(Some("me_1"), None), Seen::Unrenewed),
        ];
        for (lease, want) in cases {
            assert_eq!(observe(&lease, "me_1"), want, "{lease:?}");
        }
        assert_eq!(observe(&Lease::default(), "me_1"), Seen::Holder(None));
    }

    #[test]
    fn step_down_reasons() {
        let deadline = StepDown::Deadline {
            since_renewal: MS(10_250),
            renew_deadline: S(10),
        };
        assert_eq!(
            deadline.to_string(),
            "no Lease renewal landed for 10.25s, past the renew deadline of 10s"
        );
        assert_eq!(
            StepDown::Taken(Some("b_2".into())).to_string(),
            "the Lease is held by b_2"
        );
        assert_eq!(StepDown::Taken(None).to_string(), "the Lease is held by no one");
        assert_eq!(
            StepDown::NotHolder.to_string(),
            "the Lease is no longer held by this replica"
        );
    }

    /// `watch_deadline` against a mock API server that answers every Lease read with
    /// `answer(now)` (`None`: a 500), on a fast timing (Lease 300 ms, deadline 200 ms, retry
    /// 50 ms); `None` when it still leads after a second.
    async fn watch_against(
        answer: impl Fn(Timestamp) -> Option<Lease> + Send + 'static,
    ) -> Option<(StepDown, Duration)> {
        let (service, mut handle) =
            tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                assert_eq!(
                    request.uri().path(),
                    "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"
                );
                let response = match answer(Timestamp::now()) {
                    Some(lease) => http::Response::new(serde_json::to_vec(&lease).unwrap().into()),
                    None => {
                        let mut response = http::Response::new(b"{}".to_vec().into());
                        *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                        response
                    }
                };
                send.send_response(response);
            }
        });
        let timing = Timing::new(MS(300), Some(MS(200)), Some(MS(50))).unwrap();
        let leases = Api::namespaced(kube::Client::new(service, "default"), "ns");
        let clock = crate::clock::system_clock();
        let started = std::time::Instant::now();
        let watch = watch_deadline(leases, "l", "me_1", timing, clock, Timestamp::now());
        let reason = tokio::time::timeout(S(1), watch).await.ok()?;
        Some((reason, started.elapsed()))
    }

    fn lease_held(holder: &str, renewed: Timestamp) -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "l", "namespace": "ns"},
            "spec": {"holderIdentity": holder, "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(renewed)},
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn renewals_that_land_keep_it_leading() {
        assert_eq!(watch_against(|now| Some(lease_held("me_1", now))).await, None);
    }

    #[tokio::test]
    async fn renewals_that_stop_landing_step_down_at_the_deadline() {
        let frozen = Timestamp::now();
        for answer in [Some(lease_held("me_1", frozen)), None] {
            let (reason, took) = watch_against(move |_| answer.clone()).await.unwrap();
            let StepDown::Deadline {
                since_renewal,
                renew_deadline,
            } = reason
            else {
                panic!("{reason:?}");
            };
            assert_eq!(renew_deadline, MS(200));
            assert!(
                since_renewal >= MS(200) && since_renewal < MS(300),
                "{since_renewal:?}"
            );
            assert!(took >= MS(150) && took < MS(300), "{took:?}");
        }
    }

    #[tokio::test]
    async fn another_holder_steps_down_at_the_first_read() {
        let (reason, took) = watch_against(|now| Some(lease_held("you_2", now))).await.unwrap();
        assert_eq!(reason, StepDown::Taken(Some("you_2".into())));
        assert!(took < MS(50), "{took:?}");
    }
}
