//! Who a request comes from, and SubjectAccessReviews answered from an allow-list.
//!
//! There is no RBAC here: a test says which access to grant with [`AccessRule`]s
//! ([`super::TestServer::allow_access`]), and `POST
//! /apis/authorization.k8s.io/v1/subjectaccessreviews` answers from them, as kube-apiserver
//! answers from its authorizers. Anything no rule grants is denied (`allowed: false`). Requests
//! made as an impersonated user are authorized against the same rules; the kubeconfig's admin
//! and added users may do anything.

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::error::{ApiError, ApiResult};

/// The user a request acts as, as the CSR registry records it in `spec.username` etc.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A known user: the kubeconfig's own token (`kubernetes-admin`), an added user, or the
    /// user an `Impersonate-User` header names.
    User(UserInfo),
    /// The server has no authentication and nobody was impersonated.
    Anonymous,
}

/// The kubeconfig's own user, as kind and kubeadm name the cluster admin.
pub fn admin() -> UserInfo {
    UserInfo {
        name: "kubernetes-admin".into(),
        uid: String::new(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        extra: BTreeMap::new(),
    }
}

/// An added user (`TestServer::add_user`): authenticated, in no other group.
pub fn added_user(name: &str) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: vec!["system:authenticated".into()],
        ..UserInfo::default()
    }
}

/// The user the `Impersonate-*` headers name, if any. As kube-apiserver's impersonation filter
/// does, an impersonated user is also in `system:authenticated`. Impersonation is not
/// authorized here: every authenticated caller may impersonate.
pub fn impersonated(headers: &HeaderMap) -> Option<UserInfo> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok().map(String::from))
            .collect()
    };
    let name = values("impersonate-user").into_iter().next()?;
    let mut groups = values("impersonate-group");
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, value) in headers {
        if let Some(k) = key.as_str().strip_prefix("impersonate-extra-")
            && let Ok(v) = value.to_str()
        {
            let k = form_urlencoded::parse(format!("k={k}").as_bytes())
                .next()
                .map_or_else(|| k.to_string(), |(_, k)| k.into_owned());
            extra.entry(k).or_default().push(v.to_string());
        }
    }
    Some(UserInfo {
        name,
        uid: values("impersonate-uid").into_iter().next().unwrap_or_default(),
        groups,
        extra,
    })
}

