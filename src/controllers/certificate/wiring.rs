//! How the Certificate controllers are wired. Two watches of their own: Certificates (ours
//! only reach the store) and Secrets labelled `controller.cert-manager.io/fao=true`, whole
//! (the issued Secrets and next-key Secrets). Every other Secret is seen through the shared
//! metadata feed only, and read live when its data is needed. The six lifecycle controllers run
//! on one queue ([`LIFECYCLE`]), woken by their Certificates, their requests, and the Secrets
//! they name or own.

use std::convert::Infallible;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, future, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;

use super::observe::{is_ours, named_secrets, settled};
use super::summary::secret_summary;
use super::{
    CertificateContext, Error, Settings, approver, issuing, keymanager, readiness, requestmanager,
    revisionmanager, trigger,
};
use crate::api::certmanager::{Certificate, CertificateRequest};
use crate::certificates::keys::label;
use crate::certificates::next_key;
use crate::certificates::secret::{CERT_MANAGER_SECRET_MANAGERS, compact_fields_v1, data_bytes};
use crate::controllers::kit::Shared;
use crate::controllers::kit::funnel::Funnel;
use crate::controllers::kit::index::{Index, controller_uid};
use crate::controllers::kit::plan::Requeue;
use crate::controllers::kit::recent::Recent;
use crate::controllers::kit::scope::Scope;
use crate::controllers::kit::secrets::SecretMeta;
use crate::controllers::kit::size::json_len;
use crate::controllers::kit::size::watch_config;
use crate::controllers::kit::status::FieldManager;
use crate::controllers::kit::wiring::{Watched, Wiring, drive, reflect_with};

mod triggers;

/// The two watches standalone mode adds, and the indexes beside their stores.
pub struct StandaloneWatches {
    pub certificates: Watched<Certificate>,
    pub secrets: Watched<Secret>,
    pub indexes: Indexes,
    /// The whole copies of the issued Secrets the store keeps as summaries.
    pub recent: Recent<Secret>,
}

/// How the Certificate controllers find related objects without scanning a store.
#[derive(Clone)]
pub struct Indexes {
    /// CertificateRequests by the UID of their controlling Certificate.
    pub requests: Index<CertificateRequest>,
    /// Cached Secrets by the UID of their controlling Certificate (next-key Secrets).
    pub key_secrets: Index<Secret>,
    /// Certificates by the Secrets they name ([`named_secrets`](super::observe::named_secrets)).
    pub certificates: Index<Certificate>,
}

impl Default for Indexes {
    fn default() -> Self {
        Indexes {
            requests: Index::new(|cr| controller_uid(&cr.metadata, "Certificate")),
            key_secrets: Index::new(|s| controller_uid(&s.metadata, "Certificate")),
            certificates: Index::new(named_secrets),
        }
    }
}

impl Indexes {
    /// Indexes of what `stores` hold now.
    pub fn of(
        (certificates, requests, secrets): &(Store<Certificate>, Store<CertificateRequest>, Store<Secret>),
    ) -> Self {
        let indexes = Indexes::default();
        indexes.certificates.extend(certificates.state());
        indexes.requests.extend(requests.state());
        indexes.key_secrets.extend(secrets.state());
        indexes
    }
}

type Reconcile = fn(Arc<Certificate>, Arc<CertificateContext>) -> BoxFuture<'static, Result<Requeue, Error>>;
type ErrorPolicy = fn(Arc<Certificate>, &Error, Arc<CertificateContext>) -> Requeue;

/// How many controllers [`LIFECYCLE`] runs.
const STEPS: u16 = 6;

/// The six Certificate controllers, in the order a Certificate moves through them. They share
/// one queue: a change wakes one reconcile that runs the six decisions, each with its own
/// observation, field manager and retry, instead of six reconciles racing on the same change
/// (most of which found nothing to do, and each paid for its wake).
const LIFECYCLE: [(Reconcile, ErrorPolicy); STEPS as usize] = [
    (|c, x| trigger::reconcile(c, x).boxed(), trigger::error_policy),
    (
        |c, x| keymanager::reconcile(c, x).boxed(),
        keymanager::error_policy,
    ),
    (
        |c, x| requestmanager::reconcile(c, x).boxed(),
        requestmanager::error_policy,
    ),
    (|c, x| issuing::reconcile(c, x).boxed(), issuing::error_policy),
    (|c, x| readiness::reconcile(c, x).boxed(), readiness::error_policy),
    (
        |c, x| revisionmanager::reconcile(c, x).boxed(),
        revisionmanager::error_policy,
    ),
];

