//! Rows for the CA's answers and the CertificateRequest.
//!
//! Every row gets its own namespace, credential Secret (a random hex key), Issuer (whose URL
//! carries `user:password@`) and scripted CA (see `e2e::harness::scripted_ca`); all rows run at
//! once against one manager and one API server. The manager runs with `--cfssl-timeout 3s`
//! (default 30 s) so the timeout row stays short.

use std::time::Duration;

use base64::Engine as _;
use e2e::harness::objects::{self, Kind};
use e2e::harness::scripted_ca::{Leaf, Script, ScriptedCa};
use e2e::harness::{Cluster, Csr, Manager, ManagerOptions};
use kube::api::{Api, Patch, PatchParams};
use kube_testserver::Verb;
use serde_json::json;

use cfssl_issuer::api::certmanager::CertificateRequest;
use cfssl_issuer::api::{GROUP, Issuer, READY};

/// The manager's per-call CA timeout in this table.
const CFSSL_TIMEOUT: &str = "3s";
/// How long one row may take to reach its outcome.
const ROW_WAIT: Duration = Duration::from_secs(60);
/// The whole table's bound.
const TABLE_WAIT: Duration = Duration::from_secs(150);
/// How long a row that must stay untouched is watched.
const SETTLE: Duration = Duration::from_secs(6);
const REQUEST: &str = "req";
const ISSUER: &str = "ca";

/// One bad input and what a user must see.
struct Row {
    name: &'static str,
    input: Input,
    expect: Expect,
}

/// What the row feeds the manager.
enum Input {
    /// A good, approved request; the CA answers its sign with this script.
    CaAnswers(Script),
    /// A good, approved request; the CA's port is closed after the issuer became Ready.
    CaStopped,
    /// A good, approved request; once the issuer is Ready the CA refuses its key (`invalid
    /// token`) on every call.
    CaRejectsKey,
    /// An approved request whose `spec.request` is this text; the CA signs well.
    Csr(BadCsr),
    /// A good, approved request naming this issuerRef group and kind.
    IssuerRef { group: &'static str, kind: &'static str },
    /// The request comes first; its Issuer is created once the request waits for it.
    IssuerCreatedLater,
    /// The Issuer is deleted while the (slow) CA signs.
    IssuerDeletedWhileSigning,
    /// Approved and Denied land in one write (two approvers raced).
    ApprovedAndDenied,
    /// Another controller already set Ready=False/Failed with a failure time.
    AlreadyFailed,
    /// Already Ready=True/Issued with a certificate.
    AlreadyIssued,
    /// Never approved.
    Unapproved,
}

