//! The CSI node plugin's deployment (the chart's `csi.*` values, kustomize's `csi-driver`
//! component): the CSIDriver kubelet needs, a DaemonSet privileged only where mounting needs it,
//! the plugin's exact RBAC, a data directory never under /tmp, the flags the binary accepts, and
//! the same objects from both. With `csi.enabled=false` (the default) none of it is rendered.

use clap::{CommandFactory as _, Parser as _};

use super::*;

const DRIVER: &str = cfssl_issuer::csi::identity::DRIVER_NAME;
/// The DaemonSet, ServiceAccount, ClusterRole and binding of both installs.
const PLUGIN: &str = "cfssl-issuer-csi-driver";

#[derive(clap::Parser)]
struct Csi {
    #[command(flatten)]
    csi: cfssl_issuer::csi::server::CsiArgs,
}

/// The long flags `cfssl-issuer csi` defines.
fn csi_flags() -> BTreeSet<String> {
    Csi::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(String::from))
        .collect()
}

/// `args` (a container's, starting with `csi`) name only flags of `cfssl-issuer csi` (or ones
/// still pending) and its parser accepts them, values included.
fn assert_plugin_accepts(args: &[&str]) {
    assert_eq!(
        args.first(),
        Some(&"csi"),
        "args start with the csi command: {args:?}"
    );
    let defined = csi_flags();
    let mut kept = vec!["cfssl-issuer".to_string()];
    for arg in &args[1..] {
        let flag = arg
            .strip_prefix("--")
            .and_then(|a| a.split('=').next())
            .unwrap_or_else(|| panic!("{arg:?} is not --flag=value"));
        assert!(
            defined.contains(flag),
            "--{flag} is not a flag of `cfssl-issuer csi` (it has {defined:?})"
        );
        kept.push(arg.replace("$(NODE_ID)", "node-1"));
    }
    if let Err(e) = Csi::try_parse_from(&kept) {
        panic!("`cfssl-issuer csi` refuses {kept:?}: {e}");
    }
}

/// Every verb the plugin's code calls the API server with, found in `src/csi/` (tests left
/// out), and the resources of the `Api<...>` it calls them on. A new call fails this test until
/// the plugin's ClusterRole (chart and component) grants it.
fn verbs_and_resources_in_code() -> (BTreeSet<&'static str>, BTreeSet<&'static str>) {
    const CALLS: &[(&str, &[&str])] = &[
        (".create(", &["create"]),
        (".get(", &["get"]),
        (".get_opt(", &["get"]),
        (".get_metadata_opt(", &["get"]),
        (".list(", &["list"]),
        ("watcher(", &["list", "watch"]),
        (".delete(", &["delete"]),
        (".delete_collection(", &["deletecollection"]),
        (".patch(", &["patch"]),
        (".replace(", &["update"]),
    ];
    const TYPES: &[(&str, &str)] = &[
        ("Api<CertificateRequest>", "certificaterequests"),
        ("Api<Event>", "events"),
        ("Api<Pod>", "pods"),
    ];
    let mut files = Vec::new();
    let mut dirs = vec![repo().join("src/csi")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src/csi") {
            let path = entry.expect("entry").path();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if file != "tests" {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && file != "tests.rs"
                && file != "testing.rs"
            {
                files.push(path);
            }
        }
    }
    let (mut verbs, mut resources) = (BTreeSet::new(), BTreeSet::new());
    for path in files {
        let text = std::fs::read_to_string(&path).expect("source");
        // Inline unit tests call fakes, not the API server.
        let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or_default();
        let uses_api = code.contains("Api<");
        for (call, granted) in CALLS {
            // `.get(` and `.create(` are also map and builder calls: count them only in files
            // holding an Api.
            if uses_api && code.contains(call) {
                verbs.extend(granted.iter().copied());
            }
        }
        let mut rest = code;
        while let Some(at) = rest.find("Api<") {
            let ty = &rest[at..rest[at..].find('>').map_or(rest.len(), |end| at + end + 1)];
            let resource = TYPES.iter().find(|(t, _)| *t == ty).unwrap_or_else(|| {
                panic!(
                    "{}: {ty} is new; add its resource here and its grant to the plugin's ClusterRole",
                    path.display()
                )
            });
            resources.insert(resource.1);
            rest = &rest[at + 4..];
        }
    }
    (verbs, resources)
}

