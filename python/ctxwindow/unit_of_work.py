"""One unit of work: every operation of a window either completes or changes nothing.

A :class:`UnitOfWork` owns the transaction of a window (SQLAlchemy's ``SessionTransaction`` and
unit of work are the model):

- **participants** (the conversation store, the prompt blocks, the window's ledger, notes,
  standing instructions, the cache schedule, recall) register once; at the start of an operation
  each gives a savepoint, and if the operation fails (any exception, ``KeyboardInterrupt``
  included) each is rolled back to it, in the reverse order of registration;
- **deferred effects** run in one fixed order (:data:`PHASES`): the archive writes and the recall
  ingestion at commit, inside the transaction (a failure there still rolls everything back), then
  the events, once the new state is final (a callback that raises cannot undo it);
- the **busy guard**: a call made while an operation is in progress (from a strategy, a
  summarizer or another coroutine) raises :class:`~ctxwindow.errors.WindowBusyError` and changes
  nothing;
- the **async re-plan loop** (:meth:`UnitOfWork.arun`): a summarizer met while planning for an async
  caller is awaited on the caller's event loop with nothing applied, then the whole operation runs
  again with its answer, so no half-made state is ever held across an ``await``.

>>> log = []
>>> class Counter:
...     def __init__(self) -> None:
...         self.value = 0
...     def savepoint(self) -> int:
...         return self.value
...     def rollback(self, savepoint: int) -> None:
...         self.value = savepoint
>>> counter = Counter()
>>> unit = UnitOfWork()
>>> unit.register(counter)
>>> def fails() -> None:
...     counter.value += 1
...     unit.defer("events", lambda: log.append("never"))
...     raise ValueError("no")
>>> try:
...     unit.run(fails)
... except ValueError:
...     pass
>>> counter.value, log
(0, [])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ctxwindow.errors import InvalidArgumentError, WindowBusyError
from ctxwindow.strategies.base import NeedsAwait
from ctxwindow.strategies.summarize import await_summarizer

__all__ = ["Participant", "Savepoints", "UnitOfWork", "PHASES", "MAX_AWAITS"]

T = TypeVar("T")

#: The deferred effects, in the order they run: the first two at commit (inside the
#: transaction), ``events`` after it.
PHASES = ("archive", "recall", "events")

#: How many summarizer calls one async operation awaits at most (each is awaited once).
MAX_AWAITS = 64

_BUSY = "this window is in the middle of another operation; the call changed nothing"


class Participant(Protocol):
    """State that takes part in a window's transactions."""

    def savepoint(self) -> Any:
        """A value from which :meth:`rollback` restores the current state."""
        ...

    def rollback(self, savepoint: Any) -> None:
        """Restores the state of ``savepoint``."""
        ...


@dataclass(frozen=True)
class Savepoints:
    """A participant made of functions, for an object whose own API names these otherwise
    (``release`` runs when the transaction commits)."""

    save: Callable[[], Any]
    restore: Callable[[Any], None]
    release: Callable[[], None] | None = None

    def savepoint(self) -> Any:
        """``save()``."""
        return self.save()

    def rollback(self, savepoint: Any) -> None:
        """``restore(savepoint)``."""
        self.restore(savepoint)


class UnitOfWork:
    """The transaction of one window; see the module documentation.

    ``on_rollback(error)`` runs after a failed operation has been rolled back (the window reports
    an overflow there)."""

    def __init__(self, on_rollback: Callable[[BaseException], None] | None = None) -> None:
        self._participants: list[Participant] = []
        self._deferred: dict[str, list[Callable[[], None]]] = {phase: [] for phase in PHASES}
        self._on_rollback = on_rollback
        #: True while an operation runs (and while an async operation awaits a summarizer).
        self.busy = False
        #: Summaries awaited so far by the current async operation, by call key.
        self.answers: dict[Any, Any] = {}
        #: True while an async operation plans (a summarizer is then awaited, not called).
        self.awaiting = False

    def register(self, participant: Participant) -> None:
        """Adds a participant to every later transaction."""
        self._participants.append(participant)

    def defer(self, phase: str, action: Callable[[], None]) -> None:
        """Runs ``action`` when the current operation commits, in the order of :data:`PHASES`
        (actions of one phase in the order deferred)."""
        if phase not in self._deferred:
            raise InvalidArgumentError(f"unknown phase {phase!r}; known: {', '.join(PHASES)}")
        self._deferred[phase].append(action)

    def run(self, body: Callable[[], T]) -> T:
        """Runs ``body`` so that it either completes or changes nothing, then delivers the events
        it deferred (a callback error is re-raised after all were delivered, when the event bus
        re-raises)."""
        if self.busy:
            raise WindowBusyError(_BUSY)
        self.busy = True
        savepoints = [p.savepoint() for p in self._participants]
        deferred = self._deferred
        for actions in deferred.values():
            actions.clear()
        try:
            result = body()
            for phase in PHASES[:-1]:
                actions = deferred[phase]
                while actions:  # an action may defer another of the same phase
                    actions.pop(0)()
        except BaseException as error:
            for participant, savepoint in reversed(list(zip(self._participants, savepoints))):
                participant.rollback(savepoint)
            for actions in deferred.values():
                actions.clear()
            self.busy = False
            if self._on_rollback is not None:
                self._on_rollback(error)
            raise
        del savepoints
        for participant in self._participants:
            if isinstance(participant, Savepoints) and participant.release is not None:
                participant.release()
        events = list(deferred["events"])
        deferred["events"].clear()
        self.busy = False
        deliver(events, reraise=True)
        return result

    async def arun(self, body: Callable[[], T]) -> T:
        """:meth:`run` for async callers: a summarizer met while planning is awaited on this
        event loop, then the whole operation runs again with its answer."""
        answers: dict[Any, Any] = {}
        for _ in range(MAX_AWAITS):
            if self.busy:
                raise WindowBusyError(_BUSY)
            self.answers, self.awaiting = answers, True
            try:
                return self.run(body)
            except NeedsAwait as need:
                call, timeout, key, is_async = need.call, need.timeout, need.key, need.is_async
            finally:
                self.answers, self.awaiting = {}, False
            self.busy = True  # no other call while the summary is awaited
            try:
                answers[key] = await await_summarizer(call, timeout, is_async)
            finally:
                self.busy = False
        raise InvalidArgumentError(f"one operation needed more than {MAX_AWAITS} summaries")


def deliver(actions: list[Callable[[], None]], reraise: bool) -> None:
    """Runs every action; with ``reraise``, the first error is raised once all have run (the
    event bus has already logged and recorded each)."""
    first: BaseException | None = None
    for action in actions:
        try:
            action()
        except Exception as error:
            first = first or error
    if first is not None and reraise:
        raise first
