"""A throwaway PostgreSQL server for the tests and benchmarks: ``initdb`` of a cluster in a
temporary folder, ``pg_ctl start`` listening on a Unix socket in that folder only, stopped and
deleted at the end. As root (``initdb`` refuses to run as root) the server runs as the user
``nobody``.

The server binaries are looked for in ``$CTXWINDOW_PG_BIN``, on ``PATH`` and in
``/usr/lib/postgresql/*/bin`` (Debian's ``postgresql`` package); ``.ci/run`` and ``make test``
install that package when it is missing.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["PostgresServer", "find_server_binaries", "postgres_server"]


def find_server_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or None."""
    candidates: list[Path] = []
    if os.environ.get("CTXWINDOW_PG_BIN"):
        candidates.append(Path(os.environ["CTXWINDOW_PG_BIN"]))
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)

    def major(path: Path) -> int:
        match = re.match(r"\d+", path.parent.name)
        return int(match[0]) if match else 0

    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=major, reverse=True)
    candidates += [Path("/usr/local/pgsql/bin"), Path("/usr/pgsql/bin")]
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


MISSING = ("PostgreSQL server binaries (initdb, pg_ctl) not found in $CTXWINDOW_PG_BIN, on PATH or in "
           "/usr/lib/postgresql/*/bin: install the distribution's package (apt-get install postgresql; "
           "`.ci/run` and `make test` do so as root) or set CTXWINDOW_PG_BIN; set CTXWINDOW_SKIP_POSTGRES=1 "
           "to skip the PostgreSQL tests")


class PostgresServer:
    """One running throwaway cluster; :attr:`dsn` connects to its database ``postgres`` as the
    superuser ``ctxwindow`` (trust authentication, Unix socket only)."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.folder = Path(tempfile.mkdtemp(prefix="ctxwpg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = 5432  # the socket lives in our own folder: no clash with another server
        self._run_as: dict[str, Any] = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            self._run_as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
            os.chown(self.folder, nobody.pw_uid, nobody.pw_gid)
        self.dsn = f"host={self.folder} port={self.port} user=ctxwindow dbname=postgres"

    def _tool(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.binaries / arguments[0]), *arguments[1:]], capture_output=True, text=True,
                              cwd=self.folder, timeout=120, **self._run_as)
        if check and done.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(arguments[:2])} failed ({done.returncode}): {done.stderr}{done.stdout}\n"
                               f"{log}")
        return done

    def start(self) -> None:
        self._tool("initdb", "-D", str(self.data), "-U", "ctxwindow", "--auth=trust", "--encoding=UTF8",
                   "--locale=C.UTF-8", "-N")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nlisten_addresses = ''\nunix_socket_directories = '{self.folder}'\nport = {self.port}\n"
                       "max_connections = 100\nshared_buffers = 32MB\nfsync = on\n")
        self._tool("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def restart(self) -> None:
        """A fast restart: open connections are cut, open transactions roll back."""
        self._tool("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", "fast", "-w", "-t", "60", "restart")

    def stop(self) -> None:
        self._tool("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.folder, ignore_errors=True)

    def new_schema(self) -> str:
        """A connection string whose ``search_path`` is a new, empty schema (a test's own
        tables in the shared cluster)."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.dsn, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {name}".encode())
        return psycopg.conninfo.make_conninfo(self.dsn, options=f"-c search_path={name}")


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A started server, stopped and deleted on exit; RuntimeError (with :data:`MISSING`) when
    no server binaries are installed."""
    binaries = find_server_binaries()
    if binaries is None:
        raise RuntimeError(MISSING)
    server = PostgresServer(binaries)
    try:
        server.start()
        yield server
    finally:
        server.stop()
