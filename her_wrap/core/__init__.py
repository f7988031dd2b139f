"""The numpy-only core. Nothing here imports a deep-learning framework or gymnasium.

- ``storage`` (with ``storage_writes``): episodes in a ring, one row per step and env column, and their fields;
- ``goal_selection``: the strategies, the goal sources of a goal mix, and the draws of goal rows;
- ``settings``: :class:`HindsightSettings`, every hindsight option parsed once;
- ``replay``: :class:`HindsightReplay`, the engine: storage, a sampler, relabeling, n-step returns;
- ``samplers``: which rows a batch holds (uniform, prioritized, movement-weighted);
- ``n_step``: n-step returns, one step of the sample path;
- ``sum_tree``, ``laber``: the sum tree of prioritized draws, and LaBER;
- ``hindsight_replay_buffer`` (with ``cpprb_arguments``): the cpprb-API buffer.
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
