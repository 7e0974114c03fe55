"""Sub-agent delegation: a large subtask runs in a child window with a fresh budget, and only a
condensed result comes back to the parent (``ContextWindow.delegate`` / ``adelegate``).

The child window is new: the parent's model and tokenizer, its own budget (the parent's unless
given), the parent's system prompt unless another is given, and as first user message the
parent's resume text (:func:`ctxwindow.checkpoint.bootstrap_prompt` of the checkpoint passed,
else of the parent's last checkpoint, else of one made from the task, the standing instructions
and the notes) followed by the task. The user's ``run(child)`` drives it (sync or async) and
returns the result: a str, or messages (the last assistant text among them is the result).

The parent then gets exactly one message, within ``max_result_tokens`` (chat accounting): an
assistant message, or the tool result of ``tool_call_id`` when the delegation answers a tool
call. A longer result is condensed (by ``condense(text, max_tokens)`` when given, else by the
offline extractive summarizer, then cut at the token cap). The child's whole transcript (every
message that went through the child window, the returned messages and the full result) is
archived in the parent's archive; its retrieval id is named in the result message and resolves
with ``parent.retrieve(id)``.

Events ``on_delegate_start`` (:class:`DelegationStarted`) and ``on_delegate_end``
(:class:`DelegationEnded`, also after a failure, with the error). A failure anywhere (``run``
raises or returns nothing usable, the result cannot fit the parent) leaves the parent exactly as
it was, archive included, and the error propagates.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, Union

from ctxwindow.archive import retrieval_id
from ctxwindow.checkpoint import TaskCheckpoint, bootstrap_prompt
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError
from ctxwindow.events import EventBus
from ctxwindow.instructions import Instruction
from ctxwindow.messages import Message, text_of, validate_message
from ctxwindow.strategies import Notes
from ctxwindow.tokenizer import TokenCounter

__all__ = ["DelegationStarted", "DelegationEnded", "DelegationResult", "DelegationHost", "RunResult", "RunFunction",
           "Condense", "delegate", "adelegate"]

#: What ``run`` returns: the result text, or messages whose last assistant text is the result.
RunResult = Union[str, Sequence[Message]]

W = TypeVar("W", bound="DelegationHost")
#: ``run(child)``: drives the child window, returns (or awaits to) the result.
RunFunction = Callable[[W], Union[RunResult, Awaitable[RunResult]]]
#: ``condense(text, max_tokens)``: a shorter result.
Condense = Callable[[str, int], str]


class DelegationHost(Protocol):
    """What delegation needs of a window (``ContextWindow`` implements it)."""

    tokenizer: TokenCounter
    notes: Notes
    events: EventBus
    last_checkpoint: TaskCheckpoint | None

    @property
    def max_tokens(self) -> int: ...

    @property
    def reserve_output(self) -> int: ...

    @property
    def system_prompt(self) -> str | None: ...

    @property
    def instructions(self) -> list[Instruction]: ...

    def child(self: W, *, max_tokens: int, reserve_output: int, system: str | None,
              on_evict: Callable[[list[Message], Any], Any] | None = None) -> W:
        """A new window for a sub-agent."""
        ...

    def add(self, message: Any, *, pinned: bool = False,
            archive: Mapping[str, list[Message]] | None = None) -> None:
        """Adds one message; ``archive`` is written to the window's archive when it succeeds."""
        ...

#: The smallest result cap: room for the header naming the task and the transcript id.
MIN_RESULT_TOKENS = 48


@dataclass(frozen=True)
class DelegationStarted:
    """A delegation began: the task and the child window (already holding the bootstrap)."""

    task: str
    child: DelegationHost


@dataclass(frozen=True)
class DelegationEnded:
    """A delegation ended: ``result`` when it succeeded, else ``error``."""

    task: str
    child: DelegationHost
    result: DelegationResult | None = None
    error: BaseException | None = None


@dataclass(frozen=True)
class DelegationResult:
    """What a delegation added to the parent: the ``message``, its tokens, whether the result was
    ``condensed`` to fit the cap, and the ``transcript_id`` of the child's archived transcript."""

    message: Message
    tokens: int
    condensed: bool
    transcript_id: str
    transcript_messages: int


@dataclass(frozen=True)
class _Prepared:
    child: Any
    transcript: list[Message]


