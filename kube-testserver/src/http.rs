//! The HTTP face: the listener, authentication, and routing Kubernetes API paths to verbs.

use std::sync::Arc;

use axum::{
    Router,
    body::Bytes,
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
    service::TowerToHyperService,
};
use serde_json::Value;
use tokio::{net::TcpListener, sync::watch, task::JoinSet};
use tokio_rustls::TlsAcceptor;

use super::{
    Shared,
    access::{self, Caller},
    control, discovery,
    error::{ApiError, ApiResult, Reason},
    faults::{AuditEntry, Verb},
    negotiate::{Output, negotiate},
    openapi,
    resources::{ResourceType, csr, is_access_review},
    store::{Sub, WriteOptions},
};

const MAX_BODY: usize = 16 * 1024 * 1024;

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .nest("/testserver", control::router())
        .fallback(handle)
        .with_state(shared)
}

/// Serves connections until `shutdown` changes, then drops them all.
pub async fn accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let _ = tcp.set_nodelay(true);
                let (app, tls) = (app.clone(), tls.clone());
                connections.spawn(async move {
                    let service = TowerToHyperService::new(app);
                    let builder = auto::Builder::new(TokioExecutor::new());
                    let served = match tls {
                        Some(acceptor) => match acceptor.accept(tcp).await {
                            Ok(stream) => builder.serve_connection_with_upgrades(TokioIo::new(stream), service).await,
                            Err(err) => {
                                tracing::debug!(%err, "TLS handshake failed");
                                return;
                            }
                        },
                        None => builder.serve_connection_with_upgrades(TokioIo::new(tcp), service).await,
                    };
                    if let Err(err) = served {
                        tracing::debug!(%err, "connection ended with an error");
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    connections.abort_all();
}

pub fn json_response(status: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).expect("JSON values serialise");
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = json_response(status, &self.to_status());
        if let Some(secs) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, secs.into());
        }
        response
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    let response = serve(&shared, request)
        .await
        .unwrap_or_else(IntoResponse::into_response);
    tracing::debug!(%method, %path, status = response.status().as_u16(), "request");
    response
}

/// One API request, parsed; `handlers` has a method per verb on it.
pub(super) struct Req<'a> {
    pub shared: &'a Arc<Shared>,
    pub target: Target,
    pub query: Query,
    pub output: Output,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub caller: Caller,
}

/// Query parameters, first value wins.
pub(super) struct Query(Vec<(String, String)>);

impl Query {
    fn parse(raw: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
                .into_owned()
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn flag(&self, key: &str) -> Option<bool> {
        self.get(key).map(|v| v == "true" || v == "1")
    }

    pub fn write_options(&self) -> WriteOptions {
        WriteOptions {
            dry_run: self.get("dryRun") == Some("All"),
            strict: self.get("fieldValidation") == Some("Strict"),
            requester: None,
        }
    }
}

/// The request's user: `None` for the kubeconfig's own token (or without auth), the name of
/// an added user (`TestServer::add_user`) for theirs; any other token is refused.
fn authorize(shared: &Shared, headers: &HeaderMap) -> ApiResult<Option<String>> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(user) = given.and_then(|t| shared.users.lock().expect("users lock").get(t).cloned()) {
        return Ok(Some(user));
    }
    match &shared.token {
        None => Ok(None),
        Some(token) if given == Some(token.as_str()) => Ok(None),
        Some(_) => Err(ApiError::new(Reason::Unauthorized, "Unauthorized")),
    }
}

/// Who a request acts as: the user it impersonates, else the added user its token names,
/// else the kubeconfig's admin; without authentication, nobody in particular.
fn caller_of(shared: &Shared, user: Option<&str>, headers: &HeaderMap) -> Caller {
    if let Some(impersonated) = access::impersonated(headers) {
        return Caller::User(impersonated);
    }
    match (user, &shared.token) {
        (Some(name), _) => Caller::User(access::added_user(name)),
        (None, Some(_)) => Caller::User(access::admin()),
        (None, None) => Caller::Anonymous,
    }
}

/// A parsed resource path.
pub(super) struct Target {
    pub rt: Arc<ResourceType>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub sub: Sub,
}

impl Target {
    pub fn ns(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    fn resource_label(&self) -> String {
        match self.sub {
            Sub::Main => self.rt.plural.clone(),
            Sub::Status => format!("{}/status", self.rt.plural),
            Sub::Approval => format!("{}/approval", self.rt.plural),
        }
    }
}

fn parse_target(shared: &Shared, segments: &[&str]) -> ApiResult<Target> {
    let (group, version, rest) = match segments {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::no_route()),
    };
    let (namespace, rest): (Option<String>, Vec<&str>) = match rest {
        ["namespaces", ns, plural, tail @ ..] if !matches!(*plural, "status" | "finalize") => (
            Some(ns.to_string()),
            std::iter::once(*plural).chain(tail.iter().copied()).collect(),
        ),
        _ => (None, rest.to_vec()),
    };
    let (plural, name, sub) = match rest.as_slice() {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(name.to_string()), None),
        [plural, name, sub] => (*plural, Some(name.to_string()), Some(*sub)),
        _ => return Err(ApiError::no_route()),
    };
    let rt = shared
        .store
        .lock()
        .expect("store lock")
        .registry
        .lookup(group, version, plural)
        .ok_or_else(ApiError::no_route)?;
    if namespace.is_some() && !rt.namespaced {
        return Err(ApiError::no_route());
    }
    let sub = match sub {
        None => Sub::Main,
        Some("status") if rt.status_subresource => Sub::Status,
        Some("approval") if csr::is_csr(&rt) => Sub::Approval,
        Some(_) => return Err(ApiError::no_route()),
    };
    Ok(Target {
        rt,
        namespace,
        name,
        sub,
    })
}

