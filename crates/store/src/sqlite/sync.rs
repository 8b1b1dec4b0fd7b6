//! The writer's fsync, off its thread: the WAL file synced after commits made with
//! `synchronous=NORMAL`.
//!
//! In WAL mode a commit appends its frames to the `-wal` file; `synchronous=FULL` fsyncs that
//! file before the commit returns, which on this machine is most of a small round's time
//! (BENCHMARKS.md, issue 28). With `NORMAL` the frames are written but not synced; an fsync of
//! the WAL file afterwards, from any file descriptor of it, makes every frame written before it
//! durable, which is what `FULL` promised for those commits. The writer answers a round's
//! requests only after such a sync (`pipeline::writer::answers`). Other connections keep
//! `FULL`: a relay's claim of a message commits, and so fsyncs the shared WAL, before the message
//! is sent, so nothing is delivered from a round that a power loss could still take back.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use crate::{Error, Syncer};

/// Syncs one database's WAL file.
pub(crate) struct WalSyncer {
    /// Its `-wal` file.
    wal: PathBuf,
    /// An open descriptor of it, with its (device, inode) when opened.
    file: Option<(File, (u64, u64))>,
}

impl WalSyncer {
    pub(crate) fn new(database: PathBuf) -> WalSyncer {
        let mut wal = database.into_os_string();
        wal.push("-wal");
        WalSyncer {
            wal: wal.into(),
            file: None,
        }
    }

    /// The descriptor of the WAL file as it is now (opened again if the file was replaced);
    /// `None` when there is no WAL file.
    fn current(&mut self) -> Result<Option<&File>, Error> {
        let identity = match std::fs::metadata(&self.wal) {
            Ok(metadata) => (metadata.dev(), metadata.ino()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        if self.file.as_ref().map(|(_, open)| *open) != Some(identity) {
            self.file = Some((File::open(&self.wal)?, identity));
        }
        Ok(self.file.as_ref().map(|(file, _)| file))
    }
}

impl Syncer for WalSyncer {
    fn sync(&mut self) -> Result<(), Error> {
        // No WAL file: SQLite removes it only after checkpointing every frame into the database
        // and syncing that. (Opening the database here and closing it would drop this process's
        // POSIX locks on it, SQLite's own included.)
        if let Some(file) = self.current()? {
            file.sync_all()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncs_the_wal_file_and_follows_it_when_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("drift.db");
        let wal = dir.path().join("drift.db-wal");
        std::fs::write(&database, b"db").unwrap();
        let mut syncer = WalSyncer::new(database.clone());
        // No WAL: nothing to sync (SQLite synced the database when it removed it).
        syncer.sync().unwrap();
        assert!(syncer.file.is_none());
        std::fs::write(&wal, b"frames").unwrap();
        syncer.sync().unwrap();
        // Replaced (removed and created again): a new descriptor.
        std::fs::remove_file(&wal).unwrap();
        std::fs::write(&wal, b"frames again").unwrap();
        syncer.sync().unwrap();
        let second = syncer.file.as_ref().map(|(_, identity)| *identity).unwrap();
        assert_eq!(second, {
            let metadata = std::fs::metadata(&wal).unwrap();
            (metadata.dev(), metadata.ino())
        });
        // A WAL that cannot be opened: an error naming the I/O failure, not a panic.
        std::fs::remove_file(&wal).unwrap();
        std::os::unix::fs::symlink(&wal, &wal).unwrap();
        let error = syncer.sync().unwrap_err();
        assert_eq!(error.kind(), "io");
    }
}
