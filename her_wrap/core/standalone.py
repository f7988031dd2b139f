"""Deprecated: the cpprb-API buffer lives in :mod:`her_wrap.core.hindsight_replay_buffer`."""

from her_wrap.core.hindsight_replay_buffer import CpprbRewardFn, HindsightReplayBuffer
from her_wrap.core.moved import warn_module_moved

warn_module_moved(__name__, "her_wrap.core.hindsight_replay_buffer")

__all__ = ["CpprbRewardFn", "HindsightReplayBuffer"]
