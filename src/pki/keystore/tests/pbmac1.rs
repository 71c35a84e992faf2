//! `Modern2026` stores (PBMAC1, RFC 9579) read by go-pkcs12, the library cert-manager writes
//! them with: OpenSSL 3.0 and Java 17 cannot check a PBMAC1 MAC. The reader is
//! tests/go/pkcs12check, built here from go-pkcs12's module through the Go module proxy when Go
//! is installed (once per source, cached in the temp directory).

use std::sync::OnceLock;

use super::*;

const CHECKER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/go/pkcs12check");

/// The built checker, or `None` when Go is not installed (the go-pkcs12 rows are then skipped
/// with a note; the other checks still run).
fn checker() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(build_checker).as_deref()
}

fn build_checker() -> Option<PathBuf> {
    if Command::new("go").arg("version").output().is_err() {
        eprintln!("go is not installed: the go-pkcs12 checks of Modern2026 stores are skipped");
        return None;
    }
    let sources: Vec<(&str, Vec<u8>)> = ["go.mod", "main.go"]
        .into_iter()
        .map(|name| (name, std::fs::read(Path::new(CHECKER).join(name)).unwrap()))
        .collect();
    let hash = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &sources.concat_bytes());
    let dir = std::env::temp_dir().join(format!(
        "cfssl-issuer-pkcs12check-{}",
        hex::encode(&hash.as_ref()[..8])
    ));
    let binary = dir.join("pkcs12check");
    if binary.exists() {
        return Some(binary);
    }
    let work = tempfile::tempdir().unwrap();
    for (name, bytes) in &sources {
        std::fs::write(work.path().join(name), bytes).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    let partial = dir.join(format!("pkcs12check.{}", std::process::id()));
    let output = Command::new("go")
        .args(["build", "-trimpath", "-o"])
        .arg(&partial)
        .arg(".")
        .current_dir(work.path())
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "go build of {CHECKER}: {}",
        text(&output)
    );
    std::fs::rename(&partial, &binary).unwrap();
    Some(binary)
}

trait ConcatBytes {
    fn concat_bytes(&self) -> Vec<u8>;
}

impl ConcatBytes for Vec<(&str, Vec<u8>)> {
    fn concat_bytes(&self) -> Vec<u8> {
        self.iter().flat_map(|(_, b)| b.iter().copied()).collect()
    }
}

/// What go-pkcs12 reads in the store at `path` (`keystore` or `truststore`), or its refusal.
fn go_reads(checker: &Path, kind: &str, path: &Path, password: &str) -> Result<String, String> {
    let output = Command::new(checker)
        .args([kind, path.to_str().unwrap(), password])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let err = String::from_utf8_lossy(&output.stderr).trim().to_string();
    if output.status.success() {
        Ok(out)
    } else {
        Err(err)
    }
}

/// The MacData's PBMAC1 as go-pkcs12 writes it: the parameters (PBKDF2 with the 16-byte salt,
/// 2048 iterations, a 32-byte key, PRF HMAC-SHA256; MAC HMAC-SHA256, no NULL parameters), an
/// empty `macSalt` and `iterations` 0.
fn assert_pbmac1_mac_data(store: &[u8], what: &str) {
    use der::{Decode, Encode};
    let pfx = ::pkcs12::pfx::Pfx::from_der(store).unwrap();
    let mac = pfx.mac_data.unwrap();
    assert_eq!(
        mac.mac.algorithm.oid.to_string(),
        "1.2.840.113549.1.5.14",
        "{what}"
    );
    assert_eq!(mac.mac_salt.as_bytes(), b"", "{what}");
    assert_eq!(mac.iterations, 0, "{what}");
    assert_eq!(mac.mac.digest.as_bytes().len(), 32, "{what}");
    let params = mac.mac.algorithm.parameters.unwrap().to_der().unwrap();
    let hex = hex::encode(&params);
    // SEQUENCE { SEQUENCE { pbkdf2, SEQUENCE { salt, ... } }, SEQUENCE { hmacWithSHA256 } }
    let (before, after) = hex.split_at(34);
    assert_eq!(before, "3040303206092a864886f70d01050c3025", "{what}: {hex}");
    // salt: OCTET STRING of 16 bytes, then INTEGER 2048, INTEGER 32, hmacWithSHA256, hmacWithSHA256.
    assert_eq!(&after[..4], "0410", "{what}: {hex}");
    assert_eq!(
        &after[4 + 32..],
        "02020800020120300a06082a864886f70d0209300a06082a864886f70d0209",
        "{what}: {hex}"
    );
}