/// One pass of the six over `crt`: a controller's failure is its own (logged, its own backoff)
/// and does not keep the others from deciding; the Certificate comes back at the soonest time
/// any of them asked for.
async fn lifecycle(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Action, Infallible> {
    if settled(&crt) {
        let namespace = crt.namespace().unwrap_or_default();
        ctx.recent.unpin(&namespace, &crt.spec.secret_name);
        super::observe::unpin_requests(&ctx, &crt);
    }
    let mut soonest = Requeue::AWAIT_CHANGE;
    for (reconcile, error_policy) in LIFECYCLE {
        let next = match reconcile(crt.clone(), ctx.clone()).await {
            Ok(next) => next,
            Err(err) => error_policy(crt.clone(), &err, ctx.clone()),
        };
        soonest = soonest.soonest(next);
    }
    // Kept compactly beside the controller, not in kube-runtime's scheduler: most
    // Certificates wait days for their renewal (`kit::later`).
    ctx.later.set(&crt, soonest.wait());
    ctx.funnel.done(&crt);
    Ok(Action::await_change())
}

/// The one queue's reconcile slots. The six had `--concurrency` slots each. A pass waiting on
/// the crypto pool holds its slot (a namespace's key generation waits in its lane), so the one
/// queue keeps the six's slots between them: one tenant's slow keys take no more of them than
/// before.
fn slots(shared: &Shared) -> u16 {
    shared.config.concurrency.saturating_mul(STEPS)
}

/// The Certificate controllers and the watches feeding them, ready to run.
pub fn controllers(
    client: &kube::Client,
    wiring: &mut Wiring,
    shared: Arc<Shared>,
    settings: Settings,
) -> (Vec<BoxFuture<'static, ()>>, BoxFuture<'static, ()>) {
    let watches = StandaloneWatches {
        certificates: Watched::new(4096),
        secrets: Watched::new(4096),
        indexes: Indexes {
            requests: wiring.request_owners.clone(),
            ..Indexes::default()
        },
        recent: Recent::default(),
    };
    let stores = (
        watches.certificates.store.clone(),
        wiring.requests.store.clone(),
        watches.secrets.store.clone(),
    );
    // cert-manager's certificate metrics are read from this store at each scrape.
    shared
        .metrics
        .watch_certificates(watches.certificates.store.clone());
    let approve = settings.approve_own_requests;
    let scope = shared.config.scope.clone();
    let mut ctx = CertificateContext::new(shared, settings, stores);
    ctx.secret_names = wiring.secrets.index();
    ctx.indexes = watches.indexes.clone();
    ctx.recent = watches.recent.clone();
    ctx.request_copies = wiring.request_copies.clone();
    // Twice the slots: a pass finishing finds the next waiting in the scheduler.
    ctx.funnel = Funnel::new(2 * usize::from(slots(&ctx.shared)));
    let ctx = Arc::new(ctx);
    let meta = wiring.secrets.subscribe();
    let mut out = vec![certificate_controller(wiring, &watches, meta, ctx.clone())];
    if approve {
        out.push(approver_controller(wiring, ctx.clone()));
    }
    (out, watch(client, &scope, watches))
}

fn certificate_controller(
    wiring: &Wiring,
    watches: &StandaloneWatches,
    meta: impl futures::Stream<Item = Arc<SecretMeta>> + Send + 'static,
    ctx: Arc<CertificateContext>,
) -> BoxFuture<'static, ()> {
    let store = watches.certificates.store.clone();
    let slots = slots(&ctx.shared);
    // Every trigger goes through the funnel, which keeps kube-runtime's scheduler small
    // (`kit::funnel`); the Certificates' own watch is one of its sources.
    let sources = triggers::sources(wiring, watches, meta, ctx.later.wakes());
    let controller = Controller::for_shared_stream(stream::pending(), store)
        .with_config(wiring.config.clone().concurrency(slots))
        .reconcile_on(ctx.funnel.clone().through(sources))
        .graceful_shutdown_on(wiring.shutdown.clone())
        .run(lifecycle, |_, never: &Infallible, _| match *never {}, ctx);
    drive(controller)
}