/// What the plugin may do: its calls in `src/csi/issue.rs` and `src/csi/collect.rs`, cluster-wide.
fn plugin_grants() -> BTreeSet<Grant> {
    grants(
        "*",
        &[
            (
                "cert-manager.io",
                &["certificaterequests"],
                &["create", "get", "list", "watch", "delete", "deletecollection"],
            ),
            ("events.k8s.io", &["events"], &["create"]),
            ("", &["pods"], &["get"]),
        ],
    )
}

/// The plugin's objects, as `assert_only_dropped` names them.
fn plugin_objects() -> [String; 5] {
    [
        format!("CSIDriver {DRIVER}"),
        format!("DaemonSet {PLUGIN}"),
        format!("ServiceAccount {PLUGIN}"),
        format!("ClusterRole {PLUGIN}"),
        format!("ClusterRoleBinding {PLUGIN}"),
    ]
}

/// What an install's plugin must look like.
struct Plugin<'a> {
    kubelet: &'a str,
    data_dir: &'a str,
    registrar_image: &'a str,
    liveness_image: &'a str,
    health_port: u64,
    /// The plugin's `/metrics` port: its `--metrics-addr` and its container port `metrics`.
    metrics_port: u64,
    /// The flags expected among the plugin's arguments.
    args: &'a [&'a str],
}

const DEFAULTS: Plugin<'static> = Plugin {
    kubelet: "/var/lib/kubelet",
    data_dir: "/var/lib/cfssl-issuer-csi",
    registrar_image: "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0",
    liveness_image: "registry.k8s.io/sig-storage/livenessprobe:v2.19.0",
    health_port: 9809,
    metrics_port: 8080,
    args: &[
        "--endpoint=unix:///plugin/csi.sock",
        "--node-id=$(NODE_ID)",
        "--data-root=/csi-data-dir",
        "--issuance-timeout=60s",
        "--pending-max-age=1h",
        "--tmpfs-size=64Mi",
        "--max-volumes=256",
        "--max-concurrent-issuances=32",
    ],
};

fn container<'a>(pod: &'a Value, wanted: &str) -> &'a Value {
    pod["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == wanted)
        .unwrap_or_else(|| panic!("no container {wanted}"))
}

