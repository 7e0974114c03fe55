"""Standing instructions: the rules a user gives about how the agent should act for the rest of
the conversation, detected in user messages as they are added and carried verbatim in a
protected block of every prompt (after the system prompt), so no compaction can lose them.

Detection is deterministic, sentence by sentence, with general rules of English directive
grammar (no word list drawn from any evaluation data):

- a *standing marker*: "always", "never", "from now on", "whenever", "every time", "by default",
  "for the rest of", "in every reply", ...;
- *modality addressed to the agent*: "you must / should / need to / are not allowed to ...";
- a *wish or preference of the speaker*: "I want / I'd like / I prefer / I'd rather / I don't
  like ...", "my preferred / favourite ... is";
- a *negative imperative*: a sentence that starts "Don't", "Do not", "Never", "Avoid",
  "Stop", "Refrain from";
- a *manner imperative*: a sentence that starts with a verb of how to communicate or format
  ("reply", "respond", "answer", "write", "format", "use", "keep", "address", "sign", ...);
- an *imperative over all occasions*: "Start every report with ...", "Check each ...";
- a *conditional rule*: a sentence that starts "When / Whenever / Before / After / If / Once /
  Until / Unless / Each time / Every time" and whose main clause is an imperative, or any
  imperative followed by "before / after / when / whenever / if / unless / until you ...";
- "make sure", "be sure", "remember to", "don't forget to", "keep in mind".

Questions are not instructions unless they carry a standing marker ("Could you always ...?").
A one-off task ("Book the 9 am flight") is not an instruction.

A later instruction *supersedes* an earlier one on the same subject (it is then no longer shown
as current; both stay listed in :attr:`StandingInstructions.history`): the same content with
the opposite polarity ("Always ..." / "Never ..."), the same directive with one value changed
("Reply in French" / "Reply in English", "I prefer aisle seats" / "I prefer window seats": one
word against one word, in an "in"/"as" frame or a preference), a near-duplicate (the newer
wording wins), or an explicit retraction ("instead", "no longer", "anymore", "actually",
"forget", "ignore", "disregard") that shares most of the subject. Pinned
instructions are never superseded.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ctxwindow.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Instruction", "StandingInstructions", "detect_instructions", "is_instruction", "split_sentences",
           "INSTRUCTIONS_HEADER"]

INSTRUCTIONS_HEADER = "[Standing instructions from the user, in force]"

_SENTENCE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]*[A-Z0-9])|\n+")
#: A fragment ending so did not end a sentence ("Dr. Morgan").
_ABBREVIATION = re.compile(r"\b(?:Dr|Mr|Ms|Mrs|Prof|St|Sr|Jr|vs|No|Inc)\.$")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")

_STANDING = re.compile(
    r"\b(?:always|never|from now on|going forward|from here on|hereafter|for the rest of|every time|each time|"
    r"whenever|any ?time|at all times|by default|as a rule|no matter what|under any circumstances|ever again|"
    r"in (?:all|every|each|any|future) (?:of )?(?:your |my |our )?(?:future )?"
    r"(?:repl(?:y|ies)|respons(?:e|es)|answers?|messages?|emails?|output|conversations?|sessions?))\b",
    re.IGNORECASE)
_MODAL = re.compile(
    r"\byou(?:'ll| will| really)? (?:must|mustn't|should|shouldn't|shall|need to|have to|ought to|may not|"
    r"can't|cannot|can not|won't|are (?:not )?(?:to|allowed to|permitted to|required to|expected to|supposed to)|"
    r"'re (?:not )?(?:to|allowed to|permitted to|supposed to|expected to))\b",
    re.IGNORECASE)
#: A preference or a refusal of the speaker. A wish followed by "to" and a verb ("I'd like to
#: change my flight") is a one-off request, not a rule, and is left to the other patterns.
_WISH = re.compile(
    r"\b(?:i|we)(?:'d| would)?(?: really| also| generally| usually| always| much| just)? "
    r"(?:(?:want|like|love)(?! to\b)|need you to|want you to|'d like you to|expect|require|prefer|rather|"
    r"hate|dislike|don't like|do not like|don't want|do not want|can't stand|cannot stand|insist|ask that|"
    r"do not wish|don't wish)\b"
    r"|\bmy (?:preference|preferred \w+|favou?rite \w+(?: \w+)?) (?:is|are)\b",
    re.IGNORECASE)
_NEGATIVE_START = re.compile(
    r"^(?:please,? |and |also,? |but |so |just )*(?:do not|don't|dont|never|avoid|stop|refrain from|no more)\b",
    re.IGNORECASE)
#: Verbs of how to communicate or present, whose imperative is a rule of manner.
_MANNER_VERBS = ("reply|respond|answer|write|format|use|keep|address|sign|stick|limit|express|spell|round|"
                 "quote|cite|speak|talk|phrase|structure|refer|stay|be|hide|mask|omit|prefer")
#: Other verbs an instruction's main clause may start with (a conditional rule's "then" part).
_ACTION_VERBS = ("ask|check|confirm|verify|double-check|notify|tell|let|send|wait|run|test|read|compare|apply|"
                 "add|mark|put|book|choose|pick|offer|suggest|recommend|remind|warn|alert|copy|cc|save|store|"
                 "retry|try|escalate|stop|pause|work|do|don't|do not|never|avoid|get|go|contact|call|email|"
                 "message|report|log|record|note|treat|assume|consider|look|search|prioriti[sz]e|follow|obey|"
                 "respect|handle|route|forward|flag|inform|update|show|give|list|include|mention|explain|"
                 "summari[sz]e|start|begin|end|make|leave|skip|present|number|label")
_MANNER_START = re.compile(
    rf"^(?:please,? |and |also,? |just |only |always )*(?:{_MANNER_VERBS})\b", re.IGNORECASE)
_CONDITION_START = re.compile(
    r"^(?:when|whenever|before|after|if|once|until|unless|each time|every time|as soon as|in case)\b",
    re.IGNORECASE)
_IMPERATIVE = re.compile(
    rf"^(?:please,? |then |also,? |always |just |only |first,? )*(?:{_MANNER_VERBS}|{_ACTION_VERBS})\b",
    re.IGNORECASE)
_YOU = re.compile(r"\byou(?:r|rs|rself)?\b", re.IGNORECASE)
#: Leading words before an imperative's verb ("From now on, always reply ...").
_LEAD = re.compile(r"^(?:(?:from now on|going forward|from here on|by default|as a rule|in (?:all|every|each|any) "
                   r"\w+(?: \w+)?|always|never|please|also|and|just|only|so|then)[,]?\s+)+", re.IGNORECASE)
_YOU_CONDITION = re.compile(r"\b(?:before|after|when|whenever|if|unless|until|once) (?:you|we)\b", re.IGNORECASE)
#: An imperative quantified over all occasions ("Start every analysis by ...").
_UNIVERSAL = re.compile(r"\b(?:every|each|all future)\b", re.IGNORECASE)
_REMINDER = re.compile(r"\b(?:make sure|be sure|remember to|don't forget|do not forget|keep in mind)\b",
                       re.IGNORECASE)
_QUESTION_START = re.compile(r"^(?:what|which|who|whom|whose|where|why|how|is|are|was|were|did|does|do you|"
                             r"has|have|had)\b", re.IGNORECASE)

_NEGATION = re.compile(r"\b(?:never|not|no|don't|dont|avoid|stop|without|refrain|nor|hate|dislike)\b|n't\b",
                       re.IGNORECASE)
_RETRACTION = re.compile(r"\b(?:instead|no longer|anymore|any more|actually|forget|ignore|disregard|"
                         r"changed my mind|scratch that|rather than|from now on)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")
_FUNCTION_WORDS = frozenset(
    "a an the and or but so to of in on at by for with from as into onto over under about than then that this "
    "these those it its i me my mine we us our you your yours he she they them their his her is are was were be "
    "been being am do does did done have has had will would shall should can could may might must need ought "
    "not no never always please also just only any all every each some more most very really ever when whenever "
    "before after if unless until once while there here what which who whom whose where why how one ones "
    "don't dont can't cannot won't i'd i'm i'll you'll you're we're it's let's also first now going forward "
    "rest time times instead longer anymore actually".split())
_SINGLE_VALUED_PREPOSITIONS = frozenset(("in", "as"))
_PREFERENCE_VERBS = frozenset(("prefer", "like", "love", "want", "hate", "dislike", "rather"))


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``: split at sentence ends and line breaks, bullets stripped."""
    sentences: list[str] = []
    glued = False
    for part in _SENTENCE.split(text):
        part = part.strip()
        if glued and part:
            sentences[-1] += " " + part
        else:
            part = _BULLET.sub("", part)
            if part:
                sentences.append(part)
        glued = bool(sentences) and bool(part) and _ABBREVIATION.search(sentences[-1]) is not None
    return sentences


