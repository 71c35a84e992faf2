//! The deployment artifacts agree with the binary and with each other:
//!
//! - `config/crd/bases` is exactly what `cfssl-issuer crd` prints, and the chart ships the same
//!   CRDs (`UPDATE_MANIFESTS=1 cargo test --test deploy_manifests` rewrites both copies);
//! - `config/default` (kustomize) and the chart give the manager the same hardened pod and the
//!   same least-privilege RBAC, checked as the exact set of grants its ServiceAccount ends up
//!   with, and the binary accepts the arguments both pass it;
//! - `config/samples` and `config/simple-cfssl` build and fit together;
//! - the CSI node plugin (the chart's `csi.*`, `config/components/csi-driver`) is the same from
//!   both, privileged only where it mounts, with exactly the RBAC its code uses
//!   (`deploy_manifests/csi.rs`);
//! - the chart lints and renders with Helm's own engine (`scripts/chart-lint.py`) for its
//!   default values and every `ci/*-values.yaml`.
//!
//! Needs `kubectl` (for `kubectl kustomize`) and, for the chart, Helm's Python bindings: the
//! chart tests fail, never skip, when they are missing, and say how to install them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use base64::Engine as _;
use serde_json::Value;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::prelude::FromDer as _;

#[path = "deploy_manifests/csi.rs"]
mod csi;
#[path = "deploy_manifests/scope.rs"]
mod scope;

const NAMESPACE: &str = "cfssl-issuer-system";
const CHART: &str = "charts/cfssl-issuer";
const CHART_CRDS: &str = "charts/cfssl-issuer/files/crds";
const CONFIG_CRDS: &str = "config/crd/bases";
/// cert-manager's Certificate and CertificateRequest CRDs (`cfssl-issuer crd --cert-manager`),
/// installed only in standalone mode.
const CHART_CM_CRDS: &str = "charts/cfssl-issuer/files/crds-cert-manager";
const CONFIG_CM_CRDS: &str = "config/crd-cert-manager/bases";

// ---------------------------------------------------------------------------------------------
// Helpers

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: impl AsRef<Path>) -> String {
    let path = repo().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn parse_docs(yaml: &str, what: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml).unwrap_or_else(|e| panic!("{what}: YAML: {e}"))
}

/// stdout of a command that must succeed; `what` names it in the failure.
fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!(
            "{what}: cannot start {}: {e}",
            cmd.get_program().to_string_lossy()
        )
    });
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn kustomize(dir: &Path) -> Vec<Value> {
    let what = format!("kubectl kustomize {}", dir.display());
    parse_docs(
        &run(Command::new("kubectl").arg("kustomize").arg(dir), &what),
        &what,
    )
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn one<'a>(docs: &'a [Value], wanted: &str) -> &'a Value {
    match kind(docs, wanted).as_slice() {
        [only] => only,
        found => panic!("expected one {wanted}, found {}", found.len()),
    }
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map_or_else(Vec::new, |a| a.iter().filter_map(Value::as_str).collect())
}

/// `to` as a path relative to `from` (both absolute), for kustomize, which refuses absolute ones.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let (from, to): (Vec<Component>, Vec<Component>) =
        (from.components().collect(), to.components().collect());
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut rel: PathBuf = from[common..].iter().map(|_| "..").collect();
    rel.extend(&to[common..]);
    rel
}

// ---------------------------------------------------------------------------------------------
// CRDs

/// `cfssl-issuer crd` (with `args`), split into documents and keyed by the file name
/// kubebuilder would use, `<group>_<plural>.yaml`; each text starts with its `---` line, so the
/// files concatenate back to the exact output.
fn crds_from_binary(args: &[&str]) -> BTreeMap<String, String> {
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_cfssl-issuer"))
            .arg("crd")
            .args(args),
        "cfssl-issuer crd",
    );
    let mut docs = Vec::new();
    for line in out.split_inclusive('\n') {
        if line.trim_end() == "---" {
            docs.push(String::new());
        }
        docs.last_mut().expect("output starts with ---").push_str(line);
    }
    docs.into_iter()
        .map(|text| {
            let crd = &parse_docs(&text, "cfssl-issuer crd")[0];
            let group = crd["spec"]["group"].as_str().expect("spec.group");
            let plural = crd["spec"]["names"]["plural"].as_str().expect("plural");
            (format!("{group}_{plural}.yaml"), text)
        })
        .collect()
}

fn crd_files(dir: &str) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(repo().join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}")) {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            files.insert(file, std::fs::read_to_string(&path).expect("read CRD"));
        }
    }
    files
}

fn write_crds(dir: &str, crds: &BTreeMap<String, String>) {
    let dir = repo().join(dir);
    for old in crd_files(dir.to_str().unwrap()).keys() {
        std::fs::remove_file(dir.join(old)).expect("remove stale CRD");
    }
    for (file, text) in crds {
        std::fs::write(dir.join(file), text).expect("write CRD");
    }
}

#[test]
fn crd_files_are_what_the_binary_prints() {
    let printed = crds_from_binary(&[]);
    assert_eq!(printed.len(), 2, "Issuer and ClusterIssuer");
    assert_crd_copies(&printed, [CONFIG_CRDS, CHART_CRDS], "cfssl-issuer crd");
}

#[test]
fn crd_files_of_cert_manager_are_what_the_binary_prints() {
    let printed = crds_from_binary(&["--cert-manager"]);
    assert_eq!(
        printed.keys().collect::<Vec<_>>(),
        [
            "cert-manager.io_certificaterequests.yaml",
            "cert-manager.io_certificates.yaml"
        ]
    );
    assert_crd_copies(
        &printed,
        [CONFIG_CM_CRDS, CHART_CM_CRDS],
        "cfssl-issuer crd --cert-manager",
    );
}

/// Both copies of `printed` hold exactly it; `UPDATE_MANIFESTS` rewrites them instead.
fn assert_crd_copies(printed: &BTreeMap<String, String>, dirs: [&str; 2], command: &str) {
    if std::env::var_os("UPDATE_MANIFESTS").is_some() {
        for dir in dirs {
            std::fs::create_dir_all(repo().join(dir)).expect("CRD directory");
            write_crds(dir, printed);
        }
        eprintln!("UPDATE_MANIFESTS: rewrote {dirs:?}");
        return;
    }
    for dir in dirs {
        assert!(
            &crd_files(dir) == printed,
            "{dir} differs from `{command}`; regenerate both copies with\n  \
             UPDATE_MANIFESTS=1 cargo test -p cfssl-issuer --test deploy_manifests crd_files"
        );
    }
}

