//! CertificateRequest reconciler: the cert-manager external issuer contract. Only requests for
//! our group are touched; approval is awaited, denial honoured, and each request is signed at
//! most once.

pub mod decide;

use std::sync::Arc;

use base64::Engine;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use self::decide::{Held, IssuerView, Outcome, RequestView, Signing, Step};
use super::issuer::{self, truncate};
use super::{Context, Error, FIELD_MANAGER, Recheck};
use crate::api::certmanager::{self, CertificateRequest};
use crate::api::{self, AnyIssuer, ConditionStatus, IssuerKind};
use crate::pki::Chain;
use crate::telemetry::metrics::{CertificateLabels, Controller, IssuerLabels};

/// Observe: the request's own state.
pub fn request_view(cr: &CertificateRequest) -> RequestView {
    let status = cr.status.as_ref();
    let is_true = |t: &str| cr.has_true(t);
    RequestView {
        ready: status
            .and_then(|s| s.condition(certmanager::READY))
            .map(|c| (c.status.clone(), c.reason.clone())),
        approved: is_true(certmanager::APPROVED),
        denied: is_true(certmanager::DENIED),
        invalid_request: is_true(certmanager::INVALID_REQUEST),
        has_certificate: status
            .and_then(|s| s.certificate.as_ref())
            .is_some_and(|c| !c.0.is_empty()),
    }
}

/// Observe: the issuer the request names, from the shared caches.
fn issuer_view(cr: &CertificateRequest, kind: Result<IssuerKind, String>, ctx: &Context) -> IssuerView {
    let name = &cr.spec.issuer_ref.name;
    match kind {
        Err(other) => IssuerView::UnknownKind(other),
        Ok(IssuerKind::Issuer) => {
            let ns = cr.namespace().unwrap_or_default();
            view_of(ctx.issuers.get(&ObjectRef::new(name).within(&ns)).as_deref(), ctx)
        }
        Ok(IssuerKind::ClusterIssuer) => {
            view_of(ctx.cluster_issuers.get(&ObjectRef::new(name)).as_deref(), ctx)
        }
    }
}

fn view_of<K: AnyIssuer>(issuer: Option<&K>, ctx: &Context) -> IssuerView {
    let Some(issuer) = issuer else {
        return IssuerView::Missing;
    };
    let schema = ctx.status_schemas.get(K::KIND);
    let current = |c: &api::Condition| {
        super::status_schema::is_current(schema, c.observed_generation, issuer.meta().generation)
    };
    match api::find_condition(issuer.conditions(), api::READY) {
        None => IssuerView::Unchecked,
        // Computed for an older spec, or (where the schema holds it) without saying for which.
        Some(c) if !current(c) => IssuerView::Unchecked,
        Some(c) if c.status == ConditionStatus::True => IssuerView::Ready,
        Some(c) => IssuerView::NotReady {
            reason: c.reason.clone(),
            message: c.message.clone(),
        },
    }
}

/// The key of a request in backoff and memory: its UID.
pub fn request_key(cr: &CertificateRequest) -> String {
    cr.uid()
        .unwrap_or_else(|| format!("{}/{}", cr.namespace().unwrap_or_default(), cr.name_any()))
}

pub async fn reconcile(cr: Arc<CertificateRequest>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.metrics.reconciled(Controller::CertificateRequest);
    // Contract step 1: never touch requests for other issuers.
    let Some(kind) = IssuerKind::for_issuer_ref(&cr.spec.issuer_ref) else {
        return Ok(Action::await_change());
    };
    let request = request_view(&cr);
    let issuer = issuer_view(&cr, kind.clone(), &ctx);
    let uid = request_key(&cr);
    let held = held(&ctx, &uid, &cr, request.has_certificate);
    let step = decide::decide(
        &request,
        &issuer,
        &cr.spec.issuer_ref.name,
        kind.clone().unwrap_or(IssuerKind::Issuer),
        ctx.config.approval_required,
    );
    let step = decide::guard(step, request.has_certificate, held);
    announce_waiting(&cr, &ctx, &step).await;
    match step {
        Step::Leave | Step::WaitForApproval => Ok(Action::await_change()),
        Step::Deny => {
            let message = "The CertificateRequest was denied by an approval controller";
            write(
                &cr,
                &ctx,
                Write::failed(certmanager::REASON_DENIED, message),
                Notice::warning("Denied"),
            )
            .await?;
            Ok(Action::await_change())
        }
        Step::Reject(message) => {
            write(
                &cr,
                &ctx,
                Write::failed(certmanager::REASON_FAILED, &message),
                Notice::warning("PermanentError"),
            )
            .await?;
            Ok(Action::await_change())
        }
        Step::ConfirmIssued => {
            let chain = unsaved_chain(&ctx, &uid).unwrap_or_else(|| observed_chain(&cr));
            let version = write(&cr, &ctx, Write::issued(chain), Notice::normal("Issued")).await?;
            if held == Held::Unsaved {
                saved(&ctx, &uid, version);
            }
            Ok(Action::await_change())
        }
        Step::WaitForIssuer { event, message } => {
            write(
                &cr,
                &ctx,
                Write::pending(&message),
                Notice::normal(event.as_str()),
            )
            .await?;
            // The issuer watch brings this request back when the issuer changes.
            Ok(Action::await_change())
        }
        Step::Sign => sign(&cr, kind.expect("sign only for a known kind"), &ctx).await,
    }
}

