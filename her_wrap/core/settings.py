"""The settings of hindsight sampling: one frozen, validated object from the public API to the sampler.

``HER(...)``, the drop-in ``HerReplayBuffer``, the cpprb-compatible ``HindsightReplayBuffer``, the config
files and the Optuna search space all hand their raw values (names in any case, enum members, mappings)
to :class:`HindsightSettings`, which parses each of them once, and pass the object down as it is: the
goal selection strategy stays a :class:`GoalSelectionStrategy` member and LaBER a :class:`LaBERVariant`
all the way to where they are used. Strings appear only at the edges (YAML files, the model zip's JSON),
through :meth:`HindsightSettings.to_dict` and :meth:`HindsightSettings.from_dict`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar, overload

import numpy as np

from her_wrap.core import goal_selection
from her_wrap.core.goal_selection import GoalSelectionStrategy, GoalSourceMember, member_named


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


def is_integer(value: Any) -> bool:
    """Whether ``value`` is an integer: a Python or numpy integer, not a bool, not a float (32.0 is not)."""
    return not isinstance(value, bool) and isinstance(value, int | np.integer)


def is_real(value: Any) -> bool:
    """Whether ``value`` is a real number: a Python or numpy int or float, not a bool, not complex."""
    return not isinstance(value, bool) and isinstance(value, int | float | np.integer | np.floating)


def check_positive_int(value: Any, name: str, meaning: str = "") -> int:
    """The one rule for counts (sizes, multipliers, steps) in the core: an integer >= 1.

    Python and numpy integers pass; a bool, a float (even an integral one such as 32.0) or anything else
    is refused with the fix.

    :param value: the value given
    :param name: the parameter's name, for the error
    :param meaning: what the parameter does, for the error (optional)
    :return: ``value`` as a Python int
    :raises ValueError: when ``value`` is not an integer >= 1
    """
    if is_integer(value) and value >= 1:
        return int(value)
    fix = ""
    if is_real(value) and math.isfinite(value) and float(value).is_integer() and value >= 1:
        fix = f"; pass int({value!r}) = {int(value)}"
    detail = f" ({meaning})" if meaning else ""
    raise ValueError(f"{name} must be an integer >= 1{detail}, got {value!r}{fix}.")


def _check_positive(name: str, value: Any, meaning: str) -> None:
    if not is_real(value) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a number > 0 ({meaning}), got {value!r}.")


@dataclass(frozen=True, init=False)
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
    :param beta: PER's importance-sampling exponent in ``[0, 1]`` (default 0.4): what a prioritized
        sample uses when the caller passes no ``beta`` (the learners anneal it from this value to 1)
    :param laber: Large Batch Experience Replay weighting (``mean``, ``lazy``, ``max``, or None for none);
        needs a learner whose update takes sample weights (``HER``'s)
    :param laber_m: LaBER's large batch is ``laber_m`` times the batch size
    :param goal_mix: relabeled goals drawn from several sources with given shares, e.g.
        ``{"future": 0.6, "desired": 0.2, "random": 0.2}`` (see
        :class:`~her_wrap.core.goal_selection.GoalSource`); each relabeled transition draws its source
        independently. Shares are normalized to sum to 1. None (default): every
        relabeled goal comes from ``goal_selection_strategy``; with a mix, that strategy is not used.
    :param n_steps: n-step returns: a sample's reward sums ``gamma ** i * r_{t+i}`` over up to ``n_steps``
        steps of its episode, every one recomputed for the sample's (relabeled) goal, stopping where the
        episode ends or the goal is reached (terminated); the next observation is the one after the last
        step summed and ``discounts`` is ``gamma ** steps``. 1 (default): one-step transitions
    :param movement_clip: draw transitions by how far their episode moved its achieved goal (see
        :mod:`her_wrap.core.samplers`): each is drawn with weight ``movement_floor + min(path,
        movement_clip)``, ``path`` the summed distance between the episode's consecutive achieved goals
        (in the goal's units, e.g. metres for Fetch). None (default): uniform draws. Not with
        ``prioritized``, which sets the same draw weights from TD errors
    :param movement_floor: the draw weight of a transition whose episode moved nothing (> 0)
    :raises ValueError: for any value out of range, naming the valid ones
    """

    n_sampled_goal: int
    goal_selection_strategy: GoalSelectionStrategy
    online: bool
    prioritized: bool
    alpha: float
    beta: float
    laber: LaBERVariant | None
    laber_m: int
    goal_mix: tuple[tuple[GoalSourceMember, float], ...] | None
    n_steps: int
    movement_clip: float | None
    movement_floor: float

    def __init__(
        self,
        n_sampled_goal: int = 4,
        goal_selection_strategy: str | Enum = GoalSelectionStrategy.FUTURE,
        online: bool = True,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        laber: str | LaBERVariant | None = None,
        laber_m: int = 4,
        goal_mix: Mapping[Any, float] | Iterable[tuple[Any, float]] | None = None,
        n_steps: int = 1,
        movement_clip: float | None = None,
        movement_floor: float = 0.05,
    ) -> None:
        # The one place these values are parsed; every entry point passes them here as it got them.
        set_field = object.__setattr__  # a frozen dataclass sets its fields in its own __init__ only
        if not is_integer(n_sampled_goal) or n_sampled_goal < 0:
            raise ValueError(
                f"n_sampled_goal must be an integer >= 0 (relabeled goals per real one), got {n_sampled_goal!r}."
            )
        set_field(self, "n_sampled_goal", int(n_sampled_goal))
        set_field(self, "goal_selection_strategy", GoalSelectionStrategy.parse(goal_selection_strategy))
        for name, flag in (("online", online), ("prioritized", prioritized)):
            if not isinstance(flag, bool | np.bool_):
                raise ValueError(f"{name} must be True or False, got {flag!r}.")
            set_field(self, name, bool(flag))
        set_field(self, "laber", None if laber is None else LaBERVariant.parse(laber))
        for name, value, meaning in (
            ("laber_m", laber_m, "the large batch is laber_m * batch_size"),
            ("n_steps", n_steps, "1: one-step returns"),
        ):
            set_field(self, name, check_positive_int(value, name, meaning))
        if self.laber is not None and self.prioritized:
            raise ValueError(
                "Choose one of laber and prioritized: LaBER already weights samples by their TD error."
            )
        if not is_real(alpha) or not math.isfinite(alpha) or alpha < 0:
            raise ValueError(f"alpha must be >= 0 (0 is uniform sampling), got {alpha!r}.")
        if not is_real(beta) or not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta must lie in [0, 1] (1 fully corrects the sampling bias), got {beta!r}.")
        set_field(self, "alpha", float(alpha))
        set_field(self, "beta", float(beta))
        set_field(self, "goal_mix", None if goal_mix is None else goal_selection.parse_goal_mix(goal_mix))
        if movement_clip is not None:
            _check_positive(
                "movement_clip", movement_clip, "the longest path of an achieved goal counted; None: off"
            )
        _check_positive("movement_floor", movement_floor, "the draw weight of an episode that moved nothing")
        set_field(self, "movement_clip", None if movement_clip is None else float(movement_clip))
        set_field(self, "movement_floor", float(movement_floor))
        if self.movement_clip is not None and self.prioritized:
            raise ValueError(
                "Choose one of movement_clip and prioritized: both set how often each transition is drawn."
            )
        if self.goal_mix is not None and not self.online:
            raise ValueError(
                "goal_mix draws each relabeled goal's source at sample time: use it with online=True."
            )

    @property
    def goal_sources(self) -> tuple[tuple[GoalSourceMember, float], ...]:
        """Sources of relabeled goals with their shares: :attr:`goal_mix`, or the strategy alone."""
        if self.goal_mix is not None:
            return self.goal_mix
        return ((self.goal_selection_strategy, 1.0),)

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


_Value = TypeVar("_Value")


class SettingsField(Generic[_Value]):
    """A read-only attribute of an object that keeps a ``settings``: one field of those settings.

    The objects built from a :class:`HindsightSettings` show some of its fields as their own attributes
    (``buffer.online``); each is one line, ``online = SettingsField("online", "docstring")``.

    :param field: the name of the :class:`HindsightSettings` field to read
    :param doc: the attribute's docstring
    """

    def __init__(self, field: str, doc: str) -> None:
        self.field = field
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type) -> SettingsField[_Value]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> _Value: ...

    def __get__(self, instance: object | None, owner: type) -> Any:
        if instance is None:
            return self
        return getattr(instance.settings, self.field)  # type: ignore[attr-defined]

    def __set__(self, instance: object, value: Any) -> None:
        raise AttributeError(
            f"{self.name} is read from the hindsight settings: build a new buffer with other settings."
        )


#: Names of the settings, in the constructor's order.
SETTING_NAMES: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(HindsightSettings))
