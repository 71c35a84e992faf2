//! The object writes a plan carries besides its status: server-side apply, create and delete.
//!
//! A write is a value naming the object by its kind's URL path (`Resource::url_path`) and
//! holding the body, so tables assert the writes a controller decides and one executor
//! ([`Writer::write`]) carries out every controller's, under the controller's field manager.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{DeleteParams, GetParams, Patch, PatchParams, PostParams, Preconditions};
use serde::de::IgnoredAny;
use serde_json::Value;

use super::Error;
use super::events::{Events, Notice};
use super::status::FieldManager;

/// The object a write is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// `Kind`, for errors.
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    /// The URL path of the collection it is in.
    pub collection: String,
}

impl Object {
    /// The object of kind `K` named `name` (in `namespace`, for a namespaced kind).
    pub fn of<K: Resource<DynamicType = ()>>(namespace: Option<&str>, name: &str) -> Self {
        Object {
            kind: K::kind(&()).into_owned(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            collection: K::url_path(&(), namespace),
        }
    }

    /// `Kind namespace/name` or `Kind name`, as [`super::plan::describe`] says an object.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    fn request(&self) -> kube::core::Request {
        kube::core::Request::new(&self.collection)
    }
}

/// One object write.
#[derive(Clone, PartialEq)]
pub enum Write {
    /// Server-side apply of `body`, the whole object as the controller wants it, with force:
    /// the fields it sends are its own to decide.
    Apply {
        object: Object,
        body: Value,
    },
    Create(Create),
    /// A background delete of the object with this `uid`, which the API server checks: one
    /// made again under the name since, or put there by someone else, is not this write's to
    /// delete. One already gone is fine.
    Delete {
        object: Object,
        uid: String,
    },
}

/// A create, and what a name already taken means.
#[derive(Clone, PartialEq)]
pub struct Create {
    pub object: Object,
    pub body: Value,
    pub if_taken: IfTaken,
    pub announce: Announce,
}

/// A Secret's body without its data's values: a key Secret's and the target's hold the key.
impl std::fmt::Debug for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Write::Apply { object, body } => f
                .debug_struct("Apply")
                .field("object", object)
                .field("body", &crate::redact::body(&object.kind, body))
                .finish(),
            Write::Create(create) => f.debug_tuple("Create").field(create).finish(),
            Write::Delete { object, uid } => f
                .debug_struct("Delete")
                .field("object", object)
                .field("uid", uid)
                .finish(),
        }
    }
}

impl std::fmt::Debug for Create {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Create")
            .field("object", &self.object)
            .field("body", &crate::redact::body(&self.object.kind, &self.body))
            .field("if_taken", &self.if_taken)
            .field("announce", &self.announce)
            .finish()
    }
}

/// What a create whose name is taken does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfTaken {
    /// An earlier attempt made it: nothing more to do.
    Done,
    /// Done when the object there is controlled by the owner of this UID (an earlier attempt);
    /// another's is left alone and the object is made under a name generated from this one.
    RenameUnlessControlledBy(String),
}

/// The Events a create publishes about itself, on the object the plan is for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Announce {
    /// Published when the create makes the object (not when it was there): the note is
    /// followed by the name it was made under, quoted.
    pub made: Option<Notice>,
    /// Published when the API server refuses the create: the note is followed by why.
    pub refused: Option<Notice>,
}

impl Write {
    /// Applies `object` as a whole.
    pub fn apply<K>(object: &K) -> Self
    where
        K: Resource<DynamicType = ()> + serde::Serialize,
    {
        Write::Apply {
            object: object_of(object),
            body: body_of(object),
        }
    }

    /// Creates `object`.
    pub fn create<K>(object: &K, if_taken: IfTaken, announce: Announce) -> Self
    where
        K: Resource<DynamicType = ()> + serde::Serialize,
    {
        Write::Create(Create {
            object: object_of(object),
            body: body_of(object),
            if_taken,
            announce,
        })
    }

    /// Deletes `object`, by its name and UID; `None` for an object without a UID, which was
    /// never read from the API server, so nothing there is known to be it.
    pub fn delete<K: Resource<DynamicType = ()>>(object: &K) -> Option<Self> {
        let uid = object.meta().uid.clone()?;
        Some(Write::Delete {
            object: object_of(object),
            uid,
        })
    }

