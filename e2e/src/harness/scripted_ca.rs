//! A CA that answers as a script says: a loopback HTTP server speaking multirootca's two
//! endpoints, for the answers a real CA (or a proxy in front of it) gives only when something
//! is wrong. `/api/v1/cfssl/info` always answers with the test CA's intermediate, and the
//! credential probe (an authsign with an empty CSR) with `invalid request`, so issuers become
//! Ready; every authsign that carries a CSR is counted and answered by the [`Script`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use rcgen::{BasicConstraints, CertificateParams, CertificateSigningRequestParams, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};

/// What the CA answers to an authsign that carries a CSR.
#[derive(Debug, Clone)]
pub struct Script {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Body,
    /// Waited before answering (past the manager's `--cfssl-timeout`, a timeout).
    pub delay: Duration,
}

/// The body of a scripted answer.
#[derive(Debug, Clone)]
pub enum Body {
    /// These bytes as they are.
    Raw(Vec<u8>),
    /// A CFSSL success envelope with a certificate built from the request's CSR.
    Signed(Leaf),
}

/// Which certificate a [`Body::Signed`] answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaf {
    /// For the CSR's key and names, by the test CA's intermediate, valid now.
    Good,
    /// For the CSR's names but a key the CA made up.
    OtherKey,
    /// For the CSR's key, valid from 2001 to 2002.
    Expired,
    /// A `CERTIFICATE` PEM block whose content is not DER.
    NotParsing,
    /// A good leaf, with a `bundle` whose intermediate belongs to another CA.
    ForeignIntermediate,
}

impl Script {
    /// A CA that signs: `Body::Signed(leaf)` with HTTP 200.
    pub fn sign(leaf: Leaf) -> Script {
        Script {
            status: 200,
            content_type: "application/json",
            body: Body::Signed(leaf),
            delay: Duration::ZERO,
        }
    }

    /// An answer of `status` with `body` as `content_type`.
    pub fn answer(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Script {
        Script {
            status,
            content_type,
            body: Body::Raw(body.into()),
            delay: Duration::ZERO,
        }
    }

    pub fn delayed(mut self, delay: Duration) -> Script {
        self.delay = delay;
        self
    }
}

/// Root → intermediate; the intermediate signs.
struct TestCa {
    root_pem: String,
    intermediate_pem: String,
    intermediate: Issuer<'static, KeyPair>,
    /// Another CA's intermediate, for [`Leaf::ForeignIntermediate`].
    foreign_intermediate_pem: String,
}

fn ca_params(name: &str) -> anyhow::Result<CertificateParams> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    Ok(params)
}

/// A root named `root` and an intermediate `intermediate` under it.
fn hierarchy(root: &str, intermediate: &str) -> anyhow::Result<(String, String, Issuer<'static, KeyPair>)> {
    let root_key = KeyPair::generate()?;
    let root_cert = ca_params(root)?.self_signed(&root_key)?;
    let root_issuer = Issuer::new(ca_params(root)?, root_key);
    let int_key = KeyPair::generate()?;
    let int_cert = ca_params(intermediate)?.signed_by(&int_key, &root_issuer)?;
    Ok((
        root_cert.pem(),
        int_cert.pem(),
        Issuer::new(ca_params(intermediate)?, int_key),
    ))
}

impl TestCa {
    fn new() -> anyhow::Result<TestCa> {
        let (root_pem, intermediate_pem, intermediate) = hierarchy("Scripted Root", "Scripted Intermediate")?;
        let (_, foreign_intermediate_pem, _) = hierarchy("Foreign Root", "Foreign Intermediate")?;
        Ok(TestCa {
            root_pem,
            intermediate_pem,
            intermediate,
            foreign_intermediate_pem,
        })
    }

    /// The `result` of a success envelope for `csr_pem`, as `leaf` says.
    fn result(&self, csr_pem: &str, leaf: Leaf) -> anyhow::Result<Value> {
        let mut csr = CertificateSigningRequestParams::from_pem(csr_pem)?;
        csr.params.use_authority_key_identifier_extension = true;
        let certificate = match leaf {
            Leaf::Good | Leaf::ForeignIntermediate => csr.signed_by(&self.intermediate)?.pem(),
            Leaf::OtherKey => {
                let other = KeyPair::generate()?;
                csr.params.signed_by(&other, &self.intermediate)?.pem()
            }
            Leaf::Expired => {
                csr.params.not_before = rcgen::date_time_ymd(2001, 1, 1);
                csr.params.not_after = rcgen::date_time_ymd(2002, 1, 1);
                csr.signed_by(&self.intermediate)?.pem()
            }
            Leaf::NotParsing => {
                "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n".into()
            }
        };
        if leaf == Leaf::ForeignIntermediate {
            let bundle = format!("{certificate}{}", self.foreign_intermediate_pem);
            return Ok(json!({
                "certificate": certificate,
                "bundle": {"bundle": bundle, "root": self.root_pem},
            }));
        }
        Ok(json!({ "certificate": certificate }))
    }
}

