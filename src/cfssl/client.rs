//! The HTTP side of the CFSSL client.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::{Engine, engine::general_purpose::STANDARD};
use prometheus_client::metrics::counter::Counter;
use reqwest::Url;
use serde::de::DeserializeOwned;

use super::answer::{ErrorContext, ReadError, read_limited};
use super::endpoints::{display_base, redact_list};
use super::error::{Attempt, Call, Class, Error, Failure, IssuerFault, MalformedAnswer, NoCertificate};
use super::wire::{AuthSignRequest, InfoRequest, InfoResult, SignRequest, SignResult};
use super::{AUTHSIGN_PATH, AuthKey, Endpoints, EndpointsError, HostPolicy, INFO_PATH, Trust, trust};
use crate::clock::{Clock, lock, system_clock};
use crate::pki::{Chain, certificates_in, check_csr_pem, check_not_expired, complete_chain};

/// Everything a [`Client`] needs; built from an issuer's spec and its Secret.
#[derive(Clone)]
pub struct ClientConfig {
    /// Comma-separated base URLs, tried in order; `user:password@` is sent as basic auth.
    pub url: String,
    pub label: String,
    /// Empty means the CA's `default` profile.
    pub profile: String,
    /// Ask the CA for its chain (servers with cfssl PR #1218); otherwise the chain is completed
    /// from the signer certificate.
    pub bundle: bool,
    pub key: AuthKey,
    /// PEM certificates trusted for TLS to the CA, instead of the system roots (and
    /// `SSL_CERT_FILE`), so that trust can be pinned to one CA.
    pub ca_bundle_pem: Option<Vec<u8>>,
    pub timeout: Duration,
    pub max_response_bytes: usize,
    /// Counts sign requests a CA took but did not answer in time before the client failed over
    /// to the next URL: each may have been signed there too (a possible duplicate signature).
    /// The controllers pass their metric's counter; by default nobody reads it.
    pub unanswered_signs: Counter,
    /// Now, for the timestamp of each authsign token.
    pub clock: Clock,
    /// Which hosts the URLs may name and whether answers are quoted (see [`trust`]).
    pub hosts: HostPolicy,
}

/// Written by hand: the URL may carry a password and the key is secret; the metric counter and
/// the clock are left out.
impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("url", &redact_list(&self.url))
            .field("label", &self.label)
            .field("profile", &self.profile)
            .field("bundle", &self.bundle)
            .field("key", &self.key)
            .field("ca_bundle_pem", &self.ca_bundle_pem.as_ref().map(Vec::len))
            .field("timeout", &self.timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl ClientConfig {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1 << 20;

    pub fn new(url: impl Into<String>, label: impl Into<String>, key: AuthKey) -> Self {
        Self {
            url: url.into(),
            label: label.into(),
            profile: String::new(),
            bundle: false,
            key,
            ca_bundle_pem: None,
            timeout: Self::DEFAULT_TIMEOUT,
            max_response_bytes: Self::DEFAULT_MAX_RESPONSE_BYTES,
            unanswered_signs: Counter::default(),
            clock: system_clock(),
            hosts: HostPolicy::Admin,
        }
    }
}

/// The signer as `/info` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// PEM certificate of the signer behind the label.
    pub certificate: String,
    pub usages: Vec<String>,
    pub expiry: String,
    /// The base URL that answered.
    pub endpoint: String,
}

/// A passed health check: the CA is up and accepts our label, profile and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub info: Info,
}

/// A signed certificate with its chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub chain: Chain,
    /// The leaf's `notAfter` (seconds since the epoch), read by the expiry check.
    pub not_after: Option<i64>,
    /// The base URL that signed.
    pub endpoint: String,
}

/// The largest `caBundle` read: cert-manager's largest bundle (150 CAs of about 2,200 bytes).
/// The issuer cache cuts a longer one to one byte over this, so this check still sees it.
pub const MAX_CA_BUNDLE: usize = crate::certificates::decode::MAX_BUNDLE_PEM;

