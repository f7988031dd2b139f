"""The settings of hindsight sampling: one frozen, validated object from the public API to the sampler.

``HER(...)``, the drop-in ``HerReplayBuffer``, the cpprb-compatible ``HindsightReplayBuffer``, the config
files and the Optuna search space all build a :class:`HindsightSettings` and pass it down as it is: the
goal selection strategy stays a :class:`GoalSelectionStrategy` member and LaBER a :class:`LaBERVariant`
all the way to where they are used. Strings appear only at the edges (YAML files, the model zip's JSON),
through :meth:`HindsightSettings.to_dict` and :meth:`HindsightSettings.from_dict`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from her_wrap.core.strategies import GoalSelectionStrategy, member_named


class LaBERVariant(str, Enum):
    """How LaBER weights the samples it keeps (Lahire et al. 2021); see :mod:`her_wrap.core.laber`."""

    MEAN = "mean"
    LAZY = "lazy"
    MAX = "max"

    @classmethod
    def parse(cls, value: str | LaBERVariant) -> LaBERVariant:
        """Accept a member, its name in any case, or cpprb's class name (``"LaBERmean"``).

        :raises ValueError: for anything else, listing the valid names
        """
        member = member_named(cls, value, prefix="laber")
        if member is not None:
            return member
        valid = sorted(member.value for member in cls)
        raise ValueError(f"Unknown laber={value!r}; use one of {valid} or None (no LaBER).")


class GoalSource(str, Enum):
    """Where a relabeled goal may come from, in a :attr:`HindsightSettings.goal_mix`.

    The first four are the goal selection strategies (achieved goals of the transition's own episode, or
    of any stored one for ``random``); ``desired`` takes the desired goal of a stored transition of any
    episode: goals the env itself asks for, which achieved goals may never have reached.
    """

    FUTURE = "future"
    FINAL = "final"
    EPISODE = "episode"
    RANDOM = "random"
    DESIRED = "desired"

    @classmethod
    def parse(cls, value: str | Enum) -> GoalSource:
        """Accept a member, a :class:`GoalSelectionStrategy`, or a name in any case.

        :raises ValueError: for anything else, listing the valid names
        """
        member = member_named(cls, value)
        if member is not None:
            return member
        valid = ", ".join(repr(member.value) for member in cls)
        raise ValueError(f"Unknown goal source {value!r} in goal_mix; use {valid}.")

    @property
    def strategy(self) -> GoalSelectionStrategy | None:
        """The goal selection strategy that draws this source's goals, None for ``desired``."""
        return None if self is GoalSource.DESIRED else GoalSelectionStrategy(self.value)


def _is_integer(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | np.integer)


def _is_real(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float | np.number)