struct Inner {
    ca: TestCa,
    script: Mutex<Script>,
    /// When set, the credential probe is refused with this message (a key the CA stopped
    /// accepting).
    probe_refusal: Mutex<Option<String>>,
    signs: AtomicU64,
    infos: AtomicU64,
}

/// A running scripted CA on 127.0.0.1; dropping it (or [`ScriptedCa::stop`]) closes its port.
pub struct ScriptedCa {
    pub url: String,
    inner: Arc<Inner>,
    server: tokio::task::JoinHandle<()>,
}

impl ScriptedCa {
    pub async fn start(script: Script) -> anyhow::Result<ScriptedCa> {
        let inner = Arc::new(Inner {
            ca: TestCa::new()?,
            script: Mutex::new(script),
            probe_refusal: Mutex::new(None),
            signs: AtomicU64::new(0),
            infos: AtomicU64::new(0),
        });
        let app = axum::Router::new()
            .route("/api/v1/cfssl/info", axum::routing::post(info))
            .route("/api/v1/cfssl/authsign", axum::routing::post(authsign))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(ScriptedCa { url, inner, server })
    }

    /// Authsign requests that carried a CSR (the credential probe's empty one is not counted).
    pub fn signs(&self) -> u64 {
        self.inner.signs.load(Ordering::SeqCst)
    }

    /// `/info` requests.
    pub fn infos(&self) -> u64 {
        self.inner.infos.load(Ordering::SeqCst)
    }

    /// The root the test CA's good chains verify to.
    pub fn root_pem(&self) -> &str {
        &self.inner.ca.root_pem
    }

    /// Answers the next sign requests with `script`.
    pub fn set_script(&self, script: Script) {
        *self.inner.script.lock().expect("lock") = script;
    }

    /// Refuses the credential probe (an authsign with an empty CSR) with `message` from now on.
    pub fn refuse_probe(&self, message: &str) {
        *self.inner.probe_refusal.lock().expect("lock") = Some(message.into());
    }

    /// Closes the port: new connections are refused.
    pub fn stop(&self) {
        self.server.abort();
    }
}

impl Drop for ScriptedCa {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn envelope(result: Value) -> Value {
    json!({"success": true, "result": result, "errors": [], "messages": []})
}

fn refusal(status: StatusCode, message: &str) -> Response {
    let body = json!({"success": false, "result": null,
        "errors": [{"code": status.as_u16(), "message": message}], "messages": []});
    (status, axum::Json(body)).into_response()
}

async fn info(State(inner): State<Arc<Inner>>) -> Response {
    inner.infos.fetch_add(1, Ordering::SeqCst);
    let result = json!({
        "certificate": inner.ca.intermediate_pem,
        "usages": ["digital signature", "key encipherment", "server auth"],
        "expiry": "8760h",
    });
    axum::Json(envelope(result)).into_response()
}

/// The CSR inside an authsign body (not authenticated: the script decides the answer).
fn csr_of(body: &[u8]) -> Option<String> {
    let outer: Value = serde_json::from_slice(body).ok()?;
    let inner = base64::engine::general_purpose::STANDARD
        .decode(outer["request"].as_str()?)
        .ok()?;
    let inner: Value = serde_json::from_slice(&inner).ok()?;
    Some(inner["certificate_request"].as_str()?.to_string())
}

async fn authsign(State(inner): State<Arc<Inner>>, body: Bytes) -> Response {
    let Some(csr) = csr_of(&body) else {
        return refusal(StatusCode::BAD_REQUEST, "bad request");
    };
    if csr.is_empty() {
        let refused = inner.probe_refusal.lock().expect("lock").clone();
        return refusal(
            StatusCode::BAD_REQUEST,
            refused.as_deref().unwrap_or("invalid request"),
        );
    }
    inner.signs.fetch_add(1, Ordering::SeqCst);
    let script = inner.script.lock().expect("lock").clone();
    tokio::time::sleep(script.delay).await;
    let body = match &script.body {
        Body::Raw(bytes) => bytes.clone(),
        Body::Signed(leaf) => match inner.ca.result(&csr, *leaf) {
            Ok(result) => envelope(result).to_string().into_bytes(),
            Err(err) => return refusal(StatusCode::BAD_REQUEST, &format!("scripted CA: {err}")),
        },
    };
    let status = StatusCode::from_u16(script.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, script.content_type)], body).into_response()
}
