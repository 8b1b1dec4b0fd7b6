//! The fake cluster's HTTP API: paths parsed as the API server routes them, each verb checked
//! and answered as the generic store and the CRD handler do (the facts are in
//! `../shared/reference/kubernetes-writes.md`), writes committed through the store and
//! followed by the controllers' reactions. Failures are `Status` bodies shaped as the API
//! server's, `details.kind` holding the resource (`services`) as its errors put it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::store::{group, plural, Part, State};
use super::{controllers, patch};
use crate::fake_apiserver::TOKEN;

/// One API request.
pub(crate) async fn handle(shared: &Arc<Mutex<State>>, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 4 << 20)
        .await
        .unwrap_or_default();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let method = parts.method.to_string();
    let mut state = shared.lock().unwrap();
    state.requests.push((method.clone(), parts.uri.to_string()));
    if header("authorization") != format!("Bearer {TOKEN}") {
        return failure(401, "Unauthorized", "Unauthorized".to_string(), None);
    }
    let query: BTreeMap<String, String> =
        url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let Some(target) = Target::parse(parts.uri.path()) else {
        return failure(
            404,
            "NotFound",
            "the server could not find the requested resource".to_string(),
            None,
        );
    };
    if query.contains_key("labelSelector") || query.contains_key("fieldSelector") {
        return failure(
            400,
            "BadRequest",
            "the fake cluster does not filter lists".to_string(),
            None,
        );
    }
    // `fieldManager`, else the User-Agent's prefix before the first `/` (`managerOrUserAgent`).
    let manager = query.get("fieldManager").cloned().unwrap_or_else(|| {
        let agent = header("user-agent");
        match agent.split('/').next().unwrap_or_default() {
            "" => "unknown".to_string(),
            prefix => prefix.to_string(),
        }
    });
    let call = Call {
        target,
        dry_run: query.get("dryRun").is_some_and(|value| value == "All"),
        manager,
        content_type: header("content-type")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_lowercase(),
        bytes: bytes.to_vec(),
    };
    match (method.as_str(), call.target.name.is_some()) {
        ("GET", true) => match state.objects.get(&call.target.path()) {
            Some(object) => answer(200, object),
            None => call.not_found(),
        },
        ("GET", false) => call.list(&state),
        ("PATCH", true) => call.patch(shared, &mut state),
        ("DELETE", true) => call.delete(shared, &mut state),
        ("POST", false) => call.create(shared, &mut state),
        _ => failure(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".to_string(),
            None,
        ),
    }
}

/// What an API path names.
struct Target {
    api_version: String,
    plural: String,
    /// Empty for a cluster-scoped object, or a collection across namespaces.
    namespace: String,
    name: Option<String>,
}

impl Target {
    fn parse(path: &str) -> Option<Target> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (api_version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => (version.to_string(), rest),
            ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
            _ => return None,
        };
        let (namespace, plural, name) = match rest {
            [plural] => ("", *plural, None),
            [plural, name] => ("", *plural, Some(*name)),
            ["namespaces", namespace, plural] => (*namespace, *plural, None),
            ["namespaces", namespace, plural, name] => (*namespace, *plural, Some(*name)),
            _ => return None,
        };
        Some(Target {
            api_version,
            plural: plural.to_string(),
            namespace: namespace.to_string(),
            name: name.map(str::to_string),
        })
    }

    fn group(&self) -> &str {
        group(&self.api_version)
    }

    /// The collection's path (`…/namespaces/NS/PLURAL`).
    fn collection(&self) -> String {
        let prefix = if self.group().is_empty() {
            format!("/api/{}", self.api_version)
        } else {
            format!("/apis/{}", self.api_version)
        };
        match self.namespace.as_str() {
            "" => format!("{prefix}/{}", self.plural),
            namespace => format!("{prefix}/namespaces/{namespace}/{}", self.plural),
        }
    }

    fn path(&self) -> String {
        format!(
            "{}/{}",
            self.collection(),
            self.name.as_deref().unwrap_or_default()
        )
    }

    /// `services.serving.knative.dev`, `configmaps`: the resource as messages name it.
    fn qualified(&self) -> String {
        match self.group() {
            "" => self.plural.clone(),
            group => format!("{}.{group}", self.plural),
        }
    }

    /// A Status's `details` (`kind` holds the resource, as `NewConflict` and `NewNotFound` put it).
    fn details(&self, name: &str) -> Value {
        let mut details = json!({"name": name, "kind": self.plural});
        if !self.group().is_empty() {
            details["group"] = json!(self.group());
        }
        details
    }
}

