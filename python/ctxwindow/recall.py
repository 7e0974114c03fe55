"""Recall: messages that left the window come back when the conversation needs them.

``ContextWindow(..., recall=Recall(max_tokens=1_500))`` archives every message the window evicts
or replaces (whole tool-call groups), and when a user message is added, searches that archive
with the message's text and injects the most relevant groups as one system message after the
system prompt, standing instructions, context and notes, and before the conversation. The block
is counted in ``usage.by_component["memory_injection"]`` and in the budget: compactions always
leave room for ``max_tokens`` of recall, so a block never pushes the prompt over the budget.

What comes back:

- whole groups only (a tool call with its results), rendered as text inside the block, so the
  conversation stays valid for every provider;
- at most ``k`` groups that matched the query, each with its neighbours when they are the
  question it answers or the answer it got, as long as everything fits ``max_tokens``; in the
  order they were said, each under its retrieval id;
- never a group whose messages are in the window verbatim;
- the block changes only when a user message is added (a tool loop's calls keep the same
  prefix, so a provider's prompt cache survives them).

Relevance: Okapi BM25 over the groups' words (:class:`ctxwindow._native.Bm25Index`, in memory
also when the archive lives in a store; SQLite's FTS5 is an option, ``lexical="fts5"``, slower
and with fewer evidence turns found on LongMemEval) chooses ``candidates`` groups; they are
ranked by reciprocal-rank fusion of the BM25 rank and the cosine similarity of the native hashed
bag-of-pieces embedding (:meth:`Tokenizer.embed_many`); ties go to the newer group. A group is
recalled only if it shares at least ``min_overlap`` of the query's content words (weighted by
rarity), so a question about something never said recalls little. All of it is deterministic. With your own ``embedder`` (a semantic model), retrieval is hybrid: the
best dense matches over the whole archive join the lexical ones, so a group that shares no word
with the query can come back.

With ``store=`` the groups are kept in that store (its session archive ``SESSION.recall``, apart
from the window's placeholders), so recall survives a restart and :meth:`ContextWindow.resume`;
the session's archived groups are read once when the :class:`Recall` is made. Without it the
archive is in memory. A group is recognised as in the window by its messages' content, so
nothing the window holds is injected, also after ``restore``, ``sync`` or a restart.

>>> from ctxwindow import ContextWindow, Recall
>>> window = ContextWindow("gpt-4o", max_tokens=600, reserve_output=0, preserve_recent=2,
...                        recall=Recall(max_tokens=200))
>>> window.add({"role": "user", "content": "My locker code is 4417, remember it."})
>>> window.add({"role": "assistant", "content": "Noted."})
>>> for i in range(12):
...     window.add({"role": "user", "content": f"Tell me fact number {i} about owls, briefly."})
...     window.add({"role": "assistant", "content": "Owls can turn their heads very far. " * 3})
>>> window.add({"role": "user", "content": "What was my locker code?"})
>>> "4417" in window.messages()[0]["content"] + window.messages()[1]["content"]
True
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxwindow._embed import embed
from ctxwindow._native import Bm25Index, Tokenizer
from ctxwindow.archive import MessageArchive, archive_text, retrieval_id
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.messages import text_of

__all__ = ["Recall", "RecallHit", "RECALL_HEADER", "render_group", "parse_recall_arguments"]

Message = dict[str, Any]
Embedder = Callable[[list[str]], Any]

#: The first line of the injected block.
RECALL_HEADER = ("[Recalled from earlier in this conversation: messages that are no longer in the context, "
                 "chosen for the latest user message; oldest first]")
#: The rank constant of reciprocal-rank fusion (the usual value).
_RRF_K = 60
#: The suffix of the store session that holds a session's recall groups.
_NAMESPACE = ".recall"
#: What an OpenAI function name may be.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The dimension of the native hashed embedding.
_DIM = 256


@dataclass(frozen=True)
class RecallHit:
    """One archived group that matched a query: its retrieval id, its messages and its score
    (fused rank score; higher is better)."""

    retrieval_id: str
    messages: list[Message]
    score: float


@dataclass(slots=True)
class _Unit:
    """One archived group (its number in the lexical index is its position in the archive):
    its id, messages, searchable text, and the seq of its first message in the window and its
    turn (None when it was read from a store). Tuples and slots: an archive of 10^5 groups is
    10^5 objects for Python's garbage collector to walk, not 10^6."""

    rid: str
    messages: tuple[Message, ...]
    text: str
    seq: int | None
    turn: int | None
    keys: tuple[MessageKey | str, ...] = ()
    section: str | None = None
    section_tokens: int | None = None