/// The CRDs of `docs` by name, each with only what the chart or kustomize may add (labels and
/// annotations) removed.
fn crds_in(docs: &[Value]) -> BTreeMap<String, Value> {
    kind(docs, "CustomResourceDefinition")
        .into_iter()
        .map(|crd| {
            let mut crd = crd.clone();
            let meta = crd["metadata"].as_object_mut().expect("metadata");
            meta.remove("labels");
            meta.remove("annotations");
            (name(&crd).to_string(), crd)
        })
        .collect()
}

fn expected_crds() -> BTreeMap<String, Value> {
    crds_of(CONFIG_CRDS)
}

/// cert-manager's two CRDs, as standalone mode installs them.
fn expected_cert_manager_crds() -> BTreeMap<String, Value> {
    crds_of(CONFIG_CM_CRDS)
}

fn crds_of(dir: &str) -> BTreeMap<String, Value> {
    let docs: Vec<Value> = crd_files(dir)
        .values()
        .flat_map(|text| parse_docs(text, dir))
        .collect();
    crds_in(&docs)
}

// ---------------------------------------------------------------------------------------------
// The manager's pod

/// The pod security, resources, probes and arguments both deployment methods must give the manager.
fn assert_hardened(deploy: &Value, leader_election: bool) {
    let pod = &deploy["spec"]["template"]["spec"];
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one container: the manager");
    let c = &containers[0];
    assert_restricted(pod, c);
    for path in ["/requests/cpu", "/requests/memory", "/limits/memory"] {
        assert!(c["resources"].pointer(path).is_some(), "resources{path} is set");
    }
    assert_probes_and_args(c, leader_election);
    assert_outlasts_a_sign(deploy);
}

/// On SIGTERM a sign in flight finishes and its status is saved before the kubelet kills the
/// pod: the grace period covers the CA timeout and a status write after it.
fn assert_outlasts_a_sign(deploy: &Value) {
    let pod = &deploy["spec"]["template"]["spec"];
    let args = strings(&pod["containers"][0]["args"]);
    let timeout = args
        .iter()
        .find_map(|a| a.strip_prefix("--cfssl-timeout="))
        .map_or(cfssl_issuer::cfssl::ClientConfig::DEFAULT_TIMEOUT, |t| {
            cfssl_issuer::manager::parse_duration(t).expect("--cfssl-timeout parses")
        });
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds is set (the default 30 s equals the CA timeout)");
    let save = 10;
    assert!(
        grace >= timeout.as_secs() + save,
        "terminationGracePeriodSeconds {grace} must exceed the CA timeout {timeout:?} by {save} s"
    );
}

/// What the restricted Pod Security Standard asks, and the image's nonroot user.
fn assert_restricted(pod: &Value, c: &Value) {
    let (psc, csc) = (&pod["securityContext"], &c["securityContext"]);
    // A container setting wins over the pod's.
    let either = |field: &str| {
        if csc[field].is_null() {
            &psc[field]
        } else {
            &csc[field]
        }
    };
    assert_eq!(either("runAsNonRoot"), true, "runAsNonRoot");
    assert_eq!(either("runAsUser"), 65532, "runAsUser");
    assert_eq!(
        either("seccompProfile")["type"],
        "RuntimeDefault",
        "seccompProfile"
    );
    assert_eq!(csc["allowPrivilegeEscalation"], false, "allowPrivilegeEscalation");
    assert_eq!(csc["readOnlyRootFilesystem"], true, "readOnlyRootFilesystem");
    assert_eq!(
        strings(&csc["capabilities"]["drop"]),
        ["ALL"],
        "drop ALL capabilities"
    );
    assert!(csc["capabilities"]["add"].is_null(), "no added capabilities");
    assert_ne!(csc["privileged"], true, "not privileged");
    assert!(
        pod["hostNetwork"].is_null() && pod["hostPID"].is_null(),
        "no host namespaces"
    );
}

