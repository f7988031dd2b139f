"""Deprecated: the presets moved to :mod:`her_wrap.runs.presets`, which reads them from ``configs/her.yml``.

Every name of the old module still resolves (``from her_wrap.sb3.presets import BIT_FLIPPING_DQN``),
with a ``DeprecationWarning`` naming the new module.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_NAMES = (
    "BIT_FLIPPING_DQN",
    "BIT_FLIPPING_DQN_LARGE",
    "BIT_FLIPPING_DQN_LARGE_N_ENVS",
    "CONTINUOUS_BIT_FLIPPING_SAC",
    "FETCH_REACH_DDPG",
    "FETCH_REACH_SAC",
    "MANIPULATION_DDPG",
    "MANIPULATION_DDPG_NOISE_STD",
    "MANIPULATION_DDPG_NUM_THREADS",
    "MANIPULATION_DDPG_N_ENVS",
    "PANDA_REACH_SAC",
    "manipulation_ddpg",
)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"her_wrap.sb3.presets is deprecated; import {name} from her_wrap.runs.presets",
        DeprecationWarning,
        stacklevel=2,
    )
    # Imported when asked for: the recipes live in configs/her.yml, which the runs layer reads.
    return getattr(importlib.import_module("her_wrap.runs.presets"), name)


def __dir__() -> list[str]:
    return sorted(_NAMES)