fn verb_of(method: &Method, target: &Target, query: &Query) -> ApiResult<Verb> {
    let named = target.name.is_some();
    let verb = match (method.as_str(), named) {
        ("GET", true) => Verb::Get,
        ("GET", false) if query.flag("watch") == Some(true) => Verb::Watch,
        ("GET", false) => Verb::List,
        ("POST", false) => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
    };
    let collection_only = matches!(verb, Verb::List | Verb::Watch);
    if target.rt.namespaced && target.namespace.is_none() && !collection_only {
        return Err(ApiError::no_route());
    }
    let create_only = is_access_review(&target.rt) && verb != Verb::Create;
    if create_only || (target.sub != Sub::Main && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch)) {
        return Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    }
    Ok(verb)
}

/// The one object a field selector `metadata.name=<name>` (alone) names.
fn named_by_selector(selector: Option<&str>) -> Option<String> {
    let name = selector?.strip_prefix("metadata.name=")?;
    (!name.is_empty() && !name.contains(',')).then(|| name.to_string())
}

async fn serve(shared: &Arc<Shared>, request: Request) -> ApiResult<Response> {
    let path = request.uri().path().to_string();
    // Health checks are public on real clusters too.
    if matches!(path.as_str(), "/healthz" | "/livez" | "/readyz") {
        return Ok((StatusCode::OK, "ok").into_response());
    }
    let user = authorize(shared, request.headers())?;
    let caller = caller_of(shared, user.as_deref(), request.headers());
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if let Some(doc) = discovery_doc(shared, &segments)? {
        return Ok(json_response(StatusCode::OK, &doc));
    }
    let query = Query::parse(request.uri().query());
    let target = parse_target(shared, &segments)?;
    let verb = verb_of(request.method(), &target, &query)?;
    if let Some(impersonated) = access::impersonated(request.headers()) {
        let rules = shared.access.lock().expect("access lock").clone();
        let resource = target.rt.plural.as_str();
        access::authorize_impersonated(
            &rules,
            &impersonated,
            verb.as_str(),
            &target.rt.group,
            resource,
            target.ns(),
        )?;
    }
    if let Some(user) = user.clone() {
        let name = target
            .name
            .clone()
            .or_else(|| named_by_selector(query.get("fieldSelector")));
        shared.faults.lock().expect("faults lock").audit.push(AuditEntry {
            user,
            verb,
            group: target.rt.group.clone(),
            resource: target.resource_label(),
            namespace: target.namespace.clone(),
            name,
            at: std::time::Instant::now(),
        });
    }
    let latency = shared.faults.lock().expect("faults lock").latency;
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    {
        let mut faults = shared.faults.lock().expect("faults lock");
        let resource = target.resource_label();
        if let Some(injected) = faults
            .observe(
                verb,
                &resource,
                target.namespace.as_deref(),
                target.name.as_deref(),
            )
            .or_else(|| faults.observe_rates(verb, &resource, user.as_deref()))
        {
            return Err(injected);
        }
    }
    let output = negotiate(request.headers(), query.get("includeObject"))?;
    let headers = request.headers().clone();
    let body = axum::body::to_bytes(request.into_body(), MAX_BODY)
        .await
        .map_err(|e| ApiError::bad_request(format!("failed to read the request body: {e}")))?;
    let req = Req {
        shared,
        target,
        query,
        output,
        headers,
        body,
        caller,
    };
    match verb {
        Verb::Create if is_access_review(&req.target.rt) => req.review(),
        Verb::Get => req.get(),
        Verb::List => req.list(),
        Verb::Watch => req.watch(),
        Verb::Create => req.create(),
        Verb::Update => req.update(),
        Verb::Patch => req.patch(),
        Verb::Delete => req.delete(),
        Verb::DeleteCollection => req.delete_collection(),
    }
}

fn discovery_doc(shared: &Shared, segments: &[&str]) -> ApiResult<Option<Value>> {
    let store = shared.store.lock().expect("store lock");
    let registry = &store.registry;
    let doc = match segments {
        ["version"] => discovery::version(),
        ["api"] => discovery::core_versions(&shared.address),
        ["apis"] => discovery::group_list(registry),
        ["api", version] => discovery::resource_list(registry, "", version).ok_or_else(ApiError::no_route)?,
        ["apis", group] => discovery::group(registry, group).ok_or_else(ApiError::no_route)?,
        ["apis", group, version] => {
            discovery::resource_list(registry, group, version).ok_or_else(ApiError::no_route)?
        }
        ["openapi", "v3"] => openapi::root(registry),
        ["openapi", "v3", "api", version] => {
            openapi::group_version(registry, "", version).ok_or_else(ApiError::no_route)?
        }
        ["openapi", "v3", "apis", group, version] => {
            openapi::group_version(registry, group, version).ok_or_else(ApiError::no_route)?
        }
        _ => return Ok(None),
    };
    Ok(Some(doc))
}