/// Probes on the health port, `run` with the expected flags, listen addresses matching the
/// declared ports, and POD_NAMESPACE for the default namespaces.
fn assert_probes_and_args(c: &Value, leader_election: bool) {
    let ports: BTreeMap<&str, &Value> = c["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| (p["name"].as_str().unwrap_or_default(), &p["containerPort"]))
        .collect();
    assert!(
        ports.contains_key("metrics") && ports.contains_key("health"),
        "{ports:?}"
    );
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(c[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(
            c[probe]["httpGet"]["port"], "health",
            "{probe} on the health port"
        );
    }
    let args = strings(&c["args"]);
    assert_eq!(
        args.first(),
        Some(&"run"),
        "args start with the run command: {args:?}"
    );
    let leader = args.contains(&"--enable-leader-election");
    assert_eq!(leader, leader_election, "--enable-leader-election in {args:?}");
    for (flag, port) in [("--metrics-addr=", "metrics"), ("--health-addr=", "health")] {
        if let Some(addr) = args.iter().find_map(|a| a.strip_prefix(flag)) {
            assert!(
                addr.ends_with(&format!(":{}", ports[port])),
                "{flag}{addr} vs {port} port"
            );
        }
    }
    let pod_namespace = c["env"]
        .as_array()
        .expect("env")
        .iter()
        .find(|e| e["name"] == "POD_NAMESPACE")
        .expect("POD_NAMESPACE");
    assert_eq!(
        pod_namespace["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
}

/// Runs the manager with a Deployment's arguments and no cluster to talk to: it must get past
/// argument parsing (and then stop for want of a cluster), so a renamed flag fails here.
fn assert_binary_accepts(deploy: &Value) {
    let c = &deploy["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> = strings(&c["args"])
        .iter()
        .map(|a| a.replace("$(POD_NAMESPACE)", NAMESPACE))
        .collect();
    let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-kubeconfig");
    std::fs::create_dir_all(&home).expect("empty HOME");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cfssl-issuer"))
        .args(&args)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", &home)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start cfssl-issuer");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().expect("wait").is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("stderr");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("Usage: cfssl-issuer"),
        "cfssl-issuer refuses {args:?}:\n{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// RBAC

/// One permission: (namespace, or "*" for cluster-wide; API group; resource; verb; the one
/// object it is restricted to by `resourceNames`, or "" for any).
type Grant = (String, String, String, String, String);

fn grants(scope: &str, rules: &[(&str, &[&str], &[&str])]) -> BTreeSet<Grant> {
    let mut set = BTreeSet::new();
    for (group, resources, verbs) in rules {
        for resource in *resources {
            for verb in *verbs {
                set.insert((
                    scope.into(),
                    (*group).into(),
                    (*resource).into(),
                    (*verb).into(),
                    String::new(),
                ));
            }
        }
    }
    set
}

/// Everything the Issuer, ClusterIssuer and CertificateRequest controllers need.
fn manager_grants() -> BTreeSet<Grant> {
    const READ: &[&str] = &["get", "list", "watch"];
    grants(
        "*",
        &[
            ("cfssl-issuer.wikimedia.org", &["issuers", "clusterissuers"], READ),
            (
                "cfssl-issuer.wikimedia.org",
                &["issuers/status", "clusterissuers/status"],
                &["patch"],
            ),
            ("cert-manager.io", &["certificaterequests"], READ),
            ("cert-manager.io", &["certificaterequests/status"], &["patch"]),
            // Secrets stay read-only unless the Certificate controllers are on.
            ("", &["secrets"], READ),
            ("events.k8s.io", &["events"], &["create", "patch"]),
        ],
    )
    .into_iter()
    .chain(issuer_crd_grants())
    .collect()
}

/// Reading our two CRDs, by name only: the manager learns what their status schema holds.
fn issuer_crd_grants() -> BTreeSet<Grant> {
    let mut set = BTreeSet::new();
    for crd in [
        "issuers.cfssl-issuer.wikimedia.org",
        "clusterissuers.cfssl-issuer.wikimedia.org",
    ] {
        for verb in ["get", "list", "watch"] {
            set.insert((
                "*".into(),
                "apiextensions.k8s.io".into(),
                "customresourcedefinitions".into(),
                verb.into(),
                crd.into(),
            ));
        }
    }
    set
}

/// What standalone mode (the Certificate controllers) adds: cluster-wide, and reading
/// cert-manager's Lease, by name, in `lease_namespace`.
fn certificate_controller_grants(lease_namespace: &str) -> BTreeSet<Grant> {
    let mut set = grants(
        "*",
        &[
            ("cert-manager.io", &["certificates"], &["get", "list", "watch"]),
            ("cert-manager.io", &["certificates/status"], &["patch"]),
            ("cert-manager.io", &["certificates/finalizers"], &["update"]),
            ("cert-manager.io", &["certificaterequests"], &["create", "delete"]),
            ("", &["secrets"], &["create", "update", "patch", "delete"]),
            ("", &["pods"], &["get"]),
        ],
    );
    let named = |scope: &str, group: &str, resource: &str, verb: &str, object: &str| {
        (
            scope.into(),
            group.into(),
            resource.into(),
            verb.into(),
            object.into(),
        )
    };
    for signers in [
        "issuers.cfssl-issuer.wikimedia.org/*",
        "clusterissuers.cfssl-issuer.wikimedia.org/*",
    ] {
        set.insert(named("*", "cert-manager.io", "signers", "approve", signers));
    }
    for verb in ["get", "list", "watch"] {
        set.insert(named(
            lease_namespace,
            "coordination.k8s.io",
            "leases",
            verb,
            "cert-manager-controller",
        ));
    }
    set
}

fn leader_election_grants(namespace: &str) -> BTreeSet<Grant> {
    grants(
        namespace,
        &[(
            "coordination.k8s.io",
            &["leases"],
            &["get", "create", "update", "patch"],
        )],
    )
}

/// Which Kubernetes CertificateSigningRequests an install signs: the chart's `kubernetesCSR`
/// values, kustomize's `no-kubernetes-csr*` components.
#[derive(Clone, Copy, Debug, PartialEq)]
enum KubernetesCsr {
    /// `--disable-kubernetes-csr-controller`: no CSR controller, no CSR RBAC.
    Off,
    /// `--disable-kubernetes-csr-namespaced-signers`: `clusterissuers.…/<name>` only.
    ClusterSigners,
    /// The default: ClusterIssuers and, after a SubjectAccessReview, namespaced Issuers.
    AllSigners,
}

/// What the CSR controller needs: read CSRs, apply their status, `sign` for our signer names
/// (kube-apiserver's check on setting `status.certificate`), and for namespaced signers
/// SubjectAccessReviews of the requester.
fn kubernetes_csr_grants(csr: KubernetesCsr) -> BTreeSet<Grant> {
    if csr == KubernetesCsr::Off {
        return BTreeSet::new();
    }
    let mut set = grants(
        "*",
        &[
            (
                "certificates.k8s.io",
                &["certificatesigningrequests"],
                &["get", "list", "watch"],
            ),
            (
                "certificates.k8s.io",
                &["certificatesigningrequests/status"],
                &["patch"],
            ),
        ],
    );
    let mut signers = vec!["clusterissuers.cfssl-issuer.wikimedia.org/*"];
    if csr == KubernetesCsr::AllSigners {
        signers.push("issuers.cfssl-issuer.wikimedia.org/*");
        set.extend(grants(
            "*",
            &[("authorization.k8s.io", &["subjectaccessreviews"], &["create"])],
        ));
    }
    for signer in signers {
        set.insert((
            "*".into(),
            "certificates.k8s.io".into(),
            "signers".into(),
            "sign".into(),
            signer.into(),
        ));
    }
    set
}

/// The manager's CSR flags say what its RBAC allows, and no role in `docs` grants more
/// about CSRs or SubjectAccessReviews than the controller needs.
fn assert_kubernetes_csr(docs: &[Value], csr: KubernetesCsr) {
    let deploy = one(docs, "Deployment");
    let args = strings(&deploy["spec"]["template"]["spec"]["containers"][0]["args"]);
    let flags: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| a.starts_with("--disable-kubernetes-csr"))
        .collect();
    let want: &[&str] = match csr {
        KubernetesCsr::Off => &["--disable-kubernetes-csr-controller"],
        KubernetesCsr::ClusterSigners => &["--disable-kubernetes-csr-namespaced-signers"],
        KubernetesCsr::AllSigners => &[],
    };
    assert_eq!(flags, want, "the Kubernetes CSR flags in {args:?}");
    let mut anywhere = BTreeSet::new();
    for r in kind(docs, "ClusterRole").into_iter().chain(kind(docs, "Role")) {
        anywhere.extend(
            expand(r, "*")
                .into_iter()
                .filter(|(_, group, ..)| group == "certificates.k8s.io" || group == "authorization.k8s.io"),
        );
    }
    assert_eq!(
        anywhere,
        kubernetes_csr_grants(csr),
        "CSR and SubjectAccessReview rules in every role"
    );
}

/// `docs` are the objects of `base` (by kind and name) but for `dropped` ("Kind name").
fn assert_only_dropped(base: &[Value], docs: &[Value], dropped: &[&str]) {
    let objects = |docs: &[Value]| -> BTreeSet<String> {
        docs.iter()
            .map(|d| format!("{} {}", d["kind"].as_str().unwrap_or_default(), name(d)))
            .collect()
    };
    let (base, docs) = (objects(base), objects(docs));
    let gone: BTreeSet<&str> = base.difference(&docs).map(String::as_str).collect();
    assert_eq!(gone, dropped.iter().copied().collect(), "objects dropped");
    let added: Vec<_> = docs.difference(&base).collect();
    assert!(added.is_empty(), "objects added: {added:?}");
}

fn binds(binding: &Value, namespace: &str, sa: &str) -> bool {
    binding["subjects"].as_array().is_some_and(|subjects| {
        subjects
            .iter()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == namespace)
    })
}

fn role<'a>(docs: &'a [Value], kind_: &str, role_name: &str, namespace: Option<&str>) -> &'a Value {
    kind(docs, kind_)
        .into_iter()
        .find(|r| name(r) == role_name && namespace.is_none_or(|ns| r["metadata"]["namespace"] == ns))
        .unwrap_or_else(|| panic!("{kind_} {role_name} is referenced but not rendered"))
}

/// Every rule of `role`, expanded to grants in `scope`, one per resource name when the rule
/// names its objects.
fn expand(role: &Value, scope: &str) -> BTreeSet<Grant> {
    let mut set = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        let names = match strings(&rule["resourceNames"]) {
            names if names.is_empty() => vec![""],
            names => names,
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    for object in &names {
                        set.insert((
                            scope.into(),
                            group.into(),
                            resource.into(),
                            verb.into(),
                            (*object).into(),
                        ));
                    }
                }
            }
        }
    }
    set
}

