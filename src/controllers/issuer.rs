//! Issuer and ClusterIssuer reconciler, one code path for both kinds: read the credential
//! Secret, check the CA (info + credential probe), keep `Ready` and Events current, look again
//! at the health-check interval or, while failing, with per-issuer backoff.

pub mod decide;

use std::future::Future;
use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, ResourceExt};

use self::decide::{Observation, Retry, Verdict};
use super::clients::Fingerprint;
use super::credentials::{self, Credentials};
use super::status_schema::{self, ObservedGeneration};
use super::{Context, Error, FIELD_MANAGER};
use crate::api::{self, AnyIssuer, Condition, IssuerKind, IssuerSpec};
use crate::cfssl::{self, ClientConfig};
use crate::telemetry::metrics::{CallLabels, Controller};

/// A stable name for logs, backoff and the client cache: `Issuer/ns/name` or `ClusterIssuer/name`.
pub fn key<K: AnyIssuer>(issuer: &K) -> String {
    match issuer.namespace() {
        Some(ns) => format!("{}/{ns}/{}", K::KIND, issuer.name_any()),
        None => format!("{}/{}", K::KIND, issuer.name_any()),
    }
}

pub async fn reconcile<K: AnyIssuer>(issuer: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = key(&*issuer);
    ctx.metrics.reconciled(controller_of::<K>());
    let verdict = check(&*issuer, &ctx).await;
    ctx.metrics.set_issuer_ready(&key, verdict.ready);
    tracing::debug!(issuer = %key, ready = verdict.ready, reason = verdict.reason.as_str(), "checked");
    apply(&*issuer, &verdict, &ctx).await?;
    Ok(match verdict.retry {
        Retry::Interval => {
            ctx.issuer_backoff.reset(&key);
            Action::requeue(ctx.config.health_check_interval)
        }
        Retry::Backoff => Action::requeue(ctx.issuer_backoff.next(key)),
    })
}

pub fn error_policy<K: AnyIssuer>(issuer: Arc<K>, err: &Error, ctx: Arc<Context>) -> Action {
    let key = key(&*issuer);
    ctx.metrics.reconcile_failed(controller_of::<K>());
    tracing::warn!(issuer = %key, error = %err, "issuer reconcile failed");
    Action::requeue(ctx.issuer_backoff.next(key))
}

/// Observe: the Secret, then the CA.
async fn check<K: AnyIssuer>(issuer: &K, ctx: &Context) -> Verdict {
    let credentials = match read_credentials(issuer, ctx).await {
        Ok(c) => c,
        Err(problem) => return decide::verdict(Observation::Secret(&problem)),
    };
    match cfssl_client(issuer, credentials, ctx) {
        Err(err) => decide::verdict(Observation::Client(&err)),
        Ok(client) => {
            let result = timed(ctx, issuer, "check", client.check()).await;
            decide::verdict(Observation::Check(result.as_ref().map(|_| ())))
        }
    }
}

pub async fn read_credentials<K: AnyIssuer>(
    issuer: &K,
    ctx: &Context,
) -> Result<Credentials, decide::SecretProblem> {
    let namespace = issuer
        .secret_namespace(&ctx.config.cluster_resource_namespace)
        .unwrap_or_default();
    credentials::read(&ctx.client, namespace, &issuer.spec().auth_secret_name).await
}

/// The issuer's CFSSL client, reused while its spec and Secret are unchanged.
pub fn cfssl_client<K: AnyIssuer>(
    issuer: &K,
    credentials: Credentials,
    ctx: &Context,
) -> Result<Arc<cfssl::Client>, cfssl::Error> {
    let fingerprint = Fingerprint {
        issuer_uid: issuer.uid().unwrap_or_default(),
        generation: issuer.meta().generation.unwrap_or_default(),
        secret_version: credentials.version.clone(),
    };
    ctx.cfssl.get_or_build(&key(issuer), fingerprint, || {
        let mut config = client_config(issuer.spec(), credentials, ctx.config.cfssl_timeout);
        config.unanswered_signs = ctx.metrics.possible_duplicates_of(&key(issuer));
        config
    })
}

/// Pure: the client settings an issuer's spec and credentials describe.
pub fn client_config(
    spec: &IssuerSpec,
    credentials: Credentials,
    timeout: std::time::Duration,
) -> ClientConfig {
    let mut config = ClientConfig::new(spec.url.clone(), spec.label.clone(), credentials.key);
    config.profile = spec.profile.clone().unwrap_or_default();
    config.bundle = spec.bundle.unwrap_or(false);
    config.ca_bundle_pem = spec.ca_bundle.as_ref().map(|b| b.0.clone());
    config.timeout = timeout;
    config
}

/// Act: apply `Ready` when it changed, and say so in an Event.
async fn apply<K: AnyIssuer>(issuer: &K, verdict: &Verdict, ctx: &Context) -> Result<(), Error> {
    let previous = api::find_condition(issuer.conditions(), api::READY);
    // Only what the installed schema declares: the Go CRDs have no observedGeneration.
    let schema = ctx.status_schemas.get(K::KIND);
    let generation = issuer
        .meta()
        .generation
        .filter(|_| status_schema::writes_observed_generation(schema));
    let condition = Condition::ready(verdict.reason, &verdict.message, ctx.now(), generation)
        .with_transition_from(previous);
    if previous == Some(&condition) {
        return Ok(());
    }
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": { "conditions": [condition] },
    });
    // Erased to reach `/status` of either scope through one code path.
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = match issuer.namespace() {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), &ns, &resource),
        None => Api::all_with(ctx.client.clone(), &resource),
    };
    api.patch_status(
        &issuer.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| {
        if status_schema::refuses_observed_generation(&source)
            && ctx.status_schemas.set(K::KIND, ObservedGeneration::NotDeclared)
        {
            tracing::warn!(issuer = %key(issuer), "the installed CRD has no observedGeneration; no longer writing it");
        }
        Error::WriteStatus {
            object: key(issuer),
            source,
        }
    })?;
    let event = Event {
        type_: if verdict.ready {
            EventType::Normal
        } else {
            EventType::Warning
        },
        reason: verdict.reason.as_str().into(),
        note: Some(truncate(&verdict.message)),
        action: "Check".into(),
        secondary: None,
    };
    if let Err(err) = ctx.recorder.publish(&event, &issuer.object_ref(&())).await {
        // An Event is a courtesy; the condition already says it.
        tracing::warn!(issuer = %key(issuer), error = %err, "cannot publish event");
    }
    Ok(())
}

fn controller_of<K: AnyIssuer>() -> Controller {
    match K::KIND {
        IssuerKind::Issuer => Controller::Issuer,
        IssuerKind::ClusterIssuer => Controller::ClusterIssuer,
    }
}

/// Runs one CFSSL call, recording its latency and, when it fails, its error class.
pub async fn timed<K: AnyIssuer, T>(
    ctx: &Context,
    issuer: &K,
    call: &'static str,
    work: impl Future<Output = Result<T, cfssl::Error>>,
) -> Result<T, cfssl::Error> {
    let started = std::time::Instant::now();
    let result = work.await;
    let labels = CallLabels {
        issuer: key(issuer),
        label: issuer.spec().label.clone(),
        call,
    };
    let class = result.as_ref().err().map(|err| super::class_label(err.class()));
    ctx.metrics
        .observe_call(labels, started.elapsed().as_secs_f64(), class);
    result
}

/// Event notes are limited to 1 KiB by the API server.
pub fn truncate(message: &str) -> String {
    const MAX: usize = 1000;
    if message.len() <= MAX {
        return message.to_string();
    }
    let mut end = MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}
