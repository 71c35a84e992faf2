//! Standalone mode never runs beside cert-manager. cert-manager's controller holds the Lease
//! `cert-manager-controller` (in `--cert-manager-lease-namespace`) while it leads; two sets of
//! Certificate controllers writing the same Secrets and statuses would fight. So, only in
//! standalone mode: at start one GET of that Lease (held: refuse to start), and while running a
//! watch of it (held: stop the controllers gracefully and exit 1). A stale Lease, one left by a
//! cert-manager that was removed, does not count.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use crate::clock::Clock;
use crate::controllers::Config;

/// The Lease cert-manager's controller holds while it leads.
pub const LEASE_NAME: &str = "cert-manager-controller";

/// cert-manager's `--leader-election-lease-duration` default, for a Lease that does not say.
const DEFAULT_LEASE_SECONDS: i64 = 60;

/// Who holds cert-manager's Lease, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub identity: String,
    pub until: Timestamp,
}

/// Pure: the Lease's holder if it is held at `now` (`renewTime + leaseDurationSeconds` after
/// `now`); `None` for a Lease without a holder or a renew time, or one that has expired.
pub fn held(lease: &Lease, now: Timestamp) -> Option<Holder> {
    let spec = lease.spec.as_ref()?;
    let identity = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref()?.0;
    let seconds = spec
        .lease_duration_seconds
        .map_or(DEFAULT_LEASE_SECONDS, i64::from);
    let until = renewed.checked_add(SignedDuration::from_secs(seconds)).ok()?;
    (until > now).then(|| Holder {
        identity: identity.to_string(),
        until,
    })
}

/// Why standalone mode does not run.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "standalone mode refused: cert-manager is running (Lease {namespace}/{LEASE_NAME} held by {} until {}); run either cert-manager or --certificate-controllers, not both",
        holder.identity,
        holder.until
    )]
    Running { namespace: String, holder: Holder },
    #[error(
        "standalone mode refused: RBAC does not let this manager read the Lease {namespace}/{LEASE_NAME}, so it cannot tell whether cert-manager is running; grant get, list and watch on it (the chart and config/components/certificate-controllers do), or set --cert-manager-lease-namespace to where cert-manager runs its leader election"
    )]
    Forbidden {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "standalone mode refused: cannot read the Lease {namespace}/{LEASE_NAME} after {attempts} attempts, so whether cert-manager is running is unknown"
    )]
    Unreadable {
        namespace: String,
        attempts: u32,
        #[source]
        source: kube::Error,
    },
}

/// What a failed GET of the Lease means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFailure {
    /// 403: RBAC, which retrying does not change.
    Forbidden,
    /// Anything else (5xx, 429, a timeout, a connection refused): try again.
    Retry,
}

/// Pure: how a failed GET of the Lease is handled (a 404 never gets here: no Lease is no
/// cert-manager).
pub fn classify(error: &kube::Error) -> ReadFailure {
    match error {
        kube::Error::Api(status) if status.code == 403 => ReadFailure::Forbidden,
        _ => ReadFailure::Retry,
    }
}

/// Pure: the API error of a watch that RBAC forbids; any other error back.
pub fn forbidden(error: watcher::Error) -> Result<kube::Error, watcher::Error> {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e)
            if classify(&e) == ReadFailure::Forbidden =>
        {
            Ok(e)
        }
        watcher::Error::WatchError(status) if status.code == 403 => Ok(kube::Error::Api(status)),
        other => Err(other),
    }
}

/// How often the start check reads the Lease before it gives up.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub attempts: u32,
    /// Before the second attempt; doubled before each later one.
    pub delay: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 4,
            delay: Duration::from_secs(1),
        }
    }
}