/// The grants of ServiceAccount `namespace/sa`, through every (Cluster)RoleBinding in `docs`.
fn grants_of(docs: &[Value], namespace: &str, sa: &str) -> BTreeSet<Grant> {
    let mut set = BTreeSet::new();
    for binding in kind(docs, "ClusterRoleBinding")
        .into_iter()
        .filter(|b| binds(b, namespace, sa))
    {
        let role_name = binding["roleRef"]["name"].as_str().unwrap_or_default();
        set.extend(expand(role(docs, "ClusterRole", role_name, None), "*"));
    }
    for binding in kind(docs, "RoleBinding")
        .into_iter()
        .filter(|b| binds(b, namespace, sa))
    {
        let scope = binding["metadata"]["namespace"]
            .as_str()
            .expect("RoleBinding namespace");
        let role_name = binding["roleRef"]["name"].as_str().unwrap_or_default();
        let role = match binding["roleRef"]["kind"].as_str() {
            Some("Role") => role(docs, "Role", role_name, Some(scope)),
            _ => role(docs, "ClusterRole", role_name, None),
        };
        set.extend(expand(role, scope));
    }
    set
}

fn assert_no_wildcards(docs: &[Value]) {
    for r in kind(docs, "ClusterRole").into_iter().chain(kind(docs, "Role")) {
        for rule in r["rules"].as_array().expect("rules") {
            for field in ["apiGroups", "resources", "verbs"] {
                assert!(
                    !strings(&rule[field]).contains(&"*"),
                    "{}: `*` in {field}",
                    name(r)
                );
            }
        }
    }
}

/// cert-manager's ServiceAccount may approve requests for our issuers, and do nothing else here.
fn assert_approver(docs: &[Value], cert_manager_ns: &str, cert_manager_sa: &str) {
    let bindings: Vec<_> = kind(docs, "ClusterRoleBinding")
        .into_iter()
        .filter(|b| binds(b, cert_manager_ns, cert_manager_sa))
        .collect();
    assert_eq!(
        bindings.len(),
        1,
        "one approver binding for {cert_manager_ns}/{cert_manager_sa}"
    );
    let approver = role(
        docs,
        "ClusterRole",
        bindings[0]["roleRef"]["name"].as_str().unwrap(),
        None,
    );
    let rules = approver["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 1, "{approver}");
    let rule = &rules[0];
    assert_eq!(strings(&rule["apiGroups"]), ["cert-manager.io"]);
    assert_eq!(strings(&rule["resources"]), ["signers"]);
    assert_eq!(strings(&rule["verbs"]), ["approve"]);
    let names: BTreeSet<_> = strings(&rule["resourceNames"]).into_iter().collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "issuers.cfssl-issuer.wikimedia.org/*",
            "clusterissuers.cfssl-issuer.wikimedia.org/*"
        ])
    );
}

/// The manager's ServiceAccount (the only one rendered) and its exact grants;
/// `certificate_controllers` is standalone mode's cert-manager Lease namespace, if on; `csr`
/// which Kubernetes CSRs it signs (checked with the flags that say so).
fn assert_manager_rbac(
    docs: &[Value],
    certificate_controllers: Option<&str>,
    leader_election: bool,
    csr: KubernetesCsr,
) {
    assert_no_wildcards(docs);
    assert_kubernetes_csr(docs, csr);
    let sa = one(docs, "ServiceAccount");
    let namespace = sa["metadata"]["namespace"]
        .as_str()
        .expect("ServiceAccount namespace");
    let deploy = one(docs, "Deployment");
    assert_eq!(deploy["spec"]["template"]["spec"]["serviceAccountName"], name(sa));
    let mut expected = manager_grants();
    expected.extend(kubernetes_csr_grants(csr));
    if let Some(lease_namespace) = certificate_controllers {
        expected.extend(certificate_controller_grants(lease_namespace));
    }
    if leader_election {
        expected.extend(leader_election_grants(namespace));
    }
    let actual = grants_of(docs, namespace, name(sa));
    let extra: Vec<_> = actual.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&actual).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "RBAC: extra {extra:?}, missing {missing:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// kustomize

