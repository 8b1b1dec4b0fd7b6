//! The Kubernetes API, for what the ApiServerSource cannot tell: lists of every watched kind at
//! start and on a schedule ([`resync`]), and the live state `check --live-cluster` reads; and
//! remediation's writes ([`write`]), sent exactly as planned.
//!
//! Only this module knows kube-rs. Lists are paged (`limit` and `continue`); a list whose
//! continue token expired (`410 Gone`) starts again from the first page, and the caller is told
//! so it can forget what the abandoned pass saw. Resync decodes items into the decoder's
//! [`KubeObject`]s at once (Secret values hashed before anything keeps them), so listed objects
//! reach the engine through the same code path as events; `check --live-cluster` hands the raw
//! items to `check`, which hashes Secret values as it reads them, as it does for files. An item
//! the decoder rejects is skipped and reported, never a reason to stop listing the rest.

pub mod resync;
pub mod write;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{
    ApiResource, DynamicObject, GroupVersionKind, Resource as _, Selector, SelectorExt as _,
};
use serde::Deserialize;
use serde_json::Value;

use drift_core::config::ResourceConfig;
use drift_core::decode::parse_object;
use drift_core::decode::KubeObject;
use drift_core::manifest;

/// How long to wait for a connection to the API server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one list request may take.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// How often one list may start over after `410 Gone` before the resource counts as failed.
const MAX_RESTARTS: u32 = 3;

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable client configuration (kubeconfig, context, in-cluster environment).
    #[error("cannot configure the Kubernetes client: {0}")]
    Config(String),
    /// The API server refused the list.
    #[error("listing {resource}: the API server answered {code} {reason}: {message}")]
    Api {
        /// `apiVersion kind` listed.
        resource: String,
        /// HTTP status.
        code: u16,
        /// The Status `reason` (`Forbidden`, ...).
        reason: String,
        /// The Status `message`.
        message: String,
    },
    /// The continue token kept expiring.
    #[error(
        "listing {resource}: the continue token expired {restarts} times (410 Gone) before the \
         list could be paged to its end; a larger resync.pageSize needs fewer pages"
    )]
    Gone {
        /// `apiVersion kind` listed.
        resource: String,
        /// How often the list started over.
        restarts: u32,
    },
    /// The request did not get an answer.
    #[error("listing {resource}: {message}")]
    Transport {
        /// `apiVersion kind` listed.
        resource: String,
        /// What failed.
        message: String,
    },
    /// A configured resource's label selector that the client cannot use.
    #[error("cannot configure the Kubernetes client: {resource}: {error}")]
    Selector {
        /// `apiVersion kind` of the resource, as configured.
        resource: String,
        /// Why. Not the `source()`: a failed start prints the chain of causes, which would
        /// repeat it.
        error: kube::core::ParseExpressionError,
    },
    /// A listed item the decoder rejects: skipped and reported, never a reason to stop listing.
    #[error("{object}: {source}")]
    Undecodable {
        /// `namespace/name`, `?` for what the item lacks.
        object: String,
        /// What the decoder rejects.
        #[source]
        source: drift_core::decode::Error,
    },
}

impl Error {
    /// A stable, bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::Api { code: 401, .. } => "unauthorized",
            Error::Api { code: 403, .. } => "forbidden",
            Error::Api { code: 404, .. } => "not_found",
            Error::Api { .. } => "api",
            Error::Gone { .. } => "gone",
            Error::Transport { .. } => "transport",
            Error::Selector { .. } => "selector",
            Error::Undecodable { .. } => "undecodable",
        }
    }
}

/// A client for one cluster.
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
    /// Where the client points (context name or `in-cluster`), for messages.
    pub description: String,
    /// The API server's URL (drills journal it, so a recovery goes to the same cluster).
    pub server: String,
}

impl Cluster {
    /// Connects with `kubeconfig` (a file) and `context` when given; otherwise in-cluster, or
    /// `$KUBECONFIG` / `~/.kube/config` (kube-rs's inference order). Nothing is requested yet.
    pub async fn connect(
        kubeconfig: Option<&Path>,
        context: Option<&str>,
    ) -> Result<Cluster, Error> {
        Cluster::connect_with(kubeconfig, context, true).await
    }

