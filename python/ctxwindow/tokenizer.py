"""Token counters.

- :class:`Tokenizer`: exact counts, identical to OpenAI's ``tiktoken`` (``encode_ordinary``), for
  ``cl100k_base``, ``o200k_base``, ``p50k_base`` and ``r50k_base``.
- :class:`EstimateTokenizer`: an *estimate* for models without a public vocabulary (Claude,
  Gemini): an exact count with a public vocabulary times the ratio measured against the
  provider's billing, plus a safety margin. ``Tokenizer.for_model("claude-...")`` returns one.
- :class:`HeuristicTokenizer`: a cruder *estimate* (``ceil(chars / chars_per_token)``).
- :class:`CallableTokenizer`: any ``(str) -> int`` callable (a provider SDK's counter, say).

All four share the chat accounting of :meth:`Tokenizer.count_messages`, and each is a
:class:`TokenCounter`, the protocol the window needs of its counter (defined, with the smaller
:class:`TextCounter`, in :mod:`ctxwindow._types`).
"""

from __future__ import annotations

from ctxwindow._native import (
    CallableTokenizer,
    EstimateTokenizer,
    HeuristicTokenizer,
    Tokenizer,
    encoding_for_model,
    encoding_names,
    image_tokens,
)
from ctxwindow._types import TextCounter, TokenCounter

__all__ = [
    "Tokenizer",
    "HeuristicTokenizer",
    "EstimateTokenizer",
    "CallableTokenizer",
    "TokenCounter",
    "TextCounter",
    "encoding_names",
    "encoding_for_model",
    "image_tokens",
]
