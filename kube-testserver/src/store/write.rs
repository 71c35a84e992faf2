//! Create, update and patch, and the write path server-side apply (`managed.rs`) shares.

use serde_json::{Value, json};

use super::{
    ChangeKind, ObjKey, Store, Sub, WriteOptions,
    kinds::{crd_status, is_crd, is_namespace, is_secret, namespace_storage, normalize_secret},
    managed::ApplyRecord,
    ns_key, rv_of,
};
use crate::{
    convert,
    error::{ApiError, ApiResult, Reason},
    meta,
    resources::{
        ResourceType, crd_types,
        csr::{self, Part},
    },
    schema,
};

/// Whether `a` and `b` are equal once the top-level fields `skip` are left out, compared in
/// place rather than on copies of both.
pub(super) fn equal_without(a: &Value, b: &Value, skip: &[&str]) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let kept =
        |m: &'_ serde_json::Map<String, Value>| m.keys().filter(|k| !skip.contains(&k.as_str())).count();
    kept(a) == kept(b)
        && a.iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .all(|(k, v)| b.get(k) == Some(v))
}

/// Whether the spec part (everything but metadata, and status when it is a subresource: what
/// generation counts) differs.
fn spec_changed(rt: &ResourceType, old: &Value, new: &Value) -> bool {
    let skip: &[&str] = if rt.status_subresource {
        &["metadata", "apiVersion", "kind", "status"]
    } else {
        &["metadata", "apiVersion", "kind"]
    };
    !equal_without(old, new, skip)
}