#[derive(Clone, Copy)]
enum BadCsr {
    NotPem,
    WrongBlock,
    BadDer,
    TrailingBytes,
    BadSignature,
    Over64KiB,
    ThousandSans,
    /// A good CSR armoured as `NEW CERTIFICATE REQUEST` (older tools): accepted.
    OldBlockName,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shown {
    Request,
    Issuer,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Signs {
    Exactly(u64),
    /// At least this many: a retried row shows the CA asked again.
    AtLeast(u64),
    /// From .0 to .1.
    Between(u64, u64),
}

/// The outcome a row must show. `ready: None`: the manager writes no condition at all.
struct Expect {
    on: Shown,
    ready: Option<(&'static str, &'static str)>,
    message: &'static str,
    /// Failed with `failureTime` (true), or not (false: retried or done).
    failed_for_good: bool,
    signs: Signs,
    stored: bool,
}

const fn pending(message: &'static str, signs: Signs) -> Expect {
    Expect {
        on: Shown::Request,
        ready: Some(("False", "Pending")),
        message,
        failed_for_good: false,
        signs,
        stored: false,
    }
}

const fn failed(message: &'static str, signs: u64) -> Expect {
    Expect {
        on: Shown::Request,
        ready: Some(("False", "Failed")),
        message,
        failed_for_good: true,
        signs: Signs::Exactly(signs),
        stored: false,
    }
}

const fn issued(signs: u64) -> Expect {
    Expect {
        on: Shown::Request,
        ready: Some(("True", "Issued")),
        message: "Certificate fetched from issuer successfully",
        failed_for_good: false,
        signs: Signs::Exactly(signs),
        stored: true,
    }
}

const fn untouched(
    ready: Option<(&'static str, &'static str)>,
    message: &'static str,
    stored: bool,
) -> Expect {
    Expect {
        on: Shown::Request,
        ready,
        message,
        failed_for_good: false,
        signs: Signs::Exactly(0),
        stored,
    }
}

const HTML_503: &str = "<html><head><title>503 Service Unavailable</title></head><body><h1>Service Unavailable</h1></body></html>";
const HTML_404: &str = "<html><head><title>404 Not Found</title></head><body><center><h1>404 Not Found</h1></center><hr><center>nginx</center></body></html>";
const HTML_413: &str = "<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>";
const HTML_200: &str =
    "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>It works</body></html>";
const PRESET_FAILED: &str = "failed before this manager saw it";
const PRESET_ISSUED: &str = "issued before this manager saw it";

fn rows() -> Vec<Row> {
    use Input::*;
    let retried = Signs::AtLeast(2);
    let answer = |status, content_type, body: &str| CaAnswers(Script::answer(status, content_type, body));
    vec![
        Row {
            name: "CA: connection refused",
            input: CaStopped,
            expect: pending(
                "cannot reach the CA: client error (Connect): tcp connect error: Connection refused",
                Signs::Exactly(0),
            ),
        },
        Row {
            name: "CA: invalid token (the issuer's fault)",
            input: CaRejectsKey,
            expect: Expect {
                on: Shown::Issuer,
                ready: Some(("False", "InvalidCredentials")),
                // The refused sign asks for a re-check of the issuer; until its NotReady lands
                // the request's own backoff (1 s, 2 s, 4 s) may try again, each refused: no
                // certificate is minted. On a loaded machine (a fresh clone's `.ci/run`, Go
                // builds beside the debug suite) the re-check took over 3 s once: a fourth.
                message: "refused: invalid token (HTTP 400",
                failed_for_good: false,
                signs: Signs::Between(1, 4),
                stored: false,
            },
        },
        Row {
            name: "CA: no answer within the timeout",
            input: CaAnswers(Script::sign(Leaf::Good).delayed(Duration::from_secs(30))),
            expect: pending("no answer within 3s", retried),
        },
        Row {
            name: "CA: HTTP 500",
            input: answer(500, "text/plain", "internal server error"),
            expect: pending("HTTP 500 without a CFSSL answer", retried),
        },
        Row {
            name: "CA: HTTP 503 with an HTML page",
            input: answer(503, "text/html", HTML_503),
            expect: pending(
                r#"HTTP 503 without a CFSSL answer: "503 Service Unavailable Service Unavailable""#,
                retried,
            ),
        },
        Row {
            name: "CA: HTTP 404 HTML from a proxy",
            input: answer(404, "text/html", HTML_404),
            expect: pending(
                r#"HTTP 404 without a CFSSL answer: "404 Not Found 404 Not Found nginx""#,
                retried,
            ),
        },
        Row {
            name: "CA: HTTP 413 from a proxy",
            input: answer(413, "text/html", HTML_413),
            expect: pending(
                r#"HTTP 413 without a CFSSL answer: "413 Request Entity Too Large 413 Request Entity Too Large nginx""#,
                retried,
            ),
        },
        Row {
            name: "CA: HTTP 200 with HTML",
            input: answer(200, "text/html", HTML_200),
            expect: pending("malformed answer: not a CFSSL JSON answer (text/html)", retried),
        },
        Row {
            name: "CA: HTTP 200 with truncated JSON",
            input: answer(
                200,
                "application/json",
                r#"{"success":true,"result":{"certificate":"-----BEGIN CERT"#,
            ),
            expect: pending(
                "malformed answer: not a CFSSL JSON answer (application/json): EOF while parsing",
                retried,
            ),
        },
        Row {
            name: "CA: success false without errors",
            input: answer(
                200,
                "application/json",
                r#"{"success":false,"result":null,"errors":[],"messages":[]}"#,
            ),
            expect: pending("malformed answer: a failure without an error message", retried),
        },
        Row {
            name: "CA: answer over 1 MiB",
            input: CaAnswers(Script {
                body: e2e::harness::scripted_ca::Body::Raw(vec![b' '; 1536 * 1024]),
                ..Script::answer(200, "application/json", "")
            }),
            expect: pending("answer larger than 1048576 bytes", retried),
        },
        Row {
            name: "CA: certificate for another key",
            input: CaAnswers(Script::sign(Leaf::OtherKey)),
            expect: failed(
                "the CA signed, but its certificate is unusable and was not stored: authsign at",
                1,
            ),
        },
        Row {
            name: "CA: certificate that does not parse",
            input: CaAnswers(Script::sign(Leaf::NotParsing)),
            expect: failed("unusable certificate: certificate 0 does not parse", 1),
        },
        Row {
            name: "CA: expired certificate",
            input: CaAnswers(Script::sign(Leaf::Expired)),
            expect: failed(
                "unusable certificate: the certificate expired at 2002-01-01T00:00:00Z",
                1,
            ),
        },
        Row {
            name: "CA: chain with a foreign intermediate",
            input: CaAnswers(Script::sign(Leaf::ForeignIntermediate)),
            expect: failed(
                "unusable certificate: certificate 1 of the CA's chain did not issue certificate 0",
                1,
            ),
        },
        Row {
            name: "CA: refuses the CSR (bad request)",
            input: answer(
                400,
                "application/json",
                r#"{"success":false,"result":null,"errors":[{"code":1,"message":"bad request"}],"messages":[]}"#,
            ),
            expect: failed("the CA will not sign this request: authsign at", 1),
        },
        Row {
            name: "CA: success with an empty certificate",
            input: answer(
                200,
                "application/json",
                r#"{"success":true,"result":{"certificate":""},"errors":[],"messages":[]}"#,
            ),
            expect: failed("unusable certificate: no PEM certificate found", 1),
        },
        Row {
            name: "request: not PEM",
            input: Csr(BadCsr::NotPem),
            expect: failed("the request cannot be signed: the CSR is not PEM", 0),
        },
        Row {
            name: "request: wrong PEM block",
            input: Csr(BadCsr::WrongBlock),
            expect: failed(
                r#"the request cannot be signed: PEM block type must be CERTIFICATE REQUEST, found "CERTIFICATE""#,
                0,
            ),
        },
        Row {
            name: "request: bad DER",
            input: Csr(BadCsr::BadDer),
            expect: failed("the request cannot be signed: the CSR does not parse", 0),
        },
        Row {
            name: "request: trailing bytes",
            input: Csr(BadCsr::TrailingBytes),
            expect: failed(
                "the request cannot be signed: the CSR does not parse: 2 trailing bytes",
                0,
            ),
        },
        Row {
            name: "request: bad signature",
            input: Csr(BadCsr::BadSignature),
            expect: failed(
                "the request cannot be signed: the CSR signature does not verify",
                0,
            ),
        },
        Row {
            name: "request: over 64 KiB",
            input: Csr(BadCsr::Over64KiB),
            expect: failed("over the 64 KiB limit", 0),
        },
        Row {
            name: "request: 1,000 SANs (signed)",
            input: Csr(BadCsr::ThousandSans),
            expect: issued(1),
        },
        Row {
            name: "request: NEW CERTIFICATE REQUEST block (signed)",
            input: Csr(BadCsr::OldBlockName),
            expect: issued(1),
        },
        Row {
            name: "request: not approved (waits, untouched)",
            input: Unapproved,
            expect: untouched(None, "", false),
        },
        Row {
            name: "request: unknown issuer kind",
            input: IssuerRef {
                group: GROUP,
                kind: "SigningPolicy",
            },
            expect: failed(
                r#"issuerRef.kind "SigningPolicy" is not a kind of cfssl-issuer.wikimedia.org; use Issuer or ClusterIssuer"#,
                0,
            ),
        },
        Row {
            name: "request: other group (never touched)",
            input: IssuerRef {
                group: "cert-manager.io",
                kind: "Issuer",
            },
            expect: untouched(None, "", false),
        },
        Row {
            name: "request: empty group (never touched)",
            input: IssuerRef {
                group: "",
                kind: "Issuer",
            },
            expect: untouched(None, "", false),
        },
        Row {
            name: "request: missing issuer, then created",
            input: IssuerCreatedLater,
            expect: issued(1),
        },
        Row {
            name: "request: issuer deleted while signing",
            input: IssuerDeletedWhileSigning,
            expect: issued(1),
        },
        Row {
            name: "request: approved and denied raced",
            input: ApprovedAndDenied,
            expect: Expect {
                on: Shown::Request,
                ready: Some(("False", "Denied")),
                message: "The CertificateRequest was denied by an approval controller",
                failed_for_good: true,
                signs: Signs::Exactly(0),
                stored: false,
            },
        },
        Row {
            name: "request: already Failed (left alone)",
            input: AlreadyFailed,
            expect: Expect {
                failed_for_good: true,
                ..untouched(Some(("False", "Failed")), PRESET_FAILED, false)
            },
        },
        Row {
            name: "request: already Issued (not signed again)",
            input: AlreadyIssued,
            expect: untouched(Some(("True", "Issued")), PRESET_ISSUED, true),
        },
    ]
}

impl Input {
    /// Rows whose request the manager must leave exactly as it was: watched for [`SETTLE`].
    fn untouched(&self) -> bool {
        match self {
            Input::IssuerRef { group, .. } => *group != GROUP,
            Input::AlreadyFailed | Input::AlreadyIssued | Input::Unapproved => true,
            _ => false,
        }
    }

    fn script(&self) -> Script {
        match self {
            Input::CaAnswers(script) => script.clone(),
            Input::IssuerDeletedWhileSigning => Script::sign(Leaf::Good).delayed(Duration::from_secs(2)),
            _ => Script::sign(Leaf::Good),
        }
    }
}

/// What one row left behind.
#[derive(Debug, Default)]
struct Observed {
    ready: Option<(String, String)>,
    message: String,
    failure_time: bool,
    certificate: bool,
    signs: u64,
    /// Everything the manager wrote that a user sees: conditions and Events, as JSON.
    shown: String,
}

/// Pure: how `seen` differs from `expect`; empty when the row passed.
fn problems(expect: &Expect, seen: &Observed) -> Vec<String> {
    let mut out = Vec::new();
    let want = expect.ready.map(|(s, r)| (s.to_string(), r.to_string()));
    if seen.ready != want {
        out.push(format!("{:?} Ready {:?}, want {want:?}", expect.on, seen.ready));
    }
    if !seen.message.contains(expect.message) {
        out.push(format!("message {:?} lacks {:?}", seen.message, expect.message));
    }
    if seen.message.contains("</") {
        out.push("markup in the message: a page must be quoted by its words".into());
    }
    if expect.on == Shown::Request && seen.failure_time != expect.failed_for_good {
        out.push(format!(
            "failureTime set: {}, want {}",
            seen.failure_time, expect.failed_for_good
        ));
    }
    let signs_ok = match expect.signs {
        Signs::Exactly(n) => seen.signs == n,
        Signs::AtLeast(n) => seen.signs >= n,
        Signs::Between(lo, hi) => (lo..=hi).contains(&seen.signs),
    };
    if !signs_ok {
        out.push(format!(
            "the CA saw {} sign requests, want {:?}",
            seen.signs, expect.signs
        ));
    }
    if seen.certificate != expect.stored {
        out.push(format!(
            "certificate stored: {}, want {}",
            seen.certificate, expect.stored
        ));
    }
    out
}

/// One manager and one API server for every row.
struct Env {
    cluster: Cluster,
    manager: Manager,
}

/// A row's own namespace, key, password and CA.
struct Setup {
    ns: String,
    key: String,
    password: String,
    ca: ScriptedCa,
    issuer_url: String,
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("random bytes");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

impl Env {
    fn client(&self) -> &kube::Client {
        &self.cluster.client
    }

    async fn create_issuer(&self, setup: &Setup) -> anyhow::Result<()> {
        let spec = json!({
            "url": setup.issuer_url, "label": "intermediate1", "profile": "server",
            "authSecretName": ISSUER,
        });
        objects::create_issuer(self.client(), Kind::Issuer, &setup.ns, ISSUER, spec).await?;
        objects::wait_issuer_reason(
            self.client(),
            Kind::Issuer,
            &setup.ns,
            ISSUER,
            "Checked",
            ROW_WAIT,
        )
        .await
    }

    /// What the API server saw in `ns` and the request's conditions, for a failing row.
    async fn diagnose(&self, ns: &str) -> String {
        let Some(server) = self.cluster.server() else {
            return String::new();
        };
        let rows = [
            (Verb::Get, "secrets"),
            (Verb::Patch, "certificaterequests/status"),
            (Verb::Create, "events"),
        ];
        let counts: Vec<String> = rows
            .iter()
            .map(|(verb, resource)| {
                format!(
                    "{verb} {resource}: {}",
                    server.count_in(ns, *verb, resource, None)
                )
            })
            .collect();
        let conditions = Api::<CertificateRequest>::namespaced(self.client().clone(), ns)
            .get(REQUEST)
            .await
            .map(|cr| format!("{:?}", cr.status.map(|s| s.conditions)))
            .unwrap_or_else(|e| e.to_string());
        format!("ns {ns}: {}; conditions {conditions}", counts.join(", "))
    }

    async fn request(
        &self,
        ns: &str,
        group: &str,
        kind: &str,
        csr: &str,
        approve: bool,
    ) -> anyhow::Result<()> {
        objects::create_request(self.client(), ns, REQUEST, group, kind, ISSUER, csr).await?;
        if approve {
            objects::approve(self.client(), ns, REQUEST).await?;
        }
        Ok(())
    }

    /// Writes `status` as another controller would (its own field manager).
    async fn preset(&self, ns: &str, status: serde_json::Value, manager: &str) -> anyhow::Result<()> {
        let body = json!({
            "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
            "metadata": {"name": REQUEST, "namespace": ns}, "status": status,
        });
        Api::<CertificateRequest>::namespaced(self.client().clone(), ns)
            .patch_status(
                REQUEST,
                &PatchParams::apply(manager).force(),
                &Patch::Apply(&body),
            )
            .await?;
        Ok(())
    }

    async fn setup(&self, row: &Row) -> anyhow::Result<Setup> {
        let ns = self.cluster.namespace("catalogue").await?;
        let ca = ScriptedCa::start(row.input.script()).await?;
        let password = format!("pw-{}", random_hex(6));
        let issuer_url = ca.url.replacen("://", &format!("://operator:{password}@"), 1);
        let setup = Setup {
            ns,
            key: random_hex(16),
            password,
            ca,
            issuer_url,
        };
        self.cluster.put_key_secret(&setup.ns, ISSUER, &setup.key).await?;
        if !matches!(row.input, Input::IssuerCreatedLater) {
            self.create_issuer(&setup).await?;
        }
        Ok(setup)
    }

    /// Feeds the row's input to the manager.
    async fn feed(&self, row: &Row, setup: &Setup) -> anyhow::Result<()> {
        let ns = &setup.ns;
        let good = Csr::new(&format!("row.{ns}.svc"))?.pem;
        match &row.input {
            Input::CaStopped => {
                setup.ca.stop();
                self.request(ns, GROUP, "Issuer", &good, true).await
            }
            Input::CaAnswers(_) => self.request(ns, GROUP, "Issuer", &good, true).await,
            Input::CaRejectsKey => {
                let invalid = r#"{"success":false,"result":null,"errors":[{"code":1,"message":"invalid token"}],"messages":[]}"#;
                setup
                    .ca
                    .set_script(Script::answer(400, "application/json", invalid));
                setup.ca.refuse_probe("invalid token");
                self.request(ns, GROUP, "Issuer", &good, true).await
            }
            Input::Csr(bad) => {
                self.request(ns, GROUP, "Issuer", &bad_csr(*bad, &good)?, true)
                    .await
            }
            Input::IssuerRef { group, kind } => self.request(ns, group, kind, &good, true).await,
            Input::IssuerCreatedLater => {
                self.request(ns, GROUP, "Issuer", &good, true).await?;
                let waiting =
                    objects::wait_request_reason(self.client(), ns, REQUEST, "Pending", ROW_WAIT).await?;
                let message = &waiting.condition(READY).expect("Ready").message;
                anyhow::ensure!(
                    message.contains("not found; waiting for it to be created"),
                    "{message}"
                );
                self.create_issuer(setup).await
            }
            Input::IssuerDeletedWhileSigning => {
                self.request(ns, GROUP, "Issuer", &good, true).await?;
                e2e::harness::eventually(ROW_WAIT, "the CA received the sign", || async {
                    (setup.ca.signs() > 0).then_some(())
                })
                .await?;
                Api::<Issuer>::namespaced(self.client().clone(), ns)
                    .delete(ISSUER, &Default::default())
                    .await?;
                Ok(())
            }
            Input::ApprovedAndDenied => {
                self.request(ns, GROUP, "Issuer", &good, false).await?;
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let condition = |type_: &str, reason: &str| {
                    json!({"type": type_, "status": "True",
                    "reason": reason, "message": format!("{type_} by a racing approver"), "lastTransitionTime": now})
                };
                let status = json!({"conditions": [condition("Approved", "cert-manager.io"), condition("Denied", "e2e.denied")]});
                self.preset(ns, status, "cert-manager-certificaterequests-approver")
                    .await
            }
            Input::AlreadyFailed | Input::AlreadyIssued => self.feed_preset(row, ns, &good).await,
            Input::Unapproved => self.request(ns, GROUP, "Issuer", &good, false).await,
        }
    }

    async fn feed_preset(&self, row: &Row, ns: &str, good: &str) -> anyhow::Result<()> {
        self.request(ns, GROUP, "Issuer", good, false).await?;
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let status = if matches!(row.input, Input::AlreadyFailed) {
            json!({"failureTime": now, "conditions": [{"type": READY, "status": "False", "reason": "Failed",
                "message": PRESET_FAILED, "lastTransitionTime": now}]})
        } else {
            let key = rcgen::KeyPair::generate()?;
            let cert =
                rcgen::CertificateParams::new(vec!["preset.example.com".to_string()])?.self_signed(&key)?;
            json!({"certificate": base64::engine::general_purpose::STANDARD.encode(cert.pem()),
                "conditions": [{"type": READY, "status": "True", "reason": "Issued",
                "message": PRESET_ISSUED, "lastTransitionTime": now}]})
        };
        self.preset(ns, status, "earlier-issuer").await?;
        objects::approve(self.client(), ns, REQUEST).await
    }

    async fn observe(&self, row: &Row, setup: &Setup) -> anyhow::Result<Observed> {
        use k8s_openapi::api::events::v1::Event;
        let ns = &setup.ns;
        let request = objects::get_request(self.client(), ns, REQUEST).await?;
        let issuers = Api::<Issuer>::namespaced(self.client().clone(), ns)
            .list(&Default::default())
            .await?;
        let events = Api::<Event>::namespaced(self.client().clone(), ns)
            .list(&Default::default())
            .await?;
        let issuer_ready = issuers.items.iter().find_map(|i| {
            let status = i.status.as_ref()?;
            status.conditions.iter().find(|c| c.type_ == READY).cloned()
        });
        let (ready, message) = match row.expect.on {
            Shown::Request => (
                objects::ready_of(&request),
                request
                    .condition(READY)
                    .map(|c| c.message.clone())
                    .unwrap_or_default(),
            ),
            Shown::Issuer => (
                issuer_ready
                    .as_ref()
                    .map(|c| (c.status.as_str().to_string(), c.reason.clone())),
                issuer_ready
                    .as_ref()
                    .map(|c| c.message.clone())
                    .unwrap_or_default(),
            ),
        };
        let status = request.status.as_ref();
        Ok(Observed {
            ready,
            message,
            failure_time: status.is_some_and(|s| s.failure_time.is_some()),
            certificate: status.is_some_and(|s| s.certificate.is_some()),
            signs: setup.ca.signs(),
            shown: serde_json::to_string(&(
                &request.status,
                issuers.items.iter().map(|i| &i.status).collect::<Vec<_>>(),
                &events.items,
            ))?,
        })
    }

    /// Runs one row to its outcome (or its deadline) and returns what it left behind.
    async fn run(&self, row: &Row) -> anyhow::Result<(Setup, Observed)> {
        let setup = self.setup(row).await?;
        self.feed(row, &setup).await?;
        if row.input.untouched() {
            tokio::time::sleep(SETTLE).await;
            let seen = self.observe(row, &setup).await?;
            return Ok((setup, seen));
        }
        let deadline = tokio::time::Instant::now() + ROW_WAIT;
        loop {
            let seen = self.observe(row, &setup).await?;
            if problems(&row.expect, &seen).is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok((setup, seen));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The text a row puts in `spec.request`.
fn bad_csr(bad: BadCsr, good: &str) -> anyhow::Result<String> {
    let der = ::pem::parse(good)?.into_contents();
    let armour = |der: Vec<u8>| ::pem::encode(&::pem::Pem::new("CERTIFICATE REQUEST", der));
    Ok(match bad {
        BadCsr::NotPem => "this is not a certificate request".into(),
        BadCsr::WrongBlock => {
            let key = rcgen::KeyPair::generate()?;
            rcgen::CertificateParams::new(vec!["wrong.example.com".to_string()])?
                .self_signed(&key)?
                .pem()
        }
        BadCsr::BadDer => armour(b"hello, DER".to_vec()),
        BadCsr::TrailingBytes => armour([der, vec![0, 0]].concat()),
        BadCsr::BadSignature => {
            let mut der = der;
            let at = der
                .windows(4)
                .position(|w| w == b"row.")
                .expect("the DNS name in the DER");
            der[at] ^= 0x20;
            armour(der)
        }
        BadCsr::Over64KiB => format!("{}\n{good}", "#".repeat(65 * 1024)),
        BadCsr::OldBlockName => ::pem::encode(&::pem::Pem::new("NEW CERTIFICATE REQUEST", der)),
        BadCsr::ThousandSans => {
            let names: Vec<String> = (0..1000).map(|i| format!("host-{i}.example.com")).collect();
            rcgen::CertificateParams::new(names)?
                .serialize_request(&rcgen::KeyPair::generate()?)?
                .pem()?
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalogue_request_rows() -> anyhow::Result<()> {
    if std::env::var_os("E2E_KUBECONFIG").is_some() {
        eprintln!("skipped against a real cluster: the scripted CAs run on this machine only");
        return Ok(());
    }
    let cluster = Cluster::start().await?;
    let system = "cfssl-issuer-system";
    cluster.ensure_namespace(system).await?;
    // The scripted CAs' hosts are on the allow-list: only then are their answers quoted in a
    // namespaced Issuer's messages, which the rows check.
    let options = ManagerOptions::new(cluster.manager_kubeconfig(), system)
        .env("NAMESPACED_ISSUER_ALLOWED_HOSTS", "127.0.0.0/8")
        .arg("--cfssl-timeout")
        .arg(CFSSL_TIMEOUT)
        .arg("--health-check-interval")
        .arg("10m");
    let manager = Manager::start(options).await?;
    let env = Env { cluster, manager };
    let rows = rows();
    let started = std::time::Instant::now();
    let results = tokio::time::timeout(
        TABLE_WAIT,
        futures::future::join_all(rows.iter().map(|row| env.run(row))),
    )
    .await
    .map_err(|_| anyhow::anyhow!("the table took over {TABLE_WAIT:?}:\n{}", env.manager.log()))?;
    let log = env.manager.log();
    let mut failing = Vec::new();
    for (row, result) in rows.iter().zip(results) {
        let problems = match &result {
            Ok((setup, seen)) => {
                let mut problems = problems(&row.expect, seen);
                for secret in [&setup.key, &setup.password] {
                    if seen.shown.contains(secret.as_str()) {
                        problems.push(format!("secret {secret:?} in a condition or Event"));
                    }
                    if log.contains(secret.as_str()) {
                        problems.push(format!("secret {secret:?} in the manager's log"));
                    }
                }
                problems
            }
            Err(err) => vec![format!("did not run: {err:#}")],
        };
        let verdict = if problems.is_empty() { "ok  " } else { "FAIL" };
        println!("{verdict} {:<45} {}", row.name, describe(&row.expect));
        if let Ok((_, seen)) = &result {
            println!("       saw: {:?}", seen.message);
        }
        if !problems.is_empty() {
            println!("       {}", problems.join("\n       "));
            if let Ok((setup, _)) = &result {
                println!("       {}", env.diagnose(&setup.ns).await);
            }
            failing.push(row.name);
        }
    }
    let passed = rows.len() - failing.len();
    println!(
        "catalogue request rows: {} rows, {passed} passed ({:.1} s)",
        rows.len(),
        started.elapsed().as_secs_f64()
    );
    anyhow::ensure!(
        failing.is_empty(),
        "failing rows: {failing:?}\nmanager log:\n{log}"
    );
    Ok(())
}

/// A row's expected outcome in one line.
fn describe(expect: &Expect) -> String {
    let ready = expect
        .ready
        .map_or("no condition".to_string(), |(s, r)| format!("Ready={s}/{r}"));
    let fate = if expect.failed_for_good {
        "failureTime"
    } else if expect.ready.is_some_and(|(_, r)| r == "Pending") {
        "retried"
    } else {
        "-"
    };
    let stored = if expect.stored { "stored" } else { "nothing stored" };
    format!(
        "{:?} {ready}, {fate}, CA signs {:?}, {stored}, {:?}",
        expect.on, expect.signs, expect.message
    )
}
