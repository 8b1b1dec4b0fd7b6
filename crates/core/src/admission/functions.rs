//! The functions the API server's CEL offers a new ValidatingAdmissionPolicy, by Kubernetes
//! version. A new expression compiles against the environment of the *compatibility version*,
//! one minor below the server's (`k8s.io/apiserver` `pkg/cel/environment`), so a library
//! Kubernetes added in 1.N is usable in a policy written for a 1.N+1 server. The base
//! environment (`base.go`): the standard library; URLs, regex (`find`, `findAll`) and lists
//! (1.0); quantity and optional types (1.28); the strings extension at version 2 and sets
//! (1.29); IP and CIDR (1.30); format (1.31); semver (1.33). The strings extension's version 3
//! (`reverse`) is not in it.
//!
//! Only what both sides offer can be exported: the sink's CEL (the `cel` crate with its strings
//! extension) is the other bound, so libraries the sink lacks (quantity, IP, semver, ...) never
//! reach this table through a rule that compiled.

/// The oldest Kubernetes minor version with `admissionregistration.k8s.io/v1`
/// ValidatingAdmissionPolicy (GA, on by default).
pub const OLDEST_MINOR: u32 = 30;

/// Calls (`name` global, `.name` member) and the minor version from which a new policy may use
/// them.
const AVAILABLE: &[(&str, u32)] = &[
    // Operators and the standard library.
    ("_&&_", 0),
    ("_||_", 0),
    ("!_", 0),
    ("-_", 0),
    ("_==_", 0),
    ("_!=_", 0),
    ("_<_", 0),
    ("_<=_", 0),
    ("_>_", 0),
    ("_>=_", 0),
    ("_+_", 0),
    ("_-_", 0),
    ("_*_", 0),
    ("_/_", 0),
    ("_%_", 0),
    ("_[_]", 0),
    ("@in", 0),
    ("_?_:_", 0),
    ("@not_strictly_false", 0),
    ("size", 0),
    (".size", 0),
    ("int", 0),
    ("uint", 0),
    ("double", 0),
    ("string", 0),
    ("bytes", 0),
    ("bool", 0),
    ("type", 0),
    ("dyn", 0),
    (".matches", 0),
    ("matches", 0),
    (".contains", 0),
    (".startsWith", 0),
    (".endsWith", 0),
    // The strings extension, version 0.
    (".charAt", 0),
    (".indexOf", 0),
    (".lastIndexOf", 0),
    (".lowerAscii", 0),
    (".upperAscii", 0),
    (".replace", 0),
    (".split", 0),
    (".substring", 0),
    (".trim", 0),
    (".join", 0),
    // Kubernetes' regex and list libraries.
    (".find", 0),
    (".findAll", 0),
    (".isSorted", 0),
    (".sum", 0),
    (".min", 0),
    (".max", 0),
    // The strings extension, version 2 (Kubernetes 1.29): format and quote.
    (".format", 30),
    ("strings.quote", 30),
];

/// Why `call` (as [`drift_cel::admission::Analysis::functions`] names it) cannot be used by a
/// new policy on a 1.`minor` API server; `None` when it can.
pub fn unavailable(call: &str, minor: u32) -> Option<String> {
    let shown = call
        .strip_prefix('.')
        .map_or_else(|| format!("{call}()"), |member| format!(".{member}()"));
    match AVAILABLE.iter().find(|(name, _)| *name == call) {
        Some((_, since)) if *since <= minor => None,
        Some((_, since)) => Some(format!(
            "{shown}, which a new policy may use from Kubernetes 1.{since} (the target is 1.{minor})"
        )),
        None => Some(format!(
            "{shown}, which the API server's CEL does not offer in any Kubernetes version this \
             exporter knows (1.{OLDEST_MINOR} to 1.{minor}): rewrite the rule without it"
        )),
    }
}