pub fn error_policy(cr: Arc<CertificateRequest>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_failed(Controller::CertificateRequest);
    tracing::warn!(request = %format!("{}/{}", cr.namespace().unwrap_or_default(), cr.name_any()), error = %err, "reconcile failed");
    Action::requeue(ctx.request_backoff.next(request_key(&cr)))
}

async fn sign(cr: &CertificateRequest, kind: IssuerKind, ctx: &Context) -> Result<Action, Error> {
    let uid = request_key(cr);
    // Never two signs of one request at once (the guard already keeps signed ones out).
    let Some(flight) = Flight::begin(ctx, &uid) else {
        return Ok(Action::await_change());
    };
    let outcome = match kind {
        IssuerKind::Issuer => {
            let ns = cr.namespace().unwrap_or_default();
            let found = ctx
                .issuers
                .get(&ObjectRef::new(&cr.spec.issuer_ref.name).within(&ns));
            sign_with(cr, found.as_deref(), ctx).await
        }
        IssuerKind::ClusterIssuer => {
            let found = ctx.cluster_issuers.get(&ObjectRef::new(&cr.spec.issuer_ref.name));
            sign_with(cr, found.as_deref(), ctx).await
        }
    };
    match outcome {
        Outcome::Issued(chain) => {
            flight.signed(chain.clone());
            let version = write(cr, ctx, Write::issued(chain), Notice::normal("Issued")).await?;
            saved(ctx, &uid, version);
            ctx.request_backoff.reset(&uid);
            ctx.request_memory.settled(&uid);
            Ok(Action::await_change())
        }
        Outcome::Failed(message) => {
            write(
                cr,
                ctx,
                Write::failed(certmanager::REASON_FAILED, &message),
                Notice::warning("PermanentError"),
            )
            .await?;
            ctx.request_backoff.reset(&uid);
            ctx.request_memory.settled(&uid);
            Ok(Action::await_change())
        }
        Outcome::Retry(message) => {
            ctx.request_memory.failed(&uid, ctx.now());
            write(
                cr,
                ctx,
                Write::pending(&message),
                Notice::warning("RetryableError"),
            )
            .await?;
            Ok(Action::requeue(ctx.request_backoff.next(uid)))
        }
        Outcome::IssuerFault { message, .. } => {
            write(
                cr,
                ctx,
                Write::pending(&message),
                Notice::warning("IssuerNotReady"),
            )
            .await?;
            // Re-check the issuer now; when it is Ready again its watch brings us back.
            // Until then, keep a slow retry in case the issuer never changes.
            Ok(Action::requeue(ctx.request_backoff.next(uid)))
        }
    }
}

/// Observe: what this process holds for the request; forgets it once the cache shows the write.
fn held(ctx: &Context, uid: &str, cr: &CertificateRequest, has_certificate: bool) -> Held {
    let mut signing = ctx.unsaved.lock().expect("unsaved lock");
    let (held, forget) = decide::hold(
        signing.get(uid),
        cr.metadata.resource_version.as_deref(),
        has_certificate,
    );
    if forget {
        signing.remove(uid);
    }
    held
}

fn unsaved_chain(ctx: &Context, uid: &str) -> Option<Chain> {
    match ctx.unsaved.lock().expect("unsaved lock").get(uid) {
        Some(Signing::Unsaved(chain)) => Some(chain.clone()),
        _ => None,
    }
}

/// The Issued write landed as `resource_version`: hold that until the cache shows it.
fn saved(ctx: &Context, uid: &str, resource_version: Option<String>) {
    ctx.unsaved
        .lock()
        .expect("unsaved lock")
        .insert(uid.to_string(), Signing::Saved { resource_version });
}

fn observed_chain(cr: &CertificateRequest) -> Chain {
    let status = cr.status.as_ref();
    Chain {
        certificates: pem_text(status.and_then(|s| s.certificate.as_ref())),
        ca: Some(pem_text(status.and_then(|s| s.ca.as_ref()))).filter(|c| !c.is_empty()),
    }
}

