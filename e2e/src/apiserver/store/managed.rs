//! The apply managers' records, and the `metadata.managedFields` each write stores from them.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{ManagerKey, ObjKey, Store, WriteOptions};
use crate::apiserver::{
    managed_fields::{self, Applying, Context, Owner},
    meta,
    resources::ResourceType,
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

fn managed_fields_of(obj: &Value) -> Vec<Value> {
    meta::metadata(obj)
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

impl Store {
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
        let changed = old.is_none_or(|old| {
            let mut old = old.clone();
            meta::metadata_mut(&mut old).remove("managedFields");
            old != *new
        });
        let api_version = rt.api_version();
        let now = meta::now_rfc3339();
        let cx = Context {
            object: new,
            schema: rt.schema.as_ref(),
            previous: &previous,
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
