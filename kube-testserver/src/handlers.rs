//! The verbs: one method per verb on a parsed request.

use std::{sync::Arc, time::Duration};

use axum::{
    http::{StatusCode, header},
    response::Response,
};
use base64::Engine as _;
use serde_json::{Value, json};

use super::{
    access::{self, Caller},
    convert,
    error::{ApiError, ApiResult, Reason},
    http::{Req, json_response},
    patch::{self, PatchKind},
    protobuf,
    resources::{ResourceType, csr},
    selector::{FieldSelector, LabelSelector},
    store::{ApplyRequest, DeleteOptions, Deleted, ObjKey, Propagation, Since, Sub, WriteOptions},
    watch::{self as watch_stream, WatchSpec},
};

/// Continue tokens carry the first page's resourceVersion and the last key served.
fn encode_continue(rv: u64, key: &ObjKey) -> String {
    let raw = json!({ "rv": rv, "ns": key.namespace, "name": key.name }).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> ApiResult<(u64, ObjKey)> {
    let invalid = || ApiError::bad_request("continue key is not valid");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| invalid())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(invalid)?;
    let part = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(String::from)
            .ok_or_else(invalid)
    };
    Ok((
        rv,
        ObjKey {
            namespace: part("ns")?,
            name: part("name")?,
        },
    ))
}