    /// The object written.
    pub fn object(&self) -> &Object {
        match self {
            Write::Apply { object, .. } | Write::Delete { object, .. } => object,
            Write::Create(create) => &create.object,
        }
    }
}

fn object_of<K: Resource<DynamicType = ()>>(object: &K) -> Object {
    let meta = object.meta();
    Object::of::<K>(
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// `object` as JSON, with its kind's apiVersion and kind (an apply needs them; every
/// Kubernetes object serializes to a JSON object).
fn body_of<K: Resource<DynamicType = ()> + serde::Serialize>(object: &K) -> Value {
    let mut body = serde_json::to_value(object).unwrap_or_else(|_| Value::Object(serde_json::Map::default()));
    if let Value::Object(map) = &mut body {
        map.insert("apiVersion".into(), K::api_version(&()).into());
        map.insert("kind".into(), K::kind(&()).into());
    }
    body
}

/// Who carries writes out: the client, the controller's field manager, and where the
/// creates' Events go.
pub struct Writer<'a> {
    pub client: &'a kube::Client,
    pub manager: FieldManager,
    pub events: &'a Events,
    pub regarding: &'a ObjectReference,
}

/// What a create's answer tells: the object's metadata (its name, its owners).
#[derive(serde::Deserialize)]
struct Answer {
    #[serde(default)]
    metadata: ObjectMeta,
}

impl Writer<'_> {
    /// Carries out `write`.
    pub async fn write(&self, write: &Write) -> Result<(), Error> {
        match write {
            Write::Apply { object, body } => self.apply(object, body).await,
            Write::Create(create) => self.create(create).await,
            Write::Delete { object, uid } => self.delete(object, uid).await,
        }
    }

    async fn apply(&self, object: &Object, body: &Value) -> Result<(), Error> {
        let params = PatchParams::apply(self.manager.as_str()).force();
        let request = object.request().patch(&object.name, &params, &Patch::Apply(body));
        async { self.client.request::<IgnoredAny>(built(request)?).await }
            .await
            .map_err(Error::api("applying", object.describe()))?;
        Ok(())
    }

    async fn delete(&self, object: &Object, uid: &str) -> Result<(), Error> {
        let params = DeleteParams::background().preconditions(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        });
        let request = object.request().delete(&object.name, &params);
        match async { self.client.request::<IgnoredAny>(built(request)?).await }.await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            // The UID precondition failed: the object meant is gone, another has its name.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(source) => Err(Error::api("deleting", object.describe())(source)),
        }
    }

    async fn create(&self, create: &Create) -> Result<(), Error> {
        let made = match self.post(&create.object, &create.body).await {
            Err(kube::Error::Api(status)) if status.code == 409 => match &create.if_taken {
                IfTaken::Done => return Ok(()),
                IfTaken::RenameUnlessControlledBy(uid) => {
                    if self.controlled_by(&create.object, uid).await? {
                        return Ok(());
                    }
                    self.post(&create.object, &renamed(&create.body, &create.object.name))
                        .await
                }
            },
            other => other,
        };
        match made {
            Ok(name) => {
                let name = name.unwrap_or_else(|| create.object.name.clone());
                self.announce(create.announce.made.as_ref(), &format!("{name:?}"))
                    .await;
                Ok(())
            }
            Err(source) => {
                self.announce(create.announce.refused.as_ref(), &source.to_string())
                    .await;
                Err(Error::api("creating", create.object.describe())(source))
            }
        }
    }

    /// Posts `body` to the object's collection; the name the object was made under.
    async fn post(&self, object: &Object, body: &Value) -> Result<Option<String>, kube::Error> {
        let params = PostParams {
            field_manager: Some(self.manager.as_str().to_string()),
            ..PostParams::default()
        };
        let data = serde_json::to_vec(body).map_err(kube::Error::SerdeError)?;
        let request = built(object.request().create(&params, data))?;
        let answer: Answer = self.client.request(request).await?;
        Ok(answer.metadata.name)
    }

    /// Whether the object now under `object`'s name is controlled by the owner of `uid`.
    async fn controlled_by(&self, object: &Object, uid: &str) -> Result<bool, Error> {
        let request = object.request().get(&object.name, &GetParams::default());
        let found = match async { self.client.request::<Answer>(built(request)?).await }.await {
            Ok(answer) => answer.metadata,
            // Gone since the create met it: nothing of the owner's there either.
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            Err(source) => return Err(Error::api("reading", object.describe())(source)),
        };
        let owners = found.owner_references.unwrap_or_default();
        Ok(!uid.is_empty() && owners.iter().any(|r| r.controller == Some(true) && r.uid == uid))
    }

    async fn announce(&self, notice: Option<&Notice>, then: &str) {
        if let Some(notice) = notice {
            let note = format!("{}{then}", notice.note);
            let filled = Notice {
                type_: notice.type_,
                ..Notice::normal(notice.reason.clone(), notice.action, &note)
            };
            self.events.publish(&filled, self.regarding).await;
        }
    }
}

