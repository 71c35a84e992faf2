//! The manager binary, run as a child process as users run it.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// How to start a manager.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    pub kubeconfig: PathBuf,
    pub cluster_resource_namespace: String,
    /// Extra `run` flags, e.g. `--enable-leader-election`.
    pub args: Vec<String>,
    /// Extra environment, e.g. `SSL_CERT_FILE`.
    pub env: Vec<(String, String)>,
    /// Wait for `/readyz` before returning from [`Manager::start`].
    pub wait_ready: bool,
}

impl ManagerOptions {
    pub fn new(kubeconfig: &Path, cluster_resource_namespace: &str) -> Self {
        ManagerOptions {
            kubeconfig: kubeconfig.to_path_buf(),
            cluster_resource_namespace: cluster_resource_namespace.into(),
            args: Vec::new(),
            env: Vec::new(),
            wait_ready: true,
        }
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// A running `cfssl-issuer run`; dropping it kills the process.
pub struct Manager {
    child: Child,
    pub health_addr: String,
    pub metrics_addr: String,
    log_path: PathBuf,
    _dir: tempfile::TempDir,
}

fn free_addr() -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.to_string())
}

impl Manager {
    /// Starts the manager on two free ports. A port is free when picked, but another process
    /// may take it before the manager binds it; that start (EADDRINUSE, os error 98) is retried
    /// on fresh ports.
    pub async fn start(options: ManagerOptions) -> anyhow::Result<Manager> {
        let mut attempt = 1;
        loop {
            match Manager::start_once(&options).await {
                Err(err) if attempt < 3 && format!("{err:#}").contains("os error 98") => {
                    eprintln!("manager start {attempt}: a port was taken meanwhile; again on others");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn start_once(options: &ManagerOptions) -> anyhow::Result<Manager> {
        let dir = tempfile::tempdir()?;
        let log_path = dir.path().join("manager.log");
        let log = std::fs::File::create(&log_path)?;
        let health_addr = free_addr()?;
        let metrics_addr = free_addr()?;
        let mut command = Command::new(manager_binary());
        command
            .arg("run")
            .arg("--cluster-resource-namespace")
            .arg(&options.cluster_resource_namespace)
            .arg("--health-addr")
            .arg(&health_addr)
            .arg("--metrics-addr")
            .arg(&metrics_addr)
            .args(&options.args)
            .env("KUBECONFIG", &options.kubeconfig)
            .env(
                "RUST_LOG",
                std::env::var("E2E_MANAGER_LOG").unwrap_or_else(|_| "info".into()),
            )
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        let child = command.spawn().context("start the manager binary")?;
        let mut manager = Manager {
            child,
            health_addr,
            metrics_addr,
            log_path,
            _dir: dir,
        };
        if options.wait_ready {
            manager.wait_ready(Duration::from_secs(60)).await?;
        }
        Ok(manager)
    }

    /// Waits until `/readyz` answers 200; fails early if the process exits.
    pub async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!(
                    "manager exited with {status} before it was ready:\n{}",
                    self.log()
                );
            }
            if matches!(self.probe("/readyz").await, Ok((200, _))) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!("manager not ready after {timeout:?}:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// GET on the health address: `(status, body)`.
    pub async fn probe(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let (status, _, body) = http_get(&self.health_addr, path).await?;
        Ok((status, body))
    }

    /// The Prometheus text exposition from `/metrics`.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        let (status, _, body) = http_get(&self.metrics_addr, "/metrics").await?;
        anyhow::ensure!(status == 200, "/metrics answered {status}");
        Ok(body)
    }

    /// Everything the manager logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Kills the process at once (SIGKILL), as an OOM kill or a node loss would.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    /// Sends SIGTERM, as the kubelet does, and waits up to `grace` for the exit.
    pub async fn terminate(&mut self, grace: Duration) -> anyhow::Result<ExitStatus> {
        let pid = self.pid().context("manager already exited")?;
        let status = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()?;
        anyhow::ensure!(status.success(), "kill -TERM {pid} failed");
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => Ok(status?),
            Err(_) => anyhow::bail!("manager still running {grace:?} after SIGTERM:\n{}", self.log()),
        }
    }

    /// Waits for the process to exit by itself.
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .with_context(|| format!("manager still running after {timeout:?}"))?
            .map_err(Into::into)
    }

    /// Resident memory now, in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> Option<u64> {
        self.proc_status("VmRSS:")
    }

    /// Peak resident memory, in KiB (`VmHWM`).
    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.proc_status("VmHWM:")
    }

    fn proc_status(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

/// A minimal HTTP/1.1 GET, enough for the probe and metrics endpoints:
/// `(status, content type, body)`.
pub(super) async fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String, String)> {
    let mut stream =
        tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr)).await??;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await??;
    let text = String::from_utf8(raw).context("response is not UTF-8")?;
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP header end")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status")?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((status, header("content-type").unwrap_or_default(), body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The `cfssl-issuer` binary: `CFSSL_ISSUER_BIN`, or the one cargo built next to this test,
/// built on first use when missing (`cargo test -p e2e` alone does not build it).
pub fn manager_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("CFSSL_ISSUER_BIN") {
                return PathBuf::from(path);
            }
            let exe = std::env::current_exe().expect("current exe");
            // target/<profile>/deps/<test> or target/<profile>/<bin>
            let mut dir = exe.parent().expect("exe dir").to_path_buf();
            if dir.ends_with("deps") {
                dir.pop();
            }
            let path = dir.join("cfssl-issuer");
            if !path.exists() {
                let release = dir.ends_with("release");
                let mut cargo =
                    std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
                cargo.args(["build", "-p", "cfssl-issuer", "--bin", "cfssl-issuer"]);
                if release {
                    cargo.arg("--release");
                }
                let status = cargo.status().expect("run cargo build");
                assert!(status.success(), "cargo build of cfssl-issuer failed");
            }
            path
        })
        .clone()
}
