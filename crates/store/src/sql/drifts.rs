//! The drift queries built from the API's filters: a page of drifts (`GET /api/v1/drifts`, the
//! dashboard) and the drifts resolved since a time (the report), in either dialect, and the page
//! made of their rows.

use super::{Arg, Dialect, Statement};
use crate::{Cursor, DriftFilter, Error};
use drift_model::Drift;

/// The largest page.
const MAX_PAGE: usize = 500;
/// The most drifts [`resolved_since`] answers.
const MAX_RESOLVED: usize = 5000;

/// A statement being built: its text and its values, numbered as they are added.
struct Builder {
    dialect: Dialect,
    sql: String,
    args: Vec<Arg>,
}

impl Builder {
    fn new(dialect: Dialect, sql: &str) -> Builder {
        Builder {
            dialect,
            sql: sql.to_string(),
            args: Vec::new(),
        }
    }

    /// Adds `value` and answers its parameter.
    fn bind(&mut self, value: Arg) -> String {
        self.args.push(value);
        self.dialect.param(self.args.len())
    }

    /// ` AND api_group IN (…)` with one parameter per group (none: nothing matches).
    fn groups(&mut self, groups: &[String]) {
        let placeholders: Vec<String> = groups
            .iter()
            .map(|group| self.bind(Arg::Text(group.clone())))
            .collect();
        if placeholders.is_empty() {
            self.sql.push_str(" AND FALSE");
        } else {
            self.sql
                .push_str(&format!(" AND api_group IN ({})", placeholders.join(", ")));
        }
    }

    fn done(self) -> Statement {
        Statement {
            sql: self.sql,
            args: self.args,
        }
    }
}

/// The page size `filter` asks for, within bounds.
pub(crate) fn page_size(filter: &DriftFilter) -> usize {
    filter.limit.clamp(1, MAX_PAGE)
}

/// The bodies of a page of drifts, newest first: `filter`'s page and one more row, which tells
/// whether a next page exists ([`page`]).
pub(crate) fn select(dialect: Dialect, filter: &DriftFilter) -> Statement {
    let mut query = Builder::new(dialect, "SELECT body FROM drifts WHERE TRUE");
    match filter.state.as_deref() {
        Some("open") => query.sql.push_str(" AND state IN ('pending', 'firing')"),
        Some(state) => {
            let param = query.bind(Arg::Text(state.to_string()));
            query.sql.push_str(&format!(" AND state = {param}"));
        }
        None => {}
    }
    for (column, value) in [
        ("class", &filter.class),
        ("severity", &filter.severity),
        ("cluster", &filter.cluster),
        ("namespace", &filter.namespace),
    ] {
        if let Some(value) = value {
            let param = query.bind(Arg::Text(value.clone()));
            query.sql.push_str(&format!(" AND {column} = {param}"));
        }
    }
    if let Some(since) = filter.since {
        let param = query.bind(Arg::Int(since));
        let changed =
            dialect.greatest(&["since", "COALESCE(fired_at, 0)", "COALESCE(resolved_at, 0)"]);
        query.sql.push_str(&format!(" AND {changed} >= {param}"));
    }
    if let Some(groups) = &filter.groups {
        query.groups(groups);
    }
    if let Some((since, id)) = &filter.cursor {
        let a = query.bind(Arg::Int(*since));
        let b = query.bind(Arg::Text(id.clone()));
        query
            .sql
            .push_str(&format!(" AND (since < {a} OR (since = {a} AND id > {b}))"));
    }
    query.sql.push_str(&format!(
        " ORDER BY since DESC, id ASC LIMIT {}",
        page_size(filter) + 1
    ));
    query.done()
}

/// The page of [`select`]'s bodies: the first `size` drifts, and the cursor of the next page
/// when there is one more.
pub(crate) fn page<S: AsRef<str>>(
    bodies: &[S],
    size: usize,
) -> Result<(Vec<Drift>, Option<Cursor>), Error> {
    let drifts = bodies
        .iter()
        .take(size)
        .map(|body| crate::rows::decode_drift(body.as_ref()))
        .collect::<Result<Vec<Drift>, Error>>()?;
    let next = (bodies.len() > size)
        .then(|| drifts.last().map(|drift| (drift.since, drift.id.clone())))
        .flatten();
    Ok((drifts, next))
}

/// The bodies of the drifts that fired and resolved at or after `since`, latest first, of
/// objects in `groups` when given.
pub(crate) fn resolved_since(
    dialect: Dialect,
    since: drift_model::Millis,
    groups: Option<&[String]>,
) -> Statement {
    let mut query = Builder::new(
        dialect,
        "SELECT body FROM drifts WHERE state = 'resolved' AND fired_at IS NOT NULL",
    );
    let param = query.bind(Arg::Int(since));
    query.sql.push_str(&format!(" AND resolved_at >= {param}"));
    if let Some(groups) = groups {
        query.groups(groups);
    }
    query.sql.push_str(&format!(
        " ORDER BY resolved_at DESC, id LIMIT {MAX_RESOLVED}"
    ));
    query.done()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_becomes_the_same_query_in_both_dialects() {
        let filter = DriftFilter {
            state: Some("firing".into()),
            namespace: Some("shop".into()),
            since: Some(5),
            groups: Some(vec!["".into(), "apps".into()]),
            cursor: Some((9, "d".into())),
            limit: 2,
            ..DriftFilter::default()
        };
        let sqlite = select(Dialect::Sqlite, &filter);
        assert_eq!(
            sqlite.sql,
            "SELECT body FROM drifts WHERE TRUE AND state = ?1 AND namespace = ?2 \
             AND MAX(since, COALESCE(fired_at, 0), COALESCE(resolved_at, 0)) >= ?3 \
             AND api_group IN (?4, ?5) AND (since < ?6 OR (since = ?6 AND id > ?7)) \
             ORDER BY since DESC, id ASC LIMIT 3"
        );
        let postgres = select(Dialect::Postgres, &filter);
        assert_eq!(
            postgres.sql,
            sqlite.sql.replace("MAX(", "GREATEST(").replace('?', "$")
        );
        assert_eq!(postgres.args, sqlite.args);
        assert_eq!(
            sqlite.args,
            [
                Arg::Text("firing".into()),
                Arg::Text("shop".into()),
                Arg::Int(5),
                Arg::Text("".into()),
                Arg::Text("apps".into()),
                Arg::Int(9),
                Arg::Text("d".into()),
            ]
        );
        let open = select(
            Dialect::Sqlite,
            &DriftFilter {
                state: Some("open".into()),
                groups: Some(Vec::new()),
                limit: 10_000,
                ..DriftFilter::default()
            },
        );
        assert_eq!(
            open.sql,
            "SELECT body FROM drifts WHERE TRUE AND state IN ('pending', 'firing') AND FALSE \
             ORDER BY since DESC, id ASC LIMIT 501"
        );
        assert!(open.args.is_empty());
    }
}
