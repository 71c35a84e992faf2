//! `cfssl-issuer renew`: marks Certificates for manual renewal exactly as `cmctl renew` does,
//! so users keep their habit when standalone mode replaces cert-manager.
//!
//! cmctl sets `Issuing=True`, reason `ManuallyTriggered`, on the whole status it read (every
//! other condition kept; `lastTransitionTime` now, or kept when `Issuing` was already `True`;
//! `observedGeneration` the Certificate's generation) and writes it with the object's
//! `resourceVersion`, so a status changed in between is refused, not overwritten. Here that is a
//! merge patch of `status.conditions` carrying the `resourceVersion`: the same precondition and
//! result, without sending back status fields this client does not know.

use std::process::ExitCode;

use clap::Args;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};

use crate::api::certmanager::{Certificate, CertificateCondition};

/// cmctl's reason and message for the condition it sets.
pub const REASON: &str = "ManuallyTriggered";
pub const MESSAGE: &str = "Certificate re-issuance manually triggered";

/// cmctl's flags for `renew`.
#[derive(Debug, Args)]
pub struct RenewArgs {
    /// Certificate names, in the namespace.
    pub names: Vec<String>,
    /// Namespace (default: the kubeconfig context's, as kubectl).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Renew all Certificates in the namespace, or in all namespaces with --all-namespaces.
    #[arg(long)]
    pub all: bool,
    /// Mark Certificates across namespaces for manual renewal; --namespace is ignored.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Selector (label query) to filter on, supports '=', '==', and '!='.
    #[arg(short = 'l', long, default_value = "")]
    pub selector: String,
}

/// Why nothing was renewed; the texts are cmctl's.
#[derive(Debug, thiserror::Error)]
pub enum RenewError {
    #[error("cannot specify {first} in conjunction with {rest}")]
    Exclusive { first: String, rest: String },
    #[error(
        "please either supply one or more Certificate resource names, label selectors, or use the --all flag to renew all Certificate resources"
    )]
    Nothing,
    #[error("cannot specify Certificate names in conjunction with --all-namespaces flag")]
    NamesAcrossNamespaces,
    #[error("cannot load the kubeconfig: {0}")]
    Config(#[from] kube::config::InferConfigError),
    #[error("cannot reach the API server: {0}")]
    Client(#[source] kube::Error),
    #[error("{0}")]
    Api(#[from] kube::Error),
    #[error("failed to trigger issuance of Certificate {namespace}/{name}: {source}")]
    Trigger {
        namespace: String,
        name: String,
        source: kube::Error,
    },
}

/// cmctl's `Validate`: exactly one of names, `--all` and a selector; no names with `-A`.
pub fn validate(args: &RenewArgs) -> Result<(), RenewError> {
    let mut given = Vec::new();
    if !args.names.is_empty() {
        given.push(format!("the Certificate resource names {:?}", args.names));
    }
    if args.all {
        given.push("the --all flag".to_string());
    }
    if !args.selector.is_empty() {
        given.push("a label selector".to_string());
    }
    match given.as_slice() {
        [] => Err(RenewError::Nothing),
        [first, rest @ ..] if !rest.is_empty() => Err(RenewError::Exclusive {
            first: first.clone(),
            rest: rest.join(" and "),
        }),
        _ if args.all_namespaces && !args.names.is_empty() => Err(RenewError::NamesAcrossNamespaces),
        _ => Ok(()),
    }
}

/// The status conditions cmctl's `SetCertificateCondition` leaves: `Issuing` replaced in place
/// (or appended), every other condition as read.
pub fn issuing_conditions(crt: &Certificate, now: Timestamp) -> Vec<CertificateCondition> {
    let mut conditions = crt
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut issuing = CertificateCondition {
        type_: "Issuing".into(),
        status: "True".into(),
        reason: REASON.into(),
        message: MESSAGE.into(),
        last_transition_time: Some(Time(now)),
        observed_generation: crt.metadata.generation,
        ..Default::default()
    };
    match conditions.iter_mut().find(|c| c.type_ == "Issuing") {
        Some(old) => {
            if old.status == issuing.status {
                issuing.last_transition_time.clone_from(&old.last_transition_time);
            }
            *old = issuing;
        }
        None => conditions.push(issuing),
    }
    conditions
}

/// The merge patch for the status subresource: the conditions, guarded by the resourceVersion
/// read (as cmctl's `UpdateStatus`).
pub fn issuing_patch(crt: &Certificate, now: Timestamp) -> serde_json::Value {
    serde_json::json!({
        "metadata": { "resourceVersion": crt.metadata.resource_version },
        "status": { "conditions": issuing_conditions(crt, now) },
    })
}

/// The Certificates cmctl's `Run` would renew.
async fn gather(
    client: &kube::Client,
    namespace: &str,
    args: &RenewArgs,
) -> Result<Vec<Certificate>, RenewError> {
    let api: Api<Certificate> = if args.all_namespaces {
        Api::all(client.clone())
    } else {
        Api::namespaced(client.clone(), namespace)
    };
    if args.all || !args.selector.is_empty() {
        let params = ListParams::default().labels(&args.selector);
        return Ok(api.list(&params).await?.items);
    }
    let mut crts = Vec::with_capacity(args.names.len());
    for name in &args.names {
        crts.push(api.get(name).await?);
    }
    Ok(crts)
}

async fn renew_one(client: &kube::Client, crt: &Certificate) -> Result<(), RenewError> {
    let namespace = crt.metadata.namespace.clone().unwrap_or_default();
    let name = crt.metadata.name.clone().unwrap_or_default();
    let api: Api<Certificate> = Api::namespaced(client.clone(), &namespace);
    let params = PatchParams {
        field_manager: Some("cfssl-issuer-renew".into()),
        ..Default::default()
    };
    let patch = issuing_patch(crt, Timestamp::now());
    match api.patch_status(&name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => {
            println!("Manually triggered issuance of Certificate {namespace}/{name}");
            Ok(())
        }
        Err(source) => Err(RenewError::Trigger {
            namespace,
            name,
            source,
        }),
    }
}

async fn renew(args: RenewArgs) -> Result<(), RenewError> {
    validate(&args)?;
    let config = kube::Config::infer().await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = kube::Client::try_from(config).map_err(RenewError::Client)?;
    let crts = gather(&client, &namespace, &args).await?;
    if crts.is_empty() {
        if args.all_namespaces {
            eprintln!("No Certificates found");
        } else {
            eprintln!("No Certificates found in {namespace} namespace.");
        }
        return Ok(());
    }
    for crt in &crts {
        renew_one(&client, crt).await?;
    }
    Ok(())
}

/// `cfssl-issuer renew`: exit 0 when every Certificate was marked, 1 at the first failure.
pub async fn run(args: RenewArgs) -> ExitCode {
    match renew(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests;
