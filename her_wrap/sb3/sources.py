"""Former home of the prioritized and LaBER batch sources: they now live in :mod:`her_wrap.sb3.batch_sources`
with the :class:`~her_wrap.sb3.batch_sources.BatchSource` protocol and the uniform source.

Reading a name here still works and warns (``DeprecationWarning``), naming its new module.
"""

from __future__ import annotations

from her_wrap.lazy_imports import lazy_getattr

__getattr__ = lazy_getattr(
    __name__,
    {
        name: "her_wrap.sb3.batch_sources"
        for name in (
            "LABER_VARIANTS",
            "LaBERSource",
            "PrioritizedSource",
            "make_batch_source",
            "select_samples",
        )
    },
    moved=True,
)
