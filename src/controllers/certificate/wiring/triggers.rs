//! What wakes a Certificate: a change of its own, of its requests, of its Secrets (the
//! fao-labelled ones whole, every other one through the metadata feed), and its time coming
//! (`kit::later`). All of it then waits in the funnel (`kit::funnel`).

use std::sync::Arc;

use futures::{Stream, StreamExt, future, stream};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::StandaloneWatches;
use crate::api::certmanager::Certificate;
use crate::controllers::kit::index::Index;
use crate::controllers::kit::secrets::SecretMeta;
use crate::controllers::kit::wiring::Wiring;

/// Every trigger of the Certificate controller.
pub fn sources(
    wiring: &Wiring,
    watches: &StandaloneWatches,
    meta: impl Stream<Item = Arc<SecretMeta>> + Send + 'static,
    wakes: impl Stream<Item = ObjectRef<Certificate>> + Send + 'static,
) -> impl Stream<Item = ObjectRef<Certificate>> + Send + Unpin + 'static {
    let store = watches.certificates.store.clone();
    let (for_requests, for_secrets, for_meta) = (store.clone(), store.clone(), store);
    let (index, meta_index) = (
        watches.indexes.certificates.clone(),
        watches.indexes.certificates.clone(),
    );
    let cached = watches.secrets.store.clone();
    stream::select_all([
        watches
            .certificates
            .subscribe()
            .map(|crt| ObjectRef::from_obj(&*crt))
            .boxed(),
        wiring
            .requests
            .subscribe()
            .filter_map(move |cr| future::ready(owner_of(&for_requests, &cr.metadata)))
            .boxed(),
        watches
            .secrets
            .subscribe()
            .flat_map(move |s| stream::iter(certificates_for_secret(&for_secrets, &index, &s.metadata)))
            .boxed(),
        meta.flat_map(move |s: Arc<SecretMeta>| {
            let woken = if seen_whole(&cached, &s.metadata) {
                Vec::new()
            } else {
                certificates_for_secret(&for_meta, &meta_index, &s.metadata)
            };
            stream::iter(woken)
        })
        .boxed(),
        wakes.boxed(),
    ])
}

/// Whether the Secret store holds this very version of the Secret `meta` describes: its
/// whole-object watch has then passed the same change on already (the store is written before
/// its subscribers hear), so the metadata feed need not wake the Certificates a second time. A
/// deleted Secret, or one the store does not keep, still wakes them through this feed.
pub(super) fn seen_whole(cached: &Store<Secret>, meta: &ObjectMeta) -> bool {
    let (Some(namespace), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref()) else {
        return false;
    };
    meta.resource_version.is_some()
        && cached
            .get(&ObjectRef::new(name).within(namespace))
            .is_some_and(|s| s.metadata.resource_version == meta.resource_version)
}

/// The Certificate controlling an object, if the store has it.
fn owner_of(store: &Store<Certificate>, meta: &ObjectMeta) -> Option<ObjectRef<Certificate>> {
    let namespace = meta.namespace.as_deref()?;
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true) && r.kind == "Certificate")?;
    let reference = ObjectRef::new(&owner.name).within(namespace);
    store
        .get(&reference)
        .filter(|c| c.uid().as_deref() == Some(owner.uid.as_str()))
        .map(|_| reference)
}

/// The Certificates a Secret matters to: its controlling Certificate (a next-key Secret),
/// those naming it as `secretName`, and those whose keystores take their password from it.
fn certificates_for_secret(
    store: &Store<Certificate>,
    index: &Index<Certificate>,
    meta: &ObjectMeta,
) -> Vec<ObjectRef<Certificate>> {
    let (Some(namespace), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref()) else {
        return Vec::new();
    };
    let mut out: Vec<ObjectRef<Certificate>> = index
        .get(namespace, name)
        .into_iter()
        .map(|c| ObjectRef::new(&c).within(namespace))
        .collect();
    out.extend(owner_of(store, meta));
    out
}