#[test]
fn kustomize_default_installs_crds_and_a_hardened_least_privilege_manager() {
    let docs = kustomize(&repo().join("config/default"));
    assert_eq!(
        crds_in(&docs),
        expected_crds(),
        "config/default carries config/crd unchanged"
    );
    assert_eq!(name(one(&docs, "Namespace")), NAMESPACE);
    for doc in &docs {
        let namespaced = !matches!(
            doc["kind"].as_str(),
            Some("Namespace" | "CustomResourceDefinition" | "ClusterRole" | "ClusterRoleBinding")
        );
        if namespaced {
            assert_eq!(
                doc["metadata"]["namespace"],
                NAMESPACE,
                "{} {}",
                doc["kind"],
                name(doc)
            );
        }
    }
    let deploy = one(&docs, "Deployment");
    assert_hardened(deploy, true);
    let manager = &deploy["spec"]["template"]["spec"]["containers"][0];
    let image = manager["image"].as_str().unwrap();
    assert_eq!(
        image,
        format!("cfssl-issuer:{}", env!("CARGO_PKG_VERSION")),
        "image tag = crate version"
    );
    // The Lease must be where the leader-election Role is: the pod's own namespace.
    let args = strings(&manager["args"]);
    assert!(
        args.contains(&"--leader-election-namespace=$(POD_NAMESPACE)"),
        "{args:?}"
    );
    assert_binary_accepts(deploy);
    assert_manager_rbac(&docs, None, true, KubernetesCsr::AllSigners);
    assert_approver(&docs, "cert-manager", "cert-manager");
    let service = one(&docs, "Service");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
}

/// A throwaway overlay of config/default plus `components`, under the test's target directory.
fn overlay_with(test: &str, components: &[&str]) -> Vec<Value> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("overlay dir");
    let config = relative(&dir, &repo().join("config"));
    let mut kustomization = format!(
        "resources:\n  - {}\ncomponents:\n",
        config.join("default").display()
    );
    for component in components {
        kustomization += &format!("  - {}\n", config.join("components").join(component).display());
    }
    std::fs::write(dir.join("kustomization.yaml"), kustomization).expect("write overlay");
    kustomize(&dir)
}

#[test]
fn kustomize_certificate_controllers_component_adds_exactly_their_rbac() {
    let docs = overlay_with("certificate-controllers", &["certificate-controllers"]);
    assert_manager_rbac(&docs, Some("kube-system"), true, KubernetesCsr::AllSigners);
}

/// The component is standalone mode whole: the flag (with the Lease namespace its Role is in),
/// cert-manager's CRDs beside ours, the Secret writes.
#[test]
fn kustomize_certificate_controllers_component_is_standalone_mode() {
    let docs = overlay_with("certificate-controllers-parts", &["certificate-controllers"]);
    assert_standalone_parts(&docs, true, true);
    let mut crds = expected_crds();
    crds.extend(expected_cert_manager_crds());
    assert_eq!(crds_in(&docs), crds, "our CRDs and cert-manager's, unchanged");
    let deploy = one(&docs, "Deployment");
    assert_hardened(deploy, true);
    let args = strings(&deploy["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(
        args.contains(&"--cert-manager-lease-namespace=kube-system"),
        "{args:?}"
    );
    assert_binary_accepts(deploy);
}

#[test]
fn kustomize_default_is_not_standalone_mode() {
    assert_standalone_parts(&kustomize(&repo().join("config/default")), false, false);
}

/// Standalone mode installs the policy standing in for cert-manager's webhook check of who may
/// approve (`approval_policy.yaml`, the chart's copy identical), and nothing else does.
fn assert_approval_policy(docs: &[Value], standalone: bool) {
    const SOURCE: &str = "config/components/certificate-controllers/approval_policy.yaml";
    let source = read(SOURCE);
    assert_eq!(
        read("charts/cfssl-issuer/files/approval-policy.yaml"),
        source,
        "the chart's copy of {SOURCE}"
    );
    let installed: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            d["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("ValidatingAdmissionPolicy"))
        })
        .collect();
    let want = if standalone {
        parse_docs(&source, SOURCE)
    } else {
        Vec::new()
    };
    let strip = |d: &Value| {
        let mut d = d.clone();
        if let Some(meta) = d["metadata"].as_object_mut() {
            meta.remove("labels");
        }
        d
    };
    assert_eq!(
        installed.into_iter().map(strip).collect::<Vec<_>>(),
        want,
        "the approval policy and its binding, as written, only in standalone mode"
    );
    if standalone {
        let policy = &want[0]["spec"];
        assert_eq!(
            policy["failurePolicy"], "Fail",
            "no approval unchecked when the policy fails"
        );
        assert_eq!(want[1]["spec"]["validationActions"], serde_json::json!(["Deny"]));
    }
}

/// config/default with `components`: the manager's RBAC for `csr`, a hardened pod whose
/// arguments the binary accepts, and no other object added or dropped than those `dropped`.
fn assert_kustomize_kubernetes_csr(test: &str, components: &[&str], csr: KubernetesCsr, dropped: &[&str]) {
    let docs = overlay_with(test, components);
    assert_manager_rbac(&docs, None, true, csr);
    let deploy = one(&docs, "Deployment");
    assert_hardened(deploy, true);
    assert_binary_accepts(deploy);
    assert_only_dropped(&kustomize(&repo().join("config/default")), &docs, dropped);
}

#[test]
fn kustomize_no_kubernetes_csr_component_drops_the_controller_and_its_rbac() {
    assert_kustomize_kubernetes_csr(
        "no-kubernetes-csr",
        &["no-kubernetes-csr"],
        KubernetesCsr::Off,
        &[
            "ClusterRole cfssl-issuer-kubernetes-csr-role",
            "ClusterRoleBinding cfssl-issuer-kubernetes-csr-rolebinding",
        ],
    );
}

#[test]
fn kustomize_no_kubernetes_csr_namespaced_signers_component_signs_for_clusterissuers_only() {
    assert_kustomize_kubernetes_csr(
        "no-kubernetes-csr-namespaced-signers",
        &["no-kubernetes-csr-namespaced-signers"],
        KubernetesCsr::ClusterSigners,
        &[],
    );
}

/// The off-switch composes with standalone mode: neither undoes the other's RBAC or flags.
#[test]
fn kustomize_no_kubernetes_csr_component_composes_with_standalone_mode() {
    let docs = overlay_with(
        "no-kubernetes-csr-standalone",
        &["certificate-controllers", "no-kubernetes-csr"],
    );
    assert_manager_rbac(&docs, Some("kube-system"), true, KubernetesCsr::Off);
    assert_standalone_parts(&docs, true, true);
    assert_binary_accepts(one(&docs, "Deployment"));
}

