"""Sum tree and proportional prioritized replay (Schaul et al. 2016, arXiv:1511.05952).

:class:`SumTree` stores one non-negative float64 value per slot and answers "which slot does this
prefix sum fall into" for a whole batch of prefixes in one vectorized descent (O(batch * log capacity),
never a scan of the whole tree). :class:`ProportionalPrioritizer` builds proportional prioritized
sampling on top of it: slot ``i`` is drawn with probability ``(p_i + eps) ** alpha / total``.

Both classes only know slot numbers ``0 .. capacity - 1``; which stored row a slot is, and when a row is
overwritten, is the storage's business (call :meth:`ProportionalPrioritizer.zero` for overwritten rows
whose new content should not be drawn yet, then :meth:`ProportionalPrioritizer.mark_new`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from her_wrap.core.settings import check_positive_int, is_real


def _as_slot_indexes(indexes: Any, capacity: int, name: str = "indexes") -> npt.NDArray[np.int64]:
    """Check that ``indexes`` is a 1-D integer array of slots in ``[0, capacity)``; return it as int64."""
    array = np.asarray(indexes)
    if array.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D, got shape {array.shape}; pass a flat array of slot numbers "
            "(use np.ravel or np.atleast_1d)."
        )
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(
            f"{name} must be integers, got dtype {array.dtype}; cast the slot numbers with .astype(np.int64)."
        )
    low, high = int(array.min()), int(array.max())
    if low < 0 or high >= capacity:
        raise ValueError(
            f"{name} must lie in [0, {capacity}) (the capacity), got values from {low} to {high}; "
            "pass slot numbers of this tree, not negative or wrapped-around positions."
        )
    return array.astype(np.int64, copy=False)


def _as_non_negative_values(values: Any, shape: tuple[int, ...], name: str) -> npt.NDArray[np.float64]:
    """Check that ``values`` has ``shape`` and is finite and ``>= 0``; return it as float64."""
    array = np.asarray(values)
    if array.shape != shape:
        raise ValueError(
            f"{name} has shape {array.shape} but the indexes have shape {shape}; pass one value per index."
        )
    if array.size and not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise TypeError(f"{name} must be numbers, got dtype {array.dtype}; pass a float array.")
    if np.iscomplexobj(array):
        raise TypeError(f"{name} must be real numbers, got dtype {array.dtype}; pass np.abs(...) of them.")
    array = array.astype(np.float64, copy=False)
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"{name} must be finite, got NaN or inf at positions {np.flatnonzero(~np.isfinite(array)).tolist()}; "
            "check the loss / TD errors that produced them."
        )
    if np.any(array < 0):
        raise ValueError(
            f"{name} must be >= 0, got negative values at positions {np.flatnonzero(array < 0).tolist()}; "
            "pass absolute TD errors (np.abs)."
        )
    return array


#: Up to this many slots, :meth:`SumTree.write` walks the tree slot by slot instead of level by level.
_SCALAR_WRITES = 16


class SumTree:
    """Array-backed binary sum tree over ``capacity`` float64 slots, vectorized over batches.

    Layout: the leaves live at ``[size, 2 * size)`` of one array, where ``size`` is ``capacity`` rounded
    up to a power of two; node ``k`` holds the sum of nodes ``2k`` and ``2k + 1``; the root is node 1.
    Leaves past ``capacity`` stay 0 forever, so they are never found.

    :param capacity: number of slots (>= 1); every slot starts at 0
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = check_positive_int(capacity, "capacity")
        size = 1
        while size < self._capacity:
            size *= 2
        self._size = size
        self._depth = size.bit_length() - 1  # number of levels below the root
        self._nodes = np.zeros(2 * size, dtype=np.float64)

    @property
    def capacity(self) -> int:
        """Number of slots; valid indexes are ``0 .. capacity - 1``."""
        return self._capacity

    def total(self) -> float:
        """Sum of all slot values.

        :return: the root of the tree, as a Python float
        """
        return float(self._nodes[1])

    def get(self, indexes: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Read slot values.

        :param indexes: 1-D integer slot numbers in ``[0, capacity)``
        :return: float64 copy of the values, same shape as ``indexes``
        """
        slots = _as_slot_indexes(indexes, self._capacity)
        return self._nodes[self._size + slots]

    def update(self, indexes: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """Set slot values and recompute the sums above them.

        Input is validated before anything changes. When ``indexes`` repeats a slot, the *last* value
        given for it wins (as a Python loop of single writes would do). Parent sums are recomputed from
        their children rather than shifted by deltas, so rounding error never accumulates.

        :param indexes: 1-D integer slot numbers in ``[0, capacity)``
        :param values: finite values ``>= 0``, same shape as ``indexes``
        """
        slots = _as_slot_indexes(indexes, self._capacity)
        new_values = _as_non_negative_values(values, slots.shape, "values")
        self.write(slots, new_values)

    def write(self, slots: npt.NDArray[np.int64], values: npt.NDArray[np.float64]) -> None:
        """:meth:`update` without its checks, for callers whose slots and values are known to be valid
        (1-D int64 slots in range, finite float64 values ``>= 0`` of the same shape)."""
        if slots.size == 0:
            return
        nodes = self._nodes
        if slots.size <= _SCALAR_WRITES:
            # A few slots (one env step's): a scalar walk up the tree beats a vector op per level. Writing
            # them in order makes the last value of a repeated slot win.
            for slot, value in zip(slots.tolist(), values.tolist(), strict=True):
                node = self._size + slot
                nodes[node] = value
                while node > 1:
                    node //= 2
                    nodes[node] = nodes[2 * node] + nodes[2 * node + 1]
            return
        # np.unique on the reversed array finds each slot's first occurrence there, i.e. its last write.
        unique_slots, first_in_reversed = np.unique(slots[::-1], return_index=True)
        level = self._size + unique_slots
        nodes[level] = values[::-1][first_in_reversed]
        for _ in range(self._depth):
            # Parents repeat where siblings were both written; each copy gets the same sum, so no dedupe.
            level = level // 2
            nodes[level] = nodes[2 * level] + nodes[2 * level + 1]

    def find(self, prefix_sums: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Find, for each prefix sum ``s``, the slot ``i`` with ``cumsum[i - 1] <= s < cumsum[i]``.

        Slot ``i`` owns the half-open interval ``[cumsum[i - 1], cumsum[i])``, so a zero-valued slot owns
        nothing and is never returned. ``s`` is clipped to ``[0, total]``; ``s >= total`` (which floating
        error can produce) gives the last slot with a positive value. The descent never enters a subtree
        whose sum is 0, so the result always has a positive value and is ``< capacity``.

        :param prefix_sums: finite numbers, any shape; usually drawn uniformly from ``[0, total())``
        :return: int64 slot numbers, same shape as ``prefix_sums``
        :raises ValueError: if the total is 0 (nothing to find) or a prefix sum is not finite
        """
        total = self._nodes[1]
        if not total > 0:
            raise ValueError(
                "find() needs a positive total, but every slot is 0; update some slots with positive values first."
            )
        remaining = np.array(prefix_sums, dtype=np.float64)
        if not np.all(np.isfinite(remaining)):
            raise ValueError("prefix_sums must be finite; draw them from [0, total()).")
        remaining = np.clip(remaining, 0.0, total)
        node = np.ones(remaining.shape, dtype=np.int64)
        for _ in range(self._depth):
            left_child = 2 * node
            left_sum = self._nodes[left_child]
            right_sum = self._nodes[left_child + 1]
            # Invariant: the current node's sum is > 0. Go right only into a positive subtree; when the
            # right sum is 0 the left one equals the node's sum, so it is positive too.
            go_right = (remaining >= left_sum) & (right_sum > 0)
            remaining = np.where(go_right, remaining - left_sum, remaining)
            node = left_child + go_right
        return node - self._size


class ProportionalPrioritizer:
    """Proportional prioritized replay (Schaul et al. 2016, "Prioritized Experience Replay").

    Slot ``i`` stores ``(priority_i + eps) ** alpha`` in a :class:`SumTree` and is drawn with probability
    ``P(i) = stored_i / sum_j stored_j``. Slots start unsampleable (value 0) until :meth:`mark_new`.

    .. note::
        ``priorities`` passed in are raw (e.g. ``|TD error|``); the ``+ eps`` and ``** alpha`` are applied
        here. ``alpha = 0`` gives uniform sampling over the marked slots.

    :param capacity: number of slots (>= 1), usually the replay buffer size
    :param alpha: priority exponent (>= 0); 0 is uniform, 1 is fully proportional
    :param eps: added to every priority (> 0) so a transition with zero TD error can still be drawn
    """

    def __init__(self, capacity: int, *, alpha: float = 0.6, eps: float = 1e-6) -> None:
        if not (np.isfinite(alpha) and alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0 (0 = uniform sampling), got {alpha!r}.")
        if not (np.isfinite(eps) and eps > 0):
            raise ValueError(
                f"eps must be a finite number > 0 so zero-priority rows stay sampleable, got {eps!r}."
            )
        self._tree = SumTree(capacity)
        self.alpha = float(alpha)
        self.eps = float(eps)
        self._max_priority = 1.0

    @property
    def capacity(self) -> int:
        """Number of slots."""
        return self._tree.capacity

    @property
    def max_priority(self) -> float:
        """Largest raw priority seen so far (starts at 1.0, never decreases); new rows get it."""
        return self._max_priority

    def total(self) -> float:
        """Sum of the stored values ``(priority + eps) ** alpha`` over all slots.

        :return: the sum tree's total
        """
        return self._tree.total()

    def _stored_value(self, priorities: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return (priorities + self.eps) ** self.alpha

    def mark_new(self, indexes: npt.ArrayLike) -> None:
        """Give freshly written rows the current :attr:`max_priority`, so each is drawn soon at least once.

        :param indexes: 1-D integer slots in ``[0, capacity)``
        """
        slots = _as_slot_indexes(indexes, self.capacity)
        priorities = np.full(slots.shape, self._max_priority, dtype=np.float64)
        self._tree.write(slots, self._stored_value(priorities))

    def update_priorities(self, indexes: npt.ArrayLike, priorities: npt.ArrayLike) -> None:
        """Set raw priorities (typically ``|TD error|``) for sampled slots.

        Everything is validated before the tree changes: on error the tree is exactly as before. When a
        slot repeats in ``indexes`` (sampling is with replacement), its last priority wins.

        :param indexes: 1-D integer slots in ``[0, capacity)``, e.g. those returned by :meth:`sample`
        :param priorities: finite raw priorities ``>= 0``, same shape as ``indexes``
        :raises ValueError: on shape mismatch, non-1-D input, out-of-range slots, NaN/inf or negatives
        :raises TypeError: on non-integer indexes or non-numeric priorities
        """
        slots, raw = self.check_update(indexes, priorities)
        if slots.size == 0:
            return
        self._tree.write(slots, self._stored_value(raw))
        self._max_priority = max(self._max_priority, float(raw.max()))

    def check_update(
        self, indexes: npt.ArrayLike, priorities: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Validate the arguments of :meth:`update_priorities` without changing anything.

        :return: the slots as int64 and the priorities as float64
        :raises ValueError: on shape mismatch, non-1-D input, out-of-range slots, NaN/inf or negatives
        :raises TypeError: on non-integer indexes or non-numeric priorities
        """
        slots = _as_slot_indexes(indexes, self.capacity)
        return slots, _as_non_negative_values(priorities, slots.shape, "priorities")

    def zero(self, indexes: npt.ArrayLike) -> None:
        """Make slots unsampleable (value 0), e.g. rows that were overwritten or are not valid yet.

        :param indexes: 1-D integer slots in ``[0, capacity)``
        """
        slots = _as_slot_indexes(indexes, self.capacity)
        self._tree.write(slots, np.zeros(slots.shape, dtype=np.float64))

    def assign(self, slots: npt.NDArray[np.int64], priorities: npt.NDArray[np.float64]) -> None:
        """:meth:`update_priorities` for priorities computed by the buffer itself (valid by construction:
        1-D int64 slots in range, finite float64 values ``>= 0``), without its checks or the max."""
        self._tree.write(slots, self._stored_value(priorities))

    def probabilities(self, indexes: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Probability ``P(i)`` that one draw of :meth:`sample` returns slot ``i``.

        :param indexes: 1-D integer slots in ``[0, capacity)``
        :return: float64 probabilities (0 for zeroed slots)
        :raises ValueError: if every slot is 0
        """
        values = self._tree.get(indexes)
        total = self._tree.total()
        if not total > 0:
            raise ValueError(
                "All priorities are 0; call mark_new() on stored rows before asking for probabilities."
            )
        return values / total

    def sample(self, batch_size: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """Draw ``batch_size`` slots proportionally to their stored values, with replacement.

        Stratified: ``[0, total)`` is split into ``batch_size`` equal segments with one uniform draw in
        each (as in the paper), which lowers the variance of the batch composition. Consequently the
        result is sorted by slot number; shuffle it if order matters to you.

        :param batch_size: number of slots to draw (>= 1)
        :param rng: the generator all randomness comes from
        :return: int64 slot numbers, shape ``(batch_size,)``
        :raises ValueError: if every slot is 0 (nothing marked yet)
        """
        batch_size = check_positive_int(batch_size, "batch_size")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(
                f"rng must be a np.random.Generator (np.random.default_rng(seed)), got {type(rng)}."
            )
        total = self._tree.total()
        if not total > 0:
            raise ValueError(
                "Cannot sample: all priorities are 0. Call mark_new() on the stored rows before sampling."
            )
        segment = total / batch_size
        prefix_sums = (np.arange(batch_size) + rng.random(batch_size)) * segment
        return self._tree.find(prefix_sums)

    def importance_weights(
        self, indexes: npt.ArrayLike, beta: float, n_stored: int
    ) -> npt.NDArray[np.float32]:
        """Importance-sampling weights ``w_i = (N * P(i)) ** -beta / max_j w_j`` that correct the bias of
        prioritized sampling (``N`` = ``n_stored``).

        .. note::
            We normalize by the largest weight **in this batch** (so the largest weight is exactly 1).
            stable-baselines v2 and cpprb normalize by the weight of the least probable slot **in the
            whole buffer**, ``(N * min_k P(k)) ** -beta``, which needs a second (min) tree and is skewed by
            slots that are about to be overwritten; the batch maximum costs nothing, keeps weights in
            ``(0, 1]`` and is the common choice. The two differ by one scalar per batch, which rescales
            that batch's loss (an effective learning-rate change), not the relative weighting.

        :param indexes: 1-D integer slots, normally those returned by :meth:`sample`; each must have a
            positive value (a zeroed slot would get an infinite weight)
        :param beta: correction exponent in ``[0, 1]``; 0 gives all ones, 1 fully compensates
        :param n_stored: number of rows currently stored (sampleable), ``N`` in the formula (>= 1)
        :return: float32 weights, same shape as ``indexes``
        :raises ValueError: for beta outside ``[0, 1]``, ``n_stored < 1`` or a zero-probability slot
        """
        if not (is_real(beta) and 0.0 <= beta <= 1.0):
            raise ValueError(f"beta must be a number in [0, 1] (anneal it from ~0.4 to 1), got {beta!r}.")
        n_stored = check_positive_int(n_stored, "n_stored")
        probabilities = self.probabilities(indexes)
        if probabilities.size == 0:
            return np.zeros(0, dtype=np.float32)
        if np.any(probabilities <= 0):
            raise ValueError(
                "importance_weights got slots with zero probability (zeroed or never marked): "
                f"{np.asarray(indexes)[probabilities <= 0].tolist()}; pass slots returned by sample()."
            )
        weights = (n_stored * probabilities) ** (-float(beta))
        return (weights / weights.max()).astype(np.float32)
