"""Calling a summarizer from a compaction: with a timeout from sync code
(:func:`call_summarizer`), or awaited on the caller's event loop for the async methods
(:class:`NeedsAwait`, :func:`await_summarizer`). Every failure is a :class:`SummaryFailed`, which
the cascade answers by running the next strategy, the window unchanged."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
from collections.abc import Callable
from typing import Any

from ctxwindow.errors import CtxWindowError

__all__ = ["Summarizer", "SummaryFailed", "NeedsAwait", "call_summarizer", "await_summarizer", "is_async_callable"]

#: A summarizer: ``(system, user) -> str``, or an async function returning one.
Summarizer = Callable[[str, str], Any]


class SummaryFailed(CtxWindowError):
    """The summarizer raised, timed out, returned nothing, or returned something not shorter than
    what it would replace. The window is unchanged; the next strategy runs."""


def is_async_callable(function: object) -> bool:
    """True for an ``async def`` function, a partial of one, or an object whose ``__call__`` is."""
    while isinstance(function, functools.partial):
        function = function.func
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(type(function), "__call__", None))


class NeedsAwait(BaseException):
    """Raised inside a compaction planned for an async caller when a summarizer must be awaited
    first: the window abandons the plan (nothing was applied), awaits the call on the caller's
    event loop, and plans again with the answer. Not an ``Exception``, so strategies that skip
    failures do not swallow it."""

    def __init__(self, key: tuple[int, str, str], call: Callable[[], Any], timeout: float | None,
                 is_async: bool = True) -> None:
        super().__init__("a summarizer must be awaited")
        self.key, self.call, self.timeout, self.is_async = key, call, timeout, is_async


def call_summarizer(summarizer: Summarizer, system: str, user: str, timeout: float | None) -> str:
    """Calls a sync summarizer with a timeout (seconds, None: no limit); raises
    :class:`SummaryFailed` when it raises, times out or returns something other than a str.

    An async summarizer (one that returns an awaitable) is awaited only by the async methods
    (``ContextWindow.aadd``, ``acompact``) on the caller's event loop, where its client lives;
    from sync code it is a :class:`SummaryFailed` that says so (the cascade falls back)."""

    def outcome(result: Any) -> str:
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            raise SummaryFailed("the summarizer is async: call ContextWindow.aadd() / acompact() "
                                "from async code to await it")
        if not isinstance(result, str):
            raise SummaryFailed(f"the summarizer returned {type(result).__name__}, not str")
        return result

    if timeout is None:
        try:
            return outcome(summarizer(system, user))
        except SummaryFailed:
            raise
        except Exception as error:
            raise SummaryFailed(f"the summarizer raised {type(error).__name__}: {error}") from error
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxwindow-summarizer")
    try:
        result = pool.submit(summarizer, system, user).result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise SummaryFailed(f"the summarizer did not answer within {timeout} s") from None
    except Exception as error:
        raise SummaryFailed(f"the summarizer raised {type(error).__name__}: {error}") from error
    finally:
        pool.shutdown(wait=False)
    return outcome(result)


async def await_summarizer(call: Callable[[], Any], timeout: float | None, is_async: bool = True) -> Any:
    """Runs one summarizer call for an async caller: an async summarizer is awaited on the
    running loop (a timeout cancels it); a sync one runs in a worker thread so the loop is not
    blocked. Returns the text, or the :class:`SummaryFailed` to raise when the plan is made
    again."""
    try:
        if timeout is None:
            result = await _start(call, is_async)
        else:
            result = await asyncio.wait_for(_start(call, is_async), timeout)
    except (asyncio.TimeoutError, TimeoutError):
        return SummaryFailed(f"the summarizer did not answer within {timeout} s")
    except Exception as error:
        return SummaryFailed(f"the summarizer raised {type(error).__name__}: {error}")
    if not isinstance(result, str):
        return SummaryFailed(f"the summarizer returned {type(result).__name__}, not str")
    return result


async def _start(call: Callable[[], Any], is_async: bool) -> Any:
    # An async summarizer returns an awaitable we await on this loop; a sync one runs in a
    # worker thread (the loop keeps running; on a timeout its late answer is discarded).
    result = call() if is_async else await asyncio.to_thread(call)
    if inspect.isawaitable(result):
        return await result
    return result
