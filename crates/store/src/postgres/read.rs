//! A read-only look at a PostgreSQL store ([`crate::read_objects`]): one connection, one
//! read-only repeatable-read transaction, no migration, no lease.

use super::conn::{wait, Conn};
use super::{collect, schema, Target};
use crate::sql::{decode, queries, Dialect, Row};
use crate::{Error, ObjectLoader};
use drift_model::Drift;

const SQL: Dialect = Dialect::Postgres;

/// Every stored object (handed to `objects` as it arrives) and the open drifts, from one
/// snapshot of the database.
pub(crate) fn read_objects(
    target: &Target,
    objects: &mut ObjectLoader<'_>,
) -> Result<Vec<Drift>, Error> {
    let mut conn = Conn::open(target)?;
    let client = conn.client()?;
    wait(async {
        use futures_util::TryStreamExt as _;
        let transaction = client
            .build_transaction()
            .read_only(true)
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .start()
            .await?;
        if let Some(found) = schema::recorded(&transaction).await? {
            if found > schema::LATEST {
                return Err(Error::Schema {
                    found,
                    supported: schema::LATEST,
                });
            }
        }
        let rows = transaction
            .query_raw(queries::OBJECTS.text(SQL), std::iter::empty::<&str>())
            .await?;
        let mut rows = std::pin::pin!(rows);
        while let Some(row) = rows.try_next().await? {
            objects(row.text(0)?, row.text(1)?).map_err(crate::rows::corrupt("objects"))?;
        }
        let drifts = transaction
            .query(queries::OPEN_DRIFTS.text(SQL), &[])
            .await?;
        let drifts = collect(&drifts, |row| decode::drift(row, 0))?;
        transaction.commit().await?;
        Ok(drifts)
    })
}
