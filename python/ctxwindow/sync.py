"""Keeping a window in step with a history that lives elsewhere (``ContextWindow.sync``).

Agent frameworks keep the full conversation themselves and hand it over again before every model
call. :func:`sync_window` makes the window hold exactly that conversation while counting only what
is new:

- the messages already synced are recognised by comparing the new list with the list of the
  previous sync, element by element, in C (``list.__eq__``: a pointer comparison per message when
  the caller hands back the same objects, as LangChain, Pydantic AI and a plain ``history`` list
  do; an equality comparison when it hands back equal copies). Nothing of the old part is counted,
  copied or hashed again; only the new messages are prepared and added, in one transaction;
- an edited, reordered or shortened history is re-synced from the first difference: the window's
  conversation is rebuilt in one transaction from the new list, reusing the token counts of the
  messages before the difference (compaction runs again as the messages are added, so the window
  holds what a fresh window fed this history would hold, for deterministic strategies);
- system and developer messages anywhere in the list become the window's system prompt (their
  texts joined by blank lines, in order); a list without any keeps the prompt the window was made
  with;
- a message object is treated as immutable once synced: to change one, pass a new object (a
  message changed in place is not noticed while it is still the same object at the same place).

What the last sync saw is kept on the window (``window.sync_state``). If the window was changed
by ``add``, ``extend`` or ``restore`` since the last sync, the next sync
rebuilds the conversation from the list (it cannot know which of the window's messages the list
already holds). A sync that fails (a malformed message, a tool result without its call, protected
content that cannot fit) changes nothing, neither the window nor what the next sync compares with.

Messages may be OpenAI chat dicts or the OpenAI SDK's pydantic objects
(``response.choices[0].message``); :func:`as_message` turns the latter into dicts.

>>> from ctxwindow import ContextWindow
>>> window = ContextWindow("gpt-4o", max_tokens=4_000)
>>> history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
>>> window.sync(history)
>>> history.append({"role": "assistant", "content": "hello"})
>>> window.sync(history)          # counts only the reply
>>> [m["role"] for m in window.messages()]
['system', 'user', 'assistant']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from ctxwindow._checks import check_text
from ctxwindow.errors import InvalidTypeError, MalformedMessageError
from ctxwindow._types import MessageLike, SupportsModelDump
from ctxwindow.messages import Message, copy_message, text_of

__all__ = ["as_message", "sync_window", "SupportsModelDump", "MessageLike", "Prepared", "SyncTarget", "SyncState",
           "message_list"]


_KEEP = ("role", "content", "name", "tool_calls", "tool_call_id")
_SYSTEM_ROLES = ("system", "developer")


def as_message(message: object) -> object:
    """A chat message as a dict: a mapping is returned as it is; an object with ``model_dump``
    (the OpenAI SDK's ``ChatCompletionMessage``, ``ChatCompletionMessageParam`` models, any
    pydantic model of that shape) becomes the dict of its chat fields (``role``, ``content``,
    ``name``, ``tool_calls``, ``tool_call_id``; ``refusal``, ``annotations``, ``audio`` and
    unset fields left out, since the chat API does not take them back); anything else is
    returned unchanged for the validator to reject with a clear message.

    >>> class Reply:  # the shape of openai.types.chat.ChatCompletionMessage
    ...     def model_dump(self, **options: object) -> dict[str, object]:
    ...         return {"role": "assistant", "content": "hi", "refusal": None, "annotations": None}
    >>> as_message(Reply())
    {'role': 'assistant', 'content': 'hi'}
    """
    if isinstance(message, Mapping):
        return message
    dump = getattr(message, "model_dump", None)
    if dump is None or not callable(dump):
        return message
    data = dump(exclude_none=True)
    if not isinstance(data, Mapping):
        return message
    out: Message = {key: data[key] for key in _KEEP if key in data}
    if "content" not in out:
        out["content"] = None if out.get("tool_calls") else ""
    calls = out.get("tool_calls")
    if calls:  # only the fields the chat API takes back (no parsed_arguments, ...)
        out["tool_calls"] = [
            {"id": call.get("id"), "type": call.get("type", "function"),
             "function": {"name": call.get("function", {}).get("name"),
                          "arguments": call.get("function", {}).get("arguments", "")}}
            if isinstance(call, Mapping) else call
            for call in calls]
    return out


class Prepared(NamedTuple):
    """A message validated, copied and counted, ready to add (``where`` names it in errors)."""

    message: Message
    tokens: int
    pinned: bool
    where: str


class SyncTarget(Protocol):
    """What :func:`sync_window` needs of a window (``ContextWindow`` implements it)."""

    #: What the last sync saw (a :class:`SyncState`), None before the first.
    sync_state: Any

    @property
    def revision(self) -> int:
        """Changes whenever a message is added to the window by anything."""
        ...

    @property
    def system_prompt(self) -> str | None:
        """The system prompt's text."""
        ...

    def prepare_message(self, message: object, where: str = "message", *, pinned: bool = False) -> Prepared:
        """Validates, copies and counts a message; changes nothing."""
        ...

    def add_prepared(self, prepared: Sequence[Prepared], *, archive: Mapping[str, list[Message]] | None = None,
                     system: str | None = None, set_system: bool = False, reset: bool = False) -> None:
        """Adds prepared messages in one operation (with ``set_system``, the system prompt becomes
        ``system`` first; with ``reset`` the conversation is emptied first)."""
        ...


