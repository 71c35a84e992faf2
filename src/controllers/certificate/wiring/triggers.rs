//! What wakes a Certificate, and in which lane of the funnel (`kit::funnel`) it waits: a
//! change of its own (a Certificate never looked at, without status, in the lane for new
//! ones), of its requests, of its Secrets (the fao-labelled ones whole, every other one
//! through the metadata feed), and its time coming (`kit::later`).

use std::sync::Arc;

use futures::{Stream, StreamExt, future, stream};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::StandaloneWatches;
use crate::api::certmanager::Certificate;
use crate::controllers::kit::funnel::Lane;
use crate::controllers::kit::index::Index;
use crate::controllers::kit::secrets::SecretMeta;
use crate::controllers::kit::wiring::Wiring;

/// Every trigger of the Certificate controller, with its lane.
pub fn sources(
    wiring: &Wiring,
    watches: &StandaloneWatches,
    meta: impl Stream<Item = Arc<SecretMeta>> + Send + 'static,
    wakes: impl Stream<Item = ObjectRef<Certificate>> + Send + 'static,
) -> impl Stream<Item = (ObjectRef<Certificate>, Lane)> + Send + Unpin + 'static {
    let store = watches.certificates.store.clone();
    let (for_requests, for_secrets, for_meta) = (store.clone(), store.clone(), store);
    let (index, meta_index) = (
        watches.indexes.certificates.clone(),
        watches.indexes.certificates.clone(),
    );
    let cached = watches.secrets.store.clone();
    let again = |reference| (reference, Lane::Again);
    stream::select_all([
        watches
            .certificates
            .subscribe()
            .map(|crt| (ObjectRef::from_obj(&*crt), lane_of(&crt)))
            .boxed(),
        wiring
            .requests
            .subscribe()
            .filter_map(move |cr| future::ready(owner_of(&for_requests, &cr.metadata)))
            .map(again)
            .boxed(),
        watches
            .secrets
            .subscribe()
            .flat_map(move |s| stream::iter(certificates_for_secret(&for_secrets, &index, &s.metadata)))
            .map(again)
            .boxed(),
        meta.flat_map(move |s: Arc<SecretMeta>| {
            let woken = if seen_whole(&cached, &s.metadata) {
                Vec::new()
            } else {
                certificates_for_secret(&for_meta, &meta_index, &s.metadata)
            };
            stream::iter(woken)
        })
        .map(again)
        .boxed(),
        wakes.map(again).boxed(),
    ])
}

/// A Certificate no controller has written a status on yet is new: a mass creation finishes
/// the ones it started before it starts the rest.
fn lane_of(crt: &Certificate) -> Lane {
    if crt.status.is_none() {
        Lane::New
    } else {
        Lane::Again
    }
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
