//! The real thing, for comparison: a throwaway `multirootca` from Debian's golang-cfssl on
//! 127.0.0.1, started by `scripts/multirootca-lab.sh` with the same labels, profiles and key
//! as [`crate::Config::test_default`]. Tests, benches and the e2e suite share this one launcher.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context as _, ensure};

/// A running multirootca; dropping it stops the process.
pub struct Multirootca {
    /// `http://` or, with TLS, `https://127.0.0.1:<port>`.
    pub url: String,
    /// The root every label chains to (and, with TLS, the CA of the server certificate).
    pub root_pem: String,
    pub pid: u32,
    dir: tempfile::TempDir,
}

fn script() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/multirootca-lab.sh"
    ))
}

impl Multirootca {
    /// Whether the CFSSL on PATH signs Ed25519 keys: releases from 1.5.0 do (cfssl PR #1077);
    /// Debian's golang-cfssl (1.2.0, 2016) does not.
    pub fn signs_ed25519() -> bool {
        let Ok(out) = Command::new("cfssl").arg("version").output() else {
            return false;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text
            .lines()
            .find_map(|l| l.strip_prefix("Version: "))
            .unwrap_or_default();
        let mut parts = version.trim().split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (1, 5)
    }

    /// Whether `multirootca` and `cfssl` are on PATH.
    pub fn installed() -> bool {
        Command::new("sh")
            .args(["-c", "command -v multirootca && command -v cfssl"])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Builds a root and two intermediates and starts multirootca on a free port. The port is
    /// free when chosen, yet another process may bind it before multirootca does; the lab then
    /// fails (it waits for multirootca's own listener) and starts again on another port.
    pub fn start(tls: bool) -> anyhow::Result<Multirootca> {
        ensure!(
            Self::installed(),
            "multirootca and cfssl are needed: apt-get install golang-cfssl"
        );
        let mut attempt = 1;
        loop {
            match Self::start_once(tls) {
                Err(err) if attempt < 3 && format!("{err:#}").contains("address already in use") => {
                    eprintln!("multirootca start {attempt}: its port was taken meanwhile; again on another");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    fn start_once(tls: bool) -> anyhow::Result<Multirootca> {
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut command = Command::new(script());
        command.arg("start").arg(dir.path()).arg(port.to_string());
        if tls {
            command.arg("tls");
        }
        let out = command.output().context("run scripts/multirootca-lab.sh")?;
        ensure!(
            out.status.success(),
            "multirootca lab failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8(out.stdout)?;
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name))
                .map(str::to_string)
                .with_context(|| format!("no {name} in {line:?}"))
        };
        Ok(Multirootca {
            url: field("URL=")?,
            root_pem: std::fs::read_to_string(field("CA=")?)?,
            pid: field("PID=")?.parse()?,
            dir,
        })
    }
}

impl Drop for Multirootca {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(self.dir.path()).status();
    }
}
