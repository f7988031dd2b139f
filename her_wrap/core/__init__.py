"""The numpy-only core: episode storage, goal strategies, relabeling, sum tree, LaBER, standalone buffer.

Nothing here imports a deep-learning framework or gymnasium.
"""

from her_wrap.core.goal_selection import KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy
from her_wrap.core.laber import LaBER, LaBERlazy, LaBERmax, LaBERmean
from her_wrap.core.replay import HindsightReplay
from her_wrap.core.settings import HindsightSettings, LaBERVariant
from her_wrap.core.storage import EpisodeStorage, FieldSpec
from her_wrap.core.sum_tree import ProportionalPrioritizer, SumTree

__all__ = [
    "KEY_TO_GOAL_STRATEGY",
    "EpisodeStorage",
    "FieldSpec",
    "GoalSelectionStrategy",
    "HindsightReplay",
    "HindsightSettings",
    "LaBER",
    "LaBERVariant",
    "LaBERlazy",
    "LaBERmax",
    "LaBERmean",
    "ProportionalPrioritizer",
    "SumTree",
]
