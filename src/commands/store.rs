//! `store migrate --from sqlite:PATH --to postgres://...`: moves a SQLite store into an empty
//! PostgreSQL database (drifts, history, outbox rows and attempts, silences, event keys,
//! objects), so the service continues from it with `store.url`.

use std::path::Path;
use std::process::ExitCode;

use drift_core::config::{check_store_url, StoreUrlError};
use drift_store::migrate::sqlite_to_postgres;
use drift_store::postgres::Target;

/// Runs the migration; prints a summary (exit 0) or the reason it refused or failed (exit 2).
/// The password comes from the URL or, when it has none, from `PGPASSWORD` as `psql` takes it;
/// it is never printed.
pub fn migrate(from: &str, to: &str, ca_file: Option<&Path>) -> ExitCode {
    match run(from, to, ca_file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("drift-sentinel store migrate: {error}");
            ExitCode::from(2)
        }
    }
}

/// Why `store migrate` refused or failed; printed after `drift-sentinel store migrate: `.
#[derive(Debug, thiserror::Error)]
enum MigrateError {
    /// `--from` is not `sqlite:PATH`.
    #[error("--from must be sqlite:PATH (the SQLite store file)")]
    FromNotSqlite,
    /// `--to` is not a PostgreSQL store URL.
    #[error("--to: {0}")]
    ToUrl(#[source] StoreUrlError),
    /// `--to` has options the store cannot connect with.
    #[error("--to: {0}")]
    Target(#[source] drift_store::Error),
    /// The migration itself failed (or refused a database that is not empty).
    #[error("{0}")]
    Migrate(#[source] drift_store::Error),
}

impl MigrateError {
    /// A stable, bounded label.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the label a count of these failures would use; tested"
        )
    )]
    fn kind(&self) -> &'static str {
        match self {
            MigrateError::FromNotSqlite => "from_not_sqlite",
            MigrateError::ToUrl(_) => "to_url",
            MigrateError::Target(_) => "target",
            MigrateError::Migrate(_) => "migrate",
        }
    }
}

fn run(from: &str, to: &str, ca_file: Option<&Path>) -> Result<(), MigrateError> {
    let Some(path) = from.strip_prefix("sqlite:") else {
        return Err(MigrateError::FromNotSqlite);
    };
    check_store_url(to).map_err(MigrateError::ToUrl)?;
    let target = Target::new(to, None, ca_file)
        .map_err(MigrateError::Target)?
        .password_if_missing(std::env::var("PGPASSWORD").ok());
    let summary = sqlite_to_postgres(Path::new(path), &target).map_err(MigrateError::Migrate)?;
    println!(
        "Migrated sqlite:{path} (schema version {}) to {}:",
        summary.version,
        target.describe()
    );
    for (table, rows) in &summary.tables {
        println!("  {table:<18} {rows:>9} rows");
    }
    println!("Counts checked. Point store.url at the database and remove store.path to continue from it.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrate_errors_have_stable_kinds_and_say_which_argument() {
        let error = run("/var/lib/drift.db", "postgres://db/d", None).unwrap_err();
        assert_eq!(error.kind(), "from_not_sqlite");
        assert_eq!(
            error.to_string(),
            "--from must be sqlite:PATH (the SQLite store file)"
        );
        let error = run("sqlite:drift.db", "mysql://db/d", None).unwrap_err();
        assert_eq!(error.kind(), "to_url");
        assert_eq!(
            error.to_string(),
            "--to: the scheme must be postgres:// or postgresql://, not mysql://"
        );
        let error = run(
            "sqlite:drift.db",
            "postgres://db/d?connect_timeout=soon",
            None,
        )
        .unwrap_err();
        assert_eq!(error.kind(), "target");
        assert!(error.to_string().starts_with("--to: "), "{error}");
        let missing = tempfile::tempdir().unwrap().path().join("missing.db");
        let from = format!("sqlite:{}", missing.display());
        let error = run(&from, "postgres://db/d", None).unwrap_err();
        assert_eq!(error.kind(), "migrate");
        assert!(error.to_string().contains("no SQLite store at"), "{error}");
    }
}