fn approver_controller(wiring: &Wiring, ctx: Arc<CertificateContext>) -> BoxFuture<'static, ()> {
    // A summary is a finished request: nothing to approve, nor to schedule (see the request
    // controller's wiring).
    let unfinished = wiring
        .requests
        .subscribe()
        .filter(|cr| future::ready(!cr.is_summary()));
    let controller = Controller::for_shared_stream(unfinished, wiring.requests.store.clone())
        .with_config(wiring.config.clone())
        .graceful_shutdown_on(wiring.shutdown.clone())
        .run(approver::reconcile, approver::error_policy, ctx);
    drive(controller)
}

/// Runs the two watches until the process ends.
fn watch(client: &kube::Client, scope: &Scope, watches: StandaloneWatches) -> BoxFuture<'static, ()> {
    let fao = watch_config().labels(&format!("{}=true", label::PART_OF_CERT_MANAGER));
    let (indexes, recent) = (watches.indexes, watches.recent);
    future::join(
        reflect_with(
            scope.apis::<Certificate>(client),
            watch_config(),
            watches.certificates.into_writer(),
            indexes.certificates.following(ours_only),
        ),
        reflect_with(
            scope.apis::<Secret>(client),
            fao,
            watches.secrets.into_writer(),
            indexes
                .key_secrets
                .following(move |event| cacheable_only(event).map(|e| recent.summarise(e, secret_summary))),
        ),
    )
    .map(drop)
    .boxed()
}

/// Keeps only Certificates for our issuers in the store, without their managedFields (no
/// controller reads them); one that stops being ours leaves it.
fn ours_only(event: watcher::Event<Certificate>) -> Option<watcher::Event<Certificate>> {
    let event = match event {
        watcher::Event::Apply(crt) if !is_ours(&crt) => watcher::Event::Delete(crt),
        watcher::Event::InitApply(crt) if !is_ours(&crt) => return None,
        event => event,
    };
    Some(event.modify(|crt| crt.metadata.managed_fields = None))
}

/// The most a cached Secret may hold: its data, and its metadata. An issued Secret with every
/// output format and keystore of an RSA-8192 key is under 64 KiB.
const MAX_SECRET_DATA: usize = 256 * 1024;
const MAX_SECRET_METADATA: usize = 64 * 1024;

/// Keeps in the store only labelled Secrets of our issuers' Certificates (issued for our group,
/// or next-key Secrets) of a bounded size: anyone may label a Secret. One the store does not
/// hold is read live when a Certificate names it (`observe::secret_named`). The issued ones
/// then go into the store as summaries, whole into [`Recent`].
fn cacheable_only(event: watcher::Event<Secret>) -> Option<watcher::Event<Secret>> {
    let event = match event {
        watcher::Event::Apply(secret) if !cacheable(&secret) => watcher::Event::Delete(secret),
        watcher::Event::InitApply(secret) if !cacheable(&secret) => return None,
        event => event,
    };
    Some(event.modify(only_issuing_fields))
}

/// Drops the managedFields entries of other managers than the issuing controller's, the only
/// ones read (`certificates::secret` compares what issuing owns with what the spec asks), but
/// for cert-manager's, kept without their fields: issuing releases them (`issuing::takeover`).
/// Issuing's own fields are kept as JSON text ([`compact_fields_v1`]).
fn only_issuing_fields(secret: &mut Secret) {
    if let Some(entries) = secret.metadata.managed_fields.as_mut() {
        entries.retain_mut(|e| {
            let ours = e.manager.as_deref() == Some(FieldManager::ISSUING.as_str());
            match e.fields_v1.as_mut() {
                Some(fields) if ours => compact_fields_v1(fields),
                _ => e.fields_v1 = None,
            }
            ours || e
                .manager
                .as_deref()
                .is_some_and(|m| CERT_MANAGER_SECRET_MANAGERS.contains(&m))
        });
    }
}

