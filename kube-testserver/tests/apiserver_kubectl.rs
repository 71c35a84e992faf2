//! kubectl and the `kube-testserver` binary against the server.

mod support;

use std::{path::Path, process::Stdio, time::Duration};

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::{
    Api, Client, CustomResourceExt,
    api::{Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use kube_testserver::{Count, Counts, Verb};
use serde_json::json;
use support::{Harness, Widget, kubectl_bin, start, widget};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::Command,
};

/// Fails the test when kubectl cannot run: a skipped test would pass without testing anything.
/// `make test` checks for kubectl first and names the command that installs it.
fn require_kubectl() {
    let status = std::process::Command::new(kubectl_bin())
        .arg("version")
        .arg("--client")
        .output();
    assert!(
        status.is_ok_and(|o| o.status.success()),
        "kubectl ({}) cannot run; these tests need it (see `scripts/test-deps.sh`)",
        kubectl_bin()
    );
}

/// Runs kubectl against `kubeconfig`; returns stdout, failing the test on a non-zero exit.
async fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> String {
    let output = Command::new(kubectl_bin())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .await
        .expect("kubectl runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        output.status.success(),
        "kubectl {args:?} failed:\n{stdout}\n{stderr}"
    );
    stdout.into_owned()
}

struct Kubectl {
    h: Harness,
    dir: tempfile::TempDir,
}

impl Kubectl {
    async fn start() -> Self {
        Kubectl {
            h: start().await,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    async fn run(&self, args: &[&str]) -> String {
        kubectl(
            self.h.server.kubeconfig_path(),
            &self.dir.path().join("cache"),
            args,
        )
        .await
    }

    fn write(&self, name: &str, content: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        path.to_string_lossy().into_owned()
    }
}

const WIDGET: &str = "apiVersion: test.example.com/v1
kind: Widget
metadata:
  name: my-widget
  namespace: default
spec:
  size: 3
  color: red
";

#[tokio::test]
async fn kubectl_applies_gets_and_describes_a_custom_resource() {
    require_kubectl();
    let k = Kubectl::start().await;
    let crd = k.write("crd.yaml", &serde_saphyr::to_string(&Widget::crd()).unwrap());
    assert!(
        k.run(&["apply", "-f", &crd])
            .await
            .contains("widgets.test.example.com created")
    );
    let manifest = k.write("widget.yaml", WIDGET);
    assert!(
        k.run(&["apply", "-f", &manifest])
            .await
            .contains("widget.test.example.com/my-widget created")
    );
    assert!(k.run(&["get", "widgets"]).await.contains("my-widget"));
    assert!(
        k.run(&["get", "wd", "my-widget"]).await.contains("my-widget"),
        "short names resolve"
    );
    let described = k.run(&["describe", "widget", "my-widget"]).await;
    assert!(described.contains("Color:  red"), "{described}");

    let changed = k.write("widget.yaml", &WIDGET.replace("color: red", "color: blue"));
    assert!(k.run(&["apply", "-f", &changed]).await.contains("configured"));
    assert_eq!(
        k.run(&["get", "widget", "my-widget", "-o", "jsonpath={.spec.color}"])
            .await,
        "blue"
    );
    assert_eq!(
        k.h.api::<Widget>()
            .get("my-widget")
            .await
            .unwrap()
            .metadata
            .generation,
        Some(2)
    );
    assert!(k.run(&["apply", "-f", &changed]).await.contains("unchanged"));
    assert!(k.run(&["delete", "-f", &changed]).await.contains("deleted"));
}

#[tokio::test]
async fn kubectl_applies_gets_and_describes_a_secret() {
    require_kubectl();
    let k = Kubectl::start().await;
    let manifest = k.write(
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cfssl-key\nstringData:\n  key: \"0011223344\"\n",
    );
    assert!(
        k.run(&["apply", "-f", &manifest])
            .await
            .contains("secret/cfssl-key created")
    );
    let table = k.run(&["get", "secret", "cfssl-key"]).await;
    assert!(table.contains("Opaque") && table.contains("cfssl-key"), "{table}");
    let described = k.run(&["describe", "secret", "cfssl-key"]).await;
    assert!(described.contains("key:  10 bytes"), "{described}");

    let more = k.write("secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cfssl-key\nstringData:\n  key: \"0011223344\"\n  additional_data: x\n");
    assert!(k.run(&["apply", "-f", &more]).await.contains("configured"));
    let secret = k.h.api::<Secret>().get("cfssl-key").await.unwrap();
    assert_eq!(secret.data.unwrap().len(), 2);
}

#[tokio::test]
async fn kubectl_get_shows_crd_printer_columns() {
    require_kubectl();
    let k = Kubectl::start().await;
    k.h.install_widgets().await;
    let widgets: Api<Widget> = k.h.api();
    widgets
        .create(&PostParams::default(), &widget("w", 7))
        .await
        .unwrap();
    let status = json!({ "status": { "conditions": [{ "type": "Ready", "status": "True" }] } });
    widgets
        .patch_status("w", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let table = k.run(&["get", "widgets"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "SIZE"]);
    assert_eq!(row, ["w", "True", "7"]);
}

#[tokio::test]
async fn kubectl_wait_sees_a_condition_appear() {
    require_kubectl();
    let k = Kubectl::start().await;
    k.h.install_widgets().await;
    let widgets: Api<Widget> = k.h.api();
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let waiter = Command::new(kubectl_bin())
        .arg("--kubeconfig")
        .arg(k.h.server.kubeconfig_path())
        .arg("--cache-dir")
        .arg(k.dir.path().join("cache"))
        .args(["wait", "--for=condition=Ready", "widget/w", "--timeout=10s"])
        .output();
    let waiter = tokio::spawn(waiter);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let status = json!({ "status": { "conditions": [{ "type": "Ready", "status": "True" }] } });
    widgets
        .patch_status("w", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let output = waiter.await.unwrap().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The binary, started on a free port; killed by pid when the test ends.
struct Binary {
    child: tokio::process::Child,
    kubeconfig: String,
    url: String,
    _dir: tempfile::TempDir,
}

impl Binary {
    async fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_kube-testserver"))
            .arg("--kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .args(extra)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let value = |prefix: &'static str, line: Option<String>| {
            let line = line.unwrap_or_default();
            line.strip_prefix(prefix)
                .unwrap_or_else(|| panic!("expected {prefix}…, got {line:?}"))
                .to_string()
        };
        let kubeconfig = value("KUBECONFIG=", lines.next_line().await.unwrap());
        let url = value("URL=", lines.next_line().await.unwrap());
        Binary {
            child,
            kubeconfig,
            url,
            _dir: dir,
        }
    }

    async fn client(&self) -> Client {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .unwrap();
        Client::try_from(config).unwrap()
    }

    async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().unwrap().to_string();
        Command::new("kill")
            .args(["-s", "TERM", &pid])
            .status()
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .expect("exits on SIGTERM")
            .unwrap()
    }
}

#[tokio::test]
async fn the_binary_serves_https_with_a_kubeconfig_and_control_endpoints() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let bin = Binary::start(&[]).await;
    assert!(bin.url.starts_with("https://127.0.0.1:"), "{}", bin.url);
    let client = bin.client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.get("kube-system").await.unwrap();

    let fault = json!({ "verb": "get", "resource": "namespaces", "kind": { "type": "internalError" } });
    let req = http::Request::post("/testserver/faults")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&fault).unwrap())
        .unwrap();
    client.request_text(req).await.unwrap();
    assert_eq!(support::code(&namespaces.get("default").await.unwrap_err()), 500);

    let text = client
        .request_text(http::Request::get("/testserver/counts").body(vec![]).unwrap())
        .await
        .unwrap();
    let counts = Counts::from_rows(serde_json::from_str::<Vec<Count>>(&text).unwrap());
    assert_eq!(counts.get(Verb::Get, "namespaces"), 2);
    assert!(bin.terminate().await.success());
}

#[tokio::test]
async fn the_binary_serves_plain_http_without_auth() {
    let bin = Binary::start(&["--http", "--no-auth"]).await;
    assert!(bin.url.starts_with("http://127.0.0.1:"), "{}", bin.url);
    let kubeconfig = std::fs::read_to_string(&bin.kubeconfig).unwrap();
    assert!(
        !kubeconfig.contains("token") && !kubeconfig.contains("certificate-authority-data"),
        "{kubeconfig}"
    );
    let namespaces: Api<Namespace> = Api::all(bin.client().await);
    namespaces.get("default").await.unwrap();
    require_kubectl();
    let cache = tempfile::tempdir().unwrap();
    let out = kubectl(Path::new(&bin.kubeconfig), cache.path(), &["get", "namespaces"]).await;
    assert!(out.contains("kube-system"), "{out}");
    assert!(bin.terminate().await.success());
}

#[tokio::test]
async fn kubectl_describe_shows_recorded_events() {
    use kube::{
        Resource,
        runtime::events::{Event, EventType, Recorder, Reporter},
    };
    require_kubectl();
    let k = Kubectl::start().await;
    k.h.install_widgets().await;
    let w =
        k.h.api::<Widget>()
            .create(&PostParams::default(), &widget("w", 1))
            .await
            .unwrap();
    let recorder = Recorder::new(
        k.h.client.clone(),
        Reporter {
            controller: "widget-controller".into(),
            instance: None,
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "Polished".into(),
        note: Some("shiny now".into()),
        action: "Polish".into(),
        secondary: None,
    };
    recorder.publish(&event, &w.object_ref(&())).await.unwrap();
    let described = k.run(&["describe", "widget", "w"]).await;
    assert!(
        described.contains("Polished") && described.contains("shiny now"),
        "{described}"
    );
}
