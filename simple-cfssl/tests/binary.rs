//! The `simple-cfssl` binary: the lines it prints, the files it writes, clean shutdown.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// Starts the binary and reads its announcement lines (`NAME=value`) until `URL=` and `CA=`
/// and, with TLS, `TLS_CA=` are in.
fn start(args: &[&str]) -> (Child, Vec<(String, String)>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_simple-cfssl"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let want = if args.contains(&"--tls") { 3 } else { 2 };
    let mut facts = Vec::new();
    while facts.len() < want {
        let line = lines.next().expect("announcement line").unwrap();
        let (name, value) = line.split_once('=').expect("NAME=value");
        facts.push((name.to_string(), value.to_string()));
    }
    (child, facts)
}

fn fact<'a>(facts: &'a [(String, String)], name: &str) -> &'a str {
    &facts.iter().find(|(n, _)| n == name).unwrap().1
}

/// Sends SIGTERM to the child this test started, by its id, and waits for a clean exit.
fn terminate(mut child: Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    for _ in 0..100 {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("simple-cfssl did not stop on SIGTERM");
}

#[tokio::test]
async fn announces_url_and_ca_then_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let (child, facts) = start(&["--dir", dir_arg, "--key", KEY, "--label", "only"]);
    let names: Vec<&str> = facts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["URL", "CA"]);
    let url = fact(&facts, "URL");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert_eq!(fact(&facts, "CA"), dir.path().join("root.pem").to_str().unwrap());
    assert!(dir.path().join("labels/only.pem").exists());
    let reply = call(
        &http(None),
        "POST",
        &format!("{url}{INFO}"),
        br#"{"label":"only"}"#.to_vec(),
    )
    .await;
    assert_eq!(reply.status, 200);
    terminate(child);
}

#[tokio::test]
async fn tls_and_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ca.yaml");
    std::fs::write(
        &config,
        format!(
            "labels: [edge]\ndefault_label: edge\nprofiles:\n  - {{name: default, expiry: 1h, usages: [signing, server auth], auth_key: \"{KEY}\"}}\ndir: {}\n",
            dir.path().join("out").display()
        ),
    )
    .unwrap();
    let (child, facts) = start(&[
        "--config",
        config.to_str().unwrap(),
        "--tls",
        "--tls-host",
        "127.0.0.1",
    ]);
    let url = fact(&facts, "URL");
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let tls_ca = std::fs::read_to_string(fact(&facts, "TLS_CA")).unwrap();
    let reply = call(
        &http(Some(&tls_ca)),
        "POST",
        &format!("{url}{INFO}"),
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(reply.json()["result"]["expiry"], "1h");
    assert!(fact(&facts, "CA").ends_with("out/root.pem"));
    terminate(child);
}

#[test]
fn print_config_round_trips() {
    let out = Command::new(env!("CARGO_BIN_EXE_simple-cfssl"))
        .args(["--print-config", "--key", KEY, "--listen", "0.0.0.0:8888"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let config: simple_cfssl::Config = serde_saphyr::from_slice(&out.stdout).unwrap();
    let mut want = simple_cfssl::Config::test_default(KEY);
    want.listen = "0.0.0.0:8888".into();
    assert_eq!(config, want);
}

#[test]
fn bad_config_exits_non_zero() {
    let out = Command::new(env!("CARGO_BIN_EXE_simple-cfssl"))
        .args(["--key", "zz", "--dir", "/nonexistent/x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("auth_key is not hex"));
}
