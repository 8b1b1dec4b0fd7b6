//! Putting a drilled object back: from the object as it is now, only where the injection
//! wrote, on its current version, never over a change someone made after the drill (named
//! instead, with the `kubectl` command to run by hand); an injection whose answer is unknown is
//! compared with what it would have made; a deleted object waits for its finalizers.

use std::time::{Duration, Instant};

use serde_json::Value;

use drift_core::drill::{plan, Inject, Target, FIELD_MANAGER};
use drift_core::remediate::plan::{resource_path, Request};

use super::report::End;
use crate::cluster::write::Sent;
use crate::cluster::Cluster;

/// How long a restore waits for a deleted object's finalizers before creating it again.
const DELETED_WAIT: Duration = Duration::from_secs(120);
/// Tries of a restore that meets a conflict (the object moved on: read again) or no answer.
const RESTORE_TRIES: u32 = 5;

/// The target's API path.
pub(crate) fn object_path(target: &Target) -> String {
    resource_path(
        &target.api_version,
        &target.kind,
        &target.namespace,
        Some(&target.name),
    )
}

/// A request as a person sends it by hand: a `kubectl` command (without the
/// `resourceVersion` precondition, which is stale by the time anyone reads this).
pub(crate) fn by_hand(target: &Target, request: &Request) -> String {
    let quote = |text: &str| format!("'{}'", text.replace('\'', "'\\''"));
    let resource = {
        // `/apis/GROUP/VERSION/namespaces/NS/PLURAL[/NAME]` or `/api/v1/namespaces/NS/PLURAL[/NAME]`.
        let path = request.path.split('?').next().unwrap_or_default();
        let segments: Vec<&str> = path.split('/').collect();
        let plural = segments
            .iter()
            .position(|segment| *segment == "namespaces")
            .and_then(|at| segments.get(at + 2))
            .copied()
            .unwrap_or_default();
        match target.api_version.rsplit_once('/') {
            Some((group, _)) => format!("{plural}.{group}"),
            None => plural.to_string(),
        }
    };
    let mut body = request.body.clone();
    if let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
        if metadata.is_empty() {
            body.as_object_mut()
                .map(|members| members.remove("metadata"));
        }
    }
    match request.method {
        "PATCH" => format!(
            "kubectl -n {} patch {resource} {} --type merge -p {}",
            target.namespace,
            target.name,
            quote(&body.to_string())
        ),
        "POST" => format!("echo {} | kubectl create -f -", quote(&body.to_string())),
        "DELETE" => format!(
            "kubectl -n {} delete {resource} {}",
            target.namespace, target.name
        ),
        _ => format!("{} {} {}", request.method, request.path, request.body),
    }
}

fn created_by_drill(object: &Value) -> bool {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|fields| {
            fields
                .iter()
                .any(|field| field.get("manager").and_then(Value::as_str) == Some(FIELD_MANAGER))
        })
}

/// Puts back what `inject` changed on `target`: from the object as it is now, only where the
/// injection wrote, on its current version; never over a change someone made after the drill.
/// `injected` is the API server's answer to the injection; `None` when it is not known (a run
/// killed mid-request, an answer lost): the drill then works out what the injection would have
/// made, and touches only fields that hold exactly that. Ends after [`RESTORE_TRIES`] tries (a
/// deleted object still finalizing is waited for up to [`DELETED_WAIT`]).
pub(crate) async fn restore(
    cluster: &Cluster,
    target: &Target,
    inject: &Inject,
    kept: Option<&Value>,
    injected: Option<&Value>,
) -> End {
    let path = object_path(target);
    // What the drill compares the object with: the answer, or what the injection makes.
    let guessed = match (injected, kept) {
        (None, Some(kept)) => plan::injected_locally(inject, kept),
        _ => None,
    };
    let as_injected = injected.or(guessed.as_ref());
    let mut last: String;
    let mut tries = 0;
    let deleted_wait = Instant::now() + DELETED_WAIT;
    loop {
        if tries > 0 {
            tokio::time::sleep(Duration::from_millis(200 << tries.min(4))).await;
        }
        tries += 1;
        let finalizing = match cluster.get_json(&path).await {
            Err(error) => {
                last = format!("reading it: {error}");
                false
            }
            Ok(current) => match once(
                cluster,
                target,
                inject,
                kept,
                injected,
                as_injected,
                current.as_ref(),
            )
            .await
            {
                Try::Done(end) => return end,
                Try::Again { why, finalizing } => {
                    last = why;
                    finalizing
                }
            },
        };
        if finalizing && Instant::now() < deleted_wait {
            continue;
        }
        if finalizing {
            let again = plan::restore(target, inject, kept, None)
                .map(|request| by_hand(target, &request))
                .unwrap_or_default();
            return End::NotRestored(format!(
                "it was still being deleted after {}s (a finalizer holds it): once it is gone, \
                 create it again: {again}",
                DELETED_WAIT.as_secs()
            ));
        }
        if tries >= RESTORE_TRIES {
            break;
        }
    }
    // The command from the object as last read, else from the object as the injection left it.
    let hand = match cluster.get_json(&path).await {
        Ok(current) => plan::restore(target, inject, kept, current.as_ref()),
        Err(_) => plan::restore(target, inject, kept, as_injected),
    }
    .as_ref()
    .map(|request| by_hand(target, request))
    .unwrap_or_else(|| "(none could be made: put back by hand what the drill changed)".into());
    End::NotRestored(format!(
        "gave up after {tries} tries (last: {last}); send it by hand: {hand}"
    ))
}

