"""Context-window sizes of the models the package knows: kept under this name for the modules
and users that import it from here; the table and its functions live in :mod:`ctxwindow.models`,
the one model table of the Python layer.

>>> context_window("gpt-4o-2024-08-06")
128000
"""

from __future__ import annotations

from ctxwindow.models import (
    CONTEXT_WINDOWS,
    MAX_DEFAULT_RESERVE,
    context_window,
    default_reserve,
    model_names,
    resolve_budget,
)

__all__ = ["CONTEXT_WINDOWS", "MAX_DEFAULT_RESERVE", "context_window", "default_reserve", "model_names",
           "resolve_budget"]
