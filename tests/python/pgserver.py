"""A throwaway PostgreSQL server for process tests, as tests/it/pg.rs is for the Rust ones:
`initdb` in a temporary directory, listening on a Unix socket in that directory only (no TCP
port), one database per `database()`, stopped and removed by `stop()`. It never touches a
system-wide cluster. As root, the server runs as the `postgres` user (PostgreSQL refuses root).
The tests share one per run (per xdist worker: conftest.py's `pg` fixture), a database each.

The binaries come from $PG_BINDIR, else Debian's /usr/lib/postgresql/<newest>/bin, else PATH;
without them the test fails saying what to install (scripts/test.sh installs `postgresql`)."""

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

PORT = "5432"
_names = itertools.count()


def bindir() -> Path:
    if os.environ.get("PG_BINDIR"):
        return Path(os.environ["PG_BINDIR"])
    versions = []
    for entry in Path("/usr/lib/postgresql").glob("*/bin/initdb"):
        try:
            versions.append((int(entry.parent.parent.name), entry.parent))
        except ValueError:
            pass
    if versions:
        return sorted(versions)[-1][1]
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found in $PG_BINDIR, "
        "/usr/lib/postgresql/*/bin or PATH: install Debian's `postgresql` package "
        "(scripts/test.sh does)"
    )


# Free space /dev/shm must have for the server's files to go there (a run's databases take a few
# hundred MB; a container's default /dev/shm of 64 MB would fill up).
SHM_NEEDED = 1 << 30


def scratch_dir():
    """Where the server's files go: tmpfs (/dev/shm) when the machine has it writable with room
    to spare, else the temporary directory. A throwaway server's files never need to reach a disk
    (fsync is off anyway); in memory, its databases are created and removed without waiting on
    other I/O."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK | os.X_OK)):
        return None
    stats = os.statvfs(shm)
    return str(shm) if stats.f_bavail * stats.f_frsize >= SHM_NEEDED else None


class PgServer:
    def __init__(self):
        self.bindir = bindir()
        self.dir = Path(tempfile.mkdtemp(prefix="ds-pg", dir=scratch_dir()))
        self.run_as = "postgres" if os.geteuid() == 0 else None
        self.socket = self.dir / "sock"
        self.socket.mkdir()
        if self.run_as:
            user = pwd.getpwnam(self.run_as)
            for path in (self.dir, self.socket):
                os.chown(path, user.pw_uid, user.pw_gid)
        # The locale of tests/it/pg.rs: an ICU collation (English) as the database default, whose
        # order differs from byte order, so a comparison without `COLLATE "C"` shows.
        self._run("initdb", "-D", str(self.dir / "data"), "--auth=trust", "-U", "postgres",
                  "--no-sync", "--encoding=UTF8", "--locale=C.UTF-8", "--locale-provider=icu",
                  "--icu-locale=en-US")
        self._run("pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "log"), "-w",
                  "-o", self._options(), "start")

    def _options(self) -> str:
        return (f"-p {PORT} -k {self.socket} -c listen_addresses='' -c fsync=off "
                "-c synchronous_commit=off -c max_connections=200")

    def _command(self, program: str) -> list:
        binary = str(self.bindir / program)
        return ["runuser", "-u", self.run_as, "--", binary] if self.run_as else [binary]

    def _run(self, program: str, *args: str) -> str:
        done = subprocess.run(self._command(program) + list(args), cwd=self.dir,
                              capture_output=True, text=True)
        if done.returncode != 0:
            log = (self.dir / "log").read_text() if (self.dir / "log").exists() else ""
            raise RuntimeError(f"{program} failed: {done.stdout}\n{done.stderr}\n{log}")
        return done.stdout

    def database(self, name: str = "") -> str:
        """A new, empty database (named `name`, or a fresh name); its URL for `store.url`."""
        name = name or f"t{next(_names)}"
        self._run("createdb", "-h", str(self.socket), "-p", PORT, "-U", "postgres", name)
        return self.url(name)

    def url(self, name: str) -> str:
        return f"postgres:///{name}?host={self.socket}&port={PORT}&user=postgres"

    def psql(self, url: str, sql: str) -> str:
        name = url.split("///", 1)[1].split("?", 1)[0]
        return self._run("psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                         "-h", str(self.socket), "-p", PORT, "-U", "postgres", "-d", name,
                         "-c", sql).strip()

    def stop(self):
        try:
            self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