MessageKey = tuple[Any, ...]


def message_key(message: Mapping[str, Any]) -> MessageKey | str:
    """What identifies a message verbatim: its text when it has some (cheap: Python caches a
    string's hash), else its role, content, tool call id and the ids of its tool calls."""
    content = message.get("content")
    if isinstance(content, str) and content:
        return content
    if content is not None and not isinstance(content, str):
        content = json.dumps(content, sort_keys=True, ensure_ascii=False, default=repr)
    calls = message.get("tool_calls") or ()
    call_ids = tuple(str(c.get("id")) if isinstance(c, Mapping) else repr(c) for c in calls)
    return (message.get("role"), content, message.get("tool_call_id"), call_ids)


def render_group(messages: Sequence[Mapping[str, Any]]) -> str:
    """A group of messages as the lines of a recall block: ``role: text``, a tool call as
    ``assistant calls name(arguments)``, a tool result as ``tool (name): text``."""
    lines = []
    for message in messages:
        role = str(message.get("role", ""))
        text = text_of(message)
        if role == "tool":
            name = message.get("name") or message.get("tool_call_id") or ""
            lines.append(f"tool ({name}): {text}" if name else f"tool: {text}")
            continue
        if text:
            lines.append(f"{role}: {text}")
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            lines.append(f"{role} calls {function.get('name', '')}({function.get('arguments', '')})")
    return "\n".join(lines)


