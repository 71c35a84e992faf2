//! How an issuer controller is wired: run by its issuers' spec changes, by changes of their
//! credential Secrets and by rechecks the request controller asks for.

use std::sync::Arc;

use futures::Stream;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};

use super::watch::spec_changes;
use super::{IssuerContext, error_policy, reconcile};
use crate::api::AnyIssuer;
use crate::controllers::kit::secrets::SecretMeta;
use crate::controllers::kit::wiring::{Watched, Wiring, drive};

/// The controller of issuers of kind `K`. A ClusterIssuer's Secret lives in `home`, the
/// cluster resource namespace; an Issuer's in its own namespace (`home` is `None`).
pub fn controller<K: AnyIssuer>(
    wiring: &Wiring,
    watched: &Watched<K>,
    secrets: impl Stream<Item = Arc<SecretMeta>> + Send + 'static,
    (rechecks, home): (BoxStream<'static, ObjectRef<K>>, Option<String>),
    ctx: Arc<IssuerContext>,
) -> BoxFuture<'static, ()> {
    // Spec changes only: the controller's own status writes do not run it again.
    let changes = spec_changes(watched.subscribe(), ctx.generations.clone());
    let store = watched.store.clone();
    let controller = Controller::for_shared_stream(changes, watched.store.clone())
        .with_config(wiring.config.clone())
        .watches_shared_stream(secrets, move |secret: Arc<SecretMeta>| {
            issuers_using(
                &store,
                secret.namespace().as_deref(),
                &secret.name_any(),
                home.as_deref(),
            )
        })
        .reconcile_on(rechecks)
        .graceful_shutdown_on(wiring.shutdown.clone())
        .run(reconcile::<K>, error_policy::<K>, ctx);
    drive(controller)
}

/// Issuers whose credential Secret is `namespace/name`. For ClusterIssuers the Secret must be in
/// `home`, the cluster resource namespace.
pub fn issuers_using<K: AnyIssuer>(
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
