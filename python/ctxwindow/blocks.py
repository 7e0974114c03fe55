"""The prompt's blocks: everything a window sends besides the conversation.

A window places system messages before the conversation (its *blocks*): the system prompt, the
user's standing instructions whose message left the conversation, dynamic context, notes and
recall. It also sends tool definitions and three tokens of reply priming. :class:`PromptBlocks`
owns all of it: each block's message and token count (counted once, when it is set), the
order they are sent in (:data:`BLOCK_ORDER`: most stable first, see :mod:`ctxwindow.cache`), the
room kept for blocks that may grow (instructions whose message may still leave the
conversation, a full recall block), and :meth:`PromptBlocks.by_component`, the one accounting of
the prompt by component that ``ContextWindow.usage`` and ``ContextWindow.budget`` read.

The state is one frozen value (:class:`BlockState`), replaced on every change, so a savepoint
is a reference and a rollback an assignment.

>>> from ctxwindow import Tokenizer
>>> blocks = PromptBlocks(Tokenizer("o200k_base"))
>>> blocks.set_text("system", "You are terse.")
>>> blocks.set_text("context", "Today is Monday.")
>>> [m["content"] for m in blocks.messages]
['You are terse.', 'Today is Monday.']
>>> blocks.by_component(history=0, tool_results=0, reserve_output=0)["system_prompt"]
16
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ctxwindow.cache import layout
from ctxwindow._checks import check_text
from ctxwindow.errors import InvalidTypeError
from ctxwindow.instructions import StandingInstructions
from ctxwindow.messages import Message
from ctxwindow.strategies import Notes
from ctxwindow.tokenizer import TokenCounter
from ctxwindow.tools import count_tools

__all__ = ["BLOCK_KINDS", "BLOCK_ORDER", "TEXT_BLOCKS", "REPLY_PRIMING", "Block", "BlockState", "PromptBlocks",
           "check_message_text"]

#: The kinds of block a window sends before the conversation.
BLOCK_KINDS = ("system", "instructions", "context", "notes", "recall")
#: The order they are sent in: most stable first (:func:`ctxwindow.cache.layout`), so a change in
#: one invalidates only the provider's cache of what follows it.
BLOCK_ORDER: tuple[str, ...] = tuple(layout([(kind, kind) for kind in BLOCK_KINDS]))
#: The blocks whose text the application sets directly.
TEXT_BLOCKS = ("system", "context")
#: Tokens the provider adds once per prompt to prime the reply (OpenAI's chat accounting).
REPLY_PRIMING = 3


def check_message_text(message: Mapping[str, Any], where: str) -> None:
    """:class:`InvalidTextError` when a message's text or a tool call's arguments hold a lone
    surrogate (counting would replace it, as tiktoken does, but the prompt could not be sent)."""
    content = message.get("content")
    texts: list[object] = [content] if isinstance(content, str) else [
        p.get("text") for p in content if isinstance(p, Mapping)] if isinstance(content, list) else []
    texts += [message.get("name"), message.get("tool_call_id")]
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            function = call.get("function")
            texts.append(call.get("id"))
            if isinstance(function, Mapping):
                texts += [function.get("arguments"), function.get("name")]
    for text in texts:
        if isinstance(text, str) and not text.isascii():
            check_text(text, f"{where}'s text")


@dataclass(frozen=True)
class Block:
    """One system message sent before the conversation, with its chat-accounting tokens."""

    message: Message
    tokens: int

    @property
    def text(self) -> str:
        """The message's text."""
        return str(self.message["content"])


@dataclass(frozen=True)
class BlockState:
    """The blocks at one moment (a value: every change makes a new one)."""

    blocks: Mapping[str, Block] = field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None
    tool_tokens: int = 0
    #: Tokens the instructions block would add if every message holding an instruction left the
    #: conversation (compactions plan for it).
    instructions_reserve: int = 0
    #: The block with every instruction in force (what the fidelity gate counts as present).
    instructions_text: str = ""
    #: Tokens a full recall block would add (compactions plan for it).
    recall_reserve: int = 0
    #: The blocks' messages in sending order, and every token of the prompt but the conversation
    #: (computed once per change, read on every turn).
    messages: tuple[Message, ...] = field(init=False)
    tokens: int = field(init=False)

    def __post_init__(self) -> None:
        ordered = tuple(self.blocks[kind].message for kind in BLOCK_ORDER if kind in self.blocks)
        object.__setattr__(self, "messages", ordered)
        object.__setattr__(self, "tokens", REPLY_PRIMING + self.tool_tokens
                           + sum(block.tokens for block in self.blocks.values()))

    def tokens_of(self, kind: str) -> int:
        """The tokens of one block (0 when it is not sent)."""
        block = self.blocks.get(kind)
        return block.tokens if block is not None else 0


