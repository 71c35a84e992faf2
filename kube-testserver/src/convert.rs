//! Between the stored form of an object and the form one served version shows.

use serde_json::{Value, json};

use super::resources::{ResourceType, Shape};
use super::selector::FieldSelector;

/// core/v1 Event field ↔ events.k8s.io/v1 Event field.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn rename(obj: &mut Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) {
    let Some(map) = obj.as_object_mut() else { return };
    for (from, to) in pairs {
        if let Some(v) = map.remove(from) {
            map.insert(to.to_string(), v);
        }
    }
}

fn set_type(obj: &mut Value, rt: &ResourceType) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), rt.api_version().into());
        map.insert("kind".into(), rt.kind.clone().into());
    }
}

/// The stored object as `rt` serves it.
pub fn to_view(rt: &ResourceType, mut obj: Value) -> Value {
    if rt.shape == Shape::EventsV1 {
        rename(&mut obj, EVENT_FIELDS.iter().copied());
    }
    set_type(&mut obj, rt);
    obj
}

/// Whether `fields` selects `stored` as `rt` serves it. Only a selector on something other
/// than metadata pays for a converted copy: a list, a delete-collection or a watch of one
/// object by name must not copy every object of its namespace.
pub fn fields_select(rt: &ResourceType, fields: &FieldSelector, stored: &Value) -> bool {
    if fields.reads_metadata_only() {
        return fields.matches(stored);
    }
    fields.matches(&to_view(rt, stored.clone()))
}

/// An object written through `rt`, in stored form (stored `apiVersion` is the written one;
/// reads rewrite it).
pub fn from_view(rt: &ResourceType, mut obj: Value) -> Value {
    if rt.shape == Shape::EventsV1 {
        rename(&mut obj, EVENT_FIELDS.iter().map(|(core, v1)| (*v1, *core)));
        if let Some(map) = obj.as_object_mut() {
            map.insert("apiVersion".into(), "v1".into());
            map.insert("kind".into(), "Event".into());
        }
        return obj;
    }
    set_type(&mut obj, rt);
    obj
}

/// `PartialObjectMetadata`: the object with everything but its metadata left out.
pub fn to_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    #[test]
    fn events_convert_both_ways() {
        let reg = Registry::default();
        let v1 = reg.lookup("events.k8s.io", "v1", "events").unwrap();
        let stored = json!({ "apiVersion": "v1", "kind": "Event", "message": "hi", "involvedObject": { "name": "x" } });
        let view = to_view(&v1, stored.clone());
        assert_eq!(view["note"], "hi");
        assert_eq!(view["regarding"]["name"], "x");
        assert_eq!(view["apiVersion"], "events.k8s.io/v1");
        assert_eq!(from_view(&v1, view), stored);
    }
}