impl Store {
    fn check_namespace(&self, rt: &ResourceType, ns: Option<&str>, creating: Option<&str>) -> ApiResult<()> {
        if !rt.namespaced {
            return Ok(());
        }
        let ns = ns.unwrap_or_default();
        let key = ObjKey {
            namespace: String::new(),
            name: ns.to_string(),
        };
        let Some(entry) = self.objects.get(&namespace_storage()).and_then(|m| m.get(&key)) else {
            return Err(ApiError::not_found("namespaces", ns));
        };
        if let Some(name) = creating
            && meta::is_deleting(&entry.obj)
        {
            return Err(ApiError::new(
                Reason::Forbidden,
                format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    rt.qualified()
                ),
            ));
        }
        Ok(())
    }

    /// Structural schema check for custom resources, CRD checks for CRDs, and what Secret
    /// writes imply (`stringData` folded into base64 `data`, `type` defaulted to Opaque).
    fn validate(&self, rt: &ResourceType, obj: &mut Value, opts: &WriteOptions) -> ApiResult<()> {
        let name = meta::name(obj).unwrap_or_default().to_string();
        if is_secret(rt) {
            normalize_secret(rt, &name, obj)?;
        }
        if let Some(schema) = &rt.schema {
            let found = schema::check(schema, obj);
            if opts.strict && !found.unknown.is_empty() {
                let fields: Vec<String> = found
                    .unknown
                    .iter()
                    .map(|f| format!("unknown field \"{f}\""))
                    .collect();
                return Err(ApiError::bad_request(format!(
                    "strict decoding error: {}",
                    fields.join(", ")
                )));
            }
            if !found.errors.is_empty() {
                return Err(ApiError::invalid(&rt.kind_qualified(), &name, &found.errors));
            }
        }
        if is_crd(rt) {
            crd_types(obj)?;
        }
        Ok(())
    }

    fn set_namespace(rt: &ResourceType, obj: &mut Value, ns: Option<&str>) -> ApiResult<()> {
        let meta = meta::metadata_mut(obj);
        if !rt.namespaced {
            meta.remove("namespace");
            return Ok(());
        }
        let ns = ns.unwrap_or_default();
        match meta.get("namespace").and_then(Value::as_str) {
            Some(given) if !given.is_empty() && given != ns => Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )),
            _ => {
                meta.insert("namespace".into(), ns.into());
                Ok(())
            }
        }
    }

    pub fn create(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        self.create_with(rt, ns, obj, opts, None)
    }

    pub(super) fn create_with(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
        apply: Option<&ApplyRecord>,
    ) -> ApiResult<Value> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body of the request was not an object"));
        }
        let mut obj = convert::from_view(rt, obj);
        Self::set_namespace(rt, &mut obj, ns)?;
        let name = self.name_for_create(rt, ns, &obj)?;
        let key = ns_key(rt, ns, &name);
        stamp_new(rt, &mut obj, &name);
        self.validate(rt, &mut obj, opts)?;
        if csr::is_csr(rt) {
            csr::prepare_create(&mut obj, opts.requester.as_ref());
            csr::validate(&obj)?;
        }
        if is_crd(rt) {
            crd_status(&mut obj, None);
        }
        self.stamp_managed_fields(rt, &key, None, &mut obj, apply);
        if opts.dry_run {
            return Ok(obj);
        }
        let obj = self.commit(&rt.storage, &key, ChangeKind::Added, obj);
        if is_crd(rt) {
            self.registry.register_crd(&obj)?;
        }
        // Only a delete removes owners; a write can only orphan the object it writes (an owner
        // that is already gone). A full pass per write made N writes cost O(N^2).
        if self.orphaned(&key, &obj) {
            self.collect_garbage();
        }
        Ok(obj)
    }

    /// The name a create ends up with (generated if asked), checked for form and uniqueness
    /// in a namespace that accepts new objects.
    fn name_for_create(&self, rt: &ResourceType, ns: Option<&str>, obj: &Value) -> ApiResult<String> {
        let name = match meta::name(obj) {
            Some(name) => name.to_string(),
            None => self.generate_name(rt, ns, obj)?,
        };
        self.check_namespace(rt, ns, Some(&name))?;
        let valid = if is_namespace(rt) {
            meta::is_dns_label(&name)
        } else {
            meta::is_dns_subdomain(&name)
        };
        if !valid {
            let why = format!(
                "Invalid value: \"{name}\": a lowercase RFC 1123 name must consist of lower case alphanumeric characters, '-' or '.'"
            );
            let cause = ("metadata.name".to_string(), why);
            return Err(ApiError::invalid(&rt.kind_qualified(), &name, &[cause]));
        }
        if self
            .entries(&rt.storage)
            .is_some_and(|m| m.contains_key(&ns_key(rt, ns, &name)))
        {
            return Err(ApiError::already_exists(&rt.qualified(), &name));
        }
        Ok(name)
    }

    fn generate_name(&self, rt: &ResourceType, ns: Option<&str>, obj: &Value) -> ApiResult<String> {
        let Some(prefix) = meta::meta_str(obj, "generateName") else {
            let cause = (
                "metadata.name".to_string(),
                "Required value: name or generateName is required".to_string(),
            );
            return Err(ApiError::invalid(&rt.kind_qualified(), "", &[cause]));
        };
        let taken = |n: &str| {
            self.entries(&rt.storage)
                .is_some_and(|m| m.contains_key(&ns_key(rt, ns, n)))
        };
        let name = std::iter::repeat_with(|| format!("{prefix}{}", meta::name_suffix()))
            .find(|n| !taken(n))
            .expect("an endless iterator finds a free name");
        Ok(name)
    }

    /// PUT: replaces the object (or its status), with optimistic concurrency when the body
    /// carries a resourceVersion.
    pub fn update(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        sub: Sub,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body of the request was not an object"));
        }
        let mut obj = convert::from_view(rt, obj);
        if meta::name(&obj).is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(
                "the name of the object does not match the name on the URL",
            ));
        }
        Self::set_namespace(rt, &mut obj, ns)?;
        self.write_existing(rt, &ns_key(rt, ns, name), obj, sub, opts, None)
    }

    /// PATCH (all but apply): `edit` changes the object as this version shows it.
    pub fn patch(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Sub,
        opts: &WriteOptions,
        edit: impl FnOnce(&mut Value) -> ApiResult<()>,
    ) -> ApiResult<Value> {
        let key = ns_key(rt, ns, name);
        let mut view = convert::to_view(rt, self.entry(rt, &key)?.obj.clone());
        edit(&mut view)?;
        if !view.is_object() {
            return Err(ApiError::bad_request("the patch did not produce an object"));
        }
        let mut obj = convert::from_view(rt, view);
        Self::set_namespace(rt, &mut obj, ns)?;
        if meta::name(&obj) != Some(name) {
            return Err(ApiError::bad_request(
                "the name of the object does not match the name on the URL",
            ));
        }
        self.write_existing(rt, &key, obj, sub, opts, None)
    }

    /// The common tail of update, patch and apply to an existing object.
    pub(super) fn write_existing(
        &mut self,
        rt: &ResourceType,
        key: &ObjKey,
        new: Value,
        sub: Sub,
        opts: &WriteOptions,
        apply: Option<&ApplyRecord>,
    ) -> ApiResult<Value> {
        let old = self.entry(rt, key)?.obj.clone();
        if let Some(rv) = rv_of(&new)
            && Some(rv) != rv_of(&old)
        {
            return Err(ApiError::stale(&rt.qualified(), &key.name));
        }
        let mut new = carry_over(rt, &old, new, sub);
        if csr::is_csr(rt) {
            let part = match sub {
                Sub::Main => Part::Main,
                Sub::Status => Part::Status,
                Sub::Approval => Part::Approval,
            };
            csr::prepare_update(&old, &mut new, part);
            csr::validate_update(&old, &new, part)?;
        }
        if meta::is_deleting(&old) {
            let before = meta::finalizers(&old);
            if meta::finalizers(&new).iter().any(|f| !before.contains(f)) {
                let cause = (
                    "metadata.finalizers".into(),
                    "Forbidden: no new finalizers can be added if the object is being deleted".into(),
                );
                return Err(ApiError::invalid(&rt.kind_qualified(), &key.name, &[cause]));
            }
        }
        self.validate(rt, &mut new, opts)?;
        if is_crd(rt) && sub == Sub::Main {
            crd_status(&mut new, Some(&old));
        }
        if rt.tracks_generation && spec_changed(rt, &old, &new) {
            let generation = meta::metadata(&old)
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64);
            let generation = generation.unwrap_or(0) + 1;
            meta::set_meta(&mut new, "generation", generation);
        }
        self.stamp_managed_fields(rt, key, Some(&old), &mut new, apply);
        // Like kube-apiserver, a write that changes nothing is not stored and bumps nothing.
        if new == old || opts.dry_run {
            return Ok(new);
        }
        if meta::is_deleting(&new) && meta::finalizers(&new).is_empty() {
            let gone = self.remove(rt, key, new);
            self.collect_garbage();
            return Ok(gone);
        }
        let committed = self.commit(&rt.storage, key, ChangeKind::Modified, new);
        if is_crd(rt) {
            self.registry.register_crd(&committed)?;
        }
        if self.orphaned(key, &committed) {
            self.collect_garbage();
        }
        Ok(committed)
    }

    /// Whether the collector would delete `obj` (stored under `key`) now: it is not deleting
    /// and every owner it names is gone. Each owner is looked up by kind, namespace and name
    /// and must carry the referenced uid, as the real collector resolves owners; an owner of
    /// a kind this server does not serve counts as present. Costs the owner lookups, not a
    /// pass over the whole store, so writes of owned objects stay O(log N) each.
    fn orphaned(&self, key: &ObjKey, obj: &Value) -> bool {
        let refs = meta::owner_references(obj);
        if refs.is_empty() || meta::is_deleting(obj) {
            return false;
        }
        refs.iter().all(|r| {
            let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
            let Some(rt) = self.registry.by_kind(field("apiVersion"), field("kind")) else {
                return false;
            };
            let owner = ns_key(&rt, Some(&key.namespace), field("name"));
            self.entries(&rt.storage)
                .and_then(|m| m.get(&owner))
                .is_none_or(|e| meta::uid(&e.obj) != Some(field("uid")))
        })
    }
}