def is_instruction(sentence: str) -> bool:
    """Whether one sentence is a standing instruction (see the module documentation)."""
    text = sentence.strip().strip("\"'")
    if len(text) < 8 or len(text) > 600:
        return False
    # A standing marker makes a rule only when the sentence is addressed to the agent ("you",
    # an imperative) or states the speaker's wish: "My wife and I always ..." is narrative.
    addressed = (_YOU.search(text) is not None or _IMPERATIVE.match(_LEAD.sub("", text)) is not None
                 or _NEGATIVE_START.match(text) is not None)
    standing = _STANDING.search(text) is not None and addressed
    if text.endswith("?") or _QUESTION_START.match(text):
        return standing and not _QUESTION_START.match(text)
    if standing or _MODAL.search(text) or _WISH.search(text) or _REMINDER.search(text):
        return True
    if _NEGATIVE_START.match(text) or _MANNER_START.match(text):
        return True
    if _CONDITION_START.match(text):
        main = text.split(",", 1)[1].strip() if "," in text else ""
        return bool(main) and _IMPERATIVE.match(main) is not None
    if _IMPERATIVE.match(text) is None:
        return False
    return _YOU_CONDITION.search(text) is not None or _UNIVERSAL.search(text) is not None


def detect_instructions(text: str) -> list[str]:
    """The standing instructions in a user message's text, verbatim, in order."""
    if not text:
        return []
    return [s for s in split_sentences(text) if is_instruction(s)]