/// Pure: whether the Secret store keeps `secret`.
fn cacheable(secret: &Secret) -> bool {
    let ours = secret
        .annotations()
        .get(crate::certificates::keys::annotation::ISSUER_GROUP)
        .is_some_and(|group| group == crate::api::GROUP);
    (ours || next_key::labelled(secret))
        && data_bytes(secret) <= MAX_SECRET_DATA
        && json_len(&secret.metadata) <= MAX_SECRET_METADATA
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::triggers::seen_whole;
    use super::*;

    fn secret(group: Option<&str>, next_key: bool, data: usize, note: usize) -> Secret {
        let mut annotations = serde_json::Map::new();
        if let Some(group) = group {
            annotations.insert("cert-manager.io/issuer-group".into(), group.into());
        }
        annotations.insert("note".into(), "n".repeat(note).into());
        let labels = if next_key {
            json!({"controller.cert-manager.io/fao": "true", "cert-manager.io/next-private-key": "true"})
        } else {
            json!({"controller.cert-manager.io/fao": "true"})
        };
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "apps", "labels": labels, "annotations": annotations},
            "data": {"tls.crt": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, vec![b'c'; data])},
        }))
        .unwrap()
    }

    fn meta(name: &str, version: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("apps".into()),
            resource_version: version.map(Into::into),
            ..ObjectMeta::default()
        }
    }

    /// The metadata feed stays quiet only for the very version the Secret store holds.
    #[test]
    fn seen_whole_table() {
        let (store, mut writer) = kube::runtime::reflector::store::<Secret>();
        let mut cached = secret(Some(crate::api::GROUP), false, 10, 10);
        cached.metadata.resource_version = Some("7".into());
        writer.apply_watcher_event(&watcher::Event::Apply(cached));
        let cases = [
            ("the version the store holds", meta("s", Some("7")), true),
            ("a newer version", meta("s", Some("8")), false),
            ("an older version", meta("s", Some("6")), false),
            ("no version", meta("s", None), false),
            (
                "a Secret the store does not hold",
                meta("other", Some("7")),
                false,
            ),
        ];
        for (row, meta, want) in cases {
            assert_eq!(seen_whole(&store, &meta), want, "{row}");
        }
    }

    /// The cache keeps issuing's fields as text, cert-manager's entries without fields (for
    /// the takeover), and no other manager's.
    #[test]
    fn only_issuing_fields_are_kept_and_as_text() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        let entry = |manager: &str| ManagedFieldsEntry {
            manager: Some(manager.into()),
            fields_v1: Some(FieldsV1(json!({"f:data": {"f:tls.crt": {}}}))),
            ..ManagedFieldsEntry::default()
        };
        let mut cached = secret(Some(crate::api::GROUP), false, 10, 10);
        cached.metadata.managed_fields = Some(vec![
            entry("kubectl"),
            entry(FieldManager::ISSUING.as_str()),
            entry(CERT_MANAGER_SECRET_MANAGERS[0]),
        ]);
        only_issuing_fields(&mut cached);
        let kept: Vec<_> = cached
            .metadata
            .managed_fields
            .unwrap()
            .into_iter()
            .map(|e| (e.manager.unwrap(), e.fields_v1.map(|f| f.0)))
            .collect();
        assert_eq!(
            kept,
            [
                (
                    FieldManager::ISSUING.as_str().to_string(),
                    Some(json!(r#"{"f:data":{"f:tls.crt":{}}}"#))
                ),
                (CERT_MANAGER_SECRET_MANAGERS[0].to_string(), None),
            ]
        );
    }

    /// Only our issuers' Secrets and next-key Secrets, of a bounded size, are cached.
    #[test]
    fn cacheable_table() {
        let ours = Some(crate::api::GROUP);
        let cases = [
            ("issued for us", secret(ours, false, 3_000, 10), true),
            ("a next-key Secret", secret(None, true, 3_000, 10), true),
            (
                "issued for cert-manager's issuers",
                secret(Some("cert-manager.io"), false, 3_000, 10),
                false,
            ),
            ("labelled by anyone", secret(None, false, 3_000, 10), false),
            (
                "ours, data over 256 KiB",
                secret(ours, false, MAX_SECRET_DATA, 10),
                false,
            ),
            (
                "ours, metadata over 64 KiB",
                secret(ours, false, 3_000, MAX_SECRET_METADATA),
                false,
            ),
        ];
        for (row, secret, want) in cases {
            assert_eq!(cacheable(&secret), want, "{row}");
        }
    }
}