#[test]
fn modern2026_keystores_open_in_go_pkcs12_and_here() {
    let checker = checker();
    let keys = [
        (KeySpec::Rsa(2048), "*rsa.PrivateKey"),
        (KeySpec::Ecdsa(256), "*ecdsa.PrivateKey"),
        (KeySpec::Ecdsa(521), "*ecdsa.PrivateKey"),
        (KeySpec::Ed25519, "ed25519.PrivateKey"),
    ];
    for (spec, go_type) in keys {
        let what = format!("{spec:?}");
        let f = fixture(spec);
        let store = pkcs12_keystore(&f.key, &f.chain, &f.ca, PASSWORD, Pkcs12Profile::Modern2026).unwrap();
        assert_pbmac1_mac_data(&store, &what);
        assert_eq!(pkcs12_check(&store, PASSWORD), Ok(()), "{what}");
        assert_eq!(pkcs12_check(&store, "wrong"), Err(Unopened::Password), "{what}");
        let path = f.write("keystore.p12", &store);
        let Some(checker) = checker else { continue };
        let want = format!("key {go_type}\nleaf app\nca Intermediate\nca Root CA\n");
        assert_eq!(go_reads(checker, "keystore", &path, PASSWORD), Ok(want), "{what}");
        let refused = go_reads(checker, "keystore", &path, "wrong");
        assert_eq!(
            refused,
            Err("pkcs12: decryption password incorrect".to_string()),
            "{what}"
        );
    }
}

#[test]
fn modern2026_truststores_open_in_go_pkcs12_and_here() {
    let f = fixture(KeySpec::Ecdsa(256));
    let two_cas = vec![f.ca[0].clone(), f.chain[1].clone()];
    let store = pkcs12_truststore(&two_cas, PASSWORD, Pkcs12Profile::Modern2026)
        .unwrap()
        .unwrap();
    assert_pbmac1_mac_data(&store, "truststore");
    assert_eq!(pkcs12_check(&store, PASSWORD), Ok(()));
    assert_eq!(pkcs12_check(&store, "wrong"), Err(Unopened::Password));
    let path = f.write("truststore.p12", &store);
    if let Some(checker) = checker() {
        let want = "ca Root CA\nca Intermediate\n".to_string();
        assert_eq!(go_reads(checker, "truststore", &path, PASSWORD), Ok(want));
    }
}

/// OpenSSL 3.0 cannot check PBMAC1 but decrypts the bags when told not to verify the MAC:
/// certificates and key are `Modern2023`'s PBES2, AES-256-CBC, PBKDF2-HMAC-SHA256.
#[test]
fn modern2026_bags_are_modern2023s_for_openssl() {
    let f = fixture(KeySpec::Ecdsa(256));
    let store = pkcs12_keystore(&f.key, &f.chain, &f.ca, PASSWORD, Pkcs12Profile::Modern2026).unwrap();
    let path = f.write("keystore.p12", &store);
    let pass = format!("pass:{PASSWORD}");
    let output = run(
        "openssl",
        &[
            "pkcs12",
            "-info",
            "-nodes",
            "-nomacver",
            "-in",
            path.to_str().unwrap(),
            "-passin",
            &pass,
        ],
    );
    let info = text(&output);
    assert!(output.status.success(), "{info}");
    for line in [
        "PKCS7 Encrypted data: PBES2, PBKDF2, AES-256-CBC, Iteration 2048, PRF hmacWithSHA256",
        "Shrouded Keybag: PBES2, PBKDF2, AES-256-CBC, Iteration 2048, PRF hmacWithSHA256",
    ] {
        assert!(info.contains(line), "no {line:?} in\n{info}");
    }
    let want_certs: Vec<Vec<u8>> = f.chain.iter().chain(&f.ca).cloned().collect();
    assert_eq!(blocks(&info, "CERTIFICATE"), want_certs);
}

/// A stored PBMAC1 store's check cost is capped as the other MACs' are.
#[test]
fn pbmac1_checks_refuse_costs_over_the_caps() {
    let f = fixture(KeySpec::Ecdsa(256));
    let store = pkcs12_truststore(&f.ca, PASSWORD, Pkcs12Profile::Modern2026)
        .unwrap()
        .unwrap();
    // The iteration count inside the PBMAC1 parameters: INTEGER 2048 -> 2049 (over the cap).
    let at = store
        .windows(4)
        .rposition(|w| w == [0x02, 0x02, 0x08, 0x00])
        .unwrap();
    let mut over = store.clone();
    over[at + 3] = 0x01;
    assert_eq!(
        pkcs12_check(&over, PASSWORD),
        Err(Unopened::MacIterations {
            count: 2049,
            max: 2048
        })
    );
    // The key length: 32 -> 16, shorter than RFC 9579 allows (a short MAC can be forged).
    let mut short = store.clone();
    short[at + 6] = 0x10;
    assert_eq!(pkcs12_check(&short, PASSWORD), Err(Unopened::Unreadable));
    // The MAC's last byte (the store ends `macSalt` 04 00, `iterations` 02 01 00).
    let mut tampered = store;
    let last = tampered.len() - 6;
    tampered[last] ^= 1;
    assert_eq!(pkcs12_check(&tampered, PASSWORD), Err(Unopened::Password));
}