/// What only standalone mode may have: `--certificate-controllers`, any write to Secrets,
/// cert-manager's CRDs (`cert_manager_crds`), the Role reading cert-manager's Lease. No rule
/// anywhere has a wildcard.
fn assert_standalone_parts(docs: &[Value], standalone: bool, cert_manager_crds: bool) {
    assert_no_wildcards(docs);
    let deploy = one(docs, "Deployment");
    let args = strings(&deploy["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert_eq!(
        args.contains(&"--certificate-controllers"),
        standalone,
        "--certificate-controllers in {args:?}"
    );
    let mut secret_writes = BTreeSet::new();
    let mut lease_roles = Vec::new();
    for r in kind(docs, "ClusterRole").into_iter().chain(kind(docs, "Role")) {
        for (_, group, resource, verb, object) in expand(r, "") {
            if group.is_empty() && resource == "secrets" && !["get", "list", "watch"].contains(&verb.as_str())
            {
                secret_writes.insert(verb);
            } else if resource == "leases" && object == "cert-manager-controller" {
                lease_roles.push(name(r).to_string());
            }
        }
    }
    let writes: BTreeSet<String> = if standalone {
        ["create", "update", "patch", "delete"].map(String::from).into()
    } else {
        BTreeSet::new()
    };
    assert_eq!(secret_writes, writes, "Secret writes only in standalone mode");
    assert_approval_policy(docs, standalone);
    assert_eq!(
        !lease_roles.is_empty(),
        standalone,
        "cert-manager's Lease is read only in standalone mode: {lease_roles:?}"
    );
    let theirs: Vec<_> = crds_in(docs)
        .into_keys()
        .filter(|n| n.ends_with(".cert-manager.io"))
        .collect();
    let want: Vec<String> = if cert_manager_crds {
        expected_cert_manager_crds().into_keys().collect()
    } else {
        Vec::new()
    };
    assert_eq!(theirs, want, "cert-manager's CRDs");
}

#[test]
fn kustomize_override_ca_component_points_ssl_cert_file_at_the_mounted_secret() {
    let docs = overlay_with("override-ca", &["override-ca"]);
    let deploy = one(&docs, "Deployment");
    assert_hardened(deploy, true);
    let pod = &deploy["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let file = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "SSL_CERT_FILE")
        .expect("SSL_CERT_FILE");
    let mount = c["volumeMounts"][0]["mountPath"].as_str().expect("mount");
    assert!(file["value"].as_str().unwrap().starts_with(&format!("{mount}/")));
    assert_eq!(
        pod["volumes"][0]["secret"]["optional"], true,
        "the manager starts without it"
    );
}

/// simple-cfssl's in-cluster address (`https://<service>.<namespace>.svc:<port>`) and the key
/// it is started with, after checking that its TLS certificate names that host.
fn simple_cfssl() -> (String, String) {
    let docs = kustomize(&repo().join("config/simple-cfssl"));
    let service = one(&docs, "Service");
    let host = format!(
        "{}.{}.svc",
        name(service),
        service["metadata"]["namespace"].as_str().unwrap()
    );
    let url = format!("https://{host}:{}", service["spec"]["ports"][0]["port"]);
    let args = strings(&one(&docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(
        args.contains(&format!("--tls-host={host}").as_str()),
        "TLS names {host}: {args:?}"
    );
    let key = args.iter().find_map(|a| a.strip_prefix("--key=")).expect("--key");
    (url, key.to_string())
}

#[test]
fn kustomize_samples_issuers_reach_simple_cfssl_with_its_key() {
    let samples = kustomize(&repo().join("config/samples"));
    let (url, key) = simple_cfssl();
    let issuers: Vec<_> = kind(&samples, "Issuer")
        .into_iter()
        .chain(kind(&samples, "ClusterIssuer"))
        .collect();
    assert_eq!(issuers.len(), 3);
    for issuer in &issuers {
        let urls = issuer["spec"]["url"].as_str().unwrap();
        assert!(urls.ends_with(&url), "{urls} ends with {url}");
        // An Issuer's Secret is in its namespace, a ClusterIssuer's in the manager's.
        let secret_ns = issuer["metadata"]["namespace"].as_str().unwrap_or(NAMESPACE);
        let secret = kind(&samples, "Secret")
            .into_iter()
            .find(|s| name(s) == issuer["spec"]["authSecretName"] && s["metadata"]["namespace"] == secret_ns)
            .unwrap_or_else(|| panic!("{} has no Secret in {secret_ns}", name(issuer)));
        assert_eq!(
            secret["stringData"]["key"],
            key.as_str(),
            "the key simple-cfssl is started with"
        );
    }
    assert!(
        issuers
            .iter()
            .any(|i| i["spec"]["url"].as_str().unwrap().contains(',')),
        "one sample fails over between URLs"
    );
    assert!(
        issuers.iter().any(|i| i["spec"]["bundle"] == true),
        "one sample asks for bundles"
    );
}

fn decode_csr(request: &str) -> Vec<u8> {
    let pem_text = base64::engine::general_purpose::STANDARD
        .decode(request)
        .expect("spec.request is base64");
    let block = pem::parse(pem_text).expect("spec.request is PEM");
    assert_eq!(block.tag(), "CERTIFICATE REQUEST");
    block.into_contents()
}

#[test]
fn kustomize_samples_request_from_every_issuer_with_real_csrs() {
    let samples = kustomize(&repo().join("config/samples"));
    let issuers: BTreeSet<_> = kind(&samples, "Issuer")
        .into_iter()
        .chain(kind(&samples, "ClusterIssuer"))
        .map(|i| (i["kind"].as_str().unwrap(), name(i)))
        .collect();
    for kind_ in ["CertificateRequest", "Certificate"] {
        let referenced: BTreeSet<_> = kind(&samples, kind_)
            .into_iter()
            .map(|object| {
                let r = &object["spec"]["issuerRef"];
                assert_eq!(
                    r["group"],
                    "cfssl-issuer.wikimedia.org",
                    "{} {}",
                    kind_,
                    name(object)
                );
                (r["kind"].as_str().unwrap(), r["name"].as_str().unwrap())
            })
            .collect();
        assert_eq!(referenced, issuers, "a {kind_} for each sample issuer");
    }
    for request in kind(&samples, "CertificateRequest") {
        let der = decode_csr(request["spec"]["request"].as_str().expect("spec.request"));
        X509CertificationRequest::from_der(&der).expect("a parseable CSR");
    }
}

#[test]
fn kustomize_and_chart_ship_the_crate_version() {
    let chart: Value = serde_saphyr::from_str(&read(format!("{CHART}/Chart.yaml"))).expect("Chart.yaml");
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
    assert_eq!(chart["apiVersion"], "v2");
}

// ---------------------------------------------------------------------------------------------
// Helm chart

/// The directory `scripts/chart-lint.py --out` rendered every case into, once per test process
/// (per process so that runners starting one process per test, like nextest, do not race).
fn chart_render() -> &'static Path {
    static OUT: OnceLock<PathBuf> = OnceLock::new();
    OUT.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("chart-render-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let result = Command::new(chart_python())
            .arg(repo().join("scripts/chart-lint.py"))
            .arg("--out")
            .arg(&out)
            .output()
            .expect("cannot start python3 (scripts/chart-lint.py needs it)");
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&result.stdout),
            String::from_utf8_lossy(&result.stderr)
        );
        match result.status.code() {
            Some(0) => out,
            Some(2) => panic!(
                "scripts/chart-lint.py is missing Helm's Python bindings (`scripts/test-deps.sh` installs them into .venv):\n{report}"
            ),
            _ => panic!("scripts/chart-lint.py found problems in the chart:\n{report}"),
        }
    })
}