/// `path` with `.` and `..` resolved, as the kernel would (no symlinks).
fn cleaned(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

fn assert_not_under_tmp(path: &str) {
    let clean = cleaned(path);
    for tmp in ["/tmp", "/var/tmp"] {
        assert!(
            clean != tmp && !clean.starts_with(&format!("{tmp}/")),
            "the data directory {path} is under {tmp}, which cleaners empty"
        );
    }
}

/// The plugin's objects in `docs`, for an install in `namespace`.
fn assert_plugin(docs: &[Value], namespace: &str, want: &Plugin) {
    assert_no_wildcards(docs);

    let driver = one(docs, "CSIDriver");
    assert_eq!(name(driver), DRIVER);
    assert_eq!(
        driver["spec"],
        serde_json::json!({
            "attachRequired": false,
            "podInfoOnMount": true,
            "volumeLifecycleModes": ["Ephemeral"],
            "requiresRepublish": false,
            "fsGroupPolicy": "None",
        }),
        "the CSIDriver's spec"
    );

    let ds = kind(docs, "DaemonSet")
        .into_iter()
        .find(|d| name(d) == PLUGIN)
        .expect("the plugin's DaemonSet");
    assert_eq!(ds["metadata"]["namespace"], namespace);
    let strategy = &ds["spec"]["updateStrategy"];
    assert_eq!(strategy["type"], "RollingUpdate");
    assert_eq!(
        strategy["rollingUpdate"]["maxUnavailable"], 0,
        "a node never loses its plugin during an update"
    );
    assert_eq!(strategy["rollingUpdate"]["maxSurge"], 1);
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], PLUGIN);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(pod[host].is_null() || pod[host] == false, "{host}");
    }

    // Privileged only where it mounts; every container read-only, no capability.
    let names: BTreeSet<&str> = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["csi-driver", "node-driver-registrar", "liveness-probe"])
    );
    for c in pod["containers"].as_array().unwrap() {
        let (cname, sc) = (c["name"].as_str().unwrap(), &c["securityContext"]);
        let driver = cname == "csi-driver";
        assert_eq!(
            sc["privileged"] == true,
            driver,
            "{cname}: privileged only on the plugin"
        );
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{cname}: read-only root");
        assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{cname}: drop ALL");
        assert!(
            sc["capabilities"]["add"].is_null(),
            "{cname}: no added capability"
        );
        if !driver {
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{cname}: no escalation");
        }
    }

    // Host paths, and Bidirectional propagation only on the plugin's pods and data mounts.
    let host_path = |volume: &str| -> &str {
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == volume)
            .and_then(|v| v["hostPath"]["path"].as_str())
            .unwrap_or_else(|| panic!("no hostPath volume {volume}"))
    };
    let mut bidirectional = BTreeSet::new();
    let mut mounts = BTreeMap::new();
    for c in pod["containers"].as_array().unwrap() {
        for m in c["volumeMounts"].as_array().expect("volumeMounts") {
            let volume = m["name"].as_str().unwrap();
            let at = (c["name"].as_str().unwrap(), m["mountPath"].as_str().unwrap());
            mounts.insert(at, host_path(volume));
            match m["mountPropagation"].as_str() {
                Some("Bidirectional") => {
                    bidirectional.insert((at.0, host_path(volume)));
                }
                None | Some("None") => {}
                other => panic!("{at:?}: mountPropagation {other:?}"),
            }
        }
    }
    let pods_dir = format!("{}/pods", want.kubelet);
    assert_eq!(
        bidirectional,
        BTreeSet::from([("csi-driver", pods_dir.as_str()), ("csi-driver", want.data_dir)]),
        "Bidirectional only on the plugin's pods directory and data directory"
    );
    assert_eq!(
        mounts[&("csi-driver", pods_dir.as_str())],
        pods_dir,
        "the pods directory at its host path"
    );
    let plugin_dir = format!("{}/plugins/{DRIVER}", want.kubelet);
    for c in ["csi-driver", "node-driver-registrar", "liveness-probe"] {
        assert_eq!(mounts[&(c, "/plugin")], plugin_dir, "{c}: the socket directory");
    }
    assert_eq!(
        mounts[&("node-driver-registrar", "/registration")],
        format!("{}/plugins_registry", want.kubelet)
    );
    assert_eq!(mounts[&("csi-driver", "/csi-data-dir")], want.data_dir);
    assert_not_under_tmp(want.data_dir);

    // The plugin's arguments, the socket the sidecars reach, the node's name.
    let plugin = container(pod, "csi-driver");
    let args = strings(&plugin["args"]);
    let driver_name = format!("--driver-name={DRIVER}");
    for arg in want.args.iter().copied().chain([driver_name.as_str()]) {
        assert!(args.contains(&arg), "{arg} in {args:?}");
    }
    assert_plugin_accepts(&args);
    let metrics = format!("--metrics-addr=0.0.0.0:{}", want.metrics_port);
    assert!(args.contains(&metrics.as_str()), "{metrics} in {args:?}");
    assert_eq!(
        plugin["ports"],
        serde_json::json!([{ "name": "metrics", "containerPort": want.metrics_port, "protocol": "TCP" }]),
        "the plugin's ports"
    );
    let data_root = args
        .iter()
        .find_map(|a| a.strip_prefix("--data-root="))
        .expect("--data-root");
    assert_eq!(
        mounts[&("csi-driver", data_root)],
        want.data_dir,
        "--data-root is the data directory"
    );
    let node_id = plugin["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "NODE_ID")
        .expect("NODE_ID");
    assert_eq!(node_id["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
    let registrar = container(pod, "node-driver-registrar");
    assert_eq!(registrar["image"], want.registrar_image);
    let registrar_args = strings(&registrar["args"]);
    assert!(
        registrar_args.contains(&"--csi-address=/plugin/csi.sock"),
        "{registrar_args:?}"
    );
    let registration = format!("--kubelet-registration-path={plugin_dir}/csi.sock");
    assert!(
        registrar_args.contains(&registration.as_str()),
        "{registrar_args:?}"
    );
    let liveness = container(pod, "liveness-probe");
    assert_eq!(liveness["image"], want.liveness_image);
    let liveness_args = strings(&liveness["args"]);
    assert!(
        liveness_args.contains(&"--csi-address=/plugin/csi.sock"),
        "{liveness_args:?}"
    );
    let port = format!("--health-port={}", want.health_port);
    assert!(liveness_args.contains(&port.as_str()), "{liveness_args:?}");
    assert_eq!(liveness["ports"][0]["containerPort"], want.health_port);
    let probe = &plugin["livenessProbe"]["httpGet"];
    assert_eq!(probe["path"], "/healthz");
    assert_eq!(
        probe["port"], want.health_port,
        "the plugin's probe asks the sidecar"
    );

    // Its own ServiceAccount, with exactly what the code does.
    let sa = kind(docs, "ServiceAccount")
        .into_iter()
        .find(|s| name(s) == PLUGIN)
        .expect("the plugin's ServiceAccount");
    assert_eq!(sa["metadata"]["namespace"], namespace);
    let granted = grants_of(docs, namespace, PLUGIN);
    assert_eq!(granted, plugin_grants(), "the plugin's RBAC");
    let (verbs, resources) = verbs_and_resources_in_code();
    let granted_verbs: BTreeSet<&str> = granted.iter().map(|g| g.3.as_str()).collect();
    let granted_resources: BTreeSet<&str> = granted.iter().map(|g| g.2.as_str()).collect();
    assert_eq!(granted_verbs, verbs, "the verbs src/csi/ calls, and no other");
    assert_eq!(
        granted_resources, resources,
        "the resources src/csi/ calls, and no other"
    );

    // The manager's selectors never take the plugin's pods.
    let labels = &ds["spec"]["template"]["metadata"]["labels"];
    let selected = |selector: &Value| {
        selector
            .as_object()
            .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| &labels[k] == v))
    };
    for d in kind(docs, "Deployment") {
        assert!(
            !selected(&d["spec"]["selector"]["matchLabels"]),
            "{} selects the plugin",
            name(d)
        );
    }
    for s in kind(docs, "Service") {
        assert!(
            !selected(&s["spec"]["selector"]),
            "{} selects the plugin",
            name(s)
        );
    }
    for p in kind(docs, "PodDisruptionBudget") {
        assert!(
            !selected(&p["spec"]["selector"]["matchLabels"]),
            "{} selects the plugin",
            name(p)
        );
    }
}