    /// As [`Cluster::connect`], for remediation's writes: without kube-rs's own repeats of a
    /// request answered `429`/`503`/`504` (`Config::default_retry`), so that every send is
    /// the sender's own and counted (after a repeat, a conflict may be the first try's own
    /// write: see `cluster::write`).
    pub async fn connect_for_writes(
        kubeconfig: Option<&Path>,
        context: Option<&str>,
    ) -> Result<Cluster, Error> {
        Cluster::connect_with(kubeconfig, context, false).await
    }

    async fn connect_with(
        kubeconfig: Option<&Path>,
        context: Option<&str>,
        retry: bool,
    ) -> Result<Cluster, Error> {
        let options = KubeConfigOptions {
            context: context.map(str::to_string),
            ..KubeConfigOptions::default()
        };
        let (mut config, description) = match kubeconfig {
            Some(path) => {
                let file = Kubeconfig::read_from(path)
                    .map_err(|error| Error::Config(format!("{}: {error}", path.display())))?;
                let current = context
                    .map(str::to_string)
                    .or_else(|| file.current_context.clone())
                    .unwrap_or_default();
                let config = kube::Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(|error| Error::Config(format!("{}: {error}", path.display())))?;
                (config, format!("context {current:?} of {}", path.display()))
            }
            None if context.is_some() => {
                let config = kube::Config::from_kubeconfig(&options)
                    .await
                    .map_err(|error| Error::Config(error.to_string()))?;
                (config, format!("context {:?}", context.unwrap_or_default()))
            }
            None => {
                let config = kube::Config::infer()
                    .await
                    .map_err(|error| Error::Config(error.to_string()))?;
                (
                    config,
                    "the inferred cluster (in-cluster or kubeconfig)".to_string(),
                )
            }
        };
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = Some(READ_TIMEOUT);
        config.default_retry = retry;
        let server = config.cluster_url.to_string();
        let client =
            kube::Client::try_from(config).map_err(|error| Error::Config(error.to_string()))?;
        Ok(Cluster {
            client,
            description,
            server,
        })
    }
}

/// One kind to list, compiled from a [`ResourceConfig`].
#[derive(Debug, Clone)]
pub struct Resource {
    api: ApiResource,
    selector: Selector,
    /// Listed by resync only (see [`ResourceConfig::resync_only`]).
    resync_only: bool,
}

impl Resource {
    /// Compiles a configured resource (the config was validated: operators and values).
    pub fn new(config: &ResourceConfig) -> Result<Resource, Error> {
        let (group, version) = match config.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", config.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &config.kind);
        let api = match &config.plural {
            Some(plural) => ApiResource::from_gvk_with_plural(&gvk, plural),
            None => ApiResource::from_gvk(&gvk),
        };
        Ok(Resource {
            api,
            selector: selector(config)?,
            resync_only: config.resync_only,
        })
    }

    /// True when the source does not watch this kind: what resync finds of it is no sign of
    /// missed events.
    pub fn resync_only(&self) -> bool {
        self.resync_only
    }

    /// `apiVersion kind`, for messages.
    pub fn name(&self) -> String {
        format!("{} {}", self.api.api_version, self.api.kind)
    }

    /// The `apiVersion`.
    pub fn api_version(&self) -> &str {
        &self.api.api_version
    }

    /// The kind.
    pub fn kind(&self) -> &str {
        &self.api.kind
    }