/// Access a test grants: like one RBAC rule bound to a user or a group. `None` fields match
/// anything (`name: None` is a rule without `resourceNames`; `namespace: None` a
/// ClusterRoleBinding); with both `user` and `group` None the rule grants everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessRule {
    pub user: Option<String>,
    pub group: Option<String>,
    pub verb: String,
    /// The API group (`""` for the core group).
    pub api_group: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl AccessRule {
    /// `verb` on `resource` of `api_group`, for everyone, anywhere, any name (narrow it with
    /// the setters).
    pub fn new(verb: &str, api_group: &str, resource: &str) -> Self {
        AccessRule {
            verb: verb.into(),
            api_group: api_group.into(),
            resource: resource.into(),
            ..AccessRule::default()
        }
    }

    pub fn user(mut self, user: &str) -> Self {
        self.user = Some(user.into());
        self
    }

    pub fn group(mut self, group: &str) -> Self {
        self.group = Some(group.into());
        self
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Whether this rule grants the review's `spec` (resource attributes only). A rule with a
    /// name matches only that name, as `resourceNames` match only requests naming one of them.
    fn grants(&self, spec: &Value) -> bool {
        let Some(attrs) = spec.get("resourceAttributes") else {
            return false;
        };
        let attr = |k: &str| attrs.get(k).and_then(Value::as_str).unwrap_or_default();
        let user = spec.get("user").and_then(Value::as_str).unwrap_or_default();
        let in_group = |g: &str| {
            spec.get("groups")
                .and_then(Value::as_array)
                .is_some_and(|gs| gs.iter().any(|x| x == g))
        };
        self.user.as_deref().is_none_or(|u| u == user)
            && self.group.as_deref().is_none_or(in_group)
            && self.verb == attr("verb")
            && self.api_group == attr("group")
            && self.resource == attr("resource")
            && attr("subresource").is_empty()
            && self.namespace.as_deref().is_none_or(|n| n == attr("namespace"))
            && self.name.as_deref().is_none_or(|n| n == attr("name"))
    }

    fn describe(&self) -> String {
        let subject = match (&self.user, &self.group) {
            (Some(u), _) => format!("User \"{u}\""),
            (None, Some(g)) => format!("Group \"{g}\""),
            (None, None) => "everyone".into(),
        };
        let scope = self
            .namespace
            .as_deref()
            .map_or_else(|| "cluster-wide".to_string(), |n| format!("in namespace \"{n}\""));
        format!("allowed by the test server's access rule for {subject} {scope}")
    }
}

const SAR_KIND: &str = "SubjectAccessReview.authorization.k8s.io";

/// The checks kube-apiserver makes of a SubjectAccessReview (pkg/apis/authorization/validation).
fn validate_review(spec: &Value) -> ApiResult<()> {
    let present = |k: &str| spec.get(k).is_some_and(|v| !v.is_null());
    let mut causes = Vec::new();
    match (present("resourceAttributes"), present("nonResourceAttributes")) {
        (true, true) => causes.push((
            "spec.nonResourceAttributes".to_string(),
            "Invalid value: \"\": cannot be specified in combination with resourceAttributes".to_string(),
        )),
        (false, false) => causes.push((
            "spec.resourceAttributes".to_string(),
            "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
                .to_string(),
        )),
        _ => {}
    }
    let user = spec.get("user").and_then(Value::as_str).unwrap_or_default();
    let groups = spec.get("groups").and_then(Value::as_array).map_or(0, Vec::len);
    if user.is_empty() && groups == 0 {
        causes.push((
            "spec.user".to_string(),
            "Invalid value: \"\": at least one of user or group must be specified".to_string(),
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(SAR_KIND, "", &causes))
    }
}

/// Authorizes a request made as an impersonated user, as kube-apiserver does: impersonation
/// swaps the user before authorization, so RBAC grants that user only what its roles grant
/// (k8s.io/apiserver `WithImpersonation` runs before `WithAuthorization`). Members of
/// `system:masters` may do anything; everyone else needs an [`AccessRule`]. The refusal reads
/// as kube-apiserver's (`forbidden.go`).
pub fn authorize_impersonated(
    rules: &[AccessRule],
    user: &UserInfo,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> ApiResult<()> {
    if user.groups.iter().any(|g| g == "system:masters") {
        return Ok(());
    }
    let spec = json!({ "user": user.name, "groups": user.groups, "resourceAttributes": {
        "verb": verb, "group": group, "resource": resource, "namespace": namespace.unwrap_or_default() } });
    if rules.iter().any(|r| r.grants(&spec)) {
        return Ok(());
    }
    let qualified = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    let scope = match namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".into(),
    };
    Err(ApiError::new(
        super::error::Reason::Forbidden,
        format!(
            "{qualified} is forbidden: User \"{}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}",
            user.name
        ),
    ))
}

/// The answer to a SubjectAccessReview: the review echoed with `status` filled in.
pub fn review(rules: &[AccessRule], mut body: Value) -> ApiResult<Value> {
    if !body.is_object() {
        return Err(ApiError::bad_request("the body of the request was not an object"));
    }
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    validate_review(&spec)?;
    let status = match rules.iter().find(|r| r.grants(&spec)) {
        Some(rule) => json!({ "allowed": true, "reason": rule.describe() }),
        None => json!({ "allowed": false }),
    };
    body["apiVersion"] = "authorization.k8s.io/v1".into();
    body["kind"] = "SubjectAccessReview".into();
    if body.get("metadata").is_none_or(|m| !m.is_object()) {
        body["metadata"] = json!({});
    }
    body["status"] = status;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sar(user: &str, groups: &[&str], name: &str) -> Value {
        json!({ "spec": { "user": user, "groups": groups, "resourceAttributes": {
            "group": "cfssl-issuer.wikimedia.org", "resource": "signers", "verb": "reference",
            "namespace": "ns1", "name": name, "version": "*" } } })
    }

    #[test]
    fn rules_match_like_rbac() {
        let by_name = AccessRule::new("reference", "cfssl-issuer.wikimedia.org", "signers")
            .user("alice")
            .namespace("ns1")
            .name("ca");
        let by_group = AccessRule::new("reference", "cfssl-issuer.wikimedia.org", "signers").group("ops");
        let allowed = |rules: &[AccessRule], v: Value| review(rules, v).unwrap()["status"]["allowed"] == true;
        let cases: &[(&[AccessRule], Value, bool)] = &[
            (&[], sar("alice", &[], "ca"), false),
            (std::slice::from_ref(&by_name), sar("alice", &[], "ca"), true),
            (std::slice::from_ref(&by_name), sar("alice", &[], "*"), false),
            (std::slice::from_ref(&by_name), sar("alice", &[], "other"), false),
            (std::slice::from_ref(&by_name), sar("bob", &[], "ca"), false),
            (std::slice::from_ref(&by_group), sar("bob", &["ops"], "*"), true),
            (std::slice::from_ref(&by_group), sar("bob", &["dev"], "ca"), false),
        ];
        for (rules, v, want) in cases {
            assert_eq!(allowed(rules, v.clone()), *want, "{rules:?} {v}");
        }
    }

    /// kube-apiserver authorizes an impersonated user as that user: without a role, creating
    /// a CertificateSigningRequest is forbidden (seen against kube-apiserver v1.35 in
    /// `make e2e-real`); `system:masters` may do anything.
    #[test]
    fn impersonated_users_get_only_what_rules_grant() {
        let alice = UserInfo {
            name: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        };
        let master = UserInfo {
            groups: vec!["system:masters".into()],
            ..alice.clone()
        };
        let csrs =
            AccessRule::new("create", "certificates.k8s.io", "certificatesigningrequests").user("alice");
        let create = |rules: &[AccessRule], user: &UserInfo| {
            authorize_impersonated(
                rules,
                user,
                "create",
                "certificates.k8s.io",
                "certificatesigningrequests",
                None,
            )
            .map_err(|e| e.message)
        };
        assert_eq!(
            create(&[], &alice),
            Err("certificatesigningrequests.certificates.k8s.io is forbidden: User \"alice\" cannot create resource \"certificatesigningrequests\" in API group \"certificates.k8s.io\" at the cluster scope".into())
        );
        assert_eq!(create(&[], &master), Ok(()));
        assert_eq!(create(std::slice::from_ref(&csrs), &alice), Ok(()));
        let in_ns =
            authorize_impersonated(&[], &alice, "get", "", "secrets", Some("team-a")).map_err(|e| e.message);
        assert_eq!(
            in_ns,
            Err("secrets is forbidden: User \"alice\" cannot get resource \"secrets\" in API group \"\" in the namespace \"team-a\"".into())
        );
    }
}