def _check(task: object, run: object, max_result_tokens: object, tool_call_id: object) -> None:
    if not isinstance(task, str) or not task.strip():
        raise InvalidArgumentError("task must be a non-empty str")
    if not callable(run):
        raise InvalidTypeError(f"run must be callable (child window -> str or messages), not {type(run).__name__}")
    if isinstance(max_result_tokens, bool) or not isinstance(max_result_tokens, int):
        raise InvalidTypeError(f"max_result_tokens must be an int, not {type(max_result_tokens).__name__}")
    if max_result_tokens < MIN_RESULT_TOKENS:
        raise InvalidArgumentError(f"max_result_tokens must be >= {MIN_RESULT_TOKENS}, got {max_result_tokens}")
    if tool_call_id is not None and (not isinstance(tool_call_id, str) or not tool_call_id):
        raise InvalidArgumentError("tool_call_id must be a non-empty str or None")


def _start(parent: DelegationHost, task: str, *, max_tokens: int | None, reserve_output: int | None,
           system: str | None, checkpoint: TaskCheckpoint | None) -> _Prepared:
    """The child window with its bootstrap message, and the transcript collector."""
    if checkpoint is not None and not isinstance(checkpoint, TaskCheckpoint):
        raise InvalidTypeError("checkpoint must be a ctxwindow.TaskCheckpoint or None")
    base = checkpoint or parent.last_checkpoint or TaskCheckpoint(
        goal=task, constraints=[i.text for i in parent.instructions],
        decisions=[n.text for n in parent.notes.notes])
    budget = max_tokens if max_tokens is not None else parent.max_tokens
    reserve = reserve_output if reserve_output is not None else min(parent.reserve_output, budget // 2)
    child_system = system if system is not None else parent.system_prompt
    transcript: list[Message] = []
    child = parent.child(max_tokens=budget, reserve_output=reserve, system=child_system,
                         on_evict=lambda evicted, _usage: transcript.extend(dict(m) for m in evicted))
    resume = bootstrap_prompt(base, max_tokens=max(budget // 4, 64))
    child.add({"role": "user", "content": f"{resume}\n\nYour task (delegated): {task}"})
    return _Prepared(child, transcript)


def _result_text(value: object) -> tuple[str, list[Message]]:
    """The result text and the returned messages; a typed error for anything else."""
    if isinstance(value, str):
        if not value.strip():
            raise InvalidArgumentError("the sub-agent returned an empty result")
        return value, []
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        messages = list(value)
        for index, message in enumerate(messages):
            validate_message(message, f"returned message {index}")
        text = next((text_of(m) for m in reversed(messages) if m["role"] == "assistant" and text_of(m).strip()), "")
        if not text:
            raise InvalidArgumentError("the sub-agent returned messages without an assistant text to use as result")
        return text, [dict(m) for m in messages]
    raise InvalidTypeError(f"run must return a str or a list of messages, not {type(value).__name__}")


def _extractive(text: str, max_tokens: int) -> str:
    from ctxwindow.summarizers import SUMMARY_HEADER, TARGET_PREFIX, TRANSCRIPT_CLOSE, TRANSCRIPT_OPEN, extractive

    lines = "\n".join(f"assistant: {line}" for line in text.splitlines() if line.strip())
    summary = extractive("", f"{TARGET_PREFIX} {max_tokens}\n{TRANSCRIPT_OPEN}\n{lines}\n{TRANSCRIPT_CLOSE}")
    body = summary.removeprefix(SUMMARY_HEADER).strip()
    return "\n".join(line.removeprefix("- ").removeprefix("assistant: ") for line in body.splitlines())


def _finish(parent: DelegationHost, task: str, prepared: _Prepared, value: object, max_result_tokens: int,
            tool_call_id: str | None, condense: Callable[[str, int], str] | None) -> DelegationResult:
    text, returned = _result_text(value)
    child = prepared.child
    transcript = [*prepared.transcript, *(dict(m) for m in child.messages()), *returned]
    if not returned or text_of(returned[-1]) != text:
        transcript.append({"role": "assistant", "content": text})
    transcript_id = retrieval_id(transcript)
    short_task = " ".join(task.split())
    short_task = short_task if len(short_task) <= 120 else short_task[:117] + "..."
    header = f"[Delegated task result: {short_task}] (full transcript: {transcript_id})\n"

    def message(body: str) -> Message:
        if tool_call_id is not None:
            return {"role": "tool", "tool_call_id": tool_call_id, "content": header + body}
        return {"role": "assistant", "content": header + body}

    count = parent.tokenizer.count_message
    room = max_result_tokens - count(message(""))
    if room < 1:
        raise InvalidArgumentError(f"max_result_tokens ({max_result_tokens}) leaves no room for the result after "
                                   f"its header ({count(message(''))} tokens)")
    body, condensed = text, False
    if count(message(body)) > max_result_tokens:
        condensed = True
        shorter = condense(text, room) if condense is not None else _extractive(text, room)
        if not isinstance(shorter, str):
            raise InvalidTypeError(f"condense must return a str, not {type(shorter).__name__}")
        body = shorter.strip() or text
        if count(message(body)) > max_result_tokens:
            body = _cut(body, lambda b: count(message(b)) <= max_result_tokens)
    result_message = message(body)
    parent.add(result_message, archive={transcript_id: transcript})
    return DelegationResult(result_message, count(result_message), condensed, transcript_id, len(transcript))


def _cut(body: str, fits: Callable[[str], bool]) -> str:
    """The longest head of ``body`` (plus a marker) that ``fits`` (a binary search on characters:
    the token count of a head grows with its length)."""
    marker = " [...]"
    low, high = 0, len(body)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(body[:middle] + marker):
            low = middle
        else:
            high = middle - 1
    return body[:low] + marker if fits(body[:low] + marker) else ""


def _begin(parent: DelegationHost, task: str, run: object, max_result_tokens: int, tool_call_id: str | None, *,
           max_tokens: int | None, reserve_output: int | None, system: str | None,
           checkpoint: TaskCheckpoint | None) -> _Prepared:
    """Checks the call, makes the child window and announces the start (both entry points)."""
    _check(task, run, max_result_tokens, tool_call_id)
    prepared = _start(parent, task, max_tokens=max_tokens, reserve_output=reserve_output, system=system,
                      checkpoint=checkpoint)
    parent.events.emit("on_delegate_start", DelegationStarted(task, prepared.child))
    return prepared


def _ended(parent: DelegationHost, event: DelegationEnded) -> None:
    parent.events.emit("on_delegate_end", event)


def delegate(parent: W, task: str, run: RunFunction[W], *, max_result_tokens: int = 500,
             max_tokens: int | None = None, reserve_output: int | None = None, system: str | None = None,
             checkpoint: TaskCheckpoint | None = None, tool_call_id: str | None = None,
             condense: Condense | None = None) -> DelegationResult:
    """See :meth:`ctxwindow.ContextWindow.delegate`."""
    prepared = _begin(parent, task, run, max_result_tokens, tool_call_id, max_tokens=max_tokens,
                      reserve_output=reserve_output, system=system, checkpoint=checkpoint)
    try:
        value: object = run(prepared.child)
        if inspect.isawaitable(value):
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                value = asyncio.run(_awaited(value))
            else:
                if inspect.iscoroutine(value):
                    value.close()
                raise InvalidArgumentError("run returned an awaitable inside a running event loop: "
                                           "use await window.adelegate(...)")
        result = _finish(parent, task, prepared, value, max_result_tokens, tool_call_id, condense)
    except BaseException as error:
        _ended(parent, DelegationEnded(task, prepared.child, error=error))
        raise
    _ended(parent, DelegationEnded(task, prepared.child, result=result))
    return result


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


async def adelegate(parent: W, task: str, run: RunFunction[W], *, max_result_tokens: int = 500,
                    max_tokens: int | None = None, reserve_output: int | None = None, system: str | None = None,
                    checkpoint: TaskCheckpoint | None = None, tool_call_id: str | None = None,
                    condense: Condense | None = None) -> DelegationResult:
    """See :meth:`ctxwindow.ContextWindow.adelegate`."""
    prepared = _begin(parent, task, run, max_result_tokens, tool_call_id, max_tokens=max_tokens,
                      reserve_output=reserve_output, system=system, checkpoint=checkpoint)
    try:
        value: object = run(prepared.child)
        if inspect.isawaitable(value):
            value = await value
        result = _finish(parent, task, prepared, value, max_result_tokens, tool_call_id, condense)
    except BaseException as error:
        _ended(parent, DelegationEnded(task, prepared.child, error=error))
        raise
    _ended(parent, DelegationEnded(task, prepared.child, result=result))
    return result