/// A `caBundle` over [`MAX_CA_BUNDLE`].
#[derive(Debug, thiserror::Error)]
#[error("it is over the {MAX_CA_BUNDLE} bytes this manager reads")]
struct BundleTooLarge;

/// A client for one issuer: one label, profile and key against an ordered list of URLs.
#[derive(Debug)]
pub struct Client {
    http: reqwest::Client,
    endpoints: Endpoints,
    failover: super::Failover,
    config: ClientConfig,
    /// DER of the signer certificate from the last `/info`, used to complete chains.
    signer: Mutex<Option<Arc<Vec<u8>>>>,
    /// Whether answers that are not CFSSL's are quoted in messages.
    quote: bool,
}

impl Client {
    pub fn new(config: ClientConfig) -> Result<Self, Error> {
        crate::install_crypto_provider();
        let endpoints = Endpoints::parse(&config.url)?;
        let quote = match trust(&config.hosts, endpoints.iter()) {
            Trust::Refused { host } => return Err(Error::HostNotAllowed { host }),
            Trust::Quoted => true,
            Trust::Unquoted => false,
        };
        let mut builder = reqwest::Client::builder()
            // A redirect is an error (see `Failure::Redirect`), not a new request.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("cfssl-issuer/", env!("CARGO_PKG_VERSION")))
            .no_proxy();
        if let Some(pem) = &config.ca_bundle_pem {
            if pem.len() > MAX_CA_BUNDLE {
                return Err(Error::CaBundle(Box::new(BundleTooLarge)));
            }
            let certs =
                reqwest::Certificate::from_pem_bundle(pem).map_err(|e| Error::CaBundle(Box::new(e)))?;
            if certs.is_empty() {
                return Err(Error::CaBundle(Box::new(NoCertificate)));
            }
            builder = builder.tls_certs_only(certs);
        }
        let http = builder.build().map_err(Error::HttpClient)?;
        Ok(Self {
            http,
            failover: super::Failover::new(endpoints.len()),
            endpoints,
            config,
            signer: Mutex::new(None),
            quote,
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The URLs this client tries, in the configured order.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// `POST /api/v1/cfssl/info`: the signer certificate and profile policy. Unauthenticated.
    pub async fn info(&self) -> Result<Info, Error> {
        let body = InfoRequest {
            label: &self.config.label,
            profile: &self.config.profile,
        };
        let body = encode(Call::Info, &body)?;
        let (result, endpoint) = self
            .post::<InfoResult>(Call::Info, INFO_PATH, body, false)
            .await?;
        let signer = certificates_in(&result.certificate).map_err(|e| {
            self.attempt(Call::Info, &endpoint)
                .failed(Failure::Malformed(MalformedAnswer::SignerCertificate(e)))
        })?;
        *lock(&self.signer) = signer.into_iter().next().map(Arc::new);
        Ok(Info {
            certificate: result.certificate,
            usages: result.usages,
            expiry: result.expiry,
            endpoint,
        })
    }

    /// Health check that also proves the credentials: after `/info`, an authenticated
    /// `authsign` with an empty CSR is answered `invalid request` only when label, profile and
    /// key are all right, and nothing is issued.
    pub async fn check(&self) -> Result<Health, Error> {
        let info = self.info().await?;
        let outer = self.auth_request("", false)?;
        match self
            // The result is never looked at: skipped unread, not built into a tree of values (a
            // `serde_json::Value` took ~80 bytes per byte of `[{"a":0},...]`: 80 MiB for an
            // answer within the 1 MiB cap; found by tests/fuzz_parsers.rs).
            .post::<serde::de::IgnoredAny>(Call::AuthSign, AUTHSIGN_PATH, outer, false)
            .await
        {
            Err(err) if err.is_refusal("invalid request") => Ok(Health { info }),
            Err(err) => Err(probe_error(err)),
            Ok((_, endpoint)) => Err(self
                .attempt(Call::AuthSign, &endpoint)
                .failed(Failure::Malformed(MalformedAnswer::AcceptedEmptyCsr))),
        }
    }

    /// Signs a PEM CSR. The CSR is checked locally first, and the answer must be a
    /// certificate for the CSR's key; the chain is leaf first, then intermediates.
    pub async fn sign(&self, csr_pem: &[u8]) -> Result<Signed, Error> {
        let csr = check_csr_pem(csr_pem)?;
        let outer = self.auth_request(&csr.pem, self.config.bundle)?;
        let (result, endpoint) = match self
            .post::<SignResult>(Call::AuthSign, AUTHSIGN_PATH, outer, true)
            .await
        {
            Err(err) => {
                let err = self.disambiguate_bad_request(err).await;
                return Err(err.for_key_type(csr.key_type));
            }
            Ok(ok) => ok,
        };
        let bad_cert = |source| {
            self.attempt(Call::AuthSign, &endpoint)
                .failed(Failure::BadCertificate(source))
        };
        let chain = match &result.bundle {
            Some(b) => complete_chain(
                &result.certificate,
                Some((&b.bundle, b.root.as_deref())),
                None,
                &csr.public_key_der,
            ),
            None => {
                self.chain_from_signer(&result.certificate, &csr.public_key_der)
                    .await
            }
        }
        .map_err(bad_cert)?;
        let now = (self.config.clock)().as_second();
        let not_after = check_not_expired(&chain, now).map_err(bad_cert)?;
        Ok(Signed {
            chain,
            not_after,
            endpoint,
        })
    }

    /// Completes a leaf with the signer certificate, refreshing it once if the cached one did
    /// not issue the leaf (the CA may have rotated its intermediate). A failing `/info` after a
    /// successful signature keeps the leaf: losing an issued certificate is worse than a
    /// shorter chain.
    async fn chain_from_signer(&self, leaf: &str, csr_key: &[u8]) -> Result<Chain, crate::pki::ChainError> {
        let cached = lock(&self.signer).clone();
        if let Some(signer) = &cached {
            let chain = complete_chain(leaf, None, Some(signer.as_slice()), csr_key)?;
            if chain.has_issuer() {
                return Ok(chain);
            }
        }
        match self.info().await {
            Ok(_) => {
                let fresh = lock(&self.signer).clone();
                complete_chain(leaf, None, fresh.as_deref().map(Vec::as_slice), csr_key)
            }
            Err(err) => {
                tracing::warn!(error = %err, "signed, but the signer certificate is unavailable; chain is the leaf only");
                complete_chain(leaf, None, None, csr_key)
            }
        }
    }

    /// `call` to the base URL `url` (as displayed) for this client's label, for errors.
    fn attempt(&self, call: Call, url: &str) -> Attempt {
        Attempt::new(call, url, self.config.label.clone())
    }

    /// `bad request` from authsign means an unknown label or a refused CSR; `/info` tells which.
    async fn disambiguate_bad_request(&self, err: Error) -> Error {
        if !err.is_refusal("bad request") {
            return err;
        }
        let label_known =
            !matches!(self.info().await, Err(e) if e.class() == Class::Issuer(IssuerFault::Config));
        err.with_label_known(label_known)
    }

    /// The outer authsign body for `csr` (the inner request is signed exactly as sent).
    fn auth_request(&self, csr: &str, bundle: bool) -> Result<Vec<u8>, Error> {
        let inner = SignRequest {
            certificate_request: csr,
            label: &self.config.label,
            profile: &self.config.profile,
            bundle,
        };
        let inner = encode(Call::AuthSign, &inner)?;
        // Seconds since the epoch, never negative.
        let timestamp = (self.config.clock)().as_second().max(0);
        let outer = AuthSignRequest {
            timestamp,
            token: self.config.key.token(&inner),
            request: STANDARD.encode(&inner),
        };
        encode(Call::AuthSign, &outer)
    }

    /// POSTs `body` to `path` on each URL in order until one gives a definite answer. URLs
    /// that went quiet on an earlier request are tried last (see [`super::Failover`]).
    /// `signs`: the body carries a CSR, so a CA that went quiet may have signed it.
    async fn post<T: DeserializeOwned>(
        &self,
        call: Call,
        path: &str,
        body: Vec<u8>,
        signs: bool,
    ) -> Result<(T, String), Error> {
        let mut last = None;
        for (position, base) in self.failover.order(self.endpoints.iter()) {
            let result = self.post_once(call, base, path, body.clone()).await;
            match result.as_ref().map_err(Error::failure) {
                Err(Some(Failure::Timeout { .. })) => {
                    self.failover.went_quiet(position);
                    if signs {
                        self.config.unanswered_signs.inc();
                    }
                }
                Ok(_) | Err(Some(Failure::Refused { .. })) => self.failover.answered(position),
                Err(_) => {}
            }
            match result {
                Ok(result) => return Ok((result, display_base(base))),
                Err(err) if err.fails_over() => {
                    tracing::debug!(error = %err, "CFSSL endpoint failed, trying the next");
                    last = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        // Only an empty list tries nothing, and `Endpoints` is never empty.
        Err(last.unwrap_or(Error::Endpoints(EndpointsError::Empty)))
    }

    async fn post_once<T: DeserializeOwned>(
        &self,
        call: Call,
        base: &Url,
        path: &str,
        body: Vec<u8>,
    ) -> Result<T, Error> {
        let mut ctx = ErrorContext {
            attempt: self.attempt(call, &display_base(base)),
            content_type: String::new(),
            quote: self.quote,
        };
        let url = Endpoints::api(base, path);
        let response = self
            .http
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| ctx.transport(e, self.config.timeout))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response.headers().get(reqwest::header::LOCATION);
            return Err(ctx.redirect(status, &url, location.and_then(|l| l.to_str().ok())));
        }
        ctx.content_type = content_type(&response);
        let bytes = read_limited(response, self.config.max_response_bytes)
            .await
            .map_err(|e| match e {
                ReadError::TooLarge => ctx.too_large(self.config.max_response_bytes),
                ReadError::Transport(e) => ctx.transport(e, self.config.timeout),
            })?;
        ctx.parse(status, &bytes)
    }
}

/// The answer's `content-type`, printable and short, for messages.
fn content_type(response: &reqwest::Response) -> String {
    let value = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    value.chars().filter(|c| !c.is_control()).take(60).collect()
}

/// A request body as JSON.
fn encode(call: Call, body: &impl serde::Serialize) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(body).map_err(|source| Error::Encode { call, source })
}

/// In the credential probe, `bad request` can only mean an unknown label: the CSR was empty.
fn probe_error(err: Error) -> Error {
    let label_known = !err.is_refusal("bad request");
    err.with_label_known(label_known)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::fixed_clock;

    /// The authsign token carries the injected clock's instant, not the wall clock's.
    #[test]
    fn token_timestamp_comes_from_the_clock() {
        let key = AuthKey::from_hex("0123456789abcdef0123456789abcdef").unwrap();
        let cases = [
            ("2026-11-23T21:00:00Z", 1_795_467_600),
            ("2001-09-09T01:46:40.9Z", 1_000_000_000),
            ("1970-01-01T00:00:00Z", 0),
        ];
        for (at, want) in cases {
            let mut config = ClientConfig::new("https://ca:8888", "primary", key.clone());
            config.clock = fixed_clock(at.parse().unwrap());
            let client = Client::new(config).unwrap();
            let body = client.auth_request("", false).unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["timestamp"], want, "{at}");
        }
    }
}