    /// True when the label selector covers `labels`.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.matches(labels)
    }

    /// True when a list of this resource would contain `object` (a manifest): same group and
    /// kind, labels the selector accepts.
    pub(crate) fn covers(&self, object: &Value) -> bool {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let group = drift_core::decode::object::api_group(text("/apiVersion"));
        if group != self.api.group || text("/kind") != self.api.kind {
            return false;
        }
        let labels: BTreeMap<String, String> = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        self.selector.matches(&labels)
    }

    /// A matcher that owns its selector, for the writer thread.
    pub(crate) fn selector_fn(
        &self,
    ) -> impl Fn(&drift_model::Pairs) -> bool + Send + Sync + 'static {
        let selector = self.selector.clone();
        // kube's selector reads a `BTreeMap`; a sweep asks once per tracked object of the kind.
        move |labels| selector.matches(&labels.to_map())
    }

    /// Starts listing in `namespace` (all namespaces when `None`), `page_size` items a page.
    pub fn list<'a>(
        &'a self,
        cluster: &'a Cluster,
        namespace: Option<&str>,
        page_size: u32,
    ) -> Lister<'a> {
        Lister {
            cluster,
            resource: self,
            path: DynamicObject::url_path(&self.api, namespace),
            page_size,
            continue_token: None,
            restarts: 0,
            done: false,
            restarted: false,
        }
    }
}

/// The label selector of a configured resource.
fn selector(resource: &ResourceConfig) -> Result<Selector, Error> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    let config = &resource.selector;
    let selector = LabelSelector {
        match_labels: (!config.match_labels.is_empty()).then(|| config.match_labels.clone()),
        match_expressions: (!config.match_expressions.is_empty()).then(|| {
            config
                .match_expressions
                .iter()
                .map(|requirement| LabelSelectorRequirement {
                    key: requirement.key.clone(),
                    operator: requirement.operator.clone(),
                    values: (!requirement.values.is_empty()).then(|| requirement.values.clone()),
                })
                .collect()
        }),
    };
    Selector::try_from(selector).map_err(|error| Error::Selector {
        resource: format!("{} {}", resource.api_version, resource.kind),
        error,
    })
}

/// One page of a list.
#[derive(Debug, Default)]
pub struct Page {
    /// The items, each with the `apiVersion` and `kind` that list items lack.
    pub items: Vec<Value>,
    /// True when this page starts a new pass because the previous one's continue token expired:
    /// forget what the earlier pages of this list contained.
    pub restarted: bool,
    /// The list's `resourceVersion` (the snapshot every page of one pass shares).
    pub list_version: String,
}

/// Pages through one list; see [`Resource::list`].
pub struct Lister<'a> {
    cluster: &'a Cluster,
    resource: &'a Resource,
    path: String,
    page_size: u32,
    continue_token: Option<String>,
    restarts: u32,
    done: bool,
    restarted: bool,
}

#[derive(Deserialize)]
struct RawList {
    /// `ServiceList`, ...: the items' kind as the API server spells it.
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: RawListMeta,
    #[serde(default)]
    items: Vec<Value>,
}

#[derive(Deserialize, Default)]
struct RawListMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

impl Lister<'_> {
    /// The next page, or `None` after the last one.
    pub async fn next_page(&mut self) -> Result<Option<Page>, Error> {
        if self.done {
            return Ok(None);
        }
        loop {
            let mut params = ListParams::default().limit(self.page_size);
            if !self.resource.selector.selects_all() {
                params = params.labels_from(&self.resource.selector);
            }
            if let Some(token) = &self.continue_token {
                params = params.continue_token(token);
            }
            let request = kube::core::Request::new(&self.path)
                .list(&params)
                .map_err(|error| Error::Transport {
                    resource: self.resource.name(),
                    message: error.to_string(),
                })?;
            match self.cluster.client.request::<RawList>(request).await {
                Ok(list) => {
                    self.continue_token = list
                        .metadata
                        .continue_token
                        .filter(|token| !token.is_empty());
                    self.done = self.continue_token.is_none();
                    // The kind as the API server spells it (`ServiceList` → `Service`), not as
                    // the config does: a differently cased kind would file the same uid twice.
                    let kind = list
                        .kind
                        .as_deref()
                        .and_then(|kind| kind.strip_suffix("List"))
                        .filter(|kind| !kind.is_empty())
                        .unwrap_or(&self.resource.api.kind)
                        .to_string();
                    let mut items = list.items;
                    for item in &mut items {
                        if let Some(map) = item.as_object_mut() {
                            map.entry("apiVersion").or_insert_with(|| {
                                Value::String(self.resource.api.api_version.clone())
                            });
                            map.entry("kind")
                                .or_insert_with(|| Value::String(kind.clone()));
                        }
                    }
                    return Ok(Some(Page {
                        items,
                        restarted: std::mem::take(&mut self.restarted),
                        list_version: list.metadata.resource_version.unwrap_or_default(),
                    }));
                }
                Err(kube::Error::Api(status))
                    if status.code == 410 && self.continue_token.is_some() =>
                {
                    // The snapshot behind the token was compacted away: list again from the start.
                    self.restarts += 1;
                    if self.restarts > MAX_RESTARTS {
                        self.done = true;
                        return Err(Error::Gone {
                            resource: self.resource.name(),
                            restarts: self.restarts - 1,
                        });
                    }
                    self.continue_token = None;
                    self.restarted = true;
                }
                Err(kube::Error::Api(status)) => {
                    self.done = true;
                    return Err(Error::Api {
                        resource: self.resource.name(),
                        code: status.code,
                        reason: status.reason.clone(),
                        message: status.message.chars().take(300).collect(),
                    });
                }
                Err(error) => {
                    self.done = true;
                    return Err(Error::Transport {
                        resource: self.resource.name(),
                        message: error.to_string(),
                    });
                }
            }
        }
    }
}

