"""Deprecated: the cpprb-API buffer lives in :mod:`her_wrap.core.hindsight_replay_buffer`.

Importing this module still works and gives the same class, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import warnings

from her_wrap.core.hindsight_replay_buffer import CpprbRewardFn, HindsightReplayBuffer

warnings.warn(
    "her_wrap.core.standalone is deprecated: import HindsightReplayBuffer from "
    "her_wrap.core.hindsight_replay_buffer (or from her_wrap).",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["CpprbRewardFn", "HindsightReplayBuffer"]