/// Server-set fields of a new object, and what a create may not set.
fn stamp_new(rt: &ResourceType, obj: &mut Value, name: &str) {
    let meta = meta::metadata_mut(obj);
    meta.insert("name".into(), name.into());
    meta.insert("uid".into(), meta::new_uid().into());
    meta.insert("creationTimestamp".into(), meta::now_rfc3339().into());
    for server_owned in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "generation",
        "selfLink",
    ] {
        meta.remove(server_owned);
    }
    if rt.tracks_generation {
        meta.insert("generation".into(), 1.into());
    }
    if rt.status_subresource
        && let Some(map) = obj.as_object_mut()
    {
        // Status is written through /status only, so a create cannot set it.
        map.remove("status");
    }
    if is_namespace(rt) {
        if obj.get("spec").is_none() {
            obj["spec"] = json!({ "finalizers": ["kubernetes"] });
        }
        obj["status"] = json!({ "phase": "Active" });
    }
}

/// `new` as a write to `sub` may leave it: a status write changes only status, a main write
/// never changes status (when it is a subresource), and server-set metadata stays.
fn carry_over(rt: &ResourceType, old: &Value, mut new: Value, sub: Sub) -> Value {
    match sub {
        Sub::Status | Sub::Approval => {
            let status = new.get("status").cloned();
            new = old.clone();
            let map = new.as_object_mut().expect("stored objects are objects");
            match status {
                Some(status) => map.insert("status".into(), status),
                None => map.remove("status"),
            };
        }
        Sub::Main if rt.status_subresource => {
            let map = new.as_object_mut().expect("checked by callers");
            match old.get("status") {
                Some(status) => map.insert("status".into(), status.clone()),
                None => map.remove("status"),
            };
        }
        Sub::Main => {}
    }
    let old_meta = meta::metadata(old).cloned().unwrap_or_default();
    let meta = meta::metadata_mut(&mut new);
    for server_owned in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
    ] {
        match old_meta.get(server_owned) {
            Some(v) => meta.insert(server_owned.into(), v.clone()),
            None => meta.remove(server_owned),
        };
    }
    meta.remove("managedFields");
    new
}
