//! The SQL both backends run, written once: the statements ([`queries`]), the drift queries
//! built from the API's filters ([`drifts`]) and the decoding of their rows ([`decode`]). Each
//! backend keeps only what is its own: how it runs them (SQLite's connections, busy handling and
//! checkpoints; PostgreSQL's connections, TLS, pipelined commits, writer lease and shards).
//!
//! A statement is written in PostgreSQL's words ([`Query`]): `$1` parameters, a `$1::text` cast
//! where PostgreSQL cannot tell the type of a parameter that may be NULL. SQLite's text is
//! derived from it ([`Dialect::Sqlite`]): `?1`, no casts. What only PostgreSQL's outbox has (its
//! `shard` column: a database shared by shards) is marked `{shard: …}`, kept for PostgreSQL and
//! left out for SQLite, whose statements then have one parameter fewer. The few functions the
//! two spell differently are [`Dialect`]'s (`GREATEST` and SQLite's many-argument `MAX`); where
//! both accept the same words (`ON CONFLICT DO NOTHING`, `COUNT(*) FILTER (…)`,
//! `IS DISTINCT FROM`, `TRUE`), the statement uses them.

pub(crate) mod decode;
pub(crate) mod drifts;
pub(crate) mod queries;

use std::sync::OnceLock;

use crate::Error;

/// The SQL spoken by a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// SQLite: `?1` parameters, no casts, no shards.
    Sqlite,
    /// PostgreSQL: `$1` parameters, `$1::text` casts, the outbox's shards.
    Postgres,
}

impl Dialect {
    /// Parameter `n`.
    pub(crate) fn param(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }

    /// The largest of `values` (SQLite's `MAX` of several arguments is PostgreSQL's `GREATEST`).
    pub(crate) fn greatest(self, values: &[&str]) -> String {
        let function = match self {
            Dialect::Sqlite => "MAX",
            Dialect::Postgres => "GREATEST",
        };
        format!("{function}({})", values.join(", "))
    }
}

/// A statement both backends run, written once (see the module comment), with its text for
/// each dialect derived on first use.
pub(crate) struct Query {
    text: &'static str,
    sqlite: OnceLock<String>,
    postgres: OnceLock<String>,
}

impl Query {
    /// The statement `text`, in PostgreSQL's words with `{shard: …}` marks.
    pub(crate) const fn new(text: &'static str) -> Query {
        Query {
            text,
            sqlite: OnceLock::new(),
            postgres: OnceLock::new(),
        }
    }

    /// The statement in `dialect`'s words.
    pub(crate) fn text(&self, dialect: Dialect) -> &str {
        match dialect {
            Dialect::Sqlite => self.sqlite.get_or_init(|| render(self.text, dialect)),
            Dialect::Postgres => self.postgres.get_or_init(|| render(self.text, dialect)),
        }
    }
}

/// `text` in `dialect`'s words: PostgreSQL keeps the `{shard: …}` parts (without the marks);
/// SQLite drops them, and its parameters are `?n` without casts.
fn render(text: &str, dialect: Dialect) -> String {
    const SHARD: &str = "{shard:";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(SHARD) {
        let (before, marked) = rest.split_at(at);
        out.push_str(before);
        let inner = &marked[SHARD.len()..];
        let end = inner.find('}').unwrap_or(inner.len());
        if dialect == Dialect::Postgres {
            out.push_str(&inner[..end]);
        }
        rest = inner.get(end + 1..).unwrap_or("");
    }
    out.push_str(rest);
    match dialect {
        Dialect::Postgres => out,
        Dialect::Sqlite => sqlite_parameters(&out),
    }
}

/// `$n` and `$n::type` as `?n`.
fn sqlite_parameters(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' || !chars.peek().is_some_and(char::is_ascii_digit) {
            out.push(c);
            continue;
        }
        out.push('?');
        while let Some(digit) = chars.next_if(char::is_ascii_digit) {
            out.push(digit);
        }
        // A cast of the parameter (`::text`, `::boolean`): SQLite needs none.
        let mut lookahead = chars.clone();
        if lookahead.next() == Some(':') && lookahead.next() == Some(':') {
            chars = lookahead;
            while chars
                .next_if(|c| c.is_ascii_alphanumeric() || *c == '_')
                .is_some()
            {}
        }
    }
    out
}

/// A value bound to a statement built at run time ([`drifts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Arg {
    /// A text.
    Text(String),
    /// An integer.
    Int(i64),
}

/// A statement built at run time, with its values in parameter order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Statement {
    /// The text.
    pub(crate) sql: String,
    /// Parameter `n` is `args[n - 1]`.
    pub(crate) args: Vec<Arg>,
}

/// The columns of a result row, as both backends' rows give them: what the shared decoding
/// ([`decode`]) reads. Each backend implements it for its own row type.
pub(crate) trait Row {
    /// A text column.
    fn text(&self, index: usize) -> Result<&str, Error>;
    /// A text column that may be NULL.
    fn opt_text(&self, index: usize) -> Result<Option<&str>, Error>;
    /// An integer column.
    fn int(&self, index: usize) -> Result<i64, Error>;
    /// An integer column that may be NULL.
    fn opt_int(&self, index: usize) -> Result<Option<i64>, Error>;
}

#[cfg(test)]
mod tests;
