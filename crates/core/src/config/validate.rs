//! Semantic validation of a loaded configuration: every error names the key path and the reason.
//! Class ids are checked against the engine's registry, so a class added there is known here.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{ChannelConfig, ChannelKind, Config, Error, ResyncConfig, Secret};
use crate::classify::classes;
use crate::route::GroupBy;
use drift_model::silence::MATCHER_KEYS;
use drift_model::SEVERITIES;

fn validate_store(store: &super::StoreConfig) -> Result<(), Error> {
    if store.path.as_os_str().is_empty() {
        return Err(Error::invalid("store.path", "must not be empty"));
    }
    let Some(url) = &store.url else {
        for (key, set) in [
            ("store.password", store.password.is_some()),
            ("store.caFile", store.ca_file.is_some()),
            ("store.lease", store.lease_set),
        ] {
            if set {
                return Err(Error::invalid(
                    key,
                    "applies to a PostgreSQL store only (store.url)",
                ));
            }
        }
        return Ok(());
    };
    if store.path_set {
        return Err(Error::invalid(
            "store.url",
            "set either store.path (SQLite) or store.url (PostgreSQL), not both",
        ));
    }
    // The URL's own words (never its value: it may hold a password).
    super::server::check_store_url(url.expose())
        .map_err(|reason| Error::invalid("store.url", reason.to_string()))?;
    if store.password.as_ref().is_some_and(Secret::is_empty) {
        return Err(Error::invalid(
            "store.password",
            "is empty (a ${VAR} set to nothing?)",
        ));
    }
    let lease = &store.lease;
    if lease.ttl < Duration::from_secs(2) {
        return Err(Error::invalid(
            "store.lease.ttl",
            "must be at least 2s (a shorter lease lapses on a slow commit)",
        ));
    }
    // The writer gives the role up when no renewal succeeded for ttl - renewInterval: a third
    // of the ttl leaves one renewal that fails (or is slow) room before that.
    if lease.renew_interval.is_zero() || lease.renew_interval.saturating_mul(3) > lease.ttl {
        return Err(Error::invalid(
            "store.lease.renewInterval",
            format!(
                "must be more than 0s and at most a third of store.lease.ttl ({}s), so one failed renewal does not lose the lease",
                lease.ttl.as_secs_f64()
            ),
        ));
    }
    if lease.retry_interval.is_zero() || lease.retry_interval > lease.ttl {
        return Err(Error::invalid(
            "store.lease.retryInterval",
            "must be more than 0s and at most store.lease.ttl",
        ));
    }
    Ok(())
}