/// A sign in flight for one request. Dropped before [`Flight::signed`], it frees the request
/// for the next attempt; after, the chain stays until the cache shows the write.
struct Flight<'a> {
    ctx: &'a Context,
    uid: String,
}

impl<'a> Flight<'a> {
    fn begin(ctx: &'a Context, uid: &str) -> Option<Self> {
        let mut signing = ctx.unsaved.lock().expect("unsaved lock");
        if signing.contains_key(uid) {
            return None;
        }
        signing.insert(uid.to_string(), Signing::InFlight);
        Some(Flight {
            ctx,
            uid: uid.to_string(),
        })
    }

    fn signed(&self, chain: Chain) {
        self.ctx
            .unsaved
            .lock()
            .expect("unsaved lock")
            .insert(self.uid.clone(), Signing::Unsaved(chain));
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        if let Ok(mut signing) = self.ctx.unsaved.lock()
            && signing.get(&self.uid) == Some(&Signing::InFlight)
        {
            signing.remove(&self.uid);
        }
    }
}

/// Signs with `issuer` (from the cache), classifying every failure.
async fn sign_with<K: AnyIssuer>(cr: &CertificateRequest, issuer: Option<&K>, ctx: &Context) -> Outcome {
    let Some(issuer) = issuer else {
        return Outcome::Retry(format!("{} {:?} disappeared", K::KIND, cr.spec.issuer_ref.name));
    };
    let fault = |message: String, reason| {
        let _ = ctx.recheck.send(Recheck::of(issuer));
        Outcome::IssuerFault { message, reason }
    };
    let credentials = match issuer::read_credentials(issuer, ctx).await {
        Ok(c) => c,
        Err(problem) => {
            let verdict = issuer::decide::verdict(issuer::decide::Observation::Secret(&problem));
            return fault(problem.to_string(), verdict.reason);
        }
    };
    let client = match issuer::cfssl_client(issuer, credentials, ctx) {
        Ok(c) => c,
        Err(err) => return fault(err.to_string(), issuer::decide::reason_for(&err)),
    };
    // The retry window starts at the first failed sign, not at creation.
    let first_failure = ctx.request_memory.first_failure(&request_key(cr));
    let result = issuer::timed(ctx, issuer, "sign", client.sign(&cr.spec.request.0)).await;
    if let Ok(signed) = &result {
        record_issued(ctx, cr, &issuer::key(issuer), &signed.chain);
    }
    let outcome = decide::outcome(
        result.as_ref().map(|s| s.chain.clone()),
        first_failure,
        ctx.now(),
        ctx.config.max_retry_duration,
    );
    if let Outcome::IssuerFault { .. } = &outcome {
        let _ = ctx.recheck.send(Recheck::of(issuer));
    }
    outcome
}

fn record_issued(ctx: &Context, cr: &CertificateRequest, issuer: &str, chain: &Chain) {
    ctx.metrics
        .issued
        .get_or_create(&IssuerLabels {
            issuer: issuer.into(),
        })
        .inc();
    let not_after = crate::pki::certificates_in(&chain.certificates)
        .ok()
        .and_then(|ders| {
            x509_parser::parse_x509_certificate(&ders[0])
                .ok()
                .map(|(_, c)| c.validity().not_after.timestamp())
        });
    if let Some(not_after) = not_after {
        ctx.metrics
            .certificate_expiry
            .get_or_create(&expiry_labels(cr, issuer))
            .set(not_after as f64);
    }
}

/// The expiry series of a request signed by `issuer`. Keyed by Certificate, so the series
/// count follows Certificates, not requests.
pub fn expiry_labels(cr: &CertificateRequest, issuer: &str) -> CertificateLabels {
    let name = cr
        .annotations()
        .get("cert-manager.io/certificate-name")
        .cloned()
        .unwrap_or_else(|| cr.name_any());
    CertificateLabels {
        namespace: cr.namespace().unwrap_or_default(),
        name,
        issuer: issuer.into(),
    }
}

/// Act: one Normal Event, once per request, saying it waits for approval. No status is
/// written: approval is cert-manager's to record.
async fn announce_waiting(cr: &CertificateRequest, ctx: &Context, step: &Step) {
    let uid = request_key(cr);
    if *step != Step::WaitForApproval {
        ctx.request_memory.stopped_waiting(&uid);
        return;
    }
    if !ctx.request_memory.announce_waiting(&uid) {
        return;
    }
    let event = Event {
        type_: EventType::Normal,
        reason: "WaitingForApproval".into(),
        note: Some("Not signing until the request is approved (cert-manager's Approved condition)".into()),
        action: "Sign".into(),
        secondary: None,
    };
    let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    if let Err(err) = recorder.publish(&event, &cr.object_ref(&())).await {
        tracing::warn!(error = %err, "cannot publish event");
    }
}

