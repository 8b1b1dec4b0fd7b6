//! A read-only look at a SQLite store ([`crate::read_objects`]): the file is opened read-only,
//! never created or migrated, so a command may read it beside the running service.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::collect;
use super::schema;
use crate::sql::{decode, queries, Dialect, Row};
use crate::{Error, ObjectLoader};
use drift_model::Drift;

const SQL: Dialect = Dialect::Sqlite;

/// Every stored object (handed to `objects` as it is read) and the open drifts, from one
/// snapshot of the file at `path`.
pub(crate) fn read_objects(
    path: &Path,
    objects: &mut ObjectLoader<'_>,
) -> Result<Vec<Drift>, Error> {
    if !path.is_file() {
        return Err(Error::Missing);
    }
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(std::time::Duration::from_secs(5))?;
    // Every version so far stores objects and drifts in the same columns and shapes; a newer
    // one may not.
    schema::check_not_newer(&connection)?;
    // One read transaction: the objects and the drifts of one moment of a running service.
    connection.execute_batch("BEGIN")?;
    {
        let mut statement = connection.prepare(queries::OBJECTS.text(SQL))?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            objects(row.text(0)?, row.text(1)?).map_err(crate::rows::corrupt("objects"))?;
        }
    }
    let mut statement = connection.prepare(queries::OPEN_DRIFTS.text(SQL))?;
    let drifts = collect(&mut statement, [], |row| decode::drift(row, 0))?;
    drop(statement);
    connection.execute_batch("COMMIT")?;
    Ok(drifts)
}