impl Req<'_> {
    fn store(&self) -> std::sync::MutexGuard<'_, super::store::Store> {
        self.shared.store.lock().expect("store lock")
    }

    fn rt(&self) -> &ResourceType {
        &self.target.rt
    }

    /// The query's options, with the caller as the requester kinds like CSRs record.
    fn write_options(&self) -> WriteOptions {
        let mut opts = self.query.write_options();
        if let Caller::User(user) = &self.caller {
            opts.requester = Some(user.clone());
        }
        opts
    }

    /// `POST subjectaccessreviews`: answered from the test's allow-list, never stored.
    pub fn review(&self) -> ApiResult<Response> {
        let body = self.decode_body()?;
        let rules = self.shared.access.lock().expect("access lock").clone();
        let answer = access::review(&rules, body)?;
        self.shared
            .reviews
            .lock()
            .expect("reviews lock")
            .push(answer.clone());
        Ok(json_response(StatusCode::CREATED, &answer))
    }

    fn respond(&self, status: StatusCode, stored: Value) -> ApiResult<Response> {
        let view = convert::to_view(self.rt(), stored);
        Ok(json_response(status, &self.output.object(self.rt(), view)))
    }

    fn selectors(&self) -> ApiResult<(LabelSelector, FieldSelector)> {
        let fields = FieldSelector::parse(self.query.get("fieldSelector").unwrap_or_default())?;
        fields.check(self.rt().selectable.as_deref())?;
        Ok((
            LabelSelector::parse(self.query.get("labelSelector").unwrap_or_default())?,
            fields,
        ))
    }

    /// The request body as JSON, or YAML when the content type says so.
    fn decode_body(&self) -> ApiResult<Value> {
        let content_type = self.header(header::CONTENT_TYPE);
        if content_type.contains("protobuf") {
            return self.decode_protobuf(content_type);
        }
        let text =
            std::str::from_utf8(&self.body).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
        // kube-rs sends apply bodies as JSON under the YAML content type; JSON is YAML, so
        // parse it as JSON first (cheaper by far) and as YAML only when that fails.
        if content_type.contains("yaml") {
            if text.trim_start().starts_with('{')
                && let Ok(value) = serde_json::from_str(text)
            {
                return Ok(value);
            }
            return serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
        }
        serde_json::from_str(text).map_err(|e| ApiError::bad_request(format!("error decoding JSON: {e}")))
    }

    /// Protobuf only where client-go's typed clients send it and this server reads it: a
    /// CSR's `/approval` and `/status` (kubectl certificate approve|deny).
    fn decode_protobuf(&self, content_type: &str) -> ApiResult<Value> {
        if csr::is_csr(self.rt()) && self.target.sub != Sub::Main {
            return protobuf::csr_to_json(&self.body);
        }
        Err(ApiError::new(
            Reason::UnsupportedMediaType,
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml; given {content_type}"
            ),
        ))
    }

    pub fn get(&self) -> ApiResult<Response> {
        let obj = self
            .store()
            .get(self.rt(), self.target.ns(), self.target.name())?;
        self.respond(StatusCode::OK, obj)
    }

    pub fn list(&self) -> ApiResult<Response> {
        let (labels, fields) = self.selectors()?;
        let limit = self
            .query
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        let resume = self
            .query
            .get("continue")
            .filter(|c| !c.is_empty())
            .map(decode_continue)
            .transpose()?;
        let store = self.store();
        let (list_rv, after) = match resume {
            Some((rv, _)) if store.is_expired(rv) => {
                return Err(ApiError::expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                ));
            }
            Some((rv, key)) => (rv, Some(key)),
            None => (store.resource_version(), None),
        };
        let mut matching = store
            .scan_pinned(self.rt(), self.target.ns(), after.as_ref(), fields.pinned_name())
            // Labels are in metadata, the same in every served form: only what they select
            // is copied.
            .filter(|(_, o)| labels.matches(o) && convert::fields_select(self.rt(), &fields, o))
            .map(|(k, o)| (k, convert::to_view(self.rt(), o.clone())));
        let page: Vec<(ObjKey, Value)> = matching
            .by_ref()
            .take(limit.unwrap_or(usize::MAX))
            .map(|(k, o)| (k.clone(), o))
            .collect();
        // As a real server: a count of what remains only without selectors (then it is cheap:
        // keys only); with selectors just whether anything does.
        let selected = ["labelSelector", "fieldSelector"]
            .iter()
            .any(|q| self.query.get(q).is_some_and(|v| !v.is_empty()));
        let remaining = match page.last() {
            Some((last, _)) if !selected => Some(store.scan(self.rt(), self.target.ns(), Some(last)).count()),
            _ => None,
        };
        let more = remaining.map_or_else(|| matching.next().is_some(), |n| n > 0);
        drop(matching);
        drop(store);
        let mut list_meta = json!({ "resourceVersion": list_rv.to_string() });
        if more && let Some((last, _)) = page.last() {
            list_meta["continue"] = encode_continue(list_rv, last).into();
            if let Some(n) = remaining {
                list_meta["remainingItemCount"] = n.into();
            }
        }
        let items: Vec<Value> = page.into_iter().map(|(_, o)| o).collect();
        Ok(json_response(
            StatusCode::OK,
            &self.output.list(self.rt(), items, list_meta),
        ))
    }

    pub fn watch(&self) -> ApiResult<Response> {
        let (labels, fields) = self.selectors()?;
        let send_initial = self.query.flag("sendInitialEvents");
        if send_initial == Some(true) && self.query.get("resourceVersionMatch") != Some("NotOlderThan") {
            let cause = (
                "resourceVersionMatch".to_string(),
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
                    .to_string(),
            );
            return Err(ApiError::invalid("ListOptions.meta.k8s.io", "", &[cause]));
        }
        let rv = self.query.get("resourceVersion").filter(|v| !v.is_empty());
        let store = self.store();
        let since = match (rv, send_initial) {
            (_, Some(true)) => Since::Now,
            (None | Some("0"), Some(false)) => Since::After(store.resource_version()),
            (None | Some("0"), None) => Since::Now,
            (Some(rv), _) => Since::After(
                rv.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid resource version: \"{rv}\"")))?,
            ),
        };
        let start = store.watch(self.rt(), self.target.ns(), since);
        drop(store);
        let timeout = self
            .query
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs);
        let spec = WatchSpec {
            rt: Arc::clone(&self.target.rt),
            namespace: self.target.namespace.clone(),
            labels,
            fields,
            output: self.output,
            bookmarks: self.query.flag("allowWatchBookmarks") == Some(true),
            initial_events_end: send_initial == Some(true),
            timeout,
            bookmark_interval: self.shared.bookmark_interval,
        };
        let body = watch_stream::body(spec, start, self.shared.closer.subscribe());
        let mut response = Response::new(body);
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            "application/json".parse().expect("static header"),
        );
        Ok(response)
    }

    pub fn create(&self) -> ApiResult<Response> {
        let obj = self.decode_body()?;
        let created = self
            .store()
            .create(self.rt(), self.target.ns(), obj, &self.write_options())?;
        self.respond(StatusCode::CREATED, created)
    }

    pub fn update(&self) -> ApiResult<Response> {
        let obj = self.decode_body()?;
        let t = &self.target;
        let updated = self
            .store()
            .update(self.rt(), t.ns(), t.name(), obj, t.sub, &self.write_options())?;
        self.respond(StatusCode::OK, updated)
    }

    pub fn patch(&self) -> ApiResult<Response> {
        let content_type = self.header(header::CONTENT_TYPE);
        let kind = PatchKind::from_content_type(content_type).ok_or_else(|| {
            let accepted = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
            ApiError::new(
                Reason::UnsupportedMediaType,
                format!("the body of the request was in an unknown format - accepted media types include: {accepted}; given {content_type}"),
            )
        })?;
        if kind == PatchKind::Apply {
            return self.apply();
        }
        let (t, opts) = (&self.target, self.write_options());
        let body = &self.body;
        let is_custom = self.rt().crd.is_some();
        let patched = self
            .store()
            .patch(self.rt(), t.ns(), t.name(), t.sub, &opts, |obj| {
                if kind == PatchKind::Json {
                    return patch::json(obj, body);
                }
                let p: Value = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                match kind {
                    PatchKind::Strategic if !is_custom => patch::strategic(obj, &p),
                    _ => patch::merge(obj, &p),
                }
                Ok(())
            })?;
        self.respond(StatusCode::OK, patched)
    }

    /// Server-side apply (`application/apply-patch+yaml`): 201 when it created the object.
    fn apply(&self) -> ApiResult<Response> {
        let manager = self
            .query
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                ApiError::bad_request("PATCH, application/apply-patch+yaml requires fieldManager parameter")
            })?;
        let config = self.decode_body()?;
        let opts = self.write_options();
        let t = &self.target;
        let req = ApplyRequest {
            manager,
            force: self.query.flag("force") == Some(true),
            sub: t.sub,
            opts: &opts,
        };
        let (obj, created) = self.store().apply(self.rt(), t.ns(), t.name(), config, &req)?;
        self.respond(
            if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            },
            obj,
        )
    }

    fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    fn delete_options(&self) -> ApiResult<DeleteOptions> {
        let body: Value = if self.body.is_empty() {
            json!({})
        } else {
            serde_json::from_slice(&self.body)
                .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
        };
        let policy = body
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .or(self.query.get("propagationPolicy"));
        let orphan =
            policy == Some("Orphan") || body.get("orphanDependents").and_then(Value::as_bool) == Some(true);
        let dry_run = self.query.get("dryRun") == Some("All")
            || body
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|d| d.iter().any(|x| x == "All"));
        let precondition = |k: &str| {
            body.pointer(&format!("/preconditions/{k}"))
                .and_then(Value::as_str)
                .map(String::from)
        };
        Ok(DeleteOptions {
            propagation: if orphan {
                Propagation::Orphan
            } else if policy == Some("Foreground") {
                Propagation::Foreground
            } else {
                Propagation::Background
            },
            uid: precondition("uid"),
            resource_version: precondition("resourceVersion"),
            dry_run,
        })
    }

    pub fn delete(&self) -> ApiResult<Response> {
        let opts = self.delete_options()?;
        let t = &self.target;
        match self.store().delete(self.rt(), t.ns(), t.name(), &opts)? {
            Deleted::Pending(obj) => self.respond(StatusCode::OK, obj),
            Deleted::Gone(obj) => Ok(json_response(
                StatusCode::OK,
                &json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": { "name": t.name(), "group": self.rt().group, "kind": self.rt().plural,
                                 "uid": super::meta::uid(&obj).unwrap_or_default() },
                }),
            )),
        }
    }

    pub fn delete_collection(&self) -> ApiResult<Response> {
        let (labels, fields) = self.selectors()?;
        let opts = self.delete_options()?;
        let rt = Arc::clone(&self.target.rt);
        let selected = |o: &Value| labels.matches(o) && convert::fields_select(&rt, &fields, o);
        let deleted = self
            .store()
            .delete_collection(self.rt(), self.target.ns(), selected, &opts);
        let items: Vec<Value> = deleted
            .into_iter()
            .map(|o| convert::to_view(self.rt(), o))
            .collect();
        let list = json!({ "kind": self.rt().list_kind, "apiVersion": self.rt().api_version(), "metadata": {}, "items": items });
        Ok(json_response(StatusCode::OK, &list))
    }
}
