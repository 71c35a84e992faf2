//! Wires the controllers: one shared reflector store per kind, the Issuer and ClusterIssuer
//! controllers (triggered by their objects, their credential Secrets' metadata and rechecks from
//! the request controller) and the CertificateRequest controller (triggered by requests and by
//! issuer changes).

use std::future::Future;
use std::sync::Arc;

use futures::{FutureExt, StreamExt, TryStreamExt, future};
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use tokio::sync::mpsc;

use super::issuer;
use super::{Config, Context, Recheck, certificaterequest, watches};
use crate::api::certmanager::CertificateRequest;
use crate::api::{AnyIssuer, ClusterIssuer, Issuer, IssuerKind};
use crate::telemetry::{Health, Metrics};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(
        "the {kind} API is not served: {source}; are the CRDs installed? (`cfssl-issuer crd | kubectl apply -f -`)"
    )]
    MissingCrd {
        kind: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// Runs every controller until `shutdown` resolves, then lets in-flight reconciles finish.
pub async fn run(
    client: kube::Client,
    config: Config,
    clock: super::Clock,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    preflight(&client).await?;
    let shutdown = shutdown.boxed().shared();

    let (issuers, issuers_writer) = reflector::store_shared::<Issuer>(1024);
    let (cluster_issuers, cluster_writer) = reflector::store_shared::<ClusterIssuer>(1024);
    let (requests, requests_writer) = reflector::store_shared::<CertificateRequest>(4096);
    let (issuer_events, issuer_events_for_requests) =
        (subscribe(&issuers_writer), subscribe(&issuers_writer));
    let (cluster_events, cluster_events_for_requests) =
        (subscribe(&cluster_writer), subscribe(&cluster_writer));
    let request_events = subscribe(&requests_writer);
    let (ctx, recheck_rx) = Context::new(
        client.clone(),
        config.clone(),
        clock,
        issuers.clone(),
        cluster_issuers.clone(),
        metrics,
    );
    let ctx = Arc::new(ctx);
    // Deletes are seen here, before the caches drop the object (see `watches`).
    let generations = Arc::new(watches::Generations::default());

    let reflect_all = future::join3(
        drive(
            watcher(Api::<Issuer>::all(client.clone()), watcher::Config::default())
                .default_backoff()
                .inspect_ok(forget_deleted::<Issuer>(&ctx, &generations))
                .reflect_shared(issuers_writer),
        ),
        drive(
            watcher(
                Api::<ClusterIssuer>::all(client.clone()),
                watcher::Config::default(),
            )
            .default_backoff()
            .inspect_ok(forget_deleted::<ClusterIssuer>(&ctx, &generations))
            .reflect_shared(cluster_writer),
        ),
        drive(
            watcher(
                Api::<CertificateRequest>::all(client.clone()),
                watcher::Config::default(),
            )
            .default_backoff()
            .try_filter_map({
                // Foreign requests never reach the cache; deleted ones are forgotten.
                let (ctx, requests) = (ctx.clone(), requests.clone());
                let mut relist = watches::Relist::default();
                move |event| future::ready(Ok(watches::request_event(event, &ctx, &requests, &mut relist)))
            })
            .reflect_shared(requests_writer),
        ),
    );

    let synced = {
        let (issuers, cluster_issuers, requests) =
            (issuers.clone(), cluster_issuers.clone(), requests.clone());
        async move {
            let _ = future::join3(
                issuers.wait_until_ready(),
                cluster_issuers.wait_until_ready(),
                requests.wait_until_ready(),
            )
            .await;
            health.set_synced(true);
            tracing::info!("caches synced");
            future::pending::<()>().await
        }
    };
    let (issuer_rechecks, cluster_rechecks) = split_rechecks(recheck_rx);
    let controller_config = controller::Config::default().concurrency(config.concurrency);

    // Secret metadata only: the manager never holds Secret data it does not use.
    let secrets = || {
        watcher(
            Api::<PartialObjectMeta<Secret>>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .touched_objects()
    };
    // Spec changes only: the controllers' own status writes do not run them again.
    let issuer_events = watches::spec_changes(issuer_events, generations.clone());
    let cluster_events = watches::spec_changes(cluster_events, generations.clone());
    let issuer_controller = Controller::for_shared_stream(issuer_events, issuers.clone())
        .with_config(controller_config.clone())
        .watches_stream(secrets(), {
            let store = issuers.clone();
            move |secret| {
                issuers_using::<Issuer>(&store, secret.namespace().as_deref(), &secret.name_any(), None)
            }
        })
        .reconcile_on(issuer_rechecks)
        .graceful_shutdown_on(shutdown.clone())
        .run(
            issuer::reconcile::<Issuer>,
            issuer::error_policy::<Issuer>,
            ctx.clone(),
        )
        .for_each(|_| future::ready(()));
    let cluster_controller = Controller::for_shared_stream(cluster_events, cluster_issuers.clone())
        .with_config(controller_config.clone())
        .watches_stream(secrets(), {
            let store = cluster_issuers.clone();
            let home = config.cluster_resource_namespace.clone();
            move |secret| {
                issuers_using::<ClusterIssuer>(
                    &store,
                    secret.namespace().as_deref(),
                    &secret.name_any(),
                    Some(&home),
                )
            }
        })
        .reconcile_on(cluster_rechecks)
        .graceful_shutdown_on(shutdown.clone())
        .run(
            issuer::reconcile::<ClusterIssuer>,
            issuer::error_policy::<ClusterIssuer>,
            ctx.clone(),
        )
        .for_each(|_| future::ready(()));
    let request_controller = Controller::for_shared_stream(request_events, requests.clone())
        .with_config(controller_config)
        .watches_shared_stream(issuer_events_for_requests, {
            let store = requests.clone();
            move |issuer: Arc<Issuer>| {
                requests_for(
                    &store,
                    IssuerKind::Issuer,
                    issuer.namespace().as_deref(),
                    &issuer.name_any(),
                )
            }
        })
        .watches_shared_stream(cluster_events_for_requests, {
            let store = requests.clone();
            move |issuer: Arc<ClusterIssuer>| {
                requests_for(&store, IssuerKind::ClusterIssuer, None, &issuer.name_any())
            }
        })
        .graceful_shutdown_on(shutdown.clone())
        .run(
            certificaterequest::reconcile,
            certificaterequest::error_policy,
            ctx.clone(),
        )
        .for_each(|_| future::ready(()));

    tracing::info!(
        cluster_resource_namespace = %config.cluster_resource_namespace,
        concurrency = config.concurrency,
        "controllers started"
    );
    // What the installed issuer CRDs let a status hold, learned before the first status write
    // (or, when the CRDs cannot be read in time, assumed as ours) and kept current after.
    let schema_watch = super::status_schema::watch(ctx.clone());
    let controllers = async move {
        let learned = ctx.status_schemas.learned();
        if tokio::time::timeout(SCHEMA_WAIT, learned).await.is_err() {
            tracing::warn!("issuer CRD schemas not learned yet; starting as with our CRDs");
        }
        future::join3(issuer_controller, cluster_controller, request_controller).await
    };
    // The reflectors run until the process ends; the controllers end on shutdown.
    tokio::select! {
        _ = controllers => {}
        _ = reflect_all => {}
        _ = synced => {}
        _ = schema_watch => {}
    }
    tracing::info!("controllers stopped");
    Ok(())
}

/// How long the controllers wait at start to learn the issuer CRDs' status schema.
const SCHEMA_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Fails fast with a hint when a CRD we watch is not installed (the API answers 404). Any
/// other error (a 500, a timeout) is left to the watchers, which retry with backoff: a brief
/// API server hiccup at start must not crash-loop the pod with a misleading message.
async fn preflight(client: &kube::Client) -> Result<(), RunError> {
    let probe = kube::api::ListParams::default().limit(1);
    let results = [
        (
            "Issuer",
            Api::<Issuer>::all(client.clone())
                .list_metadata(&probe)
                .await
                .err(),
        ),
        (
            "ClusterIssuer",
            Api::<ClusterIssuer>::all(client.clone())
                .list_metadata(&probe)
                .await
                .err(),
        ),
        (
            "CertificateRequest",
            Api::<CertificateRequest>::all(client.clone())
                .list_metadata(&probe)
                .await
                .err(),
        ),
    ];
    for (kind, error) in results {
        match error {
            None => {}
            Some(source) if is_not_served(&source) => return Err(RunError::MissingCrd { kind, source }),
            Some(error) => tracing::warn!(kind, %error, "cannot list yet; the watchers will retry"),
        }
    }
    Ok(())
}

/// Whether the API server says the resource does not exist at all.
fn is_not_served(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

fn subscribe<K>(writer: &reflector::store::Writer<K>) -> reflector::ReflectHandle<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    writer.subscribe().expect("stores are created shared")
}

/// Forgets an issuer when its watch says it was deleted, or a relist does not bring it.
fn forget_deleted<K: AnyIssuer>(
    ctx: &Arc<Context>,
    generations: &Arc<watches::Generations>,
) -> impl FnMut(&watcher::Event<K>) + use<K> {
    let (ctx, generations) = (ctx.clone(), generations.clone());
    let mut relist = watches::Relist::default();
    move |event| watches::issuer_event(event, &ctx, &generations, &mut relist)
}

/// A reflector stream must be polled for its store to fill.
async fn drive<S: futures::Stream + Send>(stream: S) {
    stream.for_each(|_| future::ready(())).await;
}

/// Issuers whose credential Secret is `namespace/name`. For ClusterIssuers the Secret must be in
/// `home`, the cluster resource namespace.
fn issuers_using<K: AnyIssuer>(
    store: &Store<K>,
    namespace: Option<&str>,
    name: &str,
    home: Option<&str>,
) -> Vec<ObjectRef<K>> {
    if home.is_some() && home != namespace {
        return vec![];
    }
    store
        .state()
        .iter()
        .filter(|i| {
            i.spec().auth_secret_name == name && (home.is_some() || i.namespace().as_deref() == namespace)
        })
        .map(|i| ObjectRef::from_obj(&**i))
        .collect()
}

/// Requests waiting on an issuer, to reconcile when it changes. Terminal ones are skipped.
fn requests_for(
    store: &Store<CertificateRequest>,
    kind: IssuerKind,
    namespace: Option<&str>,
    name: &str,
) -> Vec<ObjectRef<CertificateRequest>> {
    store
        .state()
        .iter()
        .filter(|cr| {
            let r = &cr.spec.issuer_ref;
            r.name == name
                && IssuerKind::for_issuer_ref(r) == Some(Ok(kind))
                && (namespace.is_none() || cr.namespace().as_deref() == namespace)
                && !certificaterequest::decide::is_terminal(&certificaterequest::request_view(cr))
        })
        .map(|cr| ObjectRef::from_obj(&**cr))
        .collect()
}

type RecheckStream<K> = futures::stream::BoxStream<'static, ObjectRef<K>>;

fn receiver_stream<T: Send + 'static>(
    rx: mpsc::UnboundedReceiver<T>,
) -> futures::stream::BoxStream<'static, T> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) }).boxed()
}

