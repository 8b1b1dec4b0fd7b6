//! Background checkpoints of the SQLite store's write-ahead log, on their own thread.

use std::path::Path;

use rusqlite::Connection;

use crate::Error;

/// Time between background checkpoints.
const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

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
    /// Starts checkpointing the database at `path` (the store must exist).
    pub(crate) fn start(path: &Path) -> Result<Checkpointer, Error> {
        let connection = Connection::open(path)?;
        connection.pragma_update(None, "busy_timeout", 5000)?;
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
                    next = now + CHECKPOINT_INTERVAL;
                    let result =
                        connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                            row.get::<_, i64>(0)
                        });
                    match result {
                        Ok(_) => failing = false,
                        Err(error) => {
                            // The writer's own autocheckpoint still bounds the WAL meanwhile.
                            if !failing {
                                tracing::warn!(message = "Background checkpoint failed.", %error);
                            }
                            failing = true;
                        }
                    }
                }
            })?;
        Ok(Checkpointer {
            stop,
            thread: Some(thread),
        })
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