@dataclass(frozen=True)
class HindsightSettings:
    """How batches are drawn and relabeled in hindsight.

    :param n_sampled_goal: ``k``: relabeled goals per real one. Online, a share ``k / (k + 1)`` of every
        batch gets new goals; offline, ``k`` goals are frozen per transition when its episode ends. 0
        turns relabeling off.
    :param goal_selection_strategy: ``future`` (inclusive of the transition's own step), ``final``,
        ``episode`` or ``random``: a :class:`GoalSelectionStrategy`, its name in any case, or
        stable-baselines3's own ``GoalSelectionStrategy`` member
    :param online: relabel at sample time (default), or once when each episode ends (stable-baselines v2
        and cpprb)
    :param prioritized: proportional prioritized replay (PER) over stored transitions
    :param alpha: PER's priority exponent (0: uniform)
    :param beta: PER's importance exponent at the start of training (annealed to 1 by the learners)
    :param laber: Large Batch Experience Replay weighting (``mean``, ``lazy``, ``max``, or None for none);
        needs a learner whose update takes sample weights (``HER``'s)
    :param laber_m: LaBER's large batch is ``laber_m`` times the batch size
    :param goal_mix: relabeled goals drawn from several sources with given shares, e.g.
        ``{"future": 0.6, "desired": 0.2, "random": 0.2}`` (see :class:`GoalSource`); each relabeled
        transition draws its source independently. Shares are normalized to sum to 1. None (default): every
        relabeled goal comes from ``goal_selection_strategy``; with a mix, that strategy is not used.
    :param n_steps: n-step returns: a sample's reward sums ``gamma ** i * r_{t+i}`` over up to ``n_steps``
        steps of its episode, every one recomputed for the sample's (relabeled) goal, stopping where the
        episode ends or the goal is reached (terminated); the next observation is the one after the last
        step summed and ``discounts`` is ``gamma ** steps``. 1 (default): one-step transitions
    :raises ValueError: for any value out of range, naming the valid ones
    """

    n_sampled_goal: int = 4
    goal_selection_strategy: GoalSelectionStrategy = GoalSelectionStrategy.FUTURE
    online: bool = True
    prioritized: bool = False
    alpha: float = 0.6
    beta: float = 0.4
    laber: LaBERVariant | None = None
    laber_m: int = 4
    goal_mix: tuple[tuple[GoalSource, float], ...] | None = None
    n_steps: int = 1

    def __post_init__(self) -> None:
        set_field = object.__setattr__  # a frozen dataclass normalizes its own fields only here
        if not _is_integer(self.n_sampled_goal) or self.n_sampled_goal < 0:
            raise ValueError(
                f"n_sampled_goal must be an integer >= 0 (relabeled goals per real one), "
                f"got {self.n_sampled_goal!r}."
            )
        set_field(self, "n_sampled_goal", int(self.n_sampled_goal))
        set_field(self, "goal_selection_strategy", GoalSelectionStrategy.parse(self.goal_selection_strategy))
        for name in ("online", "prioritized"):
            value = getattr(self, name)
            if not isinstance(value, bool | np.bool_):
                raise ValueError(f"{name} must be True or False, got {value!r}.")
            set_field(self, name, bool(value))
        if self.laber is not None:
            set_field(self, "laber", LaBERVariant.parse(self.laber))
        if not _is_integer(self.laber_m) or self.laber_m < 1:
            raise ValueError(
                f"laber_m must be an integer >= 1 (the large batch is laber_m * batch_size), "
                f"got {self.laber_m!r}."
            )
        set_field(self, "laber_m", int(self.laber_m))
        if not _is_integer(self.n_steps) or self.n_steps < 1:
            raise ValueError(f"n_steps must be an integer >= 1 (1: one-step returns), got {self.n_steps!r}.")
        set_field(self, "n_steps", int(self.n_steps))
        if self.laber is not None and self.prioritized:
            raise ValueError(
                "Choose one of laber and prioritized: LaBER already weights samples by their TD error."
            )
        if not _is_real(self.alpha) or not math.isfinite(self.alpha) or self.alpha < 0:
            raise ValueError(f"alpha must be >= 0 (0 is uniform sampling), got {self.alpha!r}.")
        if not _is_real(self.beta) or not 0.0 <= self.beta <= 1.0:
            raise ValueError(
                f"beta must lie in [0, 1] (1 fully corrects the sampling bias), got {self.beta!r}."
            )
        set_field(self, "alpha", float(self.alpha))
        set_field(self, "beta", float(self.beta))
        if self.goal_mix is not None:
            set_field(self, "goal_mix", parse_goal_mix(self.goal_mix))
            if not self.online:
                raise ValueError(
                    "goal_mix draws each relabeled goal's source at sample time: use it with online=True."
                )

    @property
    def goal_sources(self) -> tuple[tuple[GoalSource, float], ...]:
        """Sources of relabeled goals with their shares: :attr:`goal_mix`, or the strategy alone."""
        if self.goal_mix is not None:
            return self.goal_mix
        return _SINGLE_SOURCES[self.goal_selection_strategy]

    @property
    def weighted(self) -> bool:
        """Whether the learner's update must take per-sample weights (PER or LaBER)."""
        return self.prioritized or self.laber is not None

    def replace(self, **changes: Any) -> HindsightSettings:
        """A copy with some settings changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def as_kwargs(self) -> dict[str, Any]:
        """The settings as keyword arguments of ``HER(...)`` (enum members kept as they are)."""
        return {name: getattr(self, name) for name in SETTING_NAMES}

    def to_dict(self) -> dict[str, Any]:
        """Plain values for JSON and YAML: enums as their names (``"future"``, ``"mean"``)."""
        values = self.as_kwargs()
        values["goal_selection_strategy"] = self.goal_selection_strategy.value
        values["laber"] = None if self.laber is None else self.laber.value
        if self.goal_mix is not None:
            values["goal_mix"] = {source.value: share for source, share in self.goal_mix}
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> HindsightSettings:
        """Settings from plain values (what :meth:`to_dict` wrote, or a config file's ``her`` section).

        :raises ValueError: for a key that is not a setting (with the closest one), or a bad value
        """
        unknown = [key for key in values if key not in SETTING_NAMES]
        if unknown:
            hints = []
            for key in unknown:
                close = difflib.get_close_matches(str(key), SETTING_NAMES, n=1)
                hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ValueError(
                f"Unknown hindsight setting {', '.join(hints)}; the settings are {', '.join(SETTING_NAMES)}."
            )
        return cls(**values)


def parse_goal_mix(mix: Any) -> tuple[tuple[GoalSource, float], ...]:
    """Normalized ``(source, share)`` pairs, in :class:`GoalSource` order, from a mapping or pairs."""
    try:
        pairs = [(source, share) for source, share in (mix.items() if isinstance(mix, Mapping) else mix)]
    except (TypeError, ValueError):
        raise ValueError(
            f"goal_mix must map goal sources to shares, e.g. {{'future': 0.8, 'desired': 0.2}}; got {mix!r}."
        ) from None
    shares: dict[GoalSource, float] = {}
    for source, share in pairs:
        parsed = GoalSource.parse(source)
        if parsed in shares:
            raise ValueError(f"goal_mix names {parsed.value!r} twice.")
        shares[parsed] = share
    for source, share in shares.items():
        if not _is_real(share) or not math.isfinite(share) or share < 0:
            raise ValueError(f"goal_mix share of {source.value!r} must be a number >= 0, got {share!r}.")
    total = float(sum(shares.values()))
    if total <= 0:
        raise ValueError(f"goal_mix shares must sum to more than 0, got {mix!r}.")
    return tuple((source, float(shares[source]) / total) for source in GoalSource if source in shares)


# The sources of each single strategy, built once (every sample reads them).
_SINGLE_SOURCES = {strategy: ((GoalSource(strategy.value), 1.0),) for strategy in GoalSelectionStrategy}

#: Names of the settings, in the constructor's order.
SETTING_NAMES: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(HindsightSettings))
