//! `store migrate --from sqlite:PATH --to postgres://...`: moves a SQLite store into an empty
//! PostgreSQL database (drifts, history, outbox rows and attempts, silences, event keys,
//! objects), so the service continues from it with `store.url`.

use std::path::Path;
use std::process::ExitCode;

use drift_store::migrate::sqlite_to_postgres;
use drift_store::postgres::Target;

/// Runs the migration; prints a summary (exit 0) or the reason it refused or failed (exit 2).
/// The password comes from the URL or, when it has none, from `PGPASSWORD` as `psql` takes it;
/// it is never printed.
pub fn migrate(from: &str, to: &str, ca_file: Option<&Path>) -> ExitCode {
    match run(from, to, ca_file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("drift-sentinel store migrate: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(from: &str, to: &str, ca_file: Option<&Path>) -> Result<(), String> {
    let Some(path) = from.strip_prefix("sqlite:") else {
        return Err("--from must be sqlite:PATH (the SQLite store file)".to_string());
    };
    drift_core::config::check_store_url(to).map_err(|reason| format!("--to: {reason}"))?;
    let target = Target::new(to, None, ca_file)
        .map_err(|error| format!("--to: {error}"))?
        .password_if_missing(std::env::var("PGPASSWORD").ok());
    let summary =
        sqlite_to_postgres(Path::new(path), &target).map_err(|error| error.to_string())?;
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
