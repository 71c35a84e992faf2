//! API errors, rendered as `meta/v1 Status` objects the way kube-apiserver renders them.

use serde_json::{Value, json};

/// The `reason` of a failed `Status`, with the HTTP code kube-apiserver pairs it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    NotAcceptable,
    AlreadyExists,
    Conflict,
    /// 410 Gone for a resourceVersion or continue token older than the retained history
    /// (kube-apiserver's reason for "too old resource version").
    Expired,
    UnsupportedMediaType,
    Invalid,
    TooManyRequests,
    InternalError,
    /// What kube-apiserver sends for an error that is not a `Status` (a plain Go error): 500
    /// with no reason. Server-side apply's "field not declared in schema" is one
    /// (kubernetes/kubernetes#139253).
    Unknown,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::BadRequest => "BadRequest",
            Reason::Unauthorized => "Unauthorized",
            Reason::Forbidden => "Forbidden",
            Reason::NotFound => "NotFound",
            Reason::MethodNotAllowed => "MethodNotAllowed",
            Reason::NotAcceptable => "NotAcceptable",
            Reason::AlreadyExists => "AlreadyExists",
            Reason::Conflict => "Conflict",
            Reason::Expired => "Expired",
            Reason::UnsupportedMediaType => "UnsupportedMediaType",
            Reason::Invalid => "Invalid",
            Reason::TooManyRequests => "TooManyRequests",
            Reason::InternalError => "InternalError",
            Reason::Unknown => "",
        }
    }

    pub fn code(self) -> u16 {
        match self {
            Reason::BadRequest => 400,
            Reason::Unauthorized => 401,
            Reason::Forbidden => 403,
            Reason::NotFound => 404,
            Reason::MethodNotAllowed => 405,
            Reason::NotAcceptable => 406,
            Reason::AlreadyExists | Reason::Conflict => 409,
            Reason::Expired => 410,
            Reason::UnsupportedMediaType => 415,
            Reason::Invalid => 422,
            Reason::TooManyRequests => 429,
            Reason::InternalError | Reason::Unknown => 500,
        }
    }
}

/// A request the server refuses; becomes a `Status` body with `code` and `reason`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} ({}): {message}", reason.as_str(), reason.code())]
pub struct ApiError {
    pub reason: Reason,
    pub message: String,
    /// `StatusDetails` (name, group, kind, causes, retryAfterSeconds).
    pub details: Option<Value>,
    /// Sent as the `Retry-After` header as well as `details.retryAfterSeconds`.
    pub retry_after: Option<u32>,
}

pub type ApiResult<T> = Result<T, ApiError>;

/// The `StatusCause` reason kube-apiserver gives a field error, read from how its message
/// starts (`field.Error`'s type string: "Required value", "Unsupported value", ...).
fn cause_reason(message: &str) -> &'static str {
    const REASONS: &[(&str, &str)] = &[
        ("Required value", "FieldValueRequired"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Forbidden", "FieldValueForbidden"),
        ("Too long", "FieldValueTooLong"),
        ("Not found", "FieldValueNotFound"),
    ];
    REASONS
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map_or("FieldValueInvalid", |(_, reason)| reason)
}

impl ApiError {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        ApiError {
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    fn with_details(mut self, qualified: &str, name: &str) -> Self {
        let (plural, group) = qualified.split_once('.').unwrap_or((qualified, ""));
        self.details = Some(json!({ "name": name, "group": group, "kind": plural }));
        self
    }

    /// `qualified` is `plural` for the core group and `plural.group` otherwise, as in real messages.
    pub fn not_found(qualified: &str, name: &str) -> Self {
        Self::new(Reason::NotFound, format!("{qualified} \"{name}\" not found")).with_details(qualified, name)
    }

    pub fn already_exists(qualified: &str, name: &str) -> Self {
        Self::new(
            Reason::AlreadyExists,
            format!("{qualified} \"{name}\" already exists"),
        )
        .with_details(qualified, name)
    }

    pub fn conflict(qualified: &str, name: &str, why: &str) -> Self {
        Self::new(
            Reason::Conflict,
            format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
        )
        .with_details(qualified, name)
    }

    pub fn stale(qualified: &str, name: &str) -> Self {
        Self::conflict(
            qualified,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with one `cause` per `(field, message)`.
    pub fn invalid(kind_qualified: &str, name: &str, causes: &[(String, String)]) -> Self {
        let summary: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let mut err = Self::new(
            Reason::Invalid,
            format!("{kind_qualified} \"{name}\" is invalid: {}", summary.join(", ")),
        );
        let (kind, group) = kind_qualified.split_once('.').unwrap_or((kind_qualified, ""));
        let causes: Vec<Value> = causes
            .iter()
            .map(|(field, message)| json!({ "reason": cause_reason(message), "message": message, "field": field }))
            .collect();
        err.details = Some(json!({ "name": name, "group": group, "kind": kind, "causes": causes }));
        err
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(Reason::BadRequest, message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(Reason::MethodNotAllowed, message)
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(Reason::Expired, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Reason::InternalError, message)
    }

    pub fn too_many_requests(retry_after: u32) -> Self {
        let mut err = Self::new(
            Reason::TooManyRequests,
            "the server has received too many requests",
        );
        err.details = Some(json!({ "retryAfterSeconds": retry_after }));
        err.retry_after = Some(retry_after);
        err
    }

    /// The 404 for a path that names no served resource.
    pub fn no_route() -> Self {
        Self::new(
            Reason::NotFound,
            "the server could not find the requested resource",
        )
    }

    pub fn code(&self) -> u16 {
        self.reason.code()
    }

    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason.as_str(),
            "code": self.code(),
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        if self.reason == Reason::Unknown
            && let Some(map) = status.as_object_mut()
        {
            map.remove("reason");
        }
        status
    }
}
