"""The argument checks shared by the package's constructors and entry points: each raises the
typed error of :mod:`ctxwindow.errors` with a message naming the argument, what it got and
what is allowed, before anything is changed.

>>> check_int(3, "keep", 0)
3
>>> check_number(float("nan"), "timeout", minimum=0.0)
Traceback (most recent call last):
...
ctxwindow.errors.InvalidArgumentError: timeout must be a finite number >= 0.0, got nan
"""

from __future__ import annotations

import math

from ctxwindow.errors import InvalidArgumentError, InvalidTextError, InvalidTypeError

__all__ = ["check_int", "check_fraction", "check_number", "check_text", "type_name"]


def type_name(value: object) -> str:
    """The name of ``value``'s type, for error messages."""
    return type(value).__name__


def check_int(value: object, name: str, minimum: int) -> int:
    """``value`` as an int >= ``minimum`` (a bool is not an int here), else a typed error naming
    the setting."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{name} must be an int, not {type_name(value)}")
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_fraction(value: object, name: str) -> float:
    """``value`` as a float in (0, 1], else a typed error naming the setting."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{name} must be a number, not {type_name(value)}")
    if not 0.0 < float(value) <= 1.0:
        raise InvalidArgumentError(f"{name} must be in (0, 1], got {value}")
    return float(value)


def check_number(value: object, name: str, *, minimum: float | None = None, above: float | None = None) -> float:
    """``value`` as a finite float (an int or a float, not a bool), at least ``minimum`` or
    strictly above ``above`` when given, else a typed error naming the setting."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{name} must be a number, not {type_name(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        raise InvalidArgumentError(f"{name} must be a finite number, got an int too large for a float") from None
    if minimum is not None and not (math.isfinite(number) and number >= minimum):
        raise InvalidArgumentError(f"{name} must be a finite number >= {minimum}, got {value}")
    if above is not None and not (math.isfinite(number) and number > above):
        raise InvalidArgumentError(f"{name} must be a finite number > {above}, got {value}")
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{name} must be a finite number, got {value}")
    return number


def check_text(value: object, name: str) -> str:
    """``value`` as a str that is valid Unicode, else :class:`~ctxwindow.errors.InvalidTypeError`
    (not a str) or :class:`~ctxwindow.errors.InvalidTextError` (a lone surrogate, which no UTF-8
    text holds: such a string cannot be sent to a provider as JSON)."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be a str, not {type_name(value)}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InvalidTextError(f"{name} is not valid Unicode: a lone surrogate at index {error.start}") from None
    return value
