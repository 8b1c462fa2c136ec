"""Private store instances the fault tests may stop and start: never the shared ones.

The suite's PostgreSQL (5432) and Redis (6379) serve every other test, so a test that stops its
store gets its own: a PostgreSQL cluster made with ``initdb`` in a temporary folder (Debian's
binaries under ``/usr/lib/postgresql/<version>/bin``), listening on a free loopback port with
its socket in that folder, and a ``redis-server`` on a free port that keeps nothing on disk but
what its own shutdown saves. Both run as the ``postgres`` user when the tests run as root
(``initdb`` refuses root, as in CI), and are stopped and removed when the test ends.

A SQLite store has no server to stop: :class:`SQLiteOutage` takes its folder away (renamed, so
no new connection can open the file), or holds its write lock (so every write waits out its
busy timeout and fails), and then puts it back.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

__all__ = [
    "PostgresInstance",
    "RedisInstance",
    "SQLiteOutage",
    "free_port",
    "postgres_bin",
    "private_postgres",
    "private_redis",
]

#: The unprivileged account the servers run as when the tests run as root.
_SERVICE_USER: Final = "postgres"
_START_TIMEOUT_S: Final = 30.0


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def postgres_bin() -> Path | None:
    """The newest Debian PostgreSQL ``bin`` folder with ``initdb``, or ``None``."""
    root = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in root.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1]
    found = shutil.which("initdb")
    return None if found is None else Path(found).parent


def _as_service_user(command: list[str]) -> list[str]:
    """``command`` as the service user when we are root (``initdb`` and ``postgres`` refuse
    root), as ourselves otherwise."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", _SERVICE_USER, "--", *command]


@contextlib.contextmanager
def _private_folder(prefix: str) -> Iterator[Path]:
    """A new temporary folder the service user owns (pytest's ``tmp_path`` is private to
    root, so the service user could not reach a folder under it)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        if os.geteuid() == 0:
            account = pwd.getpwnam(_SERVICE_USER)
            os.chown(folder, account.pw_uid, account.pw_gid)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(
        _as_service_user(command), capture_output=True, text=True, check=False, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


class PostgresInstance:
    """A PostgreSQL cluster of our own: started, stopped and started again at will.

    Attributes:
        port: Its loopback port.
        url: A connection URL (trust authentication on loopback).
    """

    def __init__(self, binaries: Path, folder: Path) -> None:
        self._bin = binaries
        self._data = folder / "data"
        self._log = folder / "postgres.log"
        self._folder = folder
        self.port = free_port()
        self.url = f"postgresql://agentskit@127.0.0.1:{self.port}/postgres"

    def init(self) -> None:
        """``initdb`` the cluster (no fsync: it is thrown away)."""
        _run(
            [
                str(self._bin / "initdb"),
                "-D",
                str(self._data),
                "-U",
                "agentskit",
                "-A",
                "trust",
                "-N",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            "initdb",
        )

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = (
            f"-p {self.port} -k {self._folder} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=60 -c shared_buffers=16MB"
        )
        _run(
            [
                str(self._bin / "pg_ctl"),
                "-D",
                str(self._data),
                "-l",
                str(self._log),
                "-o",
                options,
                "-w",
                "-t",
                str(int(_START_TIMEOUT_S)),
                "start",
            ],
            "pg_ctl start",
        )

    def stop(self) -> None:
        """A fast shutdown: open sessions are ended, committed work is kept."""
        _run(
            [str(self._bin / "pg_ctl"), "-D", str(self._data), "-m", "fast", "-w", "stop"],
            "pg_ctl stop",
        )

    def running(self) -> bool:
        """Whether the server's pid file says it runs."""
        return (self._data / "postmaster.pid").exists()


@contextlib.contextmanager
def private_postgres() -> Iterator[PostgresInstance]:
    """A started private PostgreSQL; stopped and deleted afterwards.

    Raises:
        RuntimeError: no PostgreSQL binaries, or the cluster did not start.
    """
    binaries = postgres_bin()
    if binaries is None:
        raise RuntimeError("PostgreSQL's initdb is not installed (scripts/test-services.sh)")
    with _private_folder("agentskit-pg-") as folder:
        instance = PostgresInstance(binaries, folder)
        instance.init()
        instance.start()
        try:
            yield instance
        finally:
            if instance.running():
                with contextlib.suppress(Exception):
                    instance.stop()


class RedisInstance:
    """A ``redis-server`` of our own on a free port, with nothing saved but what
    :meth:`stop` saves (so a restart finds what was committed before the stop).

    Attributes:
        port: Its loopback port.
        url: A connection URL.
    """

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server (loading the last save, if any) and wait until it answers."""
        command = [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self._folder),
            "--dbfilename",
            "dump.rdb",
            "--daemonize",
            "no",
        ]
        self._process = subprocess.Popen(
            _as_service_user(command), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._process.returncode}")
            if self._ping():
                return
            time.sleep(0.02)
        raise RuntimeError("redis-server did not answer in time")

    def _ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as connection:
                connection.sendall(b"PING\r\n")
                return connection.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """``SHUTDOWN SAVE``: clients are cut off; what was written is kept for the restart."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as connection:
            connection.sendall(b"SHUTDOWN SAVE\r\n")
            with contextlib.suppress(OSError):
                connection.recv(64)
        if self._process is not None:
            self._process.wait(timeout=_START_TIMEOUT_S)
            self._process = None

    def kill(self) -> None:
        """End the server for good (cleanup)."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None


@contextlib.contextmanager
def private_redis() -> Iterator[RedisInstance]:
    """A started private Redis; ended and its folder deleted afterwards."""
    with _private_folder("agentskit-redis-") as folder:
        instance = RedisInstance(folder)
        instance.start()
        try:
            yield instance
        finally:
            instance.kill()


class SQLiteOutage:
    """Make a SQLite store unavailable, and available again with :meth:`end`.

    Two ways a SQLite file goes away: ``"folder"`` renames its folder away (a volume gone, a
    folder moved: no new connection can open the file, while a connection already open keeps
    its file handle), and ``"lock"`` holds its write lock from another connection (a stuck
    writer, a backup: every write waits out the busy timeout and fails).

    Args:
        database: The database file.
        how: ``"folder"`` or ``"lock"``.
    """

    def __init__(self, database: Path, how: str) -> None:
        if how not in ("folder", "lock"):
            raise ValueError("how must be 'folder' or 'lock'")
        self._how = how
        self._folder = database.parent
        self._database = database
        self._hidden = self._folder.with_name(self._folder.name + ".away")
        self._lock: sqlite3.Connection | None = None

    def begin(self) -> None:
        """Take the folder away, or the write lock."""
        if self._how == "folder":
            self._folder.rename(self._hidden)
            return
        lock = sqlite3.connect(
            self._database, isolation_level=None, timeout=10, check_same_thread=False
        )
        lock.execute("BEGIN EXCLUSIVE")
        self._lock = lock

    def end(self) -> None:
        """Put the folder back, or release the lock (idempotent)."""
        if self._hidden.exists():
            self._hidden.rename(self._folder)
        if self._lock is not None:
            self._lock.execute("ROLLBACK")
            self._lock.close()
            self._lock = None
