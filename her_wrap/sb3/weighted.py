"""Former home of the weighted train steps, batch sources and learner mixin; their names now live in:

- :mod:`her_wrap.sb3.train_steps`: :func:`weighted_train`;
- :mod:`her_wrap.sb3.critic_losses`: :func:`td_abs` and the per-learner critic losses;
- :mod:`her_wrap.sb3.batch_sources`: :class:`BatchSource`, :class:`UniformSource` and the other sources;
- :mod:`her_wrap.sb3.learner_mixin`: :class:`WeightedTrainMixin`, :func:`weighted_learner_class`;
- :mod:`her_wrap.sb3.samples`: ``Samples``.

Reading a name here still works and warns (``DeprecationWarning``), naming its new module.
"""

from __future__ import annotations

from her_wrap.lazy_imports import lazy_getattr

__getattr__ = lazy_getattr(
    __name__,
    {
        "weighted_train": "her_wrap.sb3.train_steps",
        "td_abs": "her_wrap.sb3.critic_losses",
        "CriticEvaluation": "her_wrap.sb3.critic_losses",
        "BatchSource": "her_wrap.sb3.batch_sources",
        "UniformSource": "her_wrap.sb3.batch_sources",
        "WeightedTrainMixin": "her_wrap.sb3.learner_mixin",
        "weighted_learner_class": "her_wrap.sb3.learner_mixin",
        "Samples": "her_wrap.sb3.samples",
    },
    moved=True,
)