@dataclass(frozen=True)
class Instruction:
    """One standing instruction. ``id`` is stable for the window's life; ``turn`` is the user
    turn it was given in (0: added by the program); ``superseded_by`` the id of the instruction
    that replaced it (None while it is current); ``seq`` the window's sequence number of the
    user message it was found in (None when added by the program)."""

    id: int
    text: str
    turn: int
    pinned: bool = False
    source: str = "detected"
    superseded_by: int | None = None
    seq: int | None = None

    @property
    def current(self) -> bool:
        return self.superseded_by is None


@dataclass(frozen=True)
class _Signature:
    negative: bool
    verb: str | None
    preposition: str | None
    content: frozenset[str]


def _stem(word: str) -> str:
    word = word.strip("'-")
    for suffix in ("ies", "es", "s"):
        if len(word) > 4 and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


@functools.lru_cache(maxsize=8192)
def _signature(text: str) -> _Signature:
    words = _WORD.findall(text.lower())
    verb = preposition = None
    for index, word in enumerate(words):
        if word in _FUNCTION_WORDS:
            continue
        verb = _stem(word)
        for following in words[index + 1: index + 4]:
            if following in _SINGLE_VALUED_PREPOSITIONS:
                preposition = following
                break
        break
    content = frozenset(_stem(w) for w in words if w not in _FUNCTION_WORDS and len(w) > 1)
    return _Signature(_NEGATION.search(text) is not None, verb, preposition, content)


def supersedes(new: str, old: str) -> bool:
    """Whether instruction ``new`` replaces ``old`` (see the module documentation)."""
    return _supersedes(_signature(new), _RETRACTION.search(new) is not None, _signature(old))


def _supersedes(a: _Signature, retraction: bool, b: _Signature) -> bool:
    shared = a.content & b.content
    if not shared:
        return False
    jaccard = len(shared) / len(a.content | b.content)
    if jaccard >= 0.8:
        return True  # a near-duplicate or the opposite rule on the very same subject
    if jaccard >= 0.5 and a.negative != b.negative:
        return True
    one_value_changed = len(a.content - b.content) == 1 and len(b.content - a.content) == 1
    if a.verb is not None and a.verb == b.verb and one_value_changed:
        if a.preposition is not None and a.preposition == b.preposition:
            return True  # "reply in X" / "reply in Y", "address me as X" / "... as Y"
        if a.verb in _PREFERENCE_VERBS and len(shared) >= 2:
            return True  # "I prefer aisle seats" / "I prefer window seats"
    return retraction and len(shared - {a.verb}) >= 1 and jaccard >= 0.5


