"""The off-policy learners a config may name in ``model_class``, and the keyword arguments each accepts.

Names are lower case, as in the zoo (``model_class: sac``); the classes come from stable-baselines3 and
sb3-contrib, imported only when asked for (importing torch takes seconds).
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

from her_wrap.runs.errors import UsageError
from her_wrap.sb3 import learners as learner_table

# Constructor parameters a config may not set as learner kwargs: the env and the policy come from the run,
# the replay buffer is HER's, and action noise is written as noise_type/noise_std.
_NOT_LEARNER_KWARGS = frozenset(
    {
        "self",
        "policy",
        "env",
        "replay_buffer_class",
        "replay_buffer_kwargs",
        "action_noise",
        "_init_setup_model",
    }
)


def canonical_learner_name(name: Any) -> str:
    """Validate a ``model_class`` value and return its lower-case name.

    :param name: ``"sac"``, ``"SAC"``, ...
    :raises UsageError: for anything else, listing the valid names
    """
    try:
        return learner_table.canonical_learner_name(name)
    except ValueError as error:
        raise UsageError(str(error)) from None


@cache
def learner_parameters(name: str) -> dict[str, inspect.Parameter]:
    """Keyword arguments a config may pass to a learner's constructor, by name.

    :param name: a name of :data:`LEARNERS`
    :return: the constructor's parameters minus those the run sets itself
    """
    signature = inspect.signature(learner_table.learner_class(canonical_learner_name(name)))
    return {key: value for key, value in signature.parameters.items() if key not in _NOT_LEARNER_KWARGS}


def learner_policies(name: str) -> tuple[str, ...]:
    """The policy names a learner knows (``MultiInputPolicy``, ``MlpPolicy``...), by learner name."""
    return tuple(getattr(learner_table.learner_class(canonical_learner_name(name)), "policy_aliases", {}))