/// The manager keeps exactly its grants beside the plugin.
fn assert_manager_unchanged(docs: &[Value], manager_sa: &str) {
    let mut expected = manager_grants();
    expected.extend(kubernetes_csr_grants(KubernetesCsr::AllSigners));
    expected.extend(leader_election_grants(NAMESPACE));
    assert_eq!(
        grants_of(docs, NAMESPACE, manager_sa),
        expected,
        "the manager's RBAC"
    );
}

// ---------------------------------------------------------------------------------------------
// Chart

#[test]
fn chart_csi_disabled_by_default_renders_none_of_the_plugin() {
    let values: Value = serde_saphyr::from_str(&read(format!("{CHART}/values.yaml"))).expect("values.yaml");
    assert_eq!(values["csi"]["enabled"], false, "off by default");
    let dropped = plugin_objects();
    let dropped: Vec<&str> = dropped.iter().map(String::as_str).collect();
    assert_only_dropped(&chart_case("csi-defaults"), &chart_case("default"), &dropped);
    assert!(
        !chart_notes("default").contains("pod-security"),
        "no label step without the plugin"
    );
}

#[test]
fn chart_csi_defaults_render_the_plugin() {
    let docs = chart_case("csi-defaults");
    assert_plugin(&docs, NAMESPACE, &DEFAULTS);
    assert_manager_unchanged(&docs, "cfssl-issuer");
    let pod = &one(&docs, "DaemonSet")["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    assert_eq!(
        container(pod, "csi-driver")["image"],
        one(&docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    );
    let notes = chart_notes("csi-defaults");
    assert!(
        notes.contains(&format!(
            "kubectl label namespace {NAMESPACE} pod-security.kubernetes.io/enforce=privileged"
        )),
        "NOTES give the namespace label step:\n{notes}"
    );
}

#[test]
fn chart_csi_values_reach_the_plugin() {
    let docs = chart_case("csi");
    assert_plugin(
        &docs,
        NAMESPACE,
        &Plugin {
            kubelet: "/var/lib/k0s/kubelet",
            data_dir: "/var/lib/cfssl-issuer-csi-test",
            registrar_image: "registry.example.org/sig-storage/csi-node-driver-registrar:v2.16.0",
            liveness_image: "registry.example.org/sig-storage/livenessprobe:v2.18.0",
            health_port: 9810,
            metrics_port: 9402,
            args: &[
                "--issuance-timeout=90s",
                "--pending-max-age=30m",
                "--tmpfs-size=32Mi",
                "--mount-context=system_u:object_r:container_file_t:s0",
                "--max-volumes=110",
                "--max-concurrent-issuances=8",
            ],
        },
    );
    let pod = &one(&docs, "DaemonSet")["spec"]["template"]["spec"];
    assert!(
        pod["priorityClassName"].is_null(),
        "priorityClassName \"\" renders none"
    );
    assert_eq!(pod["tolerations"][0]["operator"], "Exists");
    let defaults = chart_case("csi-defaults");
    let default_args = strings(
        &container(
            &one(&defaults, "DaemonSet")["spec"]["template"]["spec"],
            "csi-driver",
        )["args"],
    );
    assert!(
        !default_args.iter().any(|a| a.starts_with("--mount-context")),
        "an empty mountContext passes no flag: {default_args:?}"
    );
}

/// The plugin pods are scraped by a PodMonitor when asked (a DaemonSet has no Service), on the
/// port the plugin serves; the scrape annotations follow the manager's `metrics` value.
#[test]
fn chart_csi_pod_monitor_scrapes_the_plugin_pods() {
    let docs = chart_case("csi");
    let monitor = one(&docs, "PodMonitor");
    let ds = one(&docs, "DaemonSet");
    let pod_labels = &ds["spec"]["template"]["metadata"]["labels"];
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels");
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(
            &pod_labels[key], value,
            "the PodMonitor selects the plugin pods by {key}"
        );
    }
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"],
        serde_json::json!([NAMESPACE])
    );
    assert_eq!(
        monitor["spec"]["podMetricsEndpoints"],
        serde_json::json!([{ "port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s" }])
    );
    let annotations = &ds["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/port"], "9402");
    assert!(
        kind(&chart_case("csi-defaults"), "PodMonitor").is_empty(),
        "no PodMonitor unless asked"
    );
}

