"""Checkpoints, one file per store and concern: the model, the versioning rule and the contract
every store keeps (over the file, SQLite and PostgreSQL stores), each store's own schema and
faults, the archive of evicted messages, the resume prompt, and a window's checkpoint / resume.

The PostgreSQL server is a throwaway cluster started once per run (``tests/pg_server.py``), each
test in its own schema. :func:`kill_trials`, :func:`open_kind` and :func:`close` are also used
by ``benches/bench_checkpoint.py``."""

from .stores import close, kill_trials, open_kind

__all__ = ["close", "kill_trials", "open_kind"]
