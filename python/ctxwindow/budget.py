"""Token budget by component: six components with allocations of the window, a soft limit (80%
of each allocation by default) and a hard limit (100%), checks before adding, burn rate and turns
until the budget is exhausted.

The output reserve never drops below 4,000 tokens or 10% of the window, whichever is smaller.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from ctxwindow.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["COMPONENTS", "PROFILES", "BudgetCheck", "TokenBudget"]

COMPONENTS = (
    "system_prompt",
    "tool_definitions",
    "message_history",
    "tool_results",
    "memory_injection",
    "output_reserved",
)

PROFILES: dict[str, dict[str, float]] = {
    "default": {"system_prompt": 0.06, "tool_definitions": 0.04, "message_history": 0.65,
                "tool_results": 0.12, "memory_injection": 0.08, "output_reserved": 0.05},
    "code_review": {"system_prompt": 0.05, "tool_definitions": 0.05, "message_history": 0.40,
                    "tool_results": 0.35, "memory_injection": 0.05, "output_reserved": 0.10},
    "research": {"system_prompt": 0.04, "tool_definitions": 0.04, "message_history": 0.45,
                 "tool_results": 0.20, "memory_injection": 0.20, "output_reserved": 0.07},
    "customer_support": {"system_prompt": 0.12, "tool_definitions": 0.08, "message_history": 0.55,
                         "tool_results": 0.15, "memory_injection": 0.05, "output_reserved": 0.05},
}


@dataclass(frozen=True)
class BudgetCheck:
    """The answer of :meth:`TokenBudget.check_before_add`."""

    allowed: bool
    level: str  # "ok", "soft" (past the soft limit) or "hard" (would pass the hard limit)
    component: str
    used_after: int
    soft_limit: int
    hard_limit: int
    message: str


@dataclass
class TokenBudget:
    """Allocations of a window of ``max_tokens`` to the six components."""

    max_tokens: int
    allocations: Mapping[str, float] = field(default_factory=lambda: dict(PROFILES["default"]))
    soft_limit: float = 0.8
    hard_limit: float = 1.0
    burn_window: int = 5
    used: dict[str, int] = field(default_factory=lambda: {c: 0 for c in COMPONENTS})
    _totals: deque[int] = field(default_factory=deque, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise InvalidTypeError("max_tokens must be an int")
        if self.max_tokens <= 0:
            raise InvalidArgumentError(f"max_tokens must be > 0, got {self.max_tokens}")
        unknown = set(self.allocations) - set(COMPONENTS)
        if unknown:
            raise InvalidArgumentError(
                f"unknown budget components {sorted(unknown)}; known: {', '.join(COMPONENTS)}")
        for name, share in self.allocations.items():
            if not 0.0 <= share <= 1.0:
                raise InvalidArgumentError(f"allocation of {name} must be in [0, 1], got {share}")
        if sum(self.allocations.values()) > 1.0 + 1e-9:
            raise InvalidArgumentError(
                f"allocations sum to {sum(self.allocations.values()):.3f}, more than the window")
        if not 0.0 < self.soft_limit <= 1.0:
            raise InvalidArgumentError(f"soft_limit must be in (0, 1], got {self.soft_limit}")
        if not self.soft_limit <= self.hard_limit <= 1.0:
            raise InvalidArgumentError(
                f"hard_limit must be in [soft_limit, 1], got {self.hard_limit}")
        if self.burn_window < 1:
            raise InvalidArgumentError(f"burn_window must be >= 1, got {self.burn_window}")
        self.allocations = {c: float(self.allocations.get(c, 0.0)) for c in COMPONENTS}
        self._totals = deque(maxlen=self.burn_window + 1)

    @classmethod
    def for_profile(cls, max_tokens: int, profile: str = "default") -> TokenBudget:
        """A budget with the allocations of a named profile (see :data:`PROFILES`)."""
        if profile not in PROFILES:
            raise InvalidArgumentError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
        return cls(max_tokens, dict(PROFILES[profile]))

    @property
    def output_reserve(self) -> int:
        """Tokens kept for the reply: the allocation, but never below min(4000, 10% of the
        window)."""
        floor = min(4000, self.max_tokens // 10)
        return max(math.floor(self.allocations["output_reserved"] * self.max_tokens), floor)

    def limit(self, component: str) -> int:
        """Hard limit of a component in tokens."""
        if component not in COMPONENTS:
            raise InvalidArgumentError(f"unknown component {component!r}; known: {', '.join(COMPONENTS)}")
        if component == "output_reserved":
            return self.output_reserve
        return math.floor(self.allocations[component] * self.max_tokens * self.hard_limit)

    def soft(self, component: str) -> int:
        """Soft limit of a component in tokens."""
        if component == "output_reserved":
            return self.output_reserve
        return math.floor(self.allocations[component] * self.max_tokens * self.soft_limit)

    def check_before_add(self, component: str, tokens: int) -> BudgetCheck:
        """Whether ``tokens`` more fit ``component``: allowed below the hard limit, with level
        "soft" past the soft limit."""
        hard = self.limit(component)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InvalidArgumentError(f"tokens must be an int >= 0, got {tokens!r}")
        after = self.used[component] + tokens
        soft = self.soft(component)
        if after > hard:
            level, message = "hard", f"{component} would use {after:,} of {hard:,} tokens (hard limit)"
        elif after > soft:
            level, message = "soft", f"{component} would use {after:,} tokens, past its soft limit of {soft:,}"
        else:
            level, message = "ok", f"{component} would use {after:,} of {hard:,} tokens"
        return BudgetCheck(level != "hard", level, component, after, soft, hard, message)

    def set_used(self, component: str, tokens: int) -> None:
        """Records what a component uses now."""
        self.limit(component)
        self.used[component] = tokens

    def record_turn(self, total_tokens: int) -> None:
        """Records the prompt total at the end of a turn (for the burn rate)."""
        self._totals.append(total_tokens)

    @property
    def burn_rate(self) -> float:
        """Mean growth of the prompt per turn over the recent turns."""
        totals = list(self._totals)
        if len(totals) < 2:
            return 0.0
        return (totals[-1] - totals[0]) / (len(totals) - 1)

    def turns_until_exhausted(self) -> float | None:
        """Turns until the prompt reaches the window less the output reserve at the current burn
        rate; None when it is not growing."""
        if not self._totals or self.burn_rate <= 0:
            return None
        room = self.max_tokens - self.output_reserve - self._totals[-1]
        return max(room, 0) / self.burn_rate
