//! The composition root: builds the contexts ([`contexts`]), starts the shared watches once,
//! then each controller as its own module describes it (`issuer::controller`,
//! `certificaterequest::controller`, ...).

mod contexts;

use std::future::Future;
use std::sync::Arc;

use futures::{FutureExt, StreamExt, future};
use kube::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{controller, watcher};
use tokio::sync::mpsc;

pub use self::contexts::Contexts;
use super::kit::scope::Scope;
use super::kit::secrets::SecretFeed;
use super::kit::wiring::{Relist, Wiring, reflect, reflect_restarting};
use super::kit::{Config, status};
use super::signing::Recheck;
use super::{certificate, certificaterequest, csr, issuer};
use crate::api::certmanager::{Certificate, CertificateRequest};
use crate::api::{AnyIssuer, ClusterIssuer, Issuer, IssuerKind};
use crate::clock::Clock;
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
    clock: Clock,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    announce(&config);
    preflight(&client, &config.scope, config.standalone.is_some()).await?;
    let controller_config = controller::Config::default().concurrency(config.concurrency);
    let mut wiring = Wiring::new(shutdown.boxed().shared(), controller_config);
    let (ctx, rechecks) = Contexts::new(
        client.clone(),
        config.clone(),
        clock,
        wiring.issuers.store.clone(),
        wiring.cluster_issuers.store.clone(),
        metrics,
    );
    // The Secret metadata watch keeps the signer's index of Secret versions.
    wiring.secrets = SecretFeed::with_index(ctx.signer.secret_index().clone());
    let home = config.cluster_resource_namespace.clone();
    let mut controllers = controllers(&mut wiring, &ctx, rechecks, home);
    let standalone_watches = match config.standalone.clone() {
        Some(settings) => {
            let (more, watches) =
                certificate::controllers(&client, &mut wiring, ctx.shared.clone(), settings);
            controllers.extend(more);
            tracing::info!("standalone mode: the Certificate controllers run");
            watches
        }
        None => future::pending().boxed(),
    };
    let synced = synced(&wiring, health);
    let watches = future::join(watch_all(&client, wiring, &ctx), standalone_watches).map(drop);
    tracing::info!(
        cluster_resource_namespace = %config.cluster_resource_namespace,
        concurrency = config.concurrency,
        "controllers started"
    );
    // What the installed issuer CRDs let a status hold, learned before the first status write
    // (or, when the CRDs cannot be read in time, assumed as ours) and kept current after.
    let schemas = ctx.shared.status_schemas.clone();
    let schema_watch = status::schema::watch(client, schemas.clone(), recheck_all(&ctx));
    let controllers = async move {
        if tokio::time::timeout(SCHEMA_WAIT, schemas.learned())
            .await
            .is_err()
        {
            tracing::warn!("issuer CRD schemas not learned yet; starting as with our CRDs");
        }
        future::join_all(controllers).await
    };
    // The watches run until the process ends; the controllers end on shutdown.
    tokio::select! {
        _ = controllers => {}
        () = watches => {}
        () = synced => {}
        () = schema_watch => {}
    }
    tracing::info!("controllers stopped");
    Ok(())
}

/// Every controller of the manager, each as its module describes it.
fn controllers(
    wiring: &mut Wiring,
    ctx: &Contexts,
    rechecks: mpsc::UnboundedReceiver<Recheck>,
    home: String,
) -> Vec<future::BoxFuture<'static, ()>> {
    let (issuer_rechecks, cluster_rechecks) = split_rechecks(rechecks);
    let (secrets, cluster_secrets) = (wiring.secrets.subscribe(), wiring.secrets.subscribe());
    let wiring = &*wiring;
    let mut all = vec![
        issuer::controller(
            wiring,
            &wiring.issuers,
            secrets,
            (issuer_rechecks, None),
            ctx.issuers.clone(),
        ),
        issuer::controller(
            wiring,
            &wiring.cluster_issuers,
            cluster_secrets,
            (cluster_rechecks, Some(home)),
            ctx.issuers.clone(),
        ),
        certificaterequest::controller(wiring, ctx.requests.clone()),
    ];
    if ctx.shared.config.kubernetes_csr.is_some() {
        all.push(csr::controller(wiring, ctx.csrs.clone()));
    }
    all
}