/// The chart's defaults are the binary's, where the binary has a default.
#[test]
fn chart_csi_defaults_are_the_flags_defaults() {
    let flags = Csi::try_parse_from(["cfssl-issuer", "--node-id=node-1"])
        .expect("defaults")
        .csi;
    let values: Value = serde_saphyr::from_str(&read(format!("{CHART}/values.yaml"))).expect("values.yaml");
    let csi = &values["csi"];
    let duration =
        |key: &str| cfssl_issuer::manager::parse_duration(csi[key].as_str().expect(key)).expect("a duration");
    assert_eq!(csi["driverName"], flags.driver_name.as_str());
    assert_eq!(duration("issuanceTimeout"), flags.issuance_timeout);
    assert_eq!(duration("pendingMaxAge"), flags.pending_max_age);
    assert_eq!(flags.endpoint, "unix:///plugin/csi.sock");
    assert_eq!(flags.data_root, Path::new("/csi-data-dir"));
    assert_eq!(csi["metrics"]["port"], flags.metrics_addr.port());
}

/// A data directory under /tmp or /var/tmp is refused: by values.schema.json, and by the chart
/// itself for a spelling the schema's pattern misses.
#[test]
fn chart_refuses_a_csi_data_dir_under_tmp() {
    for (file, says) in [
        ("csi-data-dir-tmp-values.yaml", "at '/csi/dataDir'"),
        ("csi-data-dir-var-tmp-values.yaml", "at '/csi/dataDir'"),
        (
            "csi-data-dir-dotdot-tmp-values.yaml",
            "is under /tmp, whose cleaners delete the plugin's volumes",
        ),
    ] {
        let path = repo().join("tests/deploy_manifests/refused").join(file);
        let out = Command::new(chart_python())
            .arg(repo().join("scripts/chart-lint.py"))
            .arg("--values")
            .arg(&path)
            .output()
            .expect("start scripts/chart-lint.py");
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "{file} must be refused:\n{report}");
        assert!(report.contains(says), "{file}: {says:?} in\n{report}");
    }
}