/// Decodes a listed item (Secret values are hashed here, before anything keeps them). The error
/// names the object (`namespace/name`) and what is wrong.
pub(crate) fn decode_item(item: Value) -> Result<KubeObject, Error> {
    let text = |pointer: &str| {
        item.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    };
    let object = format!("{}/{}", text("/metadata/namespace"), text("/metadata/name"));
    parse_object(item).map_err(|source| Error::Undecodable { object, source })
}

/// Reads the live state of `resources` (in `namespace`, or all namespaces) into a
/// [`manifest::Manifests`] for `check --live-cluster`.
pub async fn snapshot(
    cluster: &Cluster,
    resources: &[Resource],
    namespace: Option<&str>,
    page_size: u32,
) -> Result<manifest::Manifests, SnapshotError> {
    let mut snapshot = manifest::Manifests::default();
    for resource in resources {
        let mut lister = resource.list(cluster, namespace, page_size);
        let mut pages: Vec<Vec<Value>> = Vec::new();
        while let Some(page) = lister.next_page().await? {
            if page.restarted {
                pages.clear();
            }
            pages.push(page.items);
        }
        for (number, items) in pages.into_iter().enumerate() {
            for (index, item) in items.into_iter().enumerate() {
                let origin = manifest::Origin {
                    file: format!("{} ({} list)", cluster.description, resource.name()),
                    document: number + 1,
                    line: 0,
                    item: Some(index),
                };
                snapshot.add_object(item, origin)?;
            }
        }
    }
    Ok(snapshot)
}

/// Why a live snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Listing failed.
    #[error(transparent)]
    List(#[from] Error),
    /// A listed object is not one the check can read.
    #[error(transparent)]
    Object(#[from] manifest::Error),
}

#[cfg(test)]
mod tests {
    use drift_core::config::{LabelSelectorConfig, SelectorRequirementConfig};

    use super::*;

    #[test]
    fn a_selector_the_client_cannot_use_names_its_resource() {
        let config = ResourceConfig {
            api_version: "serving.knative.dev/v1".into(),
            kind: "Service".into(),
            plural: None,
            selector: LabelSelectorConfig {
                match_expressions: vec![SelectorRequirementConfig {
                    key: "app".into(),
                    operator: "Near".into(),
                    values: Vec::new(),
                }],
                ..LabelSelectorConfig::default()
            },
            resync_only: false,
        };
        let error = Resource::new(&config).unwrap_err();
        assert_eq!(error.kind(), "selector");
        assert_eq!(
            error.to_string(),
            "cannot configure the Kubernetes client: serving.knative.dev/v1 Service: failed to \
             parse value as expression: Invalid expression operator"
        );
    }

    #[test]
    fn an_item_the_decoder_rejects_names_the_object() {
        let item = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "apps"}});
        let error = decode_item(item).unwrap_err();
        assert_eq!(error.kind(), "undecodable");
        assert!(
            error
                .to_string()
                .starts_with("apps/?: invalid ApiServerSource data: "),
            "{error}"
        );
    }
}