/// The shared watches, each filling its store: deletes are seen here, before the stores drop
/// the object (see `watches`); requests for other issuers never reach the store.
fn watch_all(client: &kube::Client, wiring: Wiring, ctx: &Contexts) -> future::BoxFuture<'static, ()> {
    let (issuers, requests) = (&ctx.issuers, ctx.requests.clone());
    let schemas = &ctx.shared.status_schemas;
    let config = &ctx.shared.config;
    let scope = &config.scope;
    // A ClusterIssuer's Secret is read in the cluster resource namespace: watched there too.
    let secrets = scope.and(&config.cluster_resource_namespace);
    let mut relist = Relist::default();
    let copies = wiring.request_copies.clone();
    future::join4(
        reflect_restarting(
            scope.apis::<Issuer>(client),
            wiring.issuers.into_writer(),
            issuer_events(issuers),
            schemas.changes(IssuerKind::Issuer),
        ),
        reflect_restarting(
            Api::<ClusterIssuer>::all(client.clone()),
            wiring.cluster_issuers.into_writer(),
            issuer_events(issuers),
            schemas.changes(IssuerKind::ClusterIssuer),
        ),
        reflect(
            scope.apis::<CertificateRequest>(client),
            wiring.requests.into_writer(),
            wiring.request_owners.following(move |event| {
                certificaterequest::watch::request_event(event, &requests, &mut relist, &copies)
            }),
        ),
        wiring.secrets.run(client.clone(), secrets),
    )
    .map(drop)
    .boxed()
}

/// Forgets an issuer when its watch says it was deleted, or a relist does not bring it.
fn issuer_events<K: AnyIssuer>(
    ctx: &Arc<issuer::IssuerContext>,
) -> impl FnMut(watcher::Event<K>) -> Option<watcher::Event<K>> + Send + 'static + use<K> {
    let ctx = ctx.clone();
    let mut relist = Relist::default();
    move |event: watcher::Event<K>| {
        let event = event.modify(issuer::watch::slim);
        issuer::watch::issuer_event(&event, &ctx, &mut relist);
        Some(event)
    }
}

/// Marks the manager synced once the three stores hold their first list.
fn synced(wiring: &Wiring, health: Arc<Health>) -> impl Future<Output = ()> + use<> {
    let (issuers, cluster_issuers, requests) = (
        wiring.issuers.store.clone(),
        wiring.cluster_issuers.store.clone(),
        wiring.requests.store.clone(),
    );
    async move {
        let _ = future::join3(
            issuers.wait_until_ready(),
            cluster_issuers.wait_until_ready(),
            requests.wait_until_ready(),
        )
        .await;
        health.set_synced(true);
        tracing::info!("caches synced");
        future::pending::<()>().await;
    }
}

/// Asks for every issuer of a kind to be checked again (its status schema changed).
fn recheck_all(ctx: &Contexts) -> impl Fn(IssuerKind) + use<> {
    let requests = ctx.requests.clone();
    move |kind| {
        for recheck in requests.core.issuers.all(kind) {
            let _ = requests.core.recheck.send(recheck);
        }
    }
}

/// How long the controllers wait at start to learn the issuer CRDs' status schema.
const SCHEMA_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Fails fast with a hint when a CRD we watch is not installed (the API answers 404). Any
/// other error (a 500, a timeout) is left to the watchers, which retry with backoff: a brief
/// API server hiccup at start must not crash-loop the pod with a misleading message.
async fn preflight(client: &kube::Client, scope: &Scope, standalone: bool) -> Result<(), RunError> {
    let probe = kube::api::ListParams::default().limit(1);
    let certificates = if standalone {
        scope
            .probe::<Certificate>(client)
            .list_metadata(&probe)
            .await
            .err()
    } else {
        None
    };
    let results = [
        ("Certificate", certificates),
        (
            "Issuer",
            scope.probe::<Issuer>(client).list_metadata(&probe).await.err(),
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
            scope
                .probe::<CertificateRequest>(client)
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

/// Says at start which namespaces are served: in a namespace-scoped install, requests and
/// Issuers elsewhere are never seen, so nothing else would tell their owners why.
fn announce(config: &Config) {
    match &config.scope {
        Scope::Cluster => tracing::info!("serving every namespace"),
        Scope::Namespaces(served) => tracing::info!(
            namespaces = %served.join(","),
            cluster_resource_namespace = %config.cluster_resource_namespace,
            "serving only these namespaces (--namespace): Issuers, CertificateRequests and Secrets elsewhere are not watched; ClusterIssuers are served, for requests in these namespaces"
        ),
    }
}

/// Whether the API server says the resource does not exist at all.
fn is_not_served(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
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
