"""HER over SBX's JAX learners (``sbx-rl``): what sets them apart from the PyTorch ones, in one place.

SBX (Stable Baselines Jax) learners are stable-baselines3 ``OffPolicyAlgorithm`` subclasses whose
updates are jit-compiled JAX functions, so ``HER`` drives them as it drives SB3's own (collection,
``learn``, ``predict``, ``save`` / ``load``), with three differences handled here:

- their ``_setup_model`` builds a replay buffer whatever is already set (SB3's keeps the one set):
  :func:`jax_learner_class` gives the subclass that keeps HER's;
- their ``train`` draws the rows of all its gradient steps in one ``sample(batch_size * gradient_steps)``
  call and cuts that into consecutive batches, while the hindsight buffer relabels a prefix of each
  sample: :class:`~her_wrap.sb3.HerReplayBuffer` built with ``shuffle_rows=True`` (``HER`` builds it so
  for them; the drop-in takes it in ``replay_buffer_kwargs``) returns the rows in the order of
  :func:`shuffled_rows`, so that every batch gets its share of relabeled goals;
- their updates are SBX's own: the options that change HER's PyTorch update step (LaBER, prioritized
  replay, ``clip_target``, ``action_l2``, ``target_update_per_cycle``, ``random_action_prob``) are
  refused with an error naming the learners that have them (:func:`check_jax_learner`).

Importing this module imports neither JAX nor SBX.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th

from her_wrap.core.settings import HindsightSettings
from her_wrap.sb3.batch_sources import select_rows
from her_wrap.sb3.samples import Samples
from her_wrap.sb3.update_options import UpdateOptions

#: The top-level package of SBX's learners (the ``sbx-rl`` distribution).
JAX_LEARNER_PACKAGE = "sbx"

_TORCH_LEARNERS = "stable-baselines3's DQN, SAC, TD3, DDPG or sb3-contrib's QRDQN, TQC"


def is_jax_learner(model_class: type) -> bool:
    """Whether a learner class is an SBX (JAX) learner or a subclass of one (decided without importing JAX)."""
    return any(
        getattr(base, "__module__", "").partition(".")[0] == JAX_LEARNER_PACKAGE
        for base in getattr(model_class, "__mro__", ())
    )


def check_jax_learner(
    model_class: type, policy: str | type, settings: HindsightSettings, update_options: UpdateOptions
) -> None:
    """Refuse what HER cannot do with an SBX learner, naming the option and the fix.

    :param model_class: an SBX learner class
    :param policy: the policy given to HER
    :param settings: the hindsight settings
    :param update_options: the update options
    :raises ValueError: for an option that needs HER's weighted PyTorch update step, or a policy name the
        learner lacks
    """
    name = f"{JAX_LEARNER_PACKAGE}.{model_class.__name__}"
    refused = []
    if settings.laber is not None:
        refused.append(f"laber={settings.laber.value!r}")
    if settings.prioritized:
        refused.append("prioritized=True")
    defaults = UpdateOptions()
    for option, value in update_options.to_dict().items():
        if getattr(update_options, option) != getattr(defaults, option):
            refused.append(f"{option}={value!r}")
    if refused:
        raise ValueError(
            f"{', '.join(refused)}: {name} trains with SBX's own jit-compiled update, and these options "
            f"need HER's weighted PyTorch update step. Remove them to train {name}, or use "
            f"{_TORCH_LEARNERS}, which have them."
        )
    aliases = getattr(model_class, "policy_aliases", {})
    if isinstance(policy, str) and policy not in aliases:
        hint = " (HER flattens the goal dict for it)" if "MlpPolicy" in aliases else ""
        raise ValueError(f"{name} has no {policy}: use one of {', '.join(aliases)}{hint}.")


class _KeepsHindsightBuffer:
    """Makes an SBX learner keep the replay buffer HER set before ``_setup_model``.

    SBX's ``_setup_model`` always builds a buffer of its own; this one is built with a single row (so
    that no ``buffer_size`` worth of memory is asked for) and replaced by the buffer set before, if any
    (``HER.load`` sets HER's right after).
    """

    replay_buffer: Any
    buffer_size: int

    def _setup_model(self) -> None:
        installed = self.replay_buffer
        buffer_size, self.buffer_size = self.buffer_size, 1
        try:
            super()._setup_model()  # type: ignore[misc]
        finally:
            self.buffer_size = buffer_size
        if installed is not None:
            self.replay_buffer = installed


_JAX_CLASSES: dict[type, type] = {}


def jax_learner_class(model_class: type) -> Any:
    """The subclass of an SBX learner class that keeps HER's replay buffer (one per learner class)."""
    if model_class not in _JAX_CLASSES:
        _JAX_CLASSES[model_class] = type(
            f"Hindsight{model_class.__name__}", (_KeepsHindsightBuffer, model_class), {"__module__": __name__}
        )
    return _JAX_CLASSES[model_class]


def shuffled_rows(samples: Samples, rng: np.random.Generator) -> Samples:
    """The same samples in a random row order (every field, dict observations included).

    :param samples: SB3 samples (flat or dict observations; ``discounts`` may be None)
    :param rng: the generator of the order
    """
    order = th.from_numpy(rng.permutation(samples.actions.shape[0])).to(samples.actions.device)
    return select_rows(samples, order)
