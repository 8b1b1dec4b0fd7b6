//! A throwaway PostgreSQL server for tests: `initdb` in a temporary directory, started on a Unix
//! socket in that directory only (`listen_addresses=''`: no TCP port, so it can clash with no
//! other server), a database per [`PgServer::database`], stopped and removed on drop. It never
//! touches a system-wide cluster.
//!
//! The binaries come from `$PG_BINDIR`, else Debian's `/usr/lib/postgresql/<newest>/bin`, else
//! the directory of `initdb` on `PATH`. Without them the test fails and says what to install
//! (scripts/test.sh installs Debian's `postgresql`): a store test must not pass by skipping.
//! As root (CI, the dev machines), the server runs as the `postgres` user, since PostgreSQL
//! refuses to run as root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The port in the socket's name (`.s.PGSQL.5432`); unique per server through its directory.
const PORT: u16 = 5432;

pub(crate) struct PgServer {
    /// The port: in the socket's name, and on loopback TCP for a TLS server.
    port: u16,
    /// `listen_addresses` and TLS settings of a TLS server.
    extra: String,
    dir: tempfile::TempDir,
    bindir: PathBuf,
    run_as: Option<String>,
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
    /// Creates and starts a server; panics with the reason when it cannot.
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
            .prefix("ds-pg")
            .tempdir()
            .expect("temporary directory");
        let run_as = is_root().then(|| "postgres".to_string());
        std::fs::create_dir(dir.path().join("sock")).unwrap();
        if let Some(user) = &run_as {
            let (uid, gid) = user_ids(user);
            for path in [dir.path().to_path_buf(), dir.path().join("sock")] {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap();
            }
        }
        let server = PgServer {
            port,
            extra,
            dir,
            bindir,
            run_as,
        };
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
                &server.dir.path().join("log").to_string_lossy(),
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
        let log = self.dir.path().join("log").to_string_lossy().to_string();
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
        self.dir.path().join("data")
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("sock")
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
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|error| panic!("{program}: {error}"));
        if !output.status.success() {
            let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
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
            .current_dir(self.dir.path());
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
        self.dir.path()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // Immediate: nothing in a throwaway server is worth a clean shutdown's wait.
        let _ = self
            .command("pg_ctl")
            .args([
                "-D",
                &self.data().to_string_lossy(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ])
            .current_dir(self.dir.path())
            .output();
    }
}