def _fuse(lexical: Sequence[int], dense: Sequence[int]) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion of two rankings of unit positions: ``(position, score)`` of every
    unit in either, best first (a unit missing from a ranking ranks after its last; ties: the
    newer unit)."""
    lexical_rank = {i: r for r, i in enumerate(lexical)}
    dense_rank = {i: r for r, i in enumerate(dense)}
    fused = [(1.0 / (_RRF_K + lexical_rank.get(i, len(lexical))) + 1.0 / (_RRF_K + dense_rank.get(i, len(dense))), i)
             for i in dict.fromkeys([*lexical, *dense])]
    fused.sort(key=lambda pair: (-pair[0], -pair[1]))
    return [(i, score) for score, i in fused]


def _check_positive_int(value: object, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


class Recall:
    """The recall archive of one window and its settings (see the module documentation).

    - ``max_tokens``: the most the injected block may hold (the ``memory_injection`` budget,
      counted as the system message it is sent as);
    - ``k``: at most this many matching groups per block (neighbours come on top, within
      ``max_tokens``);
    - ``store``/``session_id``: keep the archive in a checkpoint store's session archive;
    - ``embedder``: ``callable(list[str]) -> array (n, d)`` replacing the native embedding:
      every group is embedded when archived (in batches) and the best dense matches over the
      whole archive join the lexical candidates (hybrid retrieval; the ``min_overlap`` filter
      does not apply). The native embedding only re-ranks the lexical candidates;
    - ``fusion``: False ranks by BM25 alone;
    - ``lexical``: ``"native"`` (the in-memory BM25 index, always built) or ``"fts5"`` (SQLite's
      full-text search of a :class:`~ctxwindow.checkpoint.SQLiteCheckpointStore`'s archive;
      slower, and without the ``min_overlap`` filter: see the README's figures);
    - ``candidates``: how many lexical matches are ranked;
    - ``neighbours``: bring back the question a recalled answer answers, and the answer a
      recalled question got;
    - ``min_overlap``: the share of the query's content words (weighted by rarity, idf; a word
      never archived counts against) a group must contain to be recalled, in [0, 1].
    """

    def __init__(self, max_tokens: int, k: int = 8, store: Any = None, session_id: str = "default", *,
                 embedder: Embedder | None = None, candidates: int = 64, neighbours: bool = True,
                 min_overlap: float = 0.2, fusion: bool = True, lexical: str = "native") -> None:
        self.max_tokens = _check_positive_int(max_tokens, "max_tokens", 16)
        self.k = _check_positive_int(k, "k")
        self.candidates = _check_positive_int(candidates, "candidates")
        if not isinstance(session_id, str):
            raise InvalidTypeError(f"session_id must be a str, not {type(session_id).__name__}")
        if not session_id:
            raise InvalidArgumentError("session_id must be a non-empty str")
        if embedder is not None and not callable(embedder):
            raise InvalidTypeError(f"embedder must be callable(list[str]) -> array, not {type(embedder).__name__}")
        for name, flag in (("neighbours", neighbours), ("fusion", fusion)):
            if not isinstance(flag, bool):
                raise InvalidTypeError(f"{name} must be a bool, not {type(flag).__name__}")
        if embedder is not None and not fusion:
            raise InvalidArgumentError("an embedder is used only with fusion=True")
        if isinstance(min_overlap, bool) or not isinstance(min_overlap, (int, float)):
            raise InvalidTypeError(f"min_overlap must be a number, not {type(min_overlap).__name__}")
        if not 0.0 <= min_overlap <= 1.0:
            raise InvalidArgumentError(f"min_overlap must be a number in [0, 1], got {min_overlap!r}")
        if not isinstance(lexical, str):
            raise InvalidTypeError(f"lexical must be a str, not {type(lexical).__name__}")
        if lexical not in ("native", "fts5"):
            raise InvalidArgumentError(f"lexical must be 'native' or 'fts5', got {lexical!r}")
        if lexical == "fts5":
            from ctxwindow.checkpoint import SQLiteCheckpointStore
            if not isinstance(store, SQLiteCheckpointStore):
                raise InvalidArgumentError("lexical='fts5' searches a SQLiteCheckpointStore: pass store=")
        self.lexical = lexical
        self._fts = lexical == "fts5"
        self.session_id = session_id
        self.embedder = embedder
        self.neighbours = neighbours
        self.fusion = fusion
        self.min_overlap = float(min_overlap)
        self.store = store
        #: The store's archive of recall's groups (its session ``SESSION.recall``, apart from the
        #: window's placeholders and ``store.archiver``), or None when recall lives in memory.
        self.archive: MessageArchive | None = None
        stored: list[tuple[str, list[Message]]] = []
        if store is not None:
            session_archive = getattr(store, "session_archive", None)
            if not callable(session_archive):
                raise InvalidTypeError(
                    f"store must be a checkpoint store with session_archive(), not {type(store).__name__}")
            if len(session_id) > 128 - len(_NAMESPACE):
                raise InvalidArgumentError(
                    f"session_id must be at most {128 - len(_NAMESPACE)} characters with a store, got {len(session_id)}")
            archive = session_archive(session_id + _NAMESPACE)
            self.archive = archive
            stored = archive.groups()
        self._index = Bm25Index()
        self._units: list[_Unit] = []
        self._by_rid: dict[str, int] = {}
        self._header_tokens: int | None = None
        self._window: weakref.ref[object] | None = None
        self._embedder_tokenizer: Tokenizer | None = None
        #: (unit position, old seq, old turn) of the units archived again since the last mark.
        self._journal: list[tuple[int, int | None, int | None]] = []
        #: Number of search calls (each user message is one).
        self.searches = 0
        #: Every group's embedding, one row per group, computed when it is archived (float16 for
        #: the native embedding, float32 for a user embedder; rows beyond
        #: ``len(self._units)`` are unused capacity).
        self._matrix: npt.NDArray[np.floating[Any]] | None = None
        fresh = [position for rid, messages in stored if (position := self._append(rid, messages, None, None)) >= 0]
        self._embed_rows(fresh)

    def attach(self, window: object) -> None:
        """Binds this recall to one window (its transactions keep the archive consistent);
        :class:`InvalidArgumentError` if another live window has it."""
        owner = self._window() if self._window is not None else None
        if owner is not None and owner is not window:
            raise InvalidArgumentError("this Recall belongs to another window; give each window its own")
        if owner is None and self._window is not None:  # a new window may count otherwise
            self._header_tokens = None
            for unit in self._units:
                unit.section_tokens = None
        self._window = weakref.ref(window)

    # --- the archive ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._units)

    def __repr__(self) -> str:
        return (f"Recall(max_tokens={self.max_tokens}, k={self.k}, groups={len(self)}, "
                f"store={type(self.store).__name__ if self.store is not None else None})")

    def _append(self, rid: str, messages: list[Message], seq: int | None, turn: int | None) -> int:
        """Adds a group; returns its position, or -1 when it was archived already."""
        known = self._by_rid.get(rid)
        if known is not None:
            unit = self._units[known]
            if seq is not None:  # archived again (it came back into a window): it is newer now
                self._journal.append((known, unit.seq, unit.turn))
                unit.seq, unit.turn = seq, turn
                unit.section, unit.section_tokens = None, None  # its turn changed
            return -1
        text = "\n".join(archive_text(m) for m in messages)
        self._index.add(text)  # its number is its position
        self._by_rid[rid] = len(self._units)
        self._units.append(_Unit(rid, tuple(messages), text, seq, turn, tuple({message_key(m): None for m in messages})))
        return len(self._units) - 1

    def _embed_rows(self, positions: list[int]) -> None:
        """Embeds the new groups (one call) into the matrix (not needed without fusion)."""
        if not self.fusion or not positions:
            return
        vectors = self._embed([self._units[i].text for i in positions])
        needed = positions[-1] + 1
        if self._matrix is None:  # room to grow: a doubling copies the whole matrix
            dtype = np.float32 if self.embedder is not None else np.float16
            self._matrix = np.zeros((max(needed + needed // 2, 64), vectors.shape[1]), dtype=dtype)
        elif vectors.shape[1] != self._matrix.shape[1]:
            raise InvalidArgumentError(
                f"embedder returned dimension {vectors.shape[1]}, earlier {self._matrix.shape[1]}")
        elif needed > self._matrix.shape[0]:
            grown = np.zeros((max(needed, 2 * self._matrix.shape[0]), self._matrix.shape[1]),
                             dtype=self._matrix.dtype)
            grown[: self._matrix.shape[0]] = self._matrix
            self._matrix = grown
        self._matrix[positions] = vectors

    def ingest(self, groups: Iterable[tuple[Sequence[Message], int | None, int | None]],
               count_many: Callable[[list[str]], Any] | None = None) -> list[str]:
        """Archives groups ``(messages, seq of the first message, turn)``, oldest first; returns
        their retrieval ids. A group archived already is not stored twice. ``count_many`` (the
        window's counter) counts the new groups' block sections now, in one call, so that a
        user message does not wait for them."""
        count, journal = len(self._units), len(self._journal)
        try:
            return self._ingest(groups, count_many)
        except BaseException:
            self._undo(count, journal)  # nothing archived in memory (a store keeps its copies)
            raise

    def _ingest(self, groups: Iterable[tuple[Sequence[Message], int | None, int | None]],
                count_many: Callable[[list[str]], Any] | None) -> list[str]:
        prepared = []
        for messages, seq, turn in groups:
            copies = [dict(m) for m in messages]
            if not copies:
                raise InvalidArgumentError("a recall group holds at least one message")
            prepared.append((retrieval_id(copies), copies, seq, turn))
        new = {rid: copies for rid, copies, _, _ in prepared if rid not in self._by_rid}
        if new and self.archive is not None:  # stored first (one transaction), so a failure archives nothing here
            put_many = getattr(self.archive, "put_many", None)
            archive = self.archive
            stored = put_many(list(new.values())) if callable(put_many) else [archive.put(g) for g in new.values()]
            for rid, got in zip(new, stored):
                if got != rid:
                    raise InvalidArgumentError(f"the recall archive stored a group as {got!r}, expected {rid!r}")
        fresh = [position for rid, copies, seq, turn in prepared
                 if (position := self._append(rid, copies, seq, turn)) >= 0]
        self._embed_rows(fresh)
        if count_many is not None and fresh:
            units = [self._units[p] for p in fresh]
            # Counted, not kept: the text is made again when a block needs it.
            for unit, tokens in zip(units, count_many([self._format(u) for u in units])):
                unit.section_tokens = int(tokens) + 1
        return [rid for rid, _, _, _ in prepared]

    def savepoint(self) -> int:
        """A savepoint for :meth:`rollback` (one at a time: a window's operations do not nest)."""
        self._journal.clear()
        return len(self._units)

    def rollback(self, mark: int) -> None:
        """Forgets the groups archived since ``mark`` (a store keeps its copies: groups are
        content-addressed, so they are harmless duplicates of what the window holds)."""
        self._undo(mark, 0)

    def _undo(self, count: int, journal: int) -> None:
        """Forgets the groups beyond the first ``count`` and the re-archivings journalled
        beyond ``journal`` (matrix rows beyond ``count`` become unused capacity)."""
        for unit in self._units[count:]:
            del self._by_rid[unit.rid]
        del self._units[count:]
        self._index.truncate(count)
        for position, seq, turn in reversed(self._journal[journal:]):
            if position < count:
                unit = self._units[position]
                unit.seq, unit.turn, unit.section, unit.section_tokens = seq, turn, None, None
        del self._journal[journal:]

    def get(self, rid: str) -> list[Message] | None:
        """Copies of the archived group with that retrieval id, or None."""
        index = self._by_rid.get(rid)
        if index is None:
            return None
        return [dict(m) for m in self._units[index].messages]

    # --- search ----------------------------------------------------------------------------

    def _embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if self.embedder is not None:
            vectors = embed(self.embedder, texts, np.float32)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            return np.asarray(vectors / np.where(norms > 0, norms, 1.0), dtype=np.float32)
        if self._embedder_tokenizer is None:
            self._embedder_tokenizer = Tokenizer("o200k_base")
        return self._embedder_tokenizer.embed_many(texts, _DIM)

    def _lexical(self, query: str, limit: int) -> list[int]:
        """Unit positions of the best lexical matches, best first; with the native index, only
        those covering at least ``min_overlap`` of the query."""
        if self._fts and self.archive is not None:
            words = Bm25Index.terms(query, stem=False)
            if not words:
                return []
            hits = self.archive.search(" ".join(dict.fromkeys(words)), limit)
            return [self._by_rid[rid] for rid, _ in hits if rid in self._by_rid]
        return [doc for doc, _, coverage in self._index.search(query, limit) if coverage >= self.min_overlap]

    def _rank(self, query: str, excluded: Callable[[_Unit], bool]) -> list[tuple[int, float]]:
        """``(unit position, fused score)`` of the units that may be recalled, best first."""
        if not isinstance(query, str):
            raise InvalidTypeError(f"query must be a str, not {type(query).__name__}")
        self.searches += 1
        if self.embedder is not None:
            return self._rank_hybrid(query, excluded)
        candidates = [i for i in self._lexical(query, self.candidates) if not excluded(self._units[i])]
        if not candidates:
            return []
        if not self.fusion:
            return [(i, 1.0 / (_RRF_K + rank)) for rank, i in enumerate(candidates)]
        assert self._matrix is not None  # every archived group is embedded with fusion on
        query_vector = self._embed([query])[0]
        similarity = self._matrix[candidates].astype(np.float32) @ query_vector
        # Stable: equal similarity keeps the lexical order.
        dense = [candidates[int(j)] for j in np.argsort(-similarity, kind="stable")]
        return _fuse(candidates, dense)

    def _rank_hybrid(self, query: str, excluded: Callable[[_Unit], bool]) -> list[tuple[int, float]]:
        """With a user embedder: the union of the best lexical and the best dense matches over
        every group, fused by reciprocal rank (a group missing from one list ranks last there)."""
        count = len(self._units)
        if count == 0 or self._matrix is None:
            return []
        lexical = [i for i in self._lexical(query, self.candidates) if not excluded(self._units[i])]
        query_vector = self._embed([query])[0]
        if query_vector.shape[0] != self._matrix.shape[1]:
            raise InvalidArgumentError(
                f"embedder returned dimension {query_vector.shape[0]}, earlier {self._matrix.shape[1]}")
        similarity = self._matrix[:count] @ query_vector
        best = np.argsort(-similarity, kind="stable")  # ties: the older first, reversed below
        dense: list[int] = []
        for position in best:
            if len(dense) >= self.candidates:
                break
            if not excluded(self._units[int(position)]):
                dense.append(int(position))
        return _fuse(lexical, dense)

    def search(self, query: str, limit: int | None = None) -> list[RecallHit]:
        """The archived groups most relevant to ``query``, best first (at most ``limit``,
        default ``k``)."""
        limit = self.k if limit is None else _check_positive_int(limit, "limit")
        return self.hits(query, limit, frozenset())

    def hits(self, query: str, limit: int, present: AbstractSet[MessageKey | str]) -> list[RecallHit]:
        """:meth:`search` leaving out the groups with a message in ``present`` (:func:`message_key`
        of the messages a window holds verbatim)."""
        if not isinstance(query, str):
            raise InvalidTypeError(f"query must be a str, not {type(query).__name__}")
        if not query.strip():
            raise InvalidArgumentError("query must be a non-empty str")
        ranked = self._rank(query, lambda unit: not present.isdisjoint(unit.keys))[:limit]
        return [RecallHit(self._units[i].rid, [dict(m) for m in self._units[i].messages], score)
                for i, score in ranked]

    # --- the block -------------------------------------------------------------------------

    @staticmethod
    def _format(unit: _Unit) -> str:
        turn = f" (turn {unit.turn})" if unit.turn is not None else ""
        return f"--- {unit.rid}{turn}\n{render_group(unit.messages)}"

    def _render(self, unit: _Unit) -> str:
        if unit.section is None:
            unit.section = self._format(unit)
        return unit.section

    def _section(self, unit: _Unit, count: Callable[[str], int]) -> tuple[str, int]:
        """A group's lines in the block and their tokens (with the newline that joins them)."""
        section = self._render(unit)
        if unit.section_tokens is None:
            unit.section_tokens = count(section) + 1
        return section, unit.section_tokens


    def _cluster(self, position: int) -> list[int]:
        """The unit and, with ``neighbours``, the question before an answer and the answer
        after a question, in conversation order."""
        if not self.neighbours:
            return [position]
        units = self._units
        unit = units[position]
        cluster = [position]

        def same_exchange(other: _Unit) -> bool:  # adjacent in the archive, and in the same turn
            return unit.turn is None or other.turn is None or unit.turn == other.turn

        first, last = unit.messages[0].get("role"), unit.messages[-1].get("role")
        if first == "assistant" and position > 0 and units[position - 1].messages[-1].get("role") == "user" \
                and same_exchange(units[position - 1]):
            cluster.insert(0, position - 1)
        if last == "user" and position + 1 < len(units) and units[position + 1].messages[0].get("role") == "assistant" \
                and same_exchange(units[position + 1]):
            cluster.append(position + 1)
        return cluster

    def block(self, query: str, count: Callable[[str], int], count_message: Callable[[Message], int],
              present: AbstractSet[MessageKey | str], max_tokens: int | None = None,
              ) -> tuple[Message | None, int, list[str]]:
        """The recall block for ``query`` within ``max_tokens`` (default and at most
        :attr:`max_tokens`): the system message, its tokens and the retrieval ids in it. A group
        with a message in ``present`` (:func:`message_key` of the window's messages) is in the
        window verbatim and is left out."""
        limit = self.max_tokens if max_tokens is None else min(max_tokens, self.max_tokens)
        def excluded(unit: _Unit) -> bool:
            return not present.isdisjoint(unit.keys)

        if self._header_tokens is None:
            self._header_tokens = count_message({"role": "system", "content": RECALL_HEADER})
        room = limit - self._header_tokens
        if room <= 0:
            return None, 0, []
        ranked = self._rank(query, excluded)
        if not ranked:
            return None, 0, []
        chosen: set[int] = set()
        used = 0
        hits = 0
        for position, _ in ranked:
            if hits >= self.k or room - used <= 0:
                break
            if position in chosen:
                continue
            _, tokens = self._section(self._units[position], count)
            if used + tokens > room:
                continue
            chosen.add(position)
            used += tokens
            hits += 1
            for neighbour in self._cluster(position):
                unit = self._units[neighbour]
                if neighbour in chosen or excluded(unit):
                    continue
                _, tokens = self._section(unit, count)
                if used + tokens <= room:
                    chosen.add(neighbour)
                    used += tokens
        # Oldest first: by seq in the conversation; groups read from a store (no seq) are older.
        order = sorted(chosen, key=lambda p: (self._units[p].seq is not None, self._units[p].seq or 0, p))
        while order:
            content = RECALL_HEADER + "\n" + "\n".join(self._section(self._units[i], count)[0] for i in order)
            message = {"role": "system", "content": content}
            tokens = count_message(message)
            if tokens <= limit:
                return message, tokens, [self._units[i].rid for i in order]
            # Sections were counted apart; joined they may differ by a token or two: drop the
            # least relevant until it fits.
            rank_of = {p: r for r, (p, _) in enumerate(ranked)}
            order.remove(max(order, key=lambda p: rank_of.get(p, len(ranked))))
        return None, 0, []

    # --- the tool --------------------------------------------------------------------------

    @staticmethod
    def tool_schema(name: str = "recall") -> dict[str, Any]:
        """An OpenAI function-tool definition that lets the model search its own archive: by
        ``query`` (words to look for) or by ``id`` (a retrieval id, as in placeholders and in
        the recall block). Handle calls with :meth:`ContextWindow.handle_recall_call`."""
        if not isinstance(name, str):
            raise InvalidTypeError(f"name must be a str, not {type(name).__name__}")
        if not _TOOL_NAME.fullmatch(name):
            raise InvalidArgumentError(f"a function name is 1-64 letters, digits, _ or -, got {name!r}")
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": ("Search earlier parts of this conversation that are no longer in the context. "
                                "Pass `query` (words to look for) or `id` (a retrieval id such as ctx-0123456789abcdef "
                                "shown in a placeholder or a recalled block) to get the messages back."),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Words to search for."},
                        "id": {"type": "string", "description": "A retrieval id (ctx-...)."},
                    },
                    "additionalProperties": False,
                },
            },
        }


def parse_recall_arguments(arguments: object) -> tuple[str | None, str | None]:
    """``(query, id)`` of a recall tool call's arguments (a JSON object string or a mapping);
    :class:`InvalidArgumentError` saying what is wrong otherwise."""
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError) as error:
            raise InvalidArgumentError(f"recall arguments are not JSON: {error}"[:300]) from None
    if not isinstance(arguments, Mapping):
        raise InvalidArgumentError(
            f"recall arguments must be a JSON object with 'query' or 'id', not {type(arguments).__name__}")
    unknown = set(arguments) - {"query", "id"}
    if unknown:
        raise InvalidArgumentError(f"unknown recall arguments {sorted(map(str, unknown))}; expected 'query' or 'id'")
    query, rid = arguments.get("query"), arguments.get("id")
    for name, value in (("query", query), ("id", rid)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidArgumentError(f"recall argument {name!r} must be a non-empty string, got {value!r}")
    if (query is None) == (rid is None):
        raise InvalidArgumentError("recall takes exactly one of 'query' or 'id'")
    return query, rid

