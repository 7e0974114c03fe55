"""The conversation store: the one owner of a window's messages, their token counts, groups,
pins and the tool-call group still waiting for results.

Nothing else mutates the conversation. The window hands the store a validated addition or a
checked compaction plan, and the store applies it in one step; ``begin()`` / ``rollback()`` make
any sequence of such steps a transaction (an ``add`` that overflows, a strategy that raises, a
``KeyboardInterrupt`` inside a summarizer: the store is exactly as before).

Groups are derived from the messages, never chosen by callers: an assistant message that makes
tool calls starts a group whose id is its ``seq``, each tool result joins the group of the call
it answers (by ``tool_call_id``), every other message is a group of its own. So a rewritten
assistant message keeps its results, and a plan that drops a call drops its results
(:func:`settle_groups`).

Costs: adding a message is O(1) (a push on the native FIFO and an append to the message list);
evicting k messages from the front is O(k) on the native FIFO plus one copy of the message list;
a compaction that rewrites messages rebuilds the store in O(window).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ctxwindow._native import HistorySnapshot, TokenHistory
from ctxwindow.errors import MalformedMessageError
from ctxwindow.messages import Message, tool_call_ids
from ctxwindow.strategies.base import Entry

__all__ = ["ConversationStore", "Savepoint", "Addition", "settle_groups"]


class Addition(NamedTuple):
    """A message ready to be applied: its entry, and either the completed group to push or the
    pending group (with the calls still open) to hold back."""

    entry: Entry
    group: tuple[Entry, ...]
    open_calls: frozenset[str]


class Savepoint(NamedTuple):
    """The store's state at :meth:`ConversationStore.begin` (cheap: no copy of messages; a
    named tuple because one is made on every operation)."""

    history: TokenHistory
    snapshot: HistorySnapshot
    messages: list[Message]
    length: int
    pending: tuple[Entry, ...]
    open_calls: frozenset[str]
    seq: int
    turn: int
    pinned: int
    tool_tokens: int


def settle_groups(entries: Iterable[Entry]) -> tuple[list[Entry], list[Entry]]:
    """Groups derived from the messages: returns ``(entries, dropped)`` where every entry's
    ``group`` is set by the rule of the module documentation and the tool results whose call is
    no longer there are dropped (a plan that drops a call drops its results)."""
    settled: list[Entry] = []
    dropped: list[Entry] = []
    group_of_call: dict[str, int] = {}
    for entry in entries:
        if entry.role == "tool":
            group = group_of_call.get(str(entry.message.get("tool_call_id")))
            if group is None:
                dropped.append(entry)
                continue
        else:
            group = entry.seq
            group_of_call = {call_id: group for call_id in tool_call_ids(entry.message)}
        settled.append(entry if entry.group == group else entry._replace(group=group))
    return settled, dropped


class ConversationStore:
    """The messages of one window, in order, on a native :class:`~ctxwindow.TokenHistory` of
    :class:`~ctxwindow.strategies.Entry` values (whole groups), plus the pending tool-call group."""

    def __init__(self) -> None:
        self._history = TokenHistory()
        self._messages: list[Message] = []
        self._pending: tuple[Entry, ...] = ()
        self._open_calls: frozenset[str] = frozenset()
        self.seq = 0
        self.turn = 0
        self._pinned = 0
        self._tool_tokens = 0

    # --- reading ---------------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """The stored messages in order (the store's own list: callers copy before changing)."""
        return self._messages

    def entries(self) -> list[Entry]:
        """The stored entries, oldest first."""
        entries: list[Entry] = list(self._history)
        return entries

    def entry(self, index: int) -> Entry:
        """The entry at ``index`` (negative allowed)."""
        entry: Entry = self._history[index]
        return entry

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def tokens(self) -> int:
        """Tokens of the stored messages (pending group excluded)."""
        return self._history.total_tokens

    @property
    def tool_tokens(self) -> int:
        """Tokens of the stored tool results."""
        return self._tool_tokens

    @property
    def pinned(self) -> int:
        """Number of stored pinned messages."""
        return self._pinned

    @property
    def pending(self) -> tuple[Entry, ...]:
        """The tool-call group still waiting for results (held back from the prompt)."""
        return self._pending

    @property
    def pending_tokens(self) -> int:
        return sum(e.tokens for e in self._pending)

    @property
    def open_calls(self) -> frozenset[str]:
        """Ids of the pending calls without a result yet."""
        return self._open_calls

    def first_role(self) -> str | None:
        return str(self._messages[0].get("role")) if self._messages else None

    def protected_groups(self, entries: Sequence[Entry], preserve_recent: int) -> set[int]:
        """Groups never evicted or altered: the last ``preserve_recent`` messages, the newest
        user message (one the window's user added, not a summary or placeholder a strategy
        wrote) and pinned messages, each with its whole group."""
        recent = entries[max(len(entries) - preserve_recent, 0):] if preserve_recent else []
        groups = {e.group for e in recent}
        for entry in reversed(entries):
            if entry.role == "user" and entry.kind == "message":
                groups.add(entry.group)
                break
        groups.update(e.group for e in entries if e.pinned)
        return groups

    # --- planning an addition (no change) --------------------------------------------------

    def prepare(self, message: Message, tokens: int, pinned: bool, where: str) -> Addition:
        """The addition of a validated message, checked against the pending group; raises
        :class:`MalformedMessageError` (``where`` names the message) and changes nothing."""
        role = message["role"]
        seq = self.seq + 1
        turn = self.turn + (1 if role == "user" else 0)
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in self._open_calls:
                raise MalformedMessageError(
                    f"{where}: tool result for call {call_id!r}, which is not an open tool call "
                    f"in this window (open: {sorted(self._open_calls) or 'none'})")
            entry = Entry(message, tokens, seq, self._pending[0].group, turn, pinned)
            return Addition(entry, (*self._pending, entry), self._open_calls - {call_id})
        if self._open_calls:
            raise MalformedMessageError(
                f"{where}: tool calls {sorted(self._open_calls)} have no results yet; add their "
                f"tool results before a {role} message")
        entry = Entry(message, tokens, seq, seq, turn, pinned)
        return Addition(entry, (entry,), frozenset(tool_call_ids(message)))

    # --- changing (only through these) -----------------------------------------------------

    def begin(self) -> Savepoint:
        """A savepoint for :meth:`rollback`."""
        return Savepoint(self._history, self._history.snapshot(), self._messages, len(self._messages),
                         self._pending, self._open_calls, self.seq, self.turn, self._pinned,
                         self._tool_tokens)

    def release(self) -> None:
        """After a transaction committed (its savepoint dropped): frees now the evicted entries
        the savepoint kept for a rollback, so their cost is paid by the operation that evicted
        them, not by a later turn (taking a snapshot releases what no live snapshot needs)."""
        if self._history.kept_for_snapshots:
            self._history.snapshot()

    def rollback(self, savepoint: Savepoint) -> None:
        """Restores exactly the state at ``savepoint``. Every change below either appends to the
        current list and FIFO or replaces them by new ones, so the saved objects are intact."""
        self._history = savepoint.history
        self._history.rollback(savepoint.snapshot)
        self._messages = savepoint.messages
        del self._messages[savepoint.length:]
        self._pending, self._open_calls = savepoint.pending, savepoint.open_calls
        self.seq, self.turn = savepoint.seq, savepoint.turn
        self._pinned, self._tool_tokens = savepoint.pinned, savepoint.tool_tokens

    def apply(self, addition: Addition) -> None:
        """Applies a prepared addition: holds the group back while calls are open, else stores it."""
        self.seq = addition.entry.seq
        self.turn = addition.entry.turn
        if addition.open_calls:
            self._pending, self._open_calls = addition.group, addition.open_calls
            return
        self._pending, self._open_calls = (), frozenset()
        for index, entry in enumerate(addition.group):
            self._push(entry, index == 0)

    def _push(self, entry: Entry, starts_group: bool) -> None:
        self._history.push(entry, entry.tokens, starts_group)
        self._messages.append(entry.message)
        self._pinned += entry.pinned
        if entry.role == "tool":
            self._tool_tokens += entry.tokens

    def drop_front(self, count: int, tokens: int) -> list[Entry]:
        """Evicts the first ``count`` entries (whole groups, ``tokens`` in total) in O(count) on
        the native FIFO; returns them, oldest first."""
        if count == 0:
            return []
        remaining = self._history.total_tokens - tokens
        evicted: list[Entry] = self._history.evict(remaining, 0, remaining)
        if len(evicted) != count:  # the cut was not at a group boundary: a bug, never silent
            raise AssertionError(f"planned to evict {count} entries, the history evicted {len(evicted)}")
        self._messages = self._messages[count:]
        self._pinned -= sum(e.pinned for e in evicted)
        self._tool_tokens -= sum(e.tokens for e in evicted if e.role == "tool")
        return evicted

    def replace(self, entries: Sequence[Entry], seq: int) -> None:
        """Replaces the stored entries by a checked plan's (one O(window) rebuild)."""
        self._history = TokenHistory()
        self._messages = []
        self._pinned = self._tool_tokens = 0
        previous: int | None = None
        for entry in entries:
            self._push(entry, entry.group != previous)
            previous = entry.group
        self.seq = max(self.seq, seq)

    def restore(self, entries: Sequence[Entry], pending: Sequence[Entry], open_calls: Iterable[str],
                seq: int, turn: int) -> None:
        """Loads a serialized state (``ContextWindow.restore``)."""
        settled, _ = settle_groups(entries)
        self.replace(settled, seq)
        self._pending, self._open_calls = tuple(pending), frozenset(open_calls)
        self.seq, self.turn = seq, turn

    def pending_state(self) -> dict[str, Any]:
        """The pending group and open calls (for serialization)."""
        return {"pending": list(self._pending), "open_calls": sorted(self._open_calls)}