@functools.lru_cache(maxsize=8192)
def _normalized(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


@dataclass
class StandingInstructions:
    """The window's standing instructions. Current ones are rendered in a protected system
    message, pinned first, then in the order given, within ``max_tokens`` (when they do not all
    fit, the newest unpinned ones are kept and :attr:`omitted` lists the others; pinned ones are
    always carried). ``detect=False`` turns automatic detection off (instructions can still be
    added by the program)."""

    max_tokens: int = 400
    detect: bool = True
    history: list[Instruction] = field(default_factory=list)
    #: Current instructions left out of the block by the token cap (ids).
    omitted: tuple[int, ...] = ()
    _counted: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise InvalidArgumentError(f"max_tokens must be an int >= 1, got {self.max_tokens!r}")
        if not isinstance(self.detect, bool):
            raise InvalidTypeError(f"detect must be a bool, not {type(self.detect).__name__}")

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.current)

    def __len__(self) -> int:
        return len(self.current)

    @property
    def current(self) -> list[Instruction]:
        """The instructions in force, in the order given."""
        return [i for i in self.history if i.superseded_by is None]

    def snapshot(self) -> tuple[list[Instruction], tuple[int, ...]]:
        """The state, for a transaction to restore (instructions are immutable values)."""
        return list(self.history), self.omitted

    def reset(self, snapshot: tuple[list[Instruction], tuple[int, ...]]) -> None:
        self.history[:] = snapshot[0]
        self.omitted = snapshot[1]

    def add(self, text: str, turn: int = 0, *, pinned: bool = False, source: str = "user",
            seq: int | None = None) -> Instruction | None:
        """Adds an instruction (verbatim, whitespace trimmed); returns it, or None when an
        identical current one exists. Earlier instructions it supersedes are marked so."""
        if not isinstance(text, str) or not _WORD.search(text.lower()):
            raise InvalidTypeError("an instruction's text must be a str with at least one word")
        if not isinstance(pinned, bool):
            raise InvalidTypeError(f"pinned must be a bool, not {type(pinned).__name__}")
        text = " ".join(text.split())
        key = _normalized(text)
        for existing in self.current:
            if _normalized(existing.text) == key:
                if pinned and not existing.pinned:
                    self._set(existing.id, pinned=True)
                    return self._get(existing.id)
                return None
        instruction = Instruction(len(self.history), text, turn, pinned, source, None, seq)
        signature, retraction = _signature(text), _RETRACTION.search(text) is not None
        for index, existing in enumerate(self.history):
            if existing.current and not existing.pinned and _supersedes(signature, retraction,
                                                                         _signature(existing.text)):
                self.history[index] = replace(existing, superseded_by=instruction.id)
        self.history.append(instruction)
        return instruction

    def observe(self, text: str, turn: int, seq: int | None = None) -> list[Instruction]:
        """Detects and adds the instructions in a user message's text (message ``seq``);
        returns the new ones."""
        if not self.detect:
            return []
        added = []
        for sentence in detect_instructions(text):
            instruction = self.add(sentence, turn, source="detected", seq=seq)
            if instruction is not None:
                added.append(instruction)
        return added

    def _get(self, instruction_id: int) -> Instruction:
        if isinstance(instruction_id, bool) or not isinstance(instruction_id, int):
            raise InvalidTypeError(f"an instruction id is an int, not {type(instruction_id).__name__}")
        if not 0 <= instruction_id < len(self.history):
            raise InvalidArgumentError(f"no instruction with id {instruction_id} (ids 0..{len(self.history) - 1})")
        return self.history[instruction_id]

    def _set(self, instruction_id: int, **changes: Any) -> None:
        self.history[instruction_id] = replace(self._get(instruction_id), **changes)

    def pin(self, instruction_id: int, pinned: bool = True) -> Instruction:
        """Pins (or unpins) a current instruction: pinned ones are always carried and never
        superseded."""
        if not isinstance(pinned, bool):
            raise InvalidTypeError(f"pinned must be a bool, not {type(pinned).__name__}")
        instruction = self._get(instruction_id)
        if not instruction.current:
            raise InvalidArgumentError(f"instruction {instruction_id} was superseded by "
                                       f"{instruction.superseded_by}; pin the current one")
        self._set(instruction_id, pinned=pinned)
        return self._get(instruction_id)

    def remove(self, instruction_id: int) -> Instruction:
        """Removes an instruction from the prompt (it stays in :attr:`history`, marked as
        superseded by itself)."""
        instruction = self._get(instruction_id)
        if not instruction.current:
            raise InvalidArgumentError(f"instruction {instruction_id} is not current")
        self._set(instruction_id, superseded_by=instruction_id, pinned=False)
        return self._get(instruction_id)

    def render(self, count: Callable[[str], int], shown: Callable[[Instruction], bool] | None = None) -> str | None:
        """The block's text within the cap (None when it has no line). The cap chooses among
        all current instructions; ``shown`` then leaves out the ones the prompt already holds
        verbatim (their message is still in the conversation)."""
        current = self.current
        if not current:
            self.omitted = ()
            return None
        used = count(INSTRUCTIONS_HEADER)
        chosen: set[int] = set()
        counted = self._counted
        for instruction in sorted(current, key=lambda i: (not i.pinned, -i.id)):
            if not instruction.pinned and used >= self.max_tokens:
                break  # full: the older unpinned ones are omitted
            tokens = counted.get(instruction.text)
            if tokens is None:
                tokens = counted[instruction.text] = count("- " + instruction.text + "\n")
            if instruction.pinned or used + tokens <= self.max_tokens:
                chosen.add(instruction.id)
                used += tokens
        self.omitted = tuple(i.id for i in current if i.id not in chosen)
        ordered = sorted((i for i in current if i.id in chosen and (shown is None or shown(i))),
                         key=lambda i: (not i.pinned, i.id))
        if not ordered:
            return None
        return INSTRUCTIONS_HEADER + "\n" + "\n".join(f"- {i.text}" for i in ordered)

    def forget_detected(self) -> dict[str, bool]:
        """Drops the instructions detected in messages (those the program added stay; one a dropped
        instruction had superseded is in force again), before the messages are detected anew.
        Returns what the program decided about the dropped ones, by their normalized text: False
        for a removed instruction, True for a pinned one; :meth:`reapply` applies it to the
        instructions detected again, so a removal or a pin survives the rebuild."""
        items = self.to_list()
        decided = {_normalized(i.text): i.pinned for i in self.history
                   if i.source == "detected" and (i.pinned or i.superseded_by == i.id)}
        keep = [index for index, item in enumerate(items) if item["source"] != "detected"]
        if len(keep) < len(items):
            renumbered = {old: new for new, old in enumerate(keep)}
            self.load([{**items[index], "superseded_by": renumbered.get(items[index]["superseded_by"])}
                       for index in keep])
        return decided

    def reapply(self, decided: dict[str, bool]) -> None:
        """Removes or pins again the current detected instructions named in ``decided``
        (:meth:`forget_detected`)."""
        for instruction in self.current:
            pinned = decided.get(_normalized(instruction.text)) if instruction.source == "detected" else None
            if pinned is None:
                continue
            self._set(instruction.id, **({"pinned": True} if pinned else
                                         {"superseded_by": instruction.id, "pinned": False}))

    def to_list(self) -> list[dict[str, Any]]:
        return [{"text": i.text, "turn": i.turn, "pinned": i.pinned, "source": i.source,
                 "superseded_by": i.superseded_by, "seq": i.seq} for i in self.history]

    def load(self, items: list[dict[str, Any]]) -> None:
        """Replaces the history with ``items`` (as :meth:`to_list` writes them)."""
        history = []
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidArgumentError(f"instruction {index} of the state is not an object")
            superseded, seq = item.get("superseded_by"), item.get("seq")
            if (not isinstance(item.get("text"), str) or not item["text"].strip()
                    or any(v is not None and (isinstance(v, bool) or not isinstance(v, int)) for v in (superseded, seq))
                    or (superseded is not None and not 0 <= superseded < len(items))
                    or isinstance(item.get("turn", 0), bool) or not isinstance(item.get("turn", 0), int)
                    or not isinstance(item.get("pinned", False), bool)):
                raise InvalidArgumentError(f"instruction {index} of the state is malformed")
            history.append(Instruction(index, item["text"], int(item.get("turn", 0)), bool(item.get("pinned", False)),
                                       str(item.get("source", "user")), superseded, seq))
        self.history[:] = history