/// A built request, or the error kube gives a request that cannot be built.
fn built<R>(request: Result<R, kube::core::request::Error>) -> Result<R, kube::Error> {
    request.map_err(kube::Error::BuildRequest)
}

/// `body` without a name, to be made under one generated from `name`.
fn renamed(body: &Value, name: &str) -> Value {
    let mut body = body.clone();
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("name");
        meta.insert("generateName".into(), format!("{name}-").into());
    }
    body
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::Secret;

    use super::*;

    type Handle =
        tower_test::mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>;

    fn secret(uid: Option<&str>) -> Secret {
        let mut secret = Secret::default();
        secret.metadata.name = Some("web-key".into());
        secret.metadata.namespace = Some("apps".into());
        secret.metadata.uid = uid.map(str::to_string);
        secret
    }

    /// Answers one request with `status`; its method, path and body.
    async fn answer(handle: &mut Handle, status: u16) -> (String, String, Value) {
        let (request, send) = handle.next_request().await.expect("a request");
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.expect("a body");
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let answer = serde_json::json!({"kind": "Status", "apiVersion": "v1", "code": status});
        let response = http::Response::builder()
            .status(status)
            .body(kube::client::Body::from(serde_json::to_vec(&answer).unwrap()))
            .unwrap();
        send.send_response(response);
        (parts.method.to_string(), parts.uri.path().to_string(), body)
    }

    #[test]
    fn a_delete_needs_the_uid_of_what_it_means() {
        assert_eq!(Write::delete(&secret(None)), None);
        assert_eq!(
            Write::delete(&secret(Some("uid-1"))),
            Some(Write::Delete {
                object: Object::of::<Secret>(Some("apps"), "web-key"),
                uid: "uid-1".into(),
            })
        );
    }

    /// The DELETE carries the UID as a precondition; the 409 of a failed precondition (the
    /// name now holds another object) is no error, and neither is a 404.
    #[tokio::test]
    async fn a_delete_sends_the_uid_precondition() {
        let (service, mut handle) = tower_test::mock::pair();
        let client = kube::Client::new(service, "default");
        let events = Events::aggregated(client.clone());
        let regarding = ObjectReference::default();
        let writer = Writer {
            client: &client,
            manager: FieldManager::KEY_MANAGER,
            events: &events,
            regarding: &regarding,
        };
        let write = Write::delete(&secret(Some("uid-1"))).expect("a UID");
        for status in [200, 409, 404] {
            let (result, seen) = tokio::time::timeout(Duration::from_secs(5), async {
                tokio::join!(writer.write(&write), answer(&mut handle, status))
            })
            .await
            .expect("in time");
            assert!(result.is_ok(), "{status}: {result:?}");
            let (method, path, body) = seen;
            assert_eq!(
                (method.as_str(), path.as_str()),
                ("DELETE", "/api/v1/namespaces/apps/secrets/web-key"),
                "{status}"
            );
            assert_eq!(
                body,
                serde_json::json!({"propagationPolicy": "Background", "preconditions": {"uid": "uid-1"}}),
                "{status}"
            );
        }
    }
}