/// The start check: `Ok` when the Lease is absent or stale, the refusal otherwise.
pub async fn check(api: &Api<Lease>, namespace: &str, clock: &Clock, retry: Retry) -> Result<(), Refusal> {
    let mut delay = retry.delay;
    for attempt in 1..=retry.attempts.max(1) {
        let source = match api.get_opt(LEASE_NAME).await {
            Ok(lease) => return judge(lease.as_ref(), namespace, clock()),
            Err(source) => source,
        };
        let namespace = namespace.to_string();
        if classify(&source) == ReadFailure::Forbidden {
            return Err(Refusal::Forbidden { namespace, source });
        }
        if attempt >= retry.attempts {
            let attempts = retry.attempts.max(1);
            return Err(Refusal::Unreadable {
                namespace,
                attempts,
                source,
            });
        }
        tracing::warn!(error = %source, attempt, "cannot read cert-manager's Lease yet; retrying");
        tokio::time::sleep(delay).await;
        delay = delay.saturating_mul(2);
    }
    Ok(())
}

/// The refusal when `lease` is held at `now`.
fn judge(lease: Option<&Lease>, namespace: &str, now: Timestamp) -> Result<(), Refusal> {
    match lease.and_then(|lease| held(lease, now)) {
        Some(holder) => Err(Refusal::Running {
            namespace: namespace.to_string(),
            holder,
        }),
        None => Ok(()),
    }
}

/// Resolves with the refusal once the watched Lease is held, or once RBAC forbids watching it
/// (the manager would run blind). Other watch errors (the API server restarting) are retried
/// with back-off; a Lease cannot become held without a write, which the watch sees.
pub async fn until_running(api: Api<Lease>, namespace: String, clock: Clock) -> Refusal {
    let config = watcher::Config::default().fields(&format!("metadata.name={LEASE_NAME}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    while let Some(event) = events.next().await {
        let lease = match event {
            Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => lease,
            Ok(_) => continue,
            Err(error) => match forbidden(error) {
                Ok(source) => return Refusal::Forbidden { namespace, source },
                Err(error) => {
                    tracing::warn!(%error, "watching cert-manager's Lease; retrying");
                    continue;
                }
            },
        };
        if let Err(refusal) = judge(Some(&lease), &namespace, clock()) {
            return refusal;
        }
    }
    futures::future::pending().await
}

/// Standalone mode's guard against cert-manager, for `manager::run`: a no-op outside
/// standalone mode.
pub struct Guard {
    refused: watch::Receiver<bool>,
}

impl Guard {
    /// Checks the Lease (the error says why standalone mode must not start), then watches it
    /// in the background for as long as the process runs.
    pub async fn start(client: &kube::Client, config: &Config, clock: Clock) -> Result<Guard, Refusal> {
        let (tx, refused) = watch::channel(false);
        let Some(settings) = &config.standalone else {
            return Ok(Guard { refused });
        };
        let namespace = settings.cert_manager_lease_namespace.clone();
        let api = Api::<Lease>::namespaced(client.clone(), &namespace);
        check(&api, &namespace, &clock, Retry::default()).await?;
        tracing::info!(lease = %format!("{namespace}/{LEASE_NAME}"), "cert-manager is not running: standalone mode on");
        tokio::spawn(async move {
            let refusal = until_running(api, namespace, clock).await;
            tracing::error!("{refusal}");
            let _ = tx.send(true);
        });
        Ok(Guard { refused })
    }

    /// `signal`, or cert-manager taking its Lease: whichever comes first stops the manager
    /// through the same graceful path.
    pub fn or(
        &self,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let mut refused = self.refused.clone();
        async move {
            tokio::select! {
                () = signal => {}
                // An error means no watch runs (standalone mode off): that branch never fires.
                Ok(_) = refused.wait_for(|r| *r) => {}
            }
        }
    }

    /// The exit code: failure once cert-manager took its Lease, `code` otherwise.
    pub fn exit_code(&self, code: ExitCode) -> ExitCode {
        if *self.refused.borrow() {
            ExitCode::FAILURE
        } else {
            code
        }
    }
}

#[cfg(test)]
mod tests;