/// What one try came to.
enum Try {
    Done(End),
    /// Try again: why, and whether a deleted object is still finalizing.
    Again {
        why: String,
        finalizing: bool,
    },
}

/// One try of a restore on the object as just read (`current`).
async fn once(
    cluster: &Cluster,
    target: &Target,
    inject: &Inject,
    kept: Option<&Value>,
    injected: Option<&Value>,
    as_injected: Option<&Value>,
    current: Option<&Value>,
) -> Try {
    let uid = |object: Option<&Value>| {
        object
            .and_then(|object| object.pointer("/metadata/uid"))
            .cloned()
    };
    let planned_restore = plan::restore(target, inject, kept, current);
    let hand = planned_restore
        .as_ref()
        .map(|request| by_hand(target, request))
        .unwrap_or_default();
    match inject {
        Inject::MergePatch(_) | Inject::JsonPatch(_) => {
            let Some(now) = current else {
                return Try::Done(End::NotRestored(format!(
                    "deleted by someone since the drill; re-create it from what was kept: {}",
                    kept.map(Value::to_string).unwrap_or_default()
                )));
            };
            if injected.is_none() {
                let version = |object: &Value| object.pointer("/metadata/resourceVersion").cloned();
                // Not written since it was read: the injection never landed.
                if kept.is_some_and(|kept| version(kept) == version(now)) {
                    return Try::Done(End::AlreadyBack);
                }
                // Put back already (by hand, say): nothing left to judge.
                if as_injected.is_none() && !plan::repaired(inject, kept, current) {
                    return Try::Done(End::NotRestored(format!(
                        "the injection's answer was lost and what it made cannot be worked out \
                         here: check the object, and put back by hand what the drill changed: \
                         {hand}"
                    )));
                }
            }
        }
        Inject::Delete => {
            match current {
                // The kept object itself: on its way out (a finalizer) after the delete, or
                // never deleted (the answer was lost before the delete landed).
                Some(now) if uid(Some(now)) == uid(kept) => {
                    if injected.is_none() && now.pointer("/metadata/deletionTimestamp").is_none() {
                        return Try::Done(End::AlreadyBack);
                    }
                    return Try::Again {
                        why: "the deleted object is still finalizing".into(),
                        finalizing: true,
                    };
                }
                // Gone, and whether the drill deleted it is not known: never re-created on a
                // guess (someone may have deleted it on purpose).
                None if injected.is_none() => {
                    let again = plan::restore(target, inject, kept, None)
                        .map(|request| by_hand(target, &request))
                        .unwrap_or_default();
                    return Try::Done(End::NotRestored(format!(
                        "it is gone, and the drill's delete got no answer: if the drill deleted \
                         it, create it again: {again}"
                    )));
                }
                _ => {}
            }
        }
        Inject::Create(_) => {
            if let Some(now) = current {
                if injected.is_none() && !created_by_drill(now) {
                    return Try::Done(End::NotRestored(format!(
                        "it exists, but not as the drill created it: delete it by hand if it is \
                         the drill's: {hand}"
                    )));
                }
            }
        }
    }
    if let Some(as_injected) = as_injected {
        let foreign = plan::foreign_changes(inject, kept, as_injected, current);
        if !foreign.is_empty() {
            return Try::Done(End::NotRestored(format!(
                "changed by someone else since the drill ({}), not written over; to put back \
                 what the drill changed: {hand}",
                foreign.join(", ")
            )));
        }
    }
    if plan::repaired(inject, kept, current) {
        return Try::Done(End::AlreadyBack);
    }
    let Some(request) = planned_restore else {
        return Try::Done(End::AlreadyBack);
    };
    let why = match cluster.send_planned(&request.planned()).await {
        Sent::Applied { .. } => return Try::Done(End::Restored),
        // The object moved on between the read and the write: read it again.
        Sent::Conflict { status, message } => format!("{status}: {message}"),
        Sent::Retry { status, message } => format!(
            "{}: {message}",
            status.map_or("no answer".to_string(), |status| status.to_string())
        ),
        Sent::Refused { status, message } => {
            return Try::Done(End::NotRestored(format!(
                "the API server refused the restore ({status}: {message}); send it by hand: {hand}"
            )))
        }
    };
    Try::Again {
        why,
        finalizing: false,
    }
}