/// The project's venv (made by `scripts/test-deps.sh`, which `make test` runs first) when it
/// exists, else the `python3` on PATH.
fn chart_python() -> PathBuf {
    let venv = repo().join(".venv/bin/python3");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

fn chart_case(case: &str) -> Vec<Value> {
    let path = chart_render().join(format!("{case}.yaml"));
    parse_docs(&std::fs::read_to_string(&path).expect("rendered case"), case)
}

fn chart_notes(case: &str) -> String {
    std::fs::read_to_string(chart_render().join(format!("{case}.NOTES.txt"))).expect("notes")
}

fn chart_deployment_resources(docs: &[Value]) -> Value {
    one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["resources"].clone()
}

#[test]
fn chart_defaults_match_the_kustomize_install() {
    let docs = chart_case("default");
    assert_eq!(
        crds_in(&docs),
        expected_crds(),
        "the chart's CRDs are config/crd's"
    );
    for crd in kind(&docs, "CustomResourceDefinition") {
        assert_eq!(crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep");
    }
    assert_hardened(one(&docs, "Deployment"), true);
    assert_manager_rbac(&docs, None, true, KubernetesCsr::AllSigners);
    assert_standalone_parts(&docs, false, false);
    assert_approver(&docs, "cert-manager", "cert-manager");
    let kustomized = kustomize(&repo().join("config/default"));
    assert_eq!(
        chart_deployment_resources(&docs),
        chart_deployment_resources(&kustomized)
    );
    for absent in [
        "PodDisruptionBudget",
        "ServiceMonitor",
        "Issuer",
        "ClusterIssuer",
        "Secret",
    ] {
        assert!(kind(&docs, absent).is_empty(), "no {absent} by default");
    }
    assert_eq!(one(&docs, "Service")["spec"]["ports"][0]["targetPort"], "metrics");
}

#[test]
fn chart_full_values_render_every_option() {
    let docs = chart_case("full");
    assert!(crds_in(&docs).is_empty(), "crds.install: false");
    let deploy = one(&docs, "Deployment");
    assert_hardened(deploy, true);
    assert_binary_accepts(deploy);
    assert_manager_rbac(&docs, Some("cert-manager"), true, KubernetesCsr::ClusterSigners);
    assert_standalone_parts(&docs, true, false);
    assert_approver(&docs, "cert-manager-system", "cert-manager-controller");
    assert_eq!(deploy["spec"]["replicas"], 2);
    assert_eq!(one(&docs, "PodDisruptionBudget")["spec"]["minAvailable"], "50%");
    assert_eq!(
        one(&docs, "ServiceMonitor")["spec"]["endpoints"][0]["port"],
        "metrics"
    );

    let c = &deploy["spec"]["template"]["spec"]["containers"][0];
    let args = strings(&c["args"]);
    for arg in [
        "--leader-election-namespace=cfssl-issuer-system",
        "--cluster-resource-namespace=cfssl-issuer-secrets",
        "--log-format=json",
        "--max-retry-duration=10m",
        "--certificate-controllers",
        "--cert-manager-lease-namespace=cert-manager",
        "--certificate-request-minimum-backoff-duration=30m",
        "--certificate-request-maximum-backoff-duration=8h",
        "--renewal-jitter=0.1",
        "--issuance-budget=2.5",
        "--issuance-budget-burst=4",
    ] {
        assert!(args.contains(&arg), "{arg} in {args:?}");
    }
    let env = c["env"].as_array().unwrap();
    assert!(
        env.iter()
            .any(|e| e["name"] == "SSL_CERT_FILE" && e["value"] == "/ca/bundle.pem")
    );
    assert_eq!(
        deploy["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        "corporate-ca"
    );

    let issuer = one(&docs, "Issuer");
    assert_eq!(issuer["metadata"]["namespace"], "team-a");
    assert_eq!(kind(&docs, "ClusterIssuer").len(), 2);
    let secrets: BTreeMap<_, _> = kind(&docs, "Secret").into_iter().map(|s| (name(s), s)).collect();
    assert_eq!(secrets.len(), 2, "only issuers with authSecret get a Secret");
    assert_eq!(secrets["team-a-cfssl-key"]["metadata"]["namespace"], "team-a");
    assert_eq!(
        secrets["discovery-cfssl-key"]["metadata"]["namespace"],
        "cfssl-issuer-secrets"
    );
    let key = base64::engine::general_purpose::STANDARD
        .decode(secrets["team-a-cfssl-key"]["data"]["key"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        key, b"0123456789abcdef0123456789abcdef",
        "the key is the plain hex text, no newline"
    );
    let discovery = kind(&docs, "ClusterIssuer")
        .into_iter()
        .find(|i| name(i) == "discovery")
        .unwrap();
    let ca = base64::engine::general_purpose::STANDARD
        .decode(discovery["spec"]["caBundle"].as_str().expect("caBundle"))
        .unwrap();
    assert!(
        ca.starts_with(b"-----BEGIN CERTIFICATE-----"),
        "caBundle is base64 of the PEM"
    );
}

#[test]
fn chart_defers_issuers_until_their_crds_are_served() {
    let docs = chart_case("deferred-issuers");
    assert_eq!(crds_in(&docs).len(), 2);
    assert!(
        kind(&docs, "Issuer").is_empty(),
        "Helm cannot map an Issuer in the release creating its CRD"
    );
    assert_eq!(
        name(one(&docs, "Secret")),
        "team-a-cfssl-key",
        "Secrets do not wait"
    );
    assert!(
        chart_notes("deferred-issuers").contains("NOT created"),
        "NOTES say what to do"
    );
}

#[test]
fn chart_minimal_values_drop_every_optional_part() {
    let docs = chart_case("minimal");
    let deploy = one(&docs, "Deployment");
    assert_hardened(deploy, false);
    assert_binary_accepts(deploy);
    assert_manager_rbac(&docs, None, false, KubernetesCsr::Off);
    for absent in [
        "CustomResourceDefinition",
        "Role",
        "RoleBinding",
        "Service",
        "PodDisruptionBudget",
    ] {
        assert!(kind(&docs, absent).is_empty(), "no {absent}");
    }
    assert!(
        kind(&docs, "ClusterRoleBinding")
            .iter()
            .all(|b| !binds(b, "cert-manager", "cert-manager")),
        "cert_manager.approve: false renders no approver binding"
    );
}

/// `case` renders the default install but for the CSR objects `dropped` (and the flag).
fn assert_chart_kubernetes_csr(case: &str, csr: KubernetesCsr, dropped: &[&str]) {
    let docs = chart_case(case);
    assert_manager_rbac(&docs, None, true, csr);
    let deploy = one(&docs, "Deployment");
    assert_hardened(deploy, true);
    assert_binary_accepts(deploy);
    assert_only_dropped(&chart_case("default"), &docs, dropped);
}

#[test]
fn chart_kubernetes_csr_disabled_drops_the_controller_and_its_rbac() {
    assert_chart_kubernetes_csr(
        "no-kubernetes-csr",
        KubernetesCsr::Off,
        &[
            "ClusterRole cfssl-issuer-kubernetes-csr",
            "ClusterRoleBinding cfssl-issuer-kubernetes-csr",
        ],
    );
}

#[test]
fn chart_kubernetes_csr_without_namespaced_signers_signs_for_clusterissuers_only() {
    assert_chart_kubernetes_csr(
        "kubernetes-csr-cluster-signers",
        KubernetesCsr::ClusterSigners,
        &[],
    );
}

/// Standalone mode with its defaults: the flags at the binary's defaults, cert-manager's CRDs
/// (kept on uninstall, as ours), Secret writes and the Lease Role in kube-system.
#[test]
fn chart_standalone_values_install_cert_manager_crds_and_grant_secret_writes() {
    let docs = chart_case("standalone");
    assert_standalone_parts(&docs, true, true);
    let mut crds = expected_crds();
    crds.extend(expected_cert_manager_crds());
    assert_eq!(crds_in(&docs), crds);
    for crd in kind(&docs, "CustomResourceDefinition") {
        assert_eq!(crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep");
    }
    assert_manager_rbac(&docs, Some("kube-system"), true, KubernetesCsr::AllSigners);
    let deploy = one(&docs, "Deployment");
    assert_hardened(deploy, true);
    assert_binary_accepts(deploy);
    let args = strings(&deploy["spec"]["template"]["spec"]["containers"][0]["args"]);
    for arg in [
        "--certificate-controllers",
        "--cert-manager-lease-namespace=kube-system",
        "--certificate-request-minimum-backoff-duration=1h",
        "--certificate-request-maximum-backoff-duration=32h",
        "--renewal-jitter=0",
    ] {
        assert!(args.contains(&arg), "{arg} in {args:?}");
    }
}

#[test]
fn chart_cases_without_standalone_mode_have_none_of_its_parts() {
    for case in [
        "default",
        "minimal",
        "deferred-issuers",
        "no-kubernetes-csr",
        "kubernetes-csr-cluster-signers",
        "csi",
        "csi-defaults",
    ] {
        assert_standalone_parts(&chart_case(case), false, false);
    }
}

/// The chart's standalone defaults are the binary's: a chart install behaves as the flags
/// documented in `cfssl-issuer run --help`.
#[test]
fn chart_standalone_defaults_are_the_flags_defaults() {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: cfssl_issuer::manager::RunArgs,
    }
    let flags = <Cli as clap::Parser>::parse_from(["cfssl-issuer"]).run.standalone;
    let values: Value = serde_saphyr::from_str(&read(format!("{CHART}/values.yaml"))).expect("values.yaml");
    let chart = &values["certificateControllers"];
    let duration = |key: &str| {
        cfssl_issuer::manager::parse_duration(chart[key].as_str().expect(key)).expect("a duration")
    };
    assert_eq!(chart["enabled"], false, "off by default");
    assert_eq!(
        (
            chart["certManagerLeaseNamespace"].as_str(),
            duration("minimumBackoffDuration"),
            duration("maximumBackoffDuration"),
        ),
        (
            Some(flags.cert_manager_lease_namespace.as_str()),
            flags.certificate_request_minimum_backoff_duration,
            flags.certificate_request_maximum_backoff_duration,
        )
    );
    let jitter = chart["renewalJitter"]
        .to_string()
        .parse::<cfssl_issuer::certificates::renewal::Jitter>();
    assert_eq!(jitter, Ok(flags.renewal_jitter), "renewalJitter");
}

/// The issuance budget is off by default (no flag passed), and the chart's burst is the flag's.
#[test]
fn chart_issuance_budget_defaults_are_the_flags_defaults() {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: cfssl_issuer::manager::RunArgs,
    }
    let flags = <Cli as clap::Parser>::parse_from(["cfssl-issuer"]).run.budget;
    let values: Value = serde_saphyr::from_str(&read(format!("{CHART}/values.yaml"))).expect("values.yaml");
    let chart = &values["issuanceBudget"];
    assert_eq!(
        (chart["signsPerSecond"].as_f64(), chart["burst"].as_u64()),
        (Some(0.0), Some(u64::from(flags.issuance_budget_burst)))
    );
    assert_eq!(flags.issuance_budget, None, "unlimited by default");
    let deploy = chart_case("default");
    let args = strings(&one(&deploy, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(
        !args.iter().any(|a| a.starts_with("--issuance-budget")),
        "no budget flag by default: {args:?}"
    );
}
