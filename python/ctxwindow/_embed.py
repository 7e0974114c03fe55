"""Calling a user's embedder (``embedder(texts) -> (n, d) array``): what it returns is checked
once, here, for every part that takes one (:class:`~ctxwindow.strategies.SemanticMerge`, recall),
and anything but an ``(n, d)`` array of finite numbers is a typed error that says what it was.

>>> embed(lambda texts: [[1.0, 0.0] for _ in texts], ["a", "b"]).shape
(2, 2)
>>> embed(lambda texts: list(texts), ["a", "b"])
Traceback (most recent call last):
...
ctxwindow.errors.InvalidTypeError: the embedder returned a list of str, expected an array of numbers of shape (2, d)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxwindow._checks import type_name
from ctxwindow.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Embedder", "embed"]

#: An embedder: ``(texts) -> array of shape (len(texts), d)``.
Embedder = Callable[[list[str]], Any]


def _describe(value: object) -> str:
    """What an embedder returned, for an error message: its type, and its elements' type."""
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    if isinstance(value, (list, tuple)) and value:
        first = value[0]
        inner = f" of {type_name(first[0])}" if isinstance(first, (list, tuple)) and first else ""
        return f"a {type_name(value)} of {type_name(first)}{inner}"
    return f"a {type_name(value)}"


def embed(embedder: Embedder, texts: list[str], dtype: type[np.floating[Any]] = np.float64) -> npt.NDArray[Any]:
    """``embedder(texts)`` as an ``(n, d)`` array of finite numbers of ``dtype``, ``n =
    len(texts)``; anything else the embedder returns (strings, None, a ragged list, NaN, another
    shape) is an :class:`~ctxwindow.errors.InvalidTypeError` or
    :class:`~ctxwindow.errors.InvalidArgumentError` that says what it returned."""
    returned = embedder(texts)
    expected = f"expected an array of numbers of shape ({len(texts)}, d)"
    try:
        raw = np.asarray(returned)
    except (TypeError, ValueError) as error:  # ragged lists, objects numpy cannot read
        raise InvalidTypeError(f"the embedder returned {_describe(returned)}, {expected}: {error}") from None
    if raw.dtype.kind not in "iuf":  # strings, bytes, None, objects, bools
        raise InvalidTypeError(f"the embedder returned {_describe(returned)}, {expected}")
    if raw.ndim != 2 or raw.shape[0] != len(texts):
        raise InvalidArgumentError(f"the embedder returned {_describe(returned)}, {expected}")
    vectors = raw.astype(dtype, copy=False)
    if not np.isfinite(vectors).all():
        raise InvalidArgumentError("the embedder returned NaN or infinite values (or values too large for "
                                   f"{np.dtype(dtype).name})")
    return vectors
