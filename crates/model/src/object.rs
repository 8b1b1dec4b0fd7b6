//! Kubernetes' own vocabulary that every crate shares: an owner reference, read straight from
//! an object's metadata by decode (hence its serde shape, which is Kubernetes' own), kept in the
//! engine's state and bound to CEL expressions.

/// An owner reference (`metadata.ownerReferences[]`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// `apiVersion` of the owner.
    pub api_version: String,
    /// `kind` of the owner.
    pub kind: String,
    /// `name` of the owner.
    pub name: String,
    /// `uid` of the owner.
    pub uid: String,
    /// True for the managing controller.
    #[serde(default)]
    pub controller: bool,
}
