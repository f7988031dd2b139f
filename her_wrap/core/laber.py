"""Large Batch Experience Replay (LaBER).

Lahire, Geist, Rachelson (2021), "Large Batch Experience Replay", arXiv:2110.01528 (ICML 2022).

The learner samples a *large* batch of ``m * batch_size`` transitions uniformly from its buffer,
computes surrogate priorities on it (usually ``|TD error|`` with the current critic), and hands them to
one of these functors, which draws ``batch_size`` of them with probability proportional to
``priority + eps`` (with replacement) and returns importance weights for the loss::

    laber = LaBERmean(batch_size=256, m=4, seed=0)
    large = buffer.sample(4 * 256)
    out = laber(priorities=np.abs(td_errors(large)), obs=large.obs, action=large.action)
    loss = (out["weights"] * per_sample_loss(out["obs"], out["action"])).mean()

The three variants differ only in how weights are normalized (``p`` are the draw probabilities over the
large batch, ``idx`` the drawn positions):

- :class:`LaBERmean`: ``w = mean(p) / p[idx]`` (the paper's recommended default; uniform priorities give 1)
- :class:`LaBERlazy`: ``w = 1 / p[idx]`` (uniform priorities give ``m * batch_size``)
- :class:`LaBERmax`: ``w = (1 / p[idx]) / max(1 / p[idx])`` (largest weight in the batch is 1)

The signature is cpprb's, ``LaBERmean(batch_size, m=4, *, eps=1e-6)``, with its defaults and the values
it accepts (``eps=0`` included), plus a keyword-only ``seed``: cpprb code keeps working after changing
the import.

.. note::
    ``batch_size`` and ``m`` follow the core's one rule for counts
    (:func:`~her_wrap.core.settings.check_positive_int`): an integral float such as ``32.0``, which
    cpprb truncates with ``int()``, is refused with the fix (pass ``int(32.0)``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import numpy.typing as npt

from her_wrap.core.settings import LaBERVariant, check_positive_int, is_real

_RESERVED_KEYS = ("weights", "indexes")


class LaBER(ABC):
    """Base functor of Large Batch Experience Replay (Lahire et al. 2021, arXiv:2110.01528).

    Subclasses only implement :meth:`compute_weights`; use :class:`LaBERmean`, :class:`LaBERlazy` or
    :class:`LaBERmax`.

    :param batch_size: size ``B`` of the small batch returned to the learner (>= 1)
    :param m: large-batch multiplier (>= 1); ``priorities`` must have length ``m * batch_size``
    :param eps: added to every priority (>= 0; cpprb's signature and default) so zero-priority
        transitions can still be drawn; with ``eps=0`` they never are, and a large batch whose priorities
        are all 0 is an error at call time
    :param seed: seed or ``np.random.Generator`` for the draws; the same seed gives the same draws.
        A Generator passed in is used (and advanced) as is, not copied.
    """

    def __init__(
        self,
        batch_size: int,
        m: int = 4,
        *,
        eps: float = 1e-6,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.m = check_positive_int(m, "m")
        if not (is_real(eps) and np.isfinite(eps) and eps >= 0):
            raise ValueError(f"eps must be a finite number >= 0 (cpprb's default is 1e-6), got {eps!r}.")
        self.eps = float(eps)
        self._rng = np.random.default_rng(seed)

    @property
    def large_batch_size(self) -> int:
        """``m * batch_size``: the length expected for ``priorities`` and every keyword array."""
        return self.m * self.batch_size

    def __call__(self, *, priorities: npt.ArrayLike, **kwargs: npt.ArrayLike) -> dict[str, np.ndarray]:
        """Draw ``batch_size`` positions of the large batch and sub-sample every keyword array there.

        :param priorities: 1-D, length ``m * batch_size``, finite and ``>= 0`` (e.g. ``|TD error|``);
            position ``i`` is drawn with probability ``(priorities[i] + eps) / sum(priorities + eps)``,
            with replacement (a position can appear several times)
        :param kwargs: arrays whose first dimension is ``m * batch_size`` (observations, actions, ...);
            each is returned indexed at the drawn positions (new arrays; inputs are not modified)
        :return: dict with every keyword array sub-sampled, plus ``"weights"`` (float32, shape
            ``(batch_size,)``) and ``"indexes"`` (int64 positions **in the large batch**, not in the
            replay buffer: map them back through the large batch's own buffer indexes if you update
            buffer priorities)
        :raises ValueError: on wrongly shaped, non-finite or negative priorities, priorities all 0 with
            ``eps=0`` (nothing can be drawn), or a keyword array whose first dimension is not
            ``m * batch_size`` or whose name is ``weights`` / ``indexes``
        """
        expected = self.large_batch_size
        prio = np.asarray(priorities)
        if prio.ndim != 1 or prio.shape[0] != expected:
            raise ValueError(
                f"priorities must be 1-D of length m * batch_size = {self.m} * {self.batch_size} = {expected}, "
                f"got shape {prio.shape}; sample a large batch of {expected} transitions and pass one "
                "priority per transition (flatten a (N, 1) array with .ravel())."
            )
        if not (np.issubdtype(prio.dtype, np.number) or prio.dtype == np.bool_) or np.iscomplexobj(prio):
            raise TypeError(
                f"priorities must be real numbers, got dtype {prio.dtype}; pass np.abs(td_errors)."
            )
        prio = prio.astype(np.float64, copy=False)
        if not np.all(np.isfinite(prio)):
            raise ValueError(
                "priorities must be finite, got NaN or inf at positions "
                f"{np.flatnonzero(~np.isfinite(prio)).tolist()}; check the TD errors that produced them."
            )
        if np.any(prio < 0):
            raise ValueError(
                "priorities must be >= 0, got negative values at positions "
                f"{np.flatnonzero(prio < 0).tolist()}; pass absolute TD errors (np.abs)."
            )
        arrays: dict[str, np.ndarray] = {}
        for key, value in kwargs.items():
            if key in _RESERVED_KEYS:
                raise ValueError(
                    f"Keyword {key!r} is reserved for the output of LaBER; rename that array (e.g. '{key}_in')."
                )
            array = np.asarray(value)
            if array.ndim == 0 or array.shape[0] != expected:
                raise ValueError(
                    f"Keyword array {key!r} has shape {array.shape}, but its first dimension must be "
                    f"m * batch_size = {expected} (one row per priority); pass the large batch's {key!r}."
                )
            arrays[key] = array

        shifted = prio + self.eps
        largest = shifted.max()
        if largest == 0:
            raise ValueError(
                f"priorities are all 0 and eps is 0, so no transition of the large batch can be drawn; "
                f"construct {type(self).__name__} with eps > 0 (cpprb's default, 1e-6) or pass priorities "
                "with at least one value > 0."
            )
        # Dividing by the max first keeps the sum finite even for priorities near the float64 limit.
        shifted /= largest
        probabilities = shifted / shifted.sum()
        cumulative = np.cumsum(probabilities)
        # Inverse-CDF draw: side="right" skips positions of probability 0 (their cumulative value equals
        # the previous one), and the clip to the last drawable position guards a draw that rounds up to
        # cumulative[-1], so a position of probability 0 (possible with eps=0) is never picked.
        last_drawable = expected - 1 - int(np.argmax(probabilities[::-1] > 0))
        draws = self._rng.random(self.batch_size) * cumulative[-1]
        indexes = np.minimum(np.searchsorted(cumulative, draws, side="right"), last_drawable).astype(np.int64)

        out = {key: array[indexes] for key, array in arrays.items()}
        out["weights"] = self.compute_weights(probabilities, indexes).astype(np.float32)
        out["indexes"] = indexes
        return out

    @abstractmethod
    def compute_weights(
        self, probabilities: npt.NDArray[np.float64], indexes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """Importance weights of the drawn positions; the one method the variants differ in.

        :param probabilities: draw probability of every position of the large batch (sums to 1)
        :param indexes: the drawn positions, shape ``(batch_size,)``
        :return: one weight per drawn position
        """


class LaBERmean(LaBER):
    """LaBER with ``w = mean(p) / p[idx]``: weights are 1 for uniform priorities (the paper's default).

    See :class:`LaBER` for the parameters.
    """

    def compute_weights(
        self, probabilities: npt.NDArray[np.float64], indexes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """``mean(p) / p[idx]``, where ``mean(p) = 1 / (m * batch_size)``; see :meth:`LaBER.compute_weights`."""
        return probabilities.mean() / probabilities[indexes]


class LaBERlazy(LaBER):
    """LaBER with ``w = 1 / p[idx]``: unnormalized, ``m * batch_size`` for uniform priorities.

    Scale your learning rate accordingly. See :class:`LaBER` for the parameters.
    """

    def compute_weights(
        self, probabilities: npt.NDArray[np.float64], indexes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """``1 / p[idx]``; see :meth:`LaBER.compute_weights`."""
        return 1.0 / probabilities[indexes]


class LaBERmax(LaBER):
    """LaBER with ``w = (1 / p[idx]) / max(1 / p[idx])``: the largest weight *in the small batch* is 1.

    See :class:`LaBER` for the parameters.
    """

    def compute_weights(
        self, probabilities: npt.NDArray[np.float64], indexes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """``(1 / p[idx]) / max(1 / p[idx])``, the max over the drawn positions; see :meth:`LaBER.compute_weights`."""
        inverse = 1.0 / probabilities[indexes]
        return inverse / inverse.max()


#: The functor class of each LaBER variant (:attr:`~her_wrap.core.settings.HindsightSettings.laber`).
LABER_VARIANTS: dict[LaBERVariant, type[LaBER]] = {
    LaBERVariant.MEAN: LaBERmean,
    LaBERVariant.LAZY: LaBERlazy,
    LaBERVariant.MAX: LaBERmax,
}
