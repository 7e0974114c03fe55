"""Token counters.

- :class:`Tokenizer`: exact counts, identical to OpenAI's ``tiktoken`` (``encode_ordinary``), for
  ``cl100k_base``, ``o200k_base``, ``p50k_base`` and ``r50k_base``.
- :class:`EstimateTokenizer`: an *estimate* for models without a public vocabulary (Claude,
  Gemini): an exact count with a public vocabulary times the ratio measured against the
  provider's billing, plus a safety margin. ``Tokenizer.for_model("claude-...")`` returns one.
- :class:`HeuristicTokenizer`: a cruder *estimate* (``ceil(chars / chars_per_token)``).
- :class:`CallableTokenizer`: any ``(str) -> int`` callable (a provider SDK's counter, say).

All four share the chat accounting of :meth:`Tokenizer.count_messages`.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np
import numpy.typing as npt

from ctxwindow._native import (
    CallableTokenizer,
    EstimateTokenizer,
    HeuristicTokenizer,
    Tokenizer,
    encoding_for_model,
    encoding_names,
    image_tokens,
)

__all__ = [
    "Tokenizer",
    "HeuristicTokenizer",
    "EstimateTokenizer",
    "CallableTokenizer",
    "TokenCounter",
    "encoding_names",
    "encoding_for_model",
    "image_tokens",
]


@runtime_checkable
class TokenCounter(Protocol):
    """What the rest of the package needs of a token counter."""

    @property
    def name(self) -> str: ...

    @property
    def exact(self) -> bool: ...

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> npt.NDArray[np.uint32]: ...

    def count_message(self, message: Mapping[str, Any]) -> int: ...

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int: ...
