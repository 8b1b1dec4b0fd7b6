//! Background checkpoints of the SQLite store's write-ahead log, on their own thread.

use std::fs::File;
use std::path::Path;

use rusqlite::Connection;

use crate::Error;

/// Time between background checkpoints (from one pass's start to the next's; longer after a
/// slow pass, [`after_pass`]). Each pass ends with a sync of the database file, which writes
/// every page the pass copied while the WAL syncs that answer requests wait behind it on the
/// same disk: every 250 ms, at half the sink's maximum rate, that sync took 12 ms on average (up
/// to 21) and the WAL syncs beside it 1–11 ms, the open loop's slow stretches (BENCHMARKS.md,
/// issue 28, fourteenth round). Every 50 ms it took 4.3 ms on average: more syncs, each shorter.
/// A page written again within 250 ms is now copied more often: about 4 µs more of this
/// thread's CPU per event, and more writes to the database file. Chosen on one local disk.
pub(super) const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// WAL pages (16 MiB at SQLite's default page size) from which a background pass hands the end
/// of the checkpoint to the writer ([`WriterTurn`]).
pub(super) const WRITER_TURN_PAGES: i64 = 4_096;

/// Asks the writer to finish a checkpoint the background thread has nearly done, so that the
/// WAL starts over from its beginning.
///
/// Why the writer: SQLite writes a WAL from its start again only when a write transaction
/// begins after every frame was copied into the database file. Under steady writes a
/// background pass never gets there (the writer appends while it copies), so the WAL grew to
/// the writer's `wal_autocheckpoint` and the writer then checkpointed inside a commit, copying
/// up to a whole interval's pages and syncing the database file: 8–16 ms, about once a second,
/// the open loop's p99 (BENCHMARKS.md, issue 28, eleventh round). The writer is the one
/// connection that does not append while it checkpoints, so its checkpoint is the one that
/// completes. Asked right after a background pass, which also synced the database file, it
/// copies and syncs only the pages written during that pass (its database sync about 1.4 ms,
/// three to four times a second at half the sink's maximum rate).
#[derive(Clone, Default)]
pub(crate) struct WriterTurn(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl WriterTurn {
    /// Whether the writer was asked since it last looked (and clears the ask).
    pub(crate) fn take(&self) -> bool {
        self.0.swap(false, std::sync::atomic::Ordering::Relaxed)
    }

    pub(super) fn ask(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Copies committed WAL pages into the database file on its own thread and connection
/// (`PRAGMA wal_checkpoint(PASSIVE)`, which never blocks the writer or readers). With SQLite's
/// default, the connection whose commit crosses 1,000 WAL pages does the checkpoint inside that
/// commit, which put tens of milliseconds into one request in every hundred or so under load.
/// Stops when dropped, at once: the thread waits parked, and the drop wakes it (a sleep made every
/// drop of a store wait up to a whole interval).
pub(crate) struct Checkpointer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts checkpointing the database at `path` (the store must exist); a pass that finds
    /// the WAL at [`WRITER_TURN_PAGES`] or more asks the writer, through `turn`, to finish it.
    pub(crate) fn start(path: &Path, turn: WriterTurn) -> Result<Checkpointer, Error> {
        let mut passes = Passes::open(path, turn)?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("drift-checkpoint".to_string())
            .spawn(move || {
                let mut failing = false;
                let mut next = std::time::Instant::now() + CHECKPOINT_INTERVAL;
                while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                    let now = std::time::Instant::now();
                    if now < next {
                        // Woken early by the drop (or spuriously): the loop looks again.
                        std::thread::park_timeout(next - now);
                        continue;
                    }
                    match passes.pass() {
                        Ok(()) => failing = false,
                        Err(error) => {
                            // The next pass tries again; meanwhile the writer's own
                            // autocheckpoint bounds the WAL, and its checkpoints sync what
                            // they copy.
                            if !failing {
                                tracing::warn!(message = "Background checkpoint failed.", %error);
                            }
                            failing = true;
                        }
                    }
                    next = after_pass(now, now.elapsed());
                }
            })?;
        Ok(Checkpointer {
            stop,
            thread: Some(thread),
        })
    }
}

/// When the pass after one that began at `began` and took `took` begins: an interval after it
/// began, or, after a pass that took more than half of one (a slow or networked disk, whose
/// syncs each take milliseconds), as long after it ended as it took, so that this thread does
/// not sync the database file back to back (the writer's turn may still sync it right after a
/// pass, by design).
pub(super) fn after_pass(
    began: std::time::Instant,
    took: std::time::Duration,
) -> std::time::Instant {
    began + CHECKPOINT_INTERVAL.max(took * 2)
}

/// `PRAGMA wal_checkpoint(PASSIVE)` on `connection`: the frames in the WAL, and how many of
/// them are now in the database file (both -1 when the file is not in WAL mode). A checkpoint
/// that another one keeps from running is not an error: it copies nothing.
pub(super) fn checkpoint(connection: &Connection) -> Result<(i64, i64), Error> {
    Ok(
        connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get(1)?, row.get(2)?))
        })?,
    )
}

/// The background thread's passes: its connection, its descriptor of the database file, and
/// the ask it hands the writer.
pub(super) struct Passes {
    connection: Connection,
    /// Never closed, on purpose: closing any descriptor of a file drops every POSIX lock the
    /// process holds on it, and SQLite's locks on the database file are such locks (every
    /// connection holds one for its whole life in WAL mode). One descriptor per opened store
    /// stays open until the process exits.
    database: std::mem::ManuallyDrop<File>,
    turn: WriterTurn,
    /// The frames copied as of the last pass, to sync only after a pass that copied some.
    copied: i64,
}

impl Passes {
    /// Opens the connection and the descriptor for the database at `path`.
    pub(super) fn open(path: &Path, turn: WriterTurn) -> Result<Passes, Error> {
        let connection = Connection::open(path)?;
        connection.pragma_update(None, "busy_timeout", 5000)?;
        Ok(Passes {
            connection,
            database: std::mem::ManuallyDrop::new(File::open(path)?),
            turn,
            copied: 0,
        })
    }

    /// One pass: copies what it can of the WAL into the database file, syncs that file, and
    /// asks the writer to finish when the WAL has grown long.
    pub(super) fn pass(&mut self) -> Result<(), Error> {
        let (log, copied) = checkpoint(&self.connection)?;
        if copied > 0 && copied != self.copied {
            // SQLite syncs the database file only after a pass that leaves no frame behind,
            // which under steady writes a pass never does (the writer appends while it
            // copies): the pages stayed dirty until the writer's own checkpoint synced them
            // all, 5–7 ms of its time (BENCHMARKS.md, issue 28, eleventh round). Synced here,
            // the writer's sync has only its own few pages left. A pass that copied nothing
            // (an idle store) syncs nothing.
            self.database.sync_data()?;
        }
        self.copied = copied;
        if log >= WRITER_TURN_PAGES {
            self.turn.ask();
        }
        Ok(())
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