fn pem_text(bytes: Option<&k8s_openapi::ByteString>) -> String {
    bytes
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default()
}

/// The status fields one write sets; applied with server-side apply so conditions owned by
/// others (`Approved`, `Denied`) stay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub ready: &'static str,
    pub reason: &'static str,
    pub message: String,
    pub chain: Option<Chain>,
    pub failed: bool,
}

impl Write {
    fn issued(chain: Chain) -> Self {
        Write {
            ready: "True",
            reason: certmanager::REASON_ISSUED,
            message: "Certificate fetched from issuer successfully".into(),
            chain: Some(chain),
            failed: false,
        }
    }
    fn pending(message: &str) -> Self {
        Write {
            ready: "False",
            reason: certmanager::REASON_PENDING,
            message: message.into(),
            chain: None,
            failed: false,
        }
    }
    fn failed(reason: &'static str, message: &str) -> Self {
        Write {
            ready: "False",
            reason,
            message: message.into(),
            chain: None,
            failed: true,
        }
    }
}

/// Pure: the apply body for `write`, or `None` when the request already says exactly that.
pub fn status_patch(
    cr: &CertificateRequest,
    write: &Write,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<serde_json::Value> {
    let status = cr.status.as_ref();
    let previous = status.and_then(|s| s.condition(certmanager::READY));
    let unchanged = previous
        .is_some_and(|p| p.status == write.ready && p.reason == write.reason && p.message == write.message);
    if unchanged && write.chain.is_none() && !write.failed {
        return None;
    }
    let transition = match previous {
        Some(p) if p.status == write.ready => p.last_transition_time.clone().map(|t| t.0).unwrap_or(now),
        _ => now,
    };
    let mut body = serde_json::json!({
        "conditions": [{
            "type": certmanager::READY,
            "status": write.ready,
            "reason": write.reason,
            "message": write.message,
            "lastTransitionTime": rfc3339(transition),
        }],
    });
    if let Some(chain) = &write.chain {
        let b64 = base64::engine::general_purpose::STANDARD;
        body["certificate"] = b64.encode(&chain.certificates).into();
        if let Some(ca) = &chain.ca {
            body["ca"] = b64.encode(ca).into();
        }
    }
    if write.failed {
        // Set once: keep the first failure time.
        let first = status
            .and_then(|s| s.failure_time.clone())
            .map(|t| t.0)
            .unwrap_or(now);
        body["failureTime"] = rfc3339(first).into();
    }
    Some(serde_json::json!({
        "apiVersion": CertificateRequest::api_version(&()),
        "kind": CertificateRequest::kind(&()),
        "status": body,
    }))
}

fn rfc3339(t: k8s_openapi::jiff::Timestamp) -> String {
    // Kubernetes times have second precision.
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The Event that goes with a write.
#[derive(Debug, Clone, Copy)]
pub struct Notice {
    pub type_: EventType,
    pub reason: &'static str,
}

impl Notice {
    fn normal(reason: &'static str) -> Self {
        Notice {
            type_: EventType::Normal,
            reason,
        }
    }
    fn warning(reason: &'static str) -> Self {
        Notice {
            type_: EventType::Warning,
            reason,
        }
    }
}

/// Act: apply the status (when it changes) and publish the Event. Returns the
/// resourceVersion the write produced, if it wrote.
async fn write(
    cr: &CertificateRequest,
    ctx: &Context,
    write: Write,
    notice: Notice,
) -> Result<Option<String>, Error> {
    let Some(patch) = status_patch(cr, &write, ctx.now()) else {
        return Ok(None);
    };
    let ns = cr.namespace().unwrap_or_default();
    let api: Api<CertificateRequest> = Api::namespaced(ctx.client.clone(), &ns);
    let patched = api
        .patch_status(
            &cr.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(|source| Error::WriteStatus {
            object: format!("CertificateRequest {ns}/{}", cr.name_any()),
            source,
        })?;
    let event = Event {
        type_: notice.type_,
        reason: notice.reason.into(),
        note: Some(truncate(&write.message)),
        action: "Sign".into(),
        secondary: None,
    };
    // kube's Recorder scans its whole six-minute cache on every publish, so one shared by all
    // requests made each Event cost O(requests in the last six minutes): 480 us per request at
    // 40,000 (benches/reconcile.rs). A request's Events hardly ever repeat (one terminal
    // outcome, a few Pending retries), so a fresh recorder per write loses next to nothing.
    let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    if let Err(err) = recorder.publish(&event, &cr.object_ref(&())).await {
        tracing::warn!(error = %err, "cannot publish event");
    }
    Ok(patched.resource_version())
}