/// One write or read, parsed.
struct Call {
    target: Target,
    dry_run: bool,
    manager: String,
    content_type: String,
    bytes: Vec<u8>,
}

impl Call {
    fn name(&self) -> &str {
        self.target.name.as_deref().unwrap_or_default()
    }

    /// The JSON body, or why it is not JSON.
    fn body(&self) -> Result<Value, String> {
        serde_json::from_slice(&self.bytes).map_err(|error| format!("error decoding body: {error}"))
    }

    fn not_found(&self) -> Response {
        failure(
            404,
            "NotFound",
            format!("{} {:?} not found", self.target.qualified(), self.name()),
            Some(self.target.details(self.name())),
        )
    }

    fn conflict(&self, why: &str) -> Response {
        failure(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {:?}: {why}",
                self.target.qualified(),
                self.name()
            ),
            Some(self.target.details(self.name())),
        )
    }

    fn list(&self, state: &State) -> Response {
        let items: Vec<Value> = state
            .objects
            .values()
            .filter(|object| {
                object["apiVersion"] == self.target.api_version.as_str()
                    && plural(object["kind"].as_str().unwrap_or_default()) == self.target.plural
                    && (self.target.namespace.is_empty()
                        || object["metadata"]["namespace"] == self.target.namespace.as_str())
            })
            .cloned()
            .collect();
        let kind = items
            .first()
            .and_then(|item| item["kind"].as_str())
            .map_or("List".to_string(), |kind| format!("{kind}List"));
        // Typed lists of built-in kinds leave `apiVersion` and `kind` out of their items;
        // custom resources' lists keep them.
        let builtin = !self.target.group().contains('.');
        let items: Vec<Value> = items
            .into_iter()
            .map(|mut item| {
                if let (true, Some(members)) = (builtin, item.as_object_mut()) {
                    members.remove("apiVersion");
                    members.remove("kind");
                }
                item
            })
            .collect();
        answer(
            200,
            &json!({"kind": kind, "apiVersion": self.target.api_version,
                    "metadata": {"resourceVersion": state.version.to_string()}, "items": items}),
        )
    }

    fn patch(&self, shared: &Arc<Mutex<State>>, state: &mut State) -> Response {
        let path = self.target.path();
        let Some(current) = state.objects.get(&path).cloned() else {
            return self.not_found();
        };
        let mut patched = current.clone();
        match self.content_type.as_str() {
            "application/merge-patch+json" => match self.body() {
                Ok(patch) => patch::merge(&mut patched, &patch),
                Err(why) => return failure(400, "BadRequest", why, None),
            },
            "application/json-patch+json" => {
                let operations = match self.body() {
                    Ok(operations) => operations,
                    Err(why) => return failure(400, "BadRequest", why, None),
                };
                match patch::apply(&mut patched, &operations) {
                    Ok(()) => {}
                    Err(patch::Refused::Malformed(why)) => {
                        return failure(400, "BadRequest", why, None)
                    }
                    // The API server keeps none of the library's text (`applyJSPatch`).
                    Err(patch::Refused::Unapplicable) => {
                        return failure(
                            422,
                            "Invalid",
                            "the server rejected our request due to an error in our request"
                                .to_string(),
                            Some(json!({})),
                        )
                    }
                }
            }
            _ => {
                let accepted = if self.target.group().contains('.') {
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                } else {
                    "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
                };
                return failure(
                    415,
                    "UnsupportedMediaType",
                    format!("the body of the request was in an unknown format - accepted media types include: {accepted}"),
                    None,
                );
            }
        }
        let version = |object: &Value| object["metadata"]["resourceVersion"].clone();
        if !version(&patched).is_null() && version(&patched) != version(&current) {
            return self.conflict("the object has been modified; please apply your changes to the latest version and try again");
        }
        for (field, pointer) in [
            ("apiVersion", "/apiVersion"),
            ("kind", "/kind"),
            ("metadata.name", "/metadata/name"),
            ("metadata.namespace", "/metadata/namespace"),
            ("metadata.uid", "/metadata/uid"),
        ] {
            if patched.pointer(pointer) != current.pointer(pointer) {
                return failure(
                    422,
                    "Invalid",
                    format!(
                        "{} {:?} is invalid: {field}: Invalid value: {}: field is immutable",
                        self.target.qualified(),
                        self.name(),
                        patched.pointer(pointer).unwrap_or(&Value::Null)
                    ),
                    Some(self.target.details(self.name())),
                );
            }
        }
        if let Some(why) = super::webhooks::denied(Some(&current), &patched) {
            return failure(400, "BadRequest", why, None);
        }
        let warnings = match super::admission::admit(
            &state.policies,
            &super::admission::Write {
                operation: "UPDATE",
                api_version: &self.target.api_version,
                plural: &self.target.plural,
                namespace: &self.target.namespace,
                name: self.name(),
                object: &patched,
                old_object: Some(&current),
            },
        ) {
            Ok(warnings) => warnings,
            Err(why) => {
                return failure(422, "Invalid", why, Some(self.target.details(self.name())))
            }
        };
        if self.dry_run {
            return warned(answer(200, &patched), &warnings);
        }
        let response = match state.commit(&path, Some(patched), &self.manager, Part::Main) {
            Some(stored) => {
                controllers::react(
                    shared,
                    state,
                    &path,
                    Some(&current),
                    Some(&stored),
                    &self.manager,
                );
                answer(200, &stored)
            }
            None => answer(200, &current),
        };
        warned(response, &warnings)
    }

    fn delete(&self, shared: &Arc<Mutex<State>>, state: &mut State) -> Response {
        let path = self.target.path();
        let Some(current) = state.objects.get(&path).cloned() else {
            return self.not_found();
        };
        let options = if self.bytes.is_empty() {
            json!({})
        } else {
            match self.body() {
                Ok(options) => options,
                Err(why) => return failure(400, "BadRequest", why, None),
            }
        };
        let key = match self.target.group() {
            group if group.contains('.') => format!("/registry/{group}/{}", self.target.plural),
            _ => format!("/registry/{}", self.target.plural),
        };
        let key = match self.target.namespace.as_str() {
            "" => format!("{key}/{}", self.name()),
            namespace => format!("{key}/{namespace}/{}", self.name()),
        };
        for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            let wanted = &options["preconditions"][field];
            let have = &current["metadata"][field];
            if !wanted.is_null() && wanted != have {
                return self.conflict(&format!(
                    "StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, \
                     AdditionalErrorMsg: Precondition failed: {label} in precondition: {}, \
                     {label} in object meta: {}",
                    wanted.as_str().unwrap_or_default(),
                    have.as_str().unwrap_or_default()
                ));
            }
        }
        let mut details = self.target.details(self.name());
        details["uid"] = current["metadata"]["uid"].clone();
        let success = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                             "status": "Success", "details": details});
        let dry_run = self.dry_run
            || options["dryRun"]
                .as_array()
                .is_some_and(|values| values.iter().any(|value| value == "All"));
        if !dry_run {
            state.commit(&path, None, &self.manager, Part::Main);
            controllers::react(shared, state, &path, Some(&current), None, &self.manager);
        }
        answer(200, &success)
    }

    fn create(&self, shared: &Arc<Mutex<State>>, state: &mut State) -> Response {
        let mut object = match self.body() {
            Ok(object) if object.is_object() => object,
            Ok(_) => {
                return failure(
                    400,
                    "BadRequest",
                    "the body is not an object".to_string(),
                    None,
                )
            }
            Err(why) => return failure(400, "BadRequest", why, None),
        };
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        if object["apiVersion"] != self.target.api_version.as_str()
            || plural(&kind) != self.target.plural
        {
            return failure(
                400,
                "BadRequest",
                format!(
                    "the API version in the data ({}) or its kind ({kind}) does not match the request's {}",
                    object["apiVersion"], self.target.collection()
                ),
                None,
            );
        }
        let metadata = &mut object["metadata"];
        match metadata["namespace"].as_str() {
            None | Some("") if !self.target.namespace.is_empty() => {
                metadata["namespace"] = json!(self.target.namespace);
            }
            Some(namespace) if namespace != self.target.namespace => {
                return failure(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request".to_string(),
                    None,
                );
            }
            _ => {}
        }
        let Some(name) = metadata["name"]
            .as_str()
            .filter(|name| !name.is_empty())
            .map(str::to_string)
        else {
            return failure(422, "Invalid", format!("{kind} \"\" is invalid: metadata.name: Required value: name or generateName is required"), None);
        };
        // etcd's own refusal, not turned into a typed Status (`InterpretCreateError`).
        if metadata["resourceVersion"]
            .as_str()
            .is_some_and(|version| !version.is_empty())
        {
            return failure(
                500,
                "InternalError",
                "Internal error occurred: resourceVersion should not be set on objects to be created".to_string(),
                None,
            );
        }
        // Set by the server on create, whatever the body says (`FillObjectMetaSystemFields`,
        // `PrepareForCreate`).
        if let Some(members) = metadata.as_object_mut() {
            for field in [
                "uid",
                "creationTimestamp",
                "generation",
                "managedFields",
                "selfLink",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ] {
                members.remove(field);
            }
        }
        if let Some(members) = object.as_object_mut() {
            members.remove("status");
        }
        let path = format!("{}/{name}", self.target.collection());
        if state.objects.contains_key(&path) {
            return failure(
                409,
                "AlreadyExists",
                format!("{} {name:?} already exists", self.target.qualified()),
                Some(self.target.details(&name)),
            );
        }
        if let Some(why) = super::webhooks::denied(None, &object) {
            return failure(400, "BadRequest", why, None);
        }
        let warnings = match super::admission::admit(
            &state.policies,
            &super::admission::Write {
                operation: "CREATE",
                api_version: &self.target.api_version,
                plural: &self.target.plural,
                namespace: &self.target.namespace,
                name: &name,
                object: &object,
                old_object: None,
            },
        ) {
            Ok(warnings) => warnings,
            Err(why) => return failure(422, "Invalid", why, Some(self.target.details(&name))),
        };
        if self.dry_run {
            return warned(answer(201, &object), &warnings);
        }
        let stored = state
            .commit(&path, Some(object), &self.manager, Part::Main)
            .expect("a create always writes");
        controllers::react(shared, state, &path, None, Some(&stored), &self.manager);
        warned(answer(201, &stored), &warnings)
    }
}

/// `response` with a `Warning` header for each of `warnings` (admission policies bound with
/// `Warn`).
fn warned(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        if let Ok(value) = axum::http::HeaderValue::from_str(warning) {
            response.headers_mut().append("warning", value);
        }
    }
    response
}

/// A JSON answer.
fn answer(status: u16, body: &Value) -> Response {
    (
        StatusCode::from_u16(status).expect("status"),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A failure `Status`, as the API server writes one.
fn failure(code: u16, reason: &str, message: String, details: Option<Value>) -> Response {
    let mut body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": message, "reason": reason, "code": code});
    if let Some(details) = details {
        body["details"] = details;
    }
    answer(code, &body)
}
