//! Throwaway PostgreSQL servers for tests: `initdb` in a temporary directory, started on a Unix
//! socket in that directory only (`listen_addresses=''`: no TCP port, so it can clash with no
//! other server), a database per [`PgServer::database`]. They never touch a system-wide cluster.
//!
//! One server serves the whole test run ([`PgServer::shared`]): started on first use, each test
//! takes a database of its own on it, so tests share the server's start and nothing else. Only a
//! test that restarts or stops the server, changes its settings or needs TLS starts one of its
//! own ([`PgServer::start`], [`PgServer::start_tls`]), stopped and removed on drop.
//!
//! Every server is stopped and its directory removed once the test process is gone, however it
//! ends (a normal exit, a panic, Ctrl-C, a kill): a watchdog shell per server, deaf to the
//! terminal's signals, reads a pipe whose writing end only this process holds (the standard
//! library opens it close-on-exec, so no other child inherits it) and runs `pg_ctl stop` and
//! `rm -rf` at end-of-file, which the kernel delivers when the process's descriptors close. A
//! statically held server (the shared one) is never dropped: its watchdog is what stops it,
//! within moments of the process's end. Should a watchdog itself have been killed, the next test
//! run stops and removes the servers of test processes that are gone (their directories are
//! named after the process, `ds-pg-run-<pid>-…`).
//!
//! The binaries come from `$PG_BINDIR`, else Debian's `/usr/lib/postgresql/<newest>/bin`, else
//! the directory of `initdb` on `PATH`. Without them the test fails and says what to install
//! (scripts/test.sh installs Debian's `postgresql`): a store test must not pass by skipping.
//! As root (CI, the dev machines), the server runs as the `postgres` user, since PostgreSQL
//! refuses to run as root.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// The port in the socket's name (`.s.PGSQL.5432`); unique per server through its directory.
const PORT: u16 = 5432;

/// The start of every server directory's name, before the test process's id.
const PREFIX: &str = "ds-pg-run-";

pub(crate) struct PgServer {
    /// The port: in the socket's name, and on loopback TCP for a TLS server.
    port: u16,
    /// `listen_addresses` and TLS settings of a TLS server; the shared server's connection cap.
    extra: String,
    /// Removed by the watchdog, after the server stopped.
    dir: PathBuf,
    bindir: PathBuf,
    run_as: Option<String>,
    /// Stops the server and removes `dir` once its stdin closes: at drop, or when the process
    /// ends.
    watchdog: Mutex<Option<Child>>,
}

fn bindir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BINDIR") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let on_path = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).find(|dir| dir.join("initdb").exists()));
    on_path.unwrap_or_else(|| {
        panic!(
            "PostgreSQL server binaries (initdb, pg_ctl) not found in $PG_BINDIR, \
             /usr/lib/postgresql/*/bin or PATH: install Debian's `postgresql` package \
             (scripts/test.sh does) to run the PostgreSQL store tests"
        )
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

fn user_ids(user: &str) -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, user])
            .output()
            .expect("id runs");
        assert!(
            out.status.success(),
            "running as root, the test server needs the `{user}` user (Debian's `postgresql` package creates it)"
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("a numeric id")
    };
    (id("-u"), id("-g"))
}

