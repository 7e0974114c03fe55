"""The exceptions of ctxwindow.

Every error the package raises is a :class:`CtxWindowError` and also an instance of the matching
builtin, so ``except ValueError`` / ``except TypeError`` keep working. A call that raises leaves
every object exactly as it was.
"""

from __future__ import annotations

__all__ = [
    "CtxWindowError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "UnknownEncodingError",
    "SnapshotError",
    "HistoryIndexError",
    "InvalidTextError",
    "MalformedMessageError",
    "ContextOverflowError",
    "MissingDependencyError",
    "StaleCheckpointError",
    "WindowBusyError",
    "CheckpointCorruptError",
    "CheckpointStoreError",
    "CheckpointCommitUnknownError",
]


class CtxWindowError(Exception):
    """Base class of every error raised by ctxwindow."""


class InvalidArgumentError(CtxWindowError, ValueError):
    """An argument has the right type but a value outside what is allowed (negative tokens,
    a low watermark above the budget, an unknown token id, ...)."""


class InvalidTypeError(CtxWindowError, TypeError):
    """An argument has the wrong type (a float or bool where tokens are counted, a non-str
    text, ...)."""


class UnknownEncodingError(InvalidArgumentError):
    """An encoding or model name that is not known; the message lists the known ones."""


class SnapshotError(InvalidArgumentError):
    """A snapshot that cannot be restored into this history (taken from another history, or on
    a branch a later rollback discarded)."""


class HistoryIndexError(CtxWindowError, IndexError):
    """An index outside the history."""


class InvalidTextError(InvalidArgumentError):
    """Text that is not valid Unicode (a lone surrogate) or bytes that are not valid UTF-8."""


class MalformedMessageError(InvalidArgumentError):
    """A chat message that does not follow the accepted shapes; the message says which one
    and what is wrong."""


class ContextOverflowError(CtxWindowError, ValueError):
    """Protected content alone exceeds the budget.

    Attributes:
        needed: tokens the protected content needs.
        available: tokens the budget allows.
    """

    def __init__(self, needed: int, available: int, detail: str = "") -> None:
        self.needed = needed
        self.available = available
        message = (
            f"protected content needs {needed} tokens but the budget allows {available} "
            f"({needed - available} over)"
        )
        if detail:
            message = f"{message}: {detail}"
        super().__init__(message)


class MissingDependencyError(CtxWindowError, ImportError):
    """An optional feature needs a package that is not installed; the message names the extra
    to install."""


class StaleCheckpointError(CtxWindowError, ValueError):
    """A checkpoint save based on an older version than the store holds; nothing was written.
    Load the newer version and retry."""


class CheckpointCorruptError(CtxWindowError, ValueError):
    """A stored checkpoint that cannot be read (truncated, wrong schema, garbage)."""


class WindowBusyError(CtxWindowError, RuntimeError):
    """A window was called while one of its own operations was in progress (from a strategy,
    a summarizer, or another coroutine while ``aadd`` awaits a summary). A window serves one
    agent loop; the call changed nothing."""


class CheckpointStoreError(CtxWindowError, RuntimeError):
    """A checkpoint store's database server failed the call (unreachable, connection lost,
    restarted). A save that raises this wrote nothing, except for its subclass
    :class:`CheckpointCommitUnknownError`; retrying it is safe."""


class CheckpointCommitUnknownError(CheckpointStoreError):
    """The connection was lost after COMMIT was sent: the save may or may not have been
    written, and it is never retried automatically. Load the session to see which version it
    holds (the saved checkpoint's content tells whether it was written) before saving again."""
