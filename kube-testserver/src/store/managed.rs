//! Server-side apply requests: the apply managers' records, and the `metadata.managedFields`
//! each write stores from them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{
    ApplyRequest, ManagerKey, ObjKey, Store, Sub, WriteOptions, ns_key, rv_of, write::equal_without,
};
use crate::{
    apply::{self, Apply},
    convert,
    error::{ApiError, ApiResult, Reason},
    managed_fields::{self, Applying, Context, Owner},
    meta,
    resources::ResourceType,
    schema,
};

/// What one apply leaves behind: this manager's configuration, and the other apply managers'
/// configurations minus what a forced apply took from them.
pub struct ApplyRecord {
    pub key: ManagerKey,
    pub config: Value,
    pub others: Vec<(ManagerKey, Value)>,
    /// The apiVersion the manager applied in.
    pub api_version: String,
}

fn managed_fields_of(obj: &Value) -> &[Value] {
    meta::metadata(obj)
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Whether `old` without its managedFields is `new` (which has none), compared in place.
fn same_but_managed_fields(old: &Value, new: &Value) -> bool {
    let (Some(old_meta), Some(new_meta)) = (meta::metadata(old), meta::metadata(new)) else {
        // Not the stored shape: compare as the stored shape would be.
        let mut old = old.clone();
        meta::metadata_mut(&mut old).remove("managedFields");
        return old == *new;
    };
    equal_without(old, new, &["metadata"])
        && old_meta.len() - usize::from(old_meta.contains_key("managedFields")) == new_meta.len()
        && old_meta
            .iter()
            .filter(|(k, _)| *k != "managedFields")
            .all(|(k, v)| new_meta.get(k) == Some(v))
}

impl Store {
    /// Server-side apply; creates the object when it does not exist. Returns whether it did.
    pub fn apply(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        config: Value,
        req: &ApplyRequest,
    ) -> ApiResult<(Value, bool)> {
        let (owned, precondition) = apply_scope(rt, name, req.sub, config)?;
        schema::typed_check(rt, ns, name, &owned)?;
        let key = ns_key(rt, ns, name);
        let Ok(entry) = self.entry(rt, &key) else {
            return self.apply_create(rt, ns, name, owned, req);
        };
        if let Some(rv) = precondition
            && Some(rv.as_str()) != rv_of(&entry.obj)
        {
            return Err(ApiError::stale(&rt.qualified(), name));
        }
        let mine = (req.manager.to_string(), req.sub);
        let previous = entry.applied.get(&mine).cloned();
        let other_keys: Vec<ManagerKey> = entry.applied.keys().filter(|k| **k != mine).cloned().collect();
        let mut others: Vec<(String, Value)> = other_keys
            .iter()
            .map(|k| (k.0.clone(), entry.applied[k].clone()))
            .collect();
        let merged = Apply {
            current: Some(&entry.obj),
            config: &owned,
            previous: previous.as_ref(),
            others: &mut others,
            schema: rt.schema.as_ref(),
            force: req.force,
        }
        .run()
        .map_err(|c| conflict_error(rt, name, &c))?;
        let record = ApplyRecord {
            key: mine,
            config: owned,
            others: other_keys
                .into_iter()
                .zip(others.into_iter().map(|(_, c)| c))
                .collect(),
            api_version: rt.api_version(),
        };
        let result = self.write_existing(rt, &key, merged, req.sub, req.opts, Some(&record))?;
        self.record_applied(rt, &key, req.opts, record);
        Ok((result, false))
    }

    fn apply_create(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        owned: Value,
        req: &ApplyRequest,
    ) -> ApiResult<(Value, bool)> {
        if req.sub != Sub::Main {
            return Err(ApiError::not_found(&rt.qualified(), name));
        }
        let apply = Apply {
            current: None,
            config: &owned,
            previous: None,
            others: &mut [],
            schema: rt.schema.as_ref(),
            force: req.force,
        };
        let mut obj = apply.run().map_err(|c| conflict_error(rt, name, &c))?;
        obj["apiVersion"] = rt.api_version().into();
        obj["kind"] = rt.kind.clone().into();
        meta::set_meta(&mut obj, "name", name);
        let record = ApplyRecord {
            key: (req.manager.to_string(), req.sub),
            config: owned,
            others: Vec::new(),
            api_version: rt.api_version(),
        };
        let created = self.create_with(rt, ns, convert::to_view(rt, obj), req.opts, Some(&record))?;
        self.record_applied(rt, &ns_key(rt, ns, name), req.opts, record);
        Ok((created, true))
    }

    /// Sets `new`'s managedFields from the apply managers' configurations as this write
    /// leaves them (`apply` for an apply, the stored ones otherwise). Client-sent managedFields
    /// are never kept.
    pub(super) fn stamp_managed_fields(
        &self,
        rt: &ResourceType,
        key: &ObjKey,
        old: Option<&Value>,
        new: &mut Value,
        apply: Option<&ApplyRecord>,
    ) {
        let stored = self
            .entries(&rt.storage)
            .and_then(|m| m.get(key))
            .map(|e| &e.applied);
        let mut configs: BTreeMap<&ManagerKey, &Value> = stored.into_iter().flatten().collect();
        if let Some(record) = apply {
            configs.extend(record.others.iter().map(|(k, c)| (k, c)));
            configs.insert(&record.key, &record.config);
        }
        meta::metadata_mut(new).remove("managedFields");
        if configs.is_empty() {
            return;
        }
        let previous = old.map(managed_fields_of).unwrap_or_default();
        let changed = old.is_none_or(|old| !same_but_managed_fields(old, new));
        let api_version = rt.api_version();
        let now = meta::now_rfc3339();
        let cx = Context {
            object: new,
            schema: rt.schema.as_ref(),
            previous,
            applying: apply.map(|r| Applying {
                manager: &r.key.0,
                sub: r.key.1,
                api_version: &r.api_version,
            }),
            changed,
            api_version: &api_version,
            now: &now,
        };
        let owners = configs.iter().map(|((manager, sub), config)| Owner {
            manager,
            sub: *sub,
            config,
        });
        let entries = managed_fields::entries(owners, &cx);
        if !entries.is_empty() {
            meta::set_meta(new, "managedFields", entries);
        }
    }

    /// Remembers what a manager applied, and what others still own after a forced apply.
    pub(super) fn record_applied(
        &mut self,
        rt: &ResourceType,
        key: &ObjKey,
        opts: &WriteOptions,
        record: ApplyRecord,
    ) {
        if opts.dry_run {
            return;
        }
        let Some(entry) = self.objects.get_mut(&rt.storage).and_then(|m| m.get_mut(key)) else {
            return;
        };
        entry.applied.insert(record.key, record.config);
        entry.applied.extend(record.others);
    }
}

/// Checks an apply configuration against the URL and reduces it to what this subresource
/// owns. Returns it with the resourceVersion precondition it carried, if any.
fn apply_scope(rt: &ResourceType, name: &str, sub: Sub, config: Value) -> ApiResult<(Value, Option<String>)> {
    let (api_version, kind) = (
        config.get("apiVersion").and_then(Value::as_str),
        config.get("kind").and_then(Value::as_str),
    );
    if api_version != Some(&rt.api_version()) || kind != Some(&rt.kind) {
        return Err(ApiError::bad_request(format!(
            "apply configuration must set apiVersion \"{}\" and kind \"{}\"",
            rt.api_version(),
            rt.kind
        )));
    }
    if meta::name(&config).is_some_and(|n| n != name) {
        return Err(ApiError::bad_request(
            "the name of the object does not match the name on the URL",
        ));
    }
    let config = convert::from_view(rt, config);
    let precondition = rv_of(&config).map(String::from);
    let mut owned = apply::owned_part(&config);
    if let Some(map) = owned.as_object_mut() {
        match sub {
            Sub::Status | Sub::Approval => map.retain(|k, _| k == "status"),
            Sub::Main if rt.status_subresource => {
                map.remove("status");
            }
            Sub::Main => {}
        }
    }
    Ok((owned, precondition))
}

fn conflict_error(rt: &ResourceType, name: &str, conflicts: &[(String, String)]) -> ApiError {
    let lines: Vec<String> = conflicts
        .iter()
        .map(|(m, f)| format!("conflict with \"{m}\": {f}"))
        .collect();
    let noun = if conflicts.len() == 1 {
        "conflict"
    } else {
        "conflicts"
    };
    let mut err = ApiError::new(
        Reason::Conflict,
        format!(
            "Apply failed with {} {noun}: {}",
            conflicts.len(),
            lines.join("\n")
        ),
    );
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, f)| json!({ "reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\""), "field": f }))
        .collect();
    let (plural, group) = (rt.plural.clone(), rt.group.clone());
    err.details = Some(json!({ "name": name, "group": group, "kind": plural, "causes": causes }));
    err
}