impl PgServer {
    /// The test run's server: started on first use, shared by every test of this process, each
    /// with a database of its own ([`PgServer::database`]); stopped when the process ends.
    /// Panics with the reason when it cannot start.
    pub(crate) fn shared() -> &'static PgServer {
        static SHARED: OnceLock<PgServer> = OnceLock::new();
        SHARED.get_or_init(|| {
            remove_abandoned_servers();
            // Room for the stores of the tests that run at once (four connections each).
            PgServer::start_with(PORT, "-c max_connections=300".to_string(), &[])
        })
    }

    /// Creates and starts a server of its own, for a test that restarts or stops it or changes
    /// its settings; panics with the reason when it cannot.
    pub(crate) fn start() -> PgServer {
        PgServer::start_with(PORT, String::new(), &[])
    }

    /// A server that also listens on loopback TCP at `port`, with TLS on: its certificate and
    /// key are `cert` and `key` (copied into the data directory, the key readable by the server
    /// alone, as PostgreSQL requires).
    pub(crate) fn start_tls(port: u16, cert: &Path, key: &Path) -> PgServer {
        PgServer::start_with(
            port,
            "-c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file=server.crt \
             -c ssl_key_file=server.key"
                .to_string(),
            &[(cert, "server.crt"), (key, "server.key")],
        )
    }

    fn start_with(port: u16, extra: String, files: &[(&Path, &str)]) -> PgServer {
        let bindir = bindir();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .tempdir()
            .expect("temporary directory")
            .keep();
        let run_as = is_root().then(|| "postgres".to_string());
        let server = PgServer {
            port,
            extra,
            dir,
            bindir,
            run_as,
            watchdog: Mutex::new(None),
        };
        // First: whatever fails below, the directory goes when the process does.
        server.watch();
        std::fs::create_dir(server.dir.join("sock")).unwrap();
        if let Some(user) = &server.run_as {
            let (uid, gid) = user_ids(user);
            for path in [server.dir.clone(), server.dir.join("sock")] {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap();
            }
        }
        server.run(
            "initdb",
            &[
                "-D",
                &server.data().to_string_lossy(),
                "--auth=trust",
                "-U",
                "postgres",
                "--no-sync",
                "--encoding=UTF8",
                // An ICU collation (English) as the database default: its order differs from
                // byte order ('B' < 'a' in bytes, not in English), so a column or comparison
                // without `COLLATE "C"` answers differently from SQLite in the contract suite.
                "--locale=C.UTF-8",
                "--locale-provider=icu",
                "--icu-locale=en-US",
            ],
        );
        for (from, name) in files {
            let to = server.data().join(name);
            std::fs::copy(from, &to).unwrap();
            std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
            if let Some(user) = &server.run_as {
                let (uid, gid) = user_ids(user);
                std::os::unix::fs::chown(&to, Some(uid), Some(gid)).unwrap();
            }
        }
        let options = server.options();
        server.run(
            "pg_ctl",
            &[
                "-D",
                &server.data().to_string_lossy(),
                "-l",
                &server.dir.join("log").to_string_lossy(),
                "-w",
                "-o",
                &options,
                "start",
            ],
        );
        server
    }

    /// Stops the server (every connection is closed) and starts it again.
    pub(crate) fn restart(&self) {
        let data = self.data().to_string_lossy().to_string();
        // Fast, not immediate: with `synchronous_commit=off` an immediate stop loses the last
        // commits, and this restart is about connections, not about losing data.
        self.run("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"]);
        let options = self.options();
        let log = self.dir.join("log").to_string_lossy().to_string();
        self.run(
            "pg_ctl",
            &["-D", &data, "-l", &log, "-w", "-o", &options, "start"],
        );
    }

    fn options(&self) -> String {
        format!(
            "-p {} -k {} -c listen_addresses='' -c fsync=off -c synchronous_commit=off {}",
            self.port,
            self.socket().display(),
            self.extra
        )
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// Starts the watchdog that stops this server and removes its directory when its stdin
    /// closes (see the module comment).
    fn watch(&self) {
        let mut stop = self.command("pg_ctl");
        stop.args([
            "-D",
            &self.data().to_string_lossy(),
            "-m",
            "immediate",
            "-w",
            "stop",
        ]);
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("ds-pg-watchdog")
            .arg(stop.get_program())
            .args(stop.get_args())
            .env("DS_PG_DIR", &self.dir)
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh runs");
        *self.watchdog.lock().unwrap() = Some(watchdog);
    }

    fn command(&self, program: &str) -> Command {
        let binary = self.bindir.join(program);
        match &self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(binary);
                command
            }
            None => Command::new(binary),
        }
    }

    fn run(&self, program: &str, args: &[&str]) {
        let output = self
            .command(program)
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap_or_else(|error| panic!("{program}: {error}"));
        if !output.status.success() {
            let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
            panic!(
                "{program} failed: {}\n{}\n{log}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }

    /// A new, empty database; returns its URL (over the Unix socket, as the `postgres` user).
    pub(crate) fn database(&self) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("t{}", NEXT.fetch_add(1, Ordering::SeqCst));
        self.run(
            "createdb",
            &[
                "-h",
                &self.socket().to_string_lossy(),
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                &name,
            ],
        );
        self.url(&name)
    }

    /// The URL of database `name`.
    pub(crate) fn url(&self, name: &str) -> String {
        format!(
            "postgres:///{name}?host={}&port={}&user=postgres",
            self.socket().display(),
            self.port
        )
    }

    /// `psql` connected to database `url_database` of this server, quiet, stopping at the
    /// first error.
    fn psql_to(&self, url_database: &str) -> Command {
        let mut command = self.command("psql");
        command
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.socket())
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                url_database,
            ])
            .current_dir(&self.dir);
        command
    }

    /// Runs SQL through `psql` (tests that tamper with a store).
    pub(crate) fn psql(&self, url_database: &str, sql: &str) -> String {
        let output = self
            .psql_to(url_database)
            .args(["-A", "-t", "-c", sql])
            .output()
            .expect("psql runs");
        assert!(
            output.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// A `psql` session left open, reading SQL from its stdin (tests that hold a transaction
    /// open while the store works); closing stdin ends it.
    pub(crate) fn session(&self, url_database: &str) -> std::process::Child {
        self.psql_to(url_database)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("psql runs")
    }

    /// The database name of a URL from [`PgServer::database`].
    pub(crate) fn name_of(url: &str) -> &str {
        url.trim_start_matches("postgres:///")
            .split('?')
            .next()
            .unwrap_or_default()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }
}

/// The watchdog's script: deaf to the terminal's signals (Ctrl-C reaches the whole foreground
/// process group), it waits for end-of-file on its stdin, then runs its arguments (`pg_ctl
/// stop`, immediate: nothing in a throwaway server is worth a clean shutdown's wait) and removes
/// the server's directory.
const WATCHDOG: &str = r#"trap '' HUP INT QUIT TERM PIPE
cat >/dev/null
"$@"
rm -rf -- "$DS_PG_DIR""#;

impl Drop for PgServer {
    fn drop(&mut self) {
        // Closing its stdin sets the watchdog off; waiting for it, the server is gone on return.
        let watchdog = self.watchdog.get_mut().map(Option::take);
        if let Ok(Some(mut watchdog)) = watchdog {
            drop(watchdog.stdin.take());
            let _ = watchdog.wait();
        }
    }
}

/// Stops and removes the servers of test processes that are gone, left behind if a watchdog was
/// itself killed. A live process's servers (another test run's) are left alone.
fn remove_abandoned_servers() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let dir = entry.path();
        let server = PgServer {
            port: PORT,
            extra: String::new(),
            dir,
            bindir: bindir(),
            run_as: is_root().then(|| "postgres".to_string()),
            watchdog: Mutex::new(None),
        };
        if server.data().join("postmaster.pid").exists() {
            let _ = server
                .command("pg_ctl")
                .args([
                    "-D",
                    &server.data().to_string_lossy(),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ])
                .current_dir(std::env::temp_dir())
                .output();
        }
        let _ = std::fs::remove_dir_all(&server.dir);
    }
}
