//! Content negotiation: the shape of an answer, from `Accept` and `includeObject`.

use axum::http::{HeaderMap, header};
use serde_json::{Value, json};

use super::{
    convert,
    error::{ApiError, ApiResult, Reason},
    resources::ResourceType,
    table::{self, IncludeObject},
};

/// How objects are rendered in a response or watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The object itself (`application/json`).
    Full,
    /// `PartialObjectMetadata(List)`: metadata only, never the body (so never Secret data).
    Metadata,
    /// `meta.k8s.io/v1 Table`, as kubectl asks for.
    Table(IncludeObject),
}

/// The first media type in `Accept` this server can produce. Aggregated discovery and
/// protobuf are skipped, so clients that list JSON after them fall back to it.
pub fn negotiate(headers: &HeaderMap, include_object: Option<&str>) -> ApiResult<Output> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(Output::Full);
    };
    for media in accept.split(',') {
        let mut parts = media.split(';').map(str::trim);
        let mime = parts.next().unwrap_or_default();
        if !matches!(
            mime,
            "application/json" | "application/yaml" | "*/*" | "application/*" | ""
        ) {
            continue;
        }
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| params.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        let meta_group = param("g") == Some("meta.k8s.io");
        match param("as") {
            None => return Ok(Output::Full),
            Some("PartialObjectMetadata" | "PartialObjectMetadataList") if meta_group => {
                return Ok(Output::Metadata);
            }
            Some("Table") if meta_group => {
                let include = match include_object {
                    Some("None") => IncludeObject::None,
                    Some("Object") => IncludeObject::Object,
                    _ => IncludeObject::Metadata,
                };
                return Ok(Output::Table(include));
            }
            Some(_) => continue,
        }
    }
    Err(ApiError::new(
        Reason::NotAcceptable,
        format!("only the following media types are accepted: application/json; given {accept}"),
    ))
}

impl Output {
    /// One object, already in `rt`'s served form.
    pub fn object(self, rt: &ResourceType, view: Value) -> Value {
        match self {
            Output::Full => view,
            Output::Metadata => convert::to_metadata(&view),
            Output::Table(include) => table::table(rt, &[view], include, json!({})),
        }
    }

    /// A list of objects in `rt`'s served form, with the list's metadata.
    pub fn list(self, rt: &ResourceType, items: Vec<Value>, list_meta: Value) -> Value {
        match self {
            Output::Full => json!({
                "kind": rt.list_kind, "apiVersion": rt.api_version(), "metadata": list_meta, "items": items,
            }),
            Output::Metadata => json!({
                "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
                "items": items.iter().map(convert::to_metadata).collect::<Vec<_>>(),
            }),
            Output::Table(include) => table::table(rt, &items, include, list_meta),
        }
    }

    /// `(kind, apiVersion)` of BOOKMARK objects in this shape.
    pub fn bookmark_type(self, rt: &ResourceType) -> (String, String) {
        match self {
            Output::Metadata => ("PartialObjectMetadata".into(), "meta.k8s.io/v1".into()),
            _ => (rt.kind.clone(), rt.api_version()),
        }
    }
}