class PromptBlocks:
    """The owner of a window's blocks; see the module documentation. It is a participant of the
    window's unit of work (:meth:`savepoint`, :meth:`rollback`)."""

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter
        self.state = BlockState()

    # --- the unit of work ---------------------------------------------------------------------

    def savepoint(self) -> BlockState:
        """The current state (a value)."""
        return self.state

    def rollback(self, savepoint: BlockState) -> None:
        """Restores a state of :meth:`savepoint`."""
        self.state = savepoint

    # --- reading --------------------------------------------------------------------------------

    @property
    def messages(self) -> tuple[Message, ...]:
        """The blocks' system messages in sending order."""
        return self.state.messages

    @property
    def tokens(self) -> int:
        """Every token of the prompt but the conversation: blocks, tool definitions, reply priming."""
        return self.state.tokens

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        """The tool definitions sent with the prompt."""
        return self.state.tools

    @property
    def reserved(self) -> int:
        """Room kept for blocks that may grow: the instructions whose message may still leave the
        conversation, and a full recall block."""
        return self.state.instructions_reserve + self.state.recall_reserve

    def text(self, kind: str) -> str | None:
        """The text of a block (None when it is not sent)."""
        block = self.state.blocks.get(kind)
        return block.text if block is not None else None

    def by_component(self, *, history: int, tool_results: int, reserve_output: int) -> dict[str, int]:
        """The prompt's tokens by budget component (the six of :mod:`ctxwindow.budget`), given the
        conversation's tokens (``history``, of which ``tool_results`` are tool messages)."""
        state = self.state
        return {
            "system_prompt": sum(state.tokens_of(kind) for kind in ("system", "context", "notes", "instructions")),
            "tool_definitions": state.tool_tokens,
            "message_history": history - tool_results,
            "tool_results": tool_results,
            "memory_injection": state.tokens_of("recall"),
            "output_reserved": reserve_output,
        }

    def prefix_key(self) -> tuple[Any, ...]:
        """A value that changes exactly when something sent before the conversation changes."""
        state = self.state
        return (*(m["content"] for m in state.messages), state.tool_tokens, id(state.tools))

    def gate_messages(self) -> list[Message]:
        """What the fidelity gate counts as present besides the conversation: the blocks, with every
        instruction in force (also those whose message is still in the conversation)."""
        return [*self.state.messages, {"content": self.state.instructions_text}]

    # --- changing -------------------------------------------------------------------------------

    def _with(self, kind: str, text: str | None, **changes: Any) -> BlockState:
        blocks = dict(self.state.blocks)
        if text:
            message: Message = {"role": "system", "content": text}
            blocks[kind] = Block(message, self._counter.count_message(message))
        else:
            blocks.pop(kind, None)
        return replace(self.state, blocks=blocks, **changes)

    def set_text(self, kind: str, text: object) -> None:
        """Sets (or, with None, removes) the system prompt or the dynamic context (:data:`TEXT_BLOCKS`),
        counted now. An empty string is sent as an empty system message, as given."""
        if kind not in TEXT_BLOCKS:
            raise InvalidTypeError(f"the {kind} block is made by the window, not set as text")
        if text is None:
            self.state = self._with(kind, None)
            return
        message: Message = {"role": "system", "content": check_text(text, kind)}
        self.state = replace(self.state, blocks={**self.state.blocks,
                                                 kind: Block(message, self._counter.count_message(message))})

    def set_tools(self, tools: object) -> None:
        """Sets the tool definitions, counted as the provider renders them (:mod:`ctxwindow.tools`)."""
        if tools is not None and not isinstance(tools, list):
            raise InvalidTypeError(f"tools must be a list of tool definitions, not {type(tools).__name__}")
        self.state = replace(self.state, tools=tools, tool_tokens=count_tools(tools, self._counter))

    def set_notes(self, notes: Notes) -> None:
        """The notes block, from the notebook (within its cap)."""
        self.state = self._with("notes", notes.render(self._counter.count))

    def set_instructions(self, standing: StandingInstructions, held: Callable[[int | None], bool]) -> None:
        """The block of the instructions in force whose message is no longer in the conversation
        verbatim (``held(seq)`` says which still are), and the reserve for the rest."""
        count = self._counter.count
        full = standing.render(count)
        if full is None:
            self.state = self._with("instructions", None, instructions_reserve=0, instructions_text="")
            return
        text = standing.render(count, lambda i: i.seq is None or not held(i.seq))
        shown = self._with("instructions", text)
        full_tokens = self._counter.count_message({"role": "system", "content": full})
        self.state = replace(shown, instructions_reserve=max(full_tokens - shown.tokens_of("instructions"), 0),
                             instructions_text=full)

    def reserve_recall(self, max_tokens: int) -> None:
        """Keeps room for a recall block of ``max_tokens`` (none is sent yet)."""
        self.state = self._with("recall", None, recall_reserve=max_tokens)

    def set_recall(self, message: Message | None, tokens: int, max_tokens: int) -> None:
        """The recall block (counted by recall) and the room still kept for a full one."""
        blocks = {k: b for k, b in self.state.blocks.items() if k != "recall"}
        if message is not None:
            blocks["recall"] = Block(message, tokens)
        self.state = replace(self.state, blocks=blocks, recall_reserve=max_tokens - tokens)

    def drop_recall(self) -> None:
        """Removes the recall block and its reserve (recall yields its room to protected content)."""
        self.state = self._with("recall", None, recall_reserve=0)