/// Fans the one recheck channel out to the two issuer controllers.
fn split_rechecks(
    mut rx: mpsc::UnboundedReceiver<Recheck>,
) -> (RecheckStream<Issuer>, RecheckStream<ClusterIssuer>) {
    let (issuer_tx, issuer_rx) = mpsc::unbounded_channel();
    let (cluster_tx, cluster_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(recheck) = rx.recv().await {
            let _ = match (recheck.kind, recheck.namespace) {
                (IssuerKind::Issuer, Some(ns)) => issuer_tx
                    .send(ObjectRef::new(&recheck.name).within(&ns))
                    .map_err(drop),
                (IssuerKind::ClusterIssuer, _) => {
                    cluster_tx.send(ObjectRef::new(&recheck.name)).map_err(drop)
                }
                (IssuerKind::Issuer, None) => Ok(()),
            };
        }
    });
    (receiver_stream(issuer_rx), receiver_stream(cluster_rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        let status: kube::core::Status =
            serde_json::from_value(serde_json::json!({"code": code, "reason": "x", "message": "m"})).unwrap();
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn only_a_404_means_the_crd_is_missing() {
        let cases = [
            (api_error(404), true),
            (api_error(403), false),
            (api_error(500), false),
            (api_error(429), false),
            (kube::Error::LinesCodecMaxLineLengthExceeded, false),
        ];
        for (error, missing) in cases {
            assert_eq!(is_not_served(&error), missing, "{error}");
        }
    }
}