pub(super) fn validate(config: &Config) -> Result<(), Error> {
    if config.default_cluster.trim().is_empty() {
        return Err(Error::invalid("defaultCluster", "must not be empty"));
    }
    // Names filed under without an event's say: the rules ingest applies to the `cluster`
    // extension (decode::cluster_name), or a look-alike or a `fleet:` name enters through here.
    let name_rules = |key: String, name: &str| {
        crate::decode::cluster_name::check(name)
            .map_err(|error| Error::invalid(key, format!("cluster name {error}")))
    };
    name_rules("defaultCluster".to_string(), &config.default_cluster)?;
    for (source, name) in &config.clusters {
        if name.trim().is_empty() {
            return Err(Error::invalid(
                format!("clusters.{source}"),
                "cluster name must not be empty",
            ));
        }
        name_rules(format!("clusters.{source}"), name)?;
    }
    if let Some(name) = config
        .resync
        .cluster
        .as_deref()
        .filter(|name| !name.trim().is_empty())
    {
        name_rules("resync.cluster".to_string(), name)?;
    }
    let server = &config.server;
    if server.body_limit_bytes < 1024 {
        return Err(Error::invalid(
            "server.bodyLimitBytes",
            "must be at least 1024 bytes",
        ));
    }
    if server
        .in_flight_bytes
        .is_some_and(|bytes| bytes < server.body_limit_bytes)
    {
        return Err(Error::invalid(
            "server.inFlightBytes",
            "must be at least server.bodyLimitBytes (one largest request must fit)",
        ));
    }
    if server.queue_capacity == 0 {
        return Err(Error::invalid("server.queueCapacity", "must be at least 1"));
    }
    if server.request_timeout.is_zero() {
        return Err(Error::invalid("server.requestTimeout", "must be positive"));
    }
    for (key, value) in [
        ("server.headerReadTimeout", server.header_read_timeout),
        ("server.idleTimeout", server.idle_timeout),
        ("server.bodyReadTimeout", server.body_read_timeout),
    ] {
        if value.is_zero() {
            return Err(Error::invalid(key, "must be positive"));
        }
    }
    if server.max_connections == 0 {
        return Err(Error::invalid(
            "server.maxConnections",
            "must be at least 1",
        ));
    }
    if server.body_min_bytes_per_second == 0 {
        return Err(Error::invalid(
            "server.bodyMinBytesPerSecond",
            "must be at least 1",
        ));
    }
    validate_store(&config.store)?;
    config.shard.validate(config.store.url.is_some())?;
    validate_shard_resync(config)?;
    validate_resync(&config.resync)?;
    config
        .traffic
        .validate(&config.shard, &config.resync, &config.default_cluster)?;
    config
        .remediation
        .compile(&config.resync, &config.default_cluster)?;
    super::invariants::compile(&config.rules.invariants, "rules.invariants")?;
    config.fleet.compile("fleet.groups")?;
    validate_limits(&config.limits)?;
    config.rules.certificates.validate()?;
    config.rules.mesh.validate()?;
    for (class, rule) in &config.rules.classes {
        if !classes::is_known(class) {
            return Err(Error::invalid(
                format!("rules.classes.{class}"),
                format!(
                    "unknown drift class; known: {}",
                    classes::ids().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        if let Some(tolerance) = rule.tolerance_percent {
            if !(0.0..=100.0).contains(&tolerance) {
                return Err(Error::invalid(
                    format!("rules.classes.{class}.tolerancePercent"),
                    "must be between 0 and 100",
                ));
            }
        }
        if let Some(severity) = &rule.severity {
            if !SEVERITIES.contains(&severity.as_str()) {
                return Err(Error::invalid(
                    format!("rules.classes.{class}.severity"),
                    format!("must be one of {}", SEVERITIES.join(", ")),
                ));
            }
        }
    }
    for (index, silence) in config.rules.silences.iter().enumerate() {
        let path = format!("rules.silences[{index}]");
        if silence.matchers.is_empty() {
            return Err(Error::invalid(
                format!("{path}.matchers"),
                "needs at least one matcher",
            ));
        }
        for key in silence.matchers.keys() {
            let known = MATCHER_KEYS;
            if !(known.contains(&key.as_str()) || key.starts_with("label:")) {
                return Err(Error::invalid(
                    format!("{path}.matchers.{key}"),
                    format!("unknown matcher; use {} or label:<key>", known.join(", ")),
                ));
            }
        }
        if let Some(expires) = &silence.expires_at {
            if chrono::DateTime::parse_from_rfc3339(expires).is_err() {
                return Err(Error::invalid(
                    format!("{path}.expiresAt"),
                    format!("{expires:?} is not an RFC 3339 time"),
                ));
            }
        }
    }
    for (kind, paths) in &config.rules.ignore_paths {
        for (index, pointer) in paths.iter().enumerate() {
            if !pointer.starts_with('/') {
                return Err(Error::invalid(
                    format!("rules.ignorePaths.{kind}[{index}]"),
                    format!("{pointer:?} is not a JSON pointer (must start with /)"),
                ));
            }
        }
    }
    let mut names = BTreeSet::new();
    for (index, channel) in config.channels.iter().enumerate() {
        validate_channel(index, channel)?;
        let name = channel.name();
        if !names.insert(name.to_string()) {
            return Err(Error::invalid(
                format!("channels[{index}].name"),
                format!("duplicate channel name {name:?}"),
            ));
        }
    }
    if let Some(oidc) = &config.auth.oidc {
        if url::Url::parse(&oidc.issuer).is_err() {
            return Err(Error::invalid("auth.oidc.issuer", "must be a URL"));
        }
        if oidc.audience.trim().is_empty() {
            return Err(Error::invalid("auth.oidc.audience", "must not be empty"));
        }
        if let Some(url) = &oidc.jwks_url {
            if url::Url::parse(url).is_err() {
                return Err(Error::invalid("auth.oidc.jwksUrl", "must be a URL"));
            }
        }
        if oidc.jwks_max_age < Duration::from_secs(1) {
            return Err(Error::invalid(
                "auth.oidc.jwksMaxAge",
                "must be at least 1s",
            ));
        }
    }
    if config.api.token.as_ref().is_some_and(Secret::is_blank) {
        return Err(Error::invalid(
            "api.token",
            "is empty or only whitespace (a ${VAR} set to nothing or a newline?); remove the key to leave the API open",
        ));
    }
    if config.auth.oidc.is_some() && config.auth.bearer_token.is_some() {
        // One would be ignored: a caller with only the static token would be refused.
        return Err(Error::invalid("auth", "set oidc or bearerToken, not both"));
    }
    if config
        .auth
        .bearer_token
        .as_ref()
        .is_some_and(Secret::is_blank)
    {
        return Err(Error::invalid(
            "auth.bearerToken",
            "is empty or only whitespace (a ${VAR} set to nothing or a newline?)",
        ));
    }
    for (index, route) in config.routes.iter().enumerate() {
        let path = format!("routes[{index}]");
        if route.channels.is_empty() {
            return Err(Error::invalid(
                format!("{path}.channels"),
                "needs at least one channel",
            ));
        }
        for (position, name) in route.channels.iter().enumerate() {
            if !names.contains(name) {
                return Err(Error::invalid(
                    format!("{path}.channels[{position}]"),
                    format!(
                        "no channel named {name:?} (channels: {})",
                        names.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        for (position, class) in route.matcher.class.iter().enumerate() {
            if !classes::is_known(class) {
                return Err(Error::invalid(
                    format!("{path}.match.class[{position}]"),
                    format!("unknown drift class {class:?}"),
                ));
            }
        }
        if let Some(severity) = &route.matcher.severity {
            if !SEVERITIES.contains(&severity.as_str()) {
                return Err(Error::invalid(
                    format!("{path}.match.severity"),
                    format!("must be one of {}", SEVERITIES.join(", ")),
                ));
            }
        }
        for (position, field) in route.group_by.iter().enumerate() {
            if GroupBy::parse(field).is_none() {
                let known: Vec<&str> = GroupBy::ALL.iter().map(|field| field.as_str()).collect();
                return Err(Error::invalid(
                    format!("{path}.groupBy[{position}]"),
                    format!("unknown field {field:?}; use {}", known.join(", ")),
                ));
            }
        }
    }
    Ok(())
}

fn validate_limits(limits: &super::LimitsConfig) -> Result<(), Error> {
    if limits.max_state_bytes < 1024 * 1024 {
        return Err(Error::invalid(
            "limits.maxStateBytes",
            "must be at least 1048576 (1 MiB)",
        ));
    }
    if limits.max_objects == 0 {
        return Err(Error::invalid("limits.maxObjects", "must be at least 1"));
    }
    if limits.max_objects_per_cluster == 0 {
        return Err(Error::invalid(
            "limits.maxObjectsPerCluster",
            "must be at least 1",
        ));
    }
    if limits.max_clusters == 0 {
        return Err(Error::invalid("limits.maxClusters", "must be at least 1"));
    }
    if !(1..=super::limits::MAX_ACTIVE_SILENCES_CEILING).contains(&limits.max_active_silences) {
        return Err(Error::invalid(
            "limits.maxActiveSilences",
            format!(
                "must be 1 to {} (each active silence is checked against every notification)",
                super::limits::MAX_ACTIVE_SILENCES_CEILING
            ),
        ));
    }
    Ok(())
}

/// Resync files what it lists under one cluster name (`resync.cluster`, else `defaultCluster`):
/// in a shard that does not own that cluster it would judge another shard's objects a second
/// time. Resync may be on (or `auto`: on in a pod) only in the shard that owns it.
fn validate_shard_resync(config: &Config) -> Result<(), Error> {
    if !config.shard.set || config.resync.enabled == super::ResyncMode::Off {
        return Ok(());
    }
    let cluster = config
        .resync
        .cluster
        .as_deref()
        .unwrap_or(&config.default_cluster);
    if config.shard.owns(cluster) {
        return Ok(());
    }
    Err(Error::invalid(
        "resync.enabled",
        format!(
            "resync files the cluster it lists as {cluster:?}, which shard {:?} does not own (shard.clusters): set resync.enabled: false in this shard, or resync.cluster to a cluster it owns",
            config.shard.name
        ),
    ))
}

fn validate_resync(resync: &ResyncConfig) -> Result<(), Error> {
    if resync.interval < Duration::from_secs(10) {
        return Err(Error::invalid(
            "resync.interval",
            "must be at least 10s (each resync lists every watched object)",
        ));
    }
    if !(1..=10_000).contains(&resync.page_size) {
        return Err(Error::invalid(
            "resync.pageSize",
            "must be between 1 and 10000",
        ));
    }
    if resync
        .cluster
        .as_deref()
        .is_some_and(|name| name.trim().is_empty())
    {
        return Err(Error::invalid("resync.cluster", "must not be empty"));
    }
    let mut seen: Vec<(
        &str,
        &str,
        &crate::config::resync::LabelSelectorConfig,
        String,
    )> = Vec::new();
    for (path, resource) in resync.listed() {
        if let Some((.., first)) = seen.iter().find(|(api_version, kind, selector, _)| {
            *api_version == resource.api_version
                && *kind == resource.kind
                && **selector == resource.selector
        }) {
            return Err(Error::invalid(
                path,
                format!("lists the same kind and selector as {first}"),
            ));
        }
        seen.push((
            &resource.api_version,
            &resource.kind,
            &resource.selector,
            path.clone(),
        ));
        let version = resource.api_version.rsplit('/').next().unwrap_or_default();
        if resource.api_version.split('/').count() > 2 || version.is_empty() {
            return Err(Error::invalid(
                format!("{path}.apiVersion"),
                "must be `group/version` or `version` (e.g. serving.knative.dev/v1, v1)",
            ));
        }
        if resource.kind.trim().is_empty() {
            return Err(Error::invalid(format!("{path}.kind"), "must not be empty"));
        }
        for (position, requirement) in resource.selector.match_expressions.iter().enumerate() {
            let at = format!("{path}.selector.matchExpressions[{position}]");
            let needs_values = match requirement.operator.as_str() {
                "In" | "NotIn" => true,
                "Exists" | "DoesNotExist" => false,
                other => {
                    return Err(Error::invalid(
                        format!("{at}.operator"),
                        format!(
                            "unknown operator {other:?}; use In, NotIn, Exists or DoesNotExist"
                        ),
                    ))
                }
            };
            if needs_values == requirement.values.is_empty() {
                return Err(Error::invalid(
                    format!("{at}.values"),
                    if needs_values {
                        "In and NotIn need at least one value"
                    } else {
                        "Exists and DoesNotExist take no values"
                    },
                ));
            }
        }
    }
    Ok(())
}

fn validate_channel(index: usize, channel: &ChannelConfig) -> Result<(), Error> {
    let path = format!("channels[{index}]");
    if channel.name.trim().is_empty() {
        return Err(Error::invalid(format!("{path}.name"), "must not be empty"));
    }
    if channel.unknown_language.is_some() {
        return Err(Error::invalid(
            format!("{path}.language"),
            "must be en or zh",
        ));
    }
    if channel.max_attempts == 0 {
        return Err(Error::invalid(
            format!("{path}.maxAttempts"),
            "must be at least 1",
        ));
    }
    if channel.timeout.is_zero() {
        return Err(Error::invalid(
            format!("{path}.timeout"),
            "must be positive",
        ));
    }
    let check_url = |key: &str, url: &Secret| -> Result<(), Error> {
        let text = url.expose();
        // Never echo the URL: it carries the token.
        if !(text.starts_with("http://") || text.starts_with("https://")) {
            return Err(Error::invalid(
                format!("{path}.{key}"),
                "must be an http:// or https:// URL",
            ));
        }
        if url::Url::parse(text).is_err() {
            return Err(Error::invalid(
                format!("{path}.{key}"),
                "is not a valid URL",
            ));
        }
        Ok(())
    };
    match &channel.kind {
        ChannelKind::Log {} => {}
        ChannelKind::Dingtalk { url, secret, .. }
        | ChannelKind::Feishu { url, secret }
        | ChannelKind::Webhook { url, secret } => {
            check_url("url", url)?;
            if let Some(secret) = secret {
                if secret.is_empty() {
                    return Err(Error::invalid(
                        format!("{path}.secret"),
                        "is empty (a ${VAR} set to nothing?)",
                    ));
                }
                if let ChannelKind::Webhook { .. } = channel.kind {
                    let ok = secret
                        .expose()
                        .strip_prefix("whsec_")
                        .is_some_and(base64_decodes);
                    if !ok {
                        return Err(Error::invalid(
                            format!("{path}.secret"),
                            "must be whsec_ followed by a base64 key",
                        ));
                    }
                }
            }
        }
        ChannelKind::Slack { url }
        | ChannelKind::Wecom { url }
        | ChannelKind::Cloudevents { url } => check_url("url", url)?,
        ChannelKind::Alertmanager {
            urls,
            resend_interval,
        } => {
            if urls.is_empty() {
                return Err(Error::invalid(
                    format!("{path}.urls"),
                    "needs at least one Alertmanager URL",
                ));
            }
            for (position, url) in urls.iter().enumerate() {
                check_url(&format!("urls[{position}]"), url)?;
            }
            if resend_interval.is_zero() {
                return Err(Error::invalid(
                    format!("{path}.resendInterval"),
                    "must be positive",
                ));
            }
        }
    }
    Ok(())
}

fn base64_decodes(text: &str) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .is_ok()
}
