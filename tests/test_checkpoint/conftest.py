"""Fixtures of the checkpoint tests: a store of every kind, and stores opened again and again on
one database (as after a restart)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxwindow.checkpoint import FileCheckpointStore

from ..pg_server import PostgresServer
from .stores import KINDS, DatabaseStore, Store, close, make_store, server_for


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store of each kind, keeping 3 versions."""
    opened = make_store(request.param, tmp_path, 3, server_for(request, request.param))
    yield opened
    close(opened)


@pytest.fixture(params=["sqlite", "postgres"])
def open_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], DatabaseStore]]:
    """Opens stores (each call a new one, as after a restart) on one SQLite file or one
    PostgreSQL schema: the stores with an archive."""
    server = server_for(request, request.param)
    dsn = server.new_schema() if server else None
    opened: list[DatabaseStore] = []

    def open_store() -> DatabaseStore:
        store = make_store(request.param, tmp_path, 20, dsn=dsn)
        assert not isinstance(store, FileCheckpointStore)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        close(store)


@pytest.fixture
def pg_dsn(postgres_server: PostgresServer) -> str:
    """A connection string to a new, empty schema of the test server."""
    return postgres_server.new_schema()