class SyncState:
    """What the last sync of a window saw: the caller's items (references), the token count of
    each conversation message (None for system messages), the window's own system prompt, and
    the window's revision afterwards."""

    __slots__ = ("items", "tokens", "base_system", "revision")

    def __init__(self, items: list[object], tokens: list[tuple[int | None, ...]], base_system: str | None,
                 revision: int) -> None:
        self.items = items
        self.tokens = tokens
        self.base_system = base_system
        self.revision = revision


def message_list(messages: object, what: str) -> list[Any]:
    """``messages`` as a list (the same list when it is one); :class:`InvalidTypeError` for a value
    that is not a sequence of messages (a str, a single message, None)."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise InvalidTypeError(f"{what} takes the list of messages, not {type(messages).__name__}")
    return messages if type(messages) is list else list(messages)


def _first_difference(new: list[object], old: list[object]) -> int:
    for index, (a, b) in enumerate(zip(new, old)):
        if a is not b and a != b:
            return index
    return min(len(new), len(old))


def _is_system(message: object) -> bool:
    return isinstance(message, Mapping) and message.get("role") in _SYSTEM_ROLES


def _system_text(message: Mapping[str, Any], where: str) -> str:
    """The text of a system message: a str content, or text parts; a typed error for anything else
    (a system message whose content is a number, a dict or missing would blank the prompt)."""
    if "content" not in message:
        raise MalformedMessageError(f"{where}: a system message needs a content")
    content = message["content"]
    if isinstance(content, str):
        return check_text(content, f"{where}'s content")
    if isinstance(content, list) and all(isinstance(p, Mapping) and p.get("type") == "text"
                                         and isinstance(p.get("text"), str) for p in content):
        return check_text(text_of(message), f"{where}'s content")
    raise MalformedMessageError(f"{where}: a system message's content must be a str or a list of text parts, "
                                f"not {type(content).__name__}")


def sync_window(window: SyncTarget, messages: Iterable[object],
                convert: Callable[[object], Sequence[object]] | None = None) -> None:
    """Makes ``window`` hold exactly ``messages``; see the module documentation. ``convert``
    turns one item of ``messages`` into the chat messages it stands for (an agent framework's
    message may hold several, e.g. a Pydantic AI request with several tool returns); it is called
    once per new item (and again for the items before the first difference on a rebuild)."""
    if convert is None:
        convert = _one
    items = message_list(messages, "sync")
    synced: SyncState | None = window.sync_state
    if synced is not None and synced.revision != window.revision:
        synced = None  # the window was changed behind the sync's back: rebuild from the list
    if synced is None:
        synced = SyncState([], [], window.system_prompt, -1)
        start, rebuild = 0, True
    else:
        known = len(synced.items)
        seen = synced.items
        # Compare without copying the caller's list: our list is extended by the new items
        # (O(new)) and compared whole in C (a pointer comparison per message for the same
        # objects); on a mismatch it is cut back.
        seen.extend(items[known:])
        if len(items) >= known and seen == items:
            start, rebuild = known, False
        else:
            del seen[known:]
            start, rebuild = _first_difference(items, seen), True

    try:
        # Prepare the new part (validated, copied, counted) before anything changes.
        new_tokens: list[tuple[int | None, ...]] = []
        prepared: list[Prepared] = []
        system_texts: list[str] = []
        for index in range(start, len(items)):
            converted = convert(items[index])
            counts: list[int | None] = []
            for part, message in enumerate(converted):
                where = f"message {index}" if len(converted) == 1 else f"message {index} (part {part})"
                if _is_system(message):
                    assert isinstance(message, Mapping)
                    system_texts.append(_system_text(message, where))
                    counts.append(None)
                    continue
                prepared.append(window.prepare_message(message, where))
                counts.append(prepared[-1].tokens)
            new_tokens.append(tuple(counts))
    except BaseException:
        if not rebuild:
            del synced.items[start:]
        raise

    system, set_system = window.system_prompt, rebuild or bool(system_texts)
    if set_system:
        texts = [_system_text(m, f"message {i}") for i, item in enumerate(items[:start])
                 for m in convert(item) if isinstance(m, Mapping) and _is_system(m)] + system_texts
        system = "\n\n".join(texts) if texts else synced.base_system

    tokens_of = synced.tokens
    if rebuild:
        tokens_of = tokens_of[:start] + new_tokens
        kept: list[Prepared] = []
        for index in range(start):
            for part, (tokens, message) in enumerate(zip(tokens_of[index], convert(items[index]))):
                if tokens is not None and isinstance(message, Mapping):  # validated when synced
                    where = f"message {index}" if len(tokens_of[index]) == 1 else f"message {index} (part {part})"
                    kept.append(Prepared(copy_message(message), tokens, False, where))
        prepared = kept + prepared

    try:
        window.add_prepared(prepared, system=system, set_system=set_system, reset=rebuild)
    except BaseException:
        if not rebuild:
            del synced.items[start:]
        raise
    if rebuild:
        window.sync_state = SyncState(list(items), tokens_of, synced.base_system, window.revision)
    else:
        synced.tokens.extend(new_tokens)
        synced.revision = window.revision


def _one(item: object) -> list[object]:
    return [as_message(item)]
