"""Fixtures of the checkpoint tests: a store of every kind, and stores opened again and again on
one database (as after a restart)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..pg_server import PostgresServer
from .stores import KINDS, Store, close, make_store, open_database, server_for  # noqa: F401 (a fixture)


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store of each kind, keeping 3 versions."""
    opened = make_store(request.param, tmp_path, 3, server_for(request, request.param))
    yield opened
    close(opened)


@pytest.fixture
def pg_dsn(postgres_server: PostgresServer) -> str:
    """A connection string to a new, empty schema of the test server."""
    return postgres_server.new_schema()