// ---------------------------------------------------------------------------------------------
// kustomize

#[test]
fn kustomize_csi_driver_component_installs_the_plugin() {
    let docs = overlay_with("csi-driver", &["csi-driver"]);
    assert_plugin(&docs, NAMESPACE, &DEFAULTS);
    assert_manager_unchanged(&docs, "cfssl-issuer-controller-manager");
    let namespace = one(&docs, "Namespace");
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "privileged",
        "the plugin's namespace admits privileged pods"
    );
    let deploy = one(&docs, "Deployment");
    assert_hardened(deploy, true);
    let pod = &one(&docs, "DaemonSet")["spec"]["template"]["spec"];
    assert_eq!(
        container(pod, "csi-driver")["image"],
        deploy["spec"]["template"]["spec"]["containers"][0]["image"],
        "the manager's image"
    );
    let dropped = plugin_objects();
    let dropped: Vec<&str> = dropped.iter().map(String::as_str).collect();
    assert_only_dropped(&docs, &kustomize(&repo().join("config/default")), &dropped);
}

/// The component and the chart's defaults make the same plugin.
#[test]
fn kustomize_csi_driver_component_is_the_charts_defaults() {
    let kustomized = overlay_with("csi-driver-vs-chart", &["csi-driver"]);
    let chart = chart_case("csi-defaults");
    let spec = |docs: &[Value], kind_: &str| {
        let doc = kind(docs, kind_)
            .into_iter()
            .find(|d| name(d) == PLUGIN || name(d) == DRIVER)
            .unwrap_or_else(|| panic!("no {kind_}"));
        match kind_ {
            "DaemonSet" => serde_json::json!({
                "pod": doc["spec"]["template"]["spec"],
                "updateStrategy": doc["spec"]["updateStrategy"],
            }),
            "ClusterRole" => doc["rules"].clone(),
            _ => doc["spec"].clone(),
        }
    };
    for kind_ in ["CSIDriver", "DaemonSet", "ClusterRole"] {
        assert_eq!(spec(&kustomized, kind_), spec(&chart, kind_), "{kind_}");
    }
}

/// It composes with the other components, listed after them.
#[test]
fn kustomize_csi_driver_component_composes_with_standalone_and_namespace_scoped() {
    let docs = overlay_with(
        "csi-driver-standalone",
        &["certificate-controllers", "csi-driver"],
    );
    assert_plugin(&docs, NAMESPACE, &DEFAULTS);
    assert_standalone_parts(&docs, true, true);
    let docs = overlay_with("csi-driver-scoped", &["namespace-scoped", "csi-driver"]);
    assert_plugin(&docs, NAMESPACE, &DEFAULTS);
}
