"""Which stored transitions a batch holds: one small sampler object per drawing rule.

:class:`~her_wrap.core.replay.HindsightReplay` stores episodes and relabels goals; a sampler only chooses
the rows. :func:`make_sampler` picks one from the :class:`~her_wrap.core.settings.HindsightSettings`
once, when the buffer is built:

- :class:`UniformSampler`: every sampleable transition equally likely (the default, and LaBER's large
  batch: the LaBER functors of :mod:`her_wrap.core.laber` subsample it with the learner's priorities);
- :class:`PrioritizedSampler`: proportional prioritized replay (``prioritized=True``) over a sum tree,
  with importance weights;
- :class:`MovementSampler`: draw weights from how far each episode moved its achieved goal
  (``movement_clip``), no importance weights.

Every sampler has the same interface: :meth:`Sampler.draw` returns a :class:`Draw`,
:meth:`Sampler.after_add` follows each storage write, :meth:`Sampler.update` takes new priorities (only
:class:`PrioritizedSampler` accepts them) and :meth:`Sampler.clear` forgets everything. A draw costs
O(batch) (rejection sampling over the ring, or one sum-tree descent per row), never a pass over the
stored data.

Movement weights: in manipulation tasks most early episodes never touch the object, so every achieved
goal of such an episode is the object's start and its relabeled transitions teach nothing about moving
it. Weighting an episode by the path length of its achieved goal (the idea of energy-based hindsight
prioritization, Zhao and Tresp 2018, with the goal's path in place of the object's energy) replays the
rare episodes that moved it more often. Each transition is drawn with weight ``floor + min(path, clip)``,
``path`` the summed distance between consecutive achieved goals of its episode: of the whole episode once
it has ended, of the steps stored so far while it is in progress. ``floor > 0`` keeps the episodes that
moved nothing in the batches; ``clip`` bounds the weight of an episode whose object flew off (falling
from the table is a long path and teaches little). These weights change which episodes are replayed, as
the goal selection strategy does, not the loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from her_wrap.core.goal_selection import sample_transitions
from her_wrap.core.settings import HindsightSettings
from her_wrap.core.storage import AddReport, EpisodeStorage
from her_wrap.core.sum_tree import ProportionalPrioritizer

#: ``read_goals(ring_rows, columns) -> goals``: the achieved goals stored at those rows, shaped ``(n, ...)``.
GoalReader = Callable[[np.ndarray, np.ndarray], np.ndarray]

#: ``goal_fn(values) -> goals``: maps stored achieved-goal values to goals (None: they are goals).
GoalFn = Callable[[np.ndarray], np.ndarray]


class Draw(NamedTuple):
    """The rows of one batch.

    :param rings: ring rows of the drawn transitions
    :param columns: their env columns
    :param indexes: flat slots ``ring_row * n_envs + column`` (what :meth:`Sampler.update` takes)
    :param weights: float32 importance weights, or None when the draw needs no correction
    """

    rings: np.ndarray
    columns: np.ndarray
    indexes: np.ndarray
    weights: np.ndarray | None


class Sampler:
    """The interface of a sampler: the rows of a batch from the sampleable transitions of ``storage``.

    :param storage: the episodes drawn from
    :param online: whether episodes in progress are sampleable (online relabeling); otherwise only
        transitions of ended episodes are
    """

    #: the sum tree the draws come from (None for uniform draws)
    prioritizer: ProportionalPrioritizer | None = None
    #: the achieved goals' paths (:class:`MovementSampler` only)
    movement: MovementWeights | None = None

    def __init__(self, storage: EpisodeStorage, *, online: bool) -> None:
        self.storage = storage
        self.online = online

    def __len__(self) -> int:
        """Transitions that can be drawn now."""
        return self.storage.n_transitions if self.online else self.storage.n_finished_transitions

    def draw(self, batch_size: int, rng: np.random.Generator, beta: float) -> Draw:
        """Draw ``batch_size`` transitions with replacement, in random order.

        :param batch_size: rows to draw (>= 1, already validated)
        :param rng: the generator every random number comes from
        :param beta: importance-sampling exponent (used by :class:`PrioritizedSampler` only)
        :raises ValueError: when nothing is sampleable yet
        """
        raise NotImplementedError

    def after_add(self, report: AddReport) -> None:
        """Follow one storage write (uniform draws keep no table)."""

    def update(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of drawn transitions; only prioritized replay has priorities."""
        raise ValueError("This buffer was built without prioritized replay; pass prioritized=True.")

    def clear(self) -> None:
        """Forget every stored transition."""


class UniformSampler(Sampler):
    """Every sampleable transition equally likely (rejection sampling over the ring, O(batch))."""

    def draw(self, batch_size: int, rng: np.random.Generator, beta: float) -> Draw:
        rings, columns = sample_transitions(self.storage, batch_size, rng, finished_only=not self.online)
        return Draw(rings, columns, rings * self.storage.n_envs + columns, None)


class _TreeSampler(Sampler):
    """Draws proportional to per-slot values kept in a sum tree (:class:`ProportionalPrioritizer`)."""

    prioritizer: ProportionalPrioritizer

    def __init__(
        self, storage: EpisodeStorage, *, online: bool, prioritizer: ProportionalPrioritizer
    ) -> None:
        super().__init__(storage, online=online)
        self.prioritizer = prioritizer

    def draw(self, batch_size: int, rng: np.random.Generator, beta: float) -> Draw:
        if len(self) == 0:
            raise ValueError("Cannot sample: no transition is stored yet; add transitions first.")
        # Stratified draws come sorted by priority segment: shuffle once, so that relabeling a prefix of
        # the batch relabels a random subset of it.
        indexes = self.prioritizer.sample(batch_size, rng)[rng.permutation(batch_size)]
        rings, columns = np.divmod(indexes, self.storage.n_envs)
        return Draw(rings, columns, indexes, self._weights(indexes, beta))

    def _weights(self, indexes: np.ndarray, beta: float) -> np.ndarray | None:
        return None

    def after_add(self, report: AddReport) -> None:
        if report.cleared:
            self.prioritizer.zero(np.asarray(report.cleared, dtype=np.int64))

    def clear(self) -> None:
        self.prioritizer.zero(np.arange(self.storage.n_rows * self.storage.n_envs))


class PrioritizedSampler(_TreeSampler):
    """Proportional prioritized replay (Schaul et al. 2016): draws by priority, with importance weights.

    New transitions get the largest priority seen so far: online as soon as they are complete, offline
    when their episode ends (only then are they sampleable).

    :param storage: the episodes drawn from
    :param online: whether episodes in progress are sampleable
    :param alpha: priority exponent (0: uniform)
    :param eps: added to priorities before the exponent (> 0)
    """

    def __init__(self, storage: EpisodeStorage, *, online: bool, alpha: float, eps: float) -> None:
        slots = storage.n_rows * storage.n_envs
        super().__init__(
            storage, online=online, prioritizer=ProportionalPrioritizer(slots, alpha=alpha, eps=eps)
        )

    def _weights(self, indexes: np.ndarray, beta: float) -> np.ndarray | None:
        return self.prioritizer.importance_weights(indexes, beta, len(self))

    def after_add(self, report: AddReport) -> None:
        super().after_add(report)
        if self.online:
            if report.new_transitions:
                self.prioritizer.mark_new(np.asarray(report.new_transitions, dtype=np.int64))
            return
        n_rows, n_envs = self.storage.n_rows, self.storage.n_envs
        for column, start, length in report.finished:
            self.prioritizer.mark_new(np.arange(start, start + length) % n_rows * n_envs + column)

    def update(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of drawn transitions (their |TD error|, typically).

        Slots that stopped holding a transition since they were drawn (overwritten by the ring) keep
        priority 0.

        :param indexes: ``indexes`` of a draw
        :param priorities: non-negative finite values, one per index
        """
        indexes, priorities = self.prioritizer.check_update(indexes, priorities)
        rings, columns = np.divmod(indexes, self.storage.n_envs)
        alive = self.storage.is_transition(rings, columns, finished_only=not self.online)
        self.prioritizer.update_priorities(indexes[alive], priorities[alive])


class MovementSampler(_TreeSampler):
    """Draws weighted by how far each transition's episode moved its achieved goal (see the module).

    :param storage: the episodes drawn from
    :param online: whether episodes in progress are sampleable (their transitions then get the weight of
        the path so far)
    :param clip: largest path counted, in the goal's units (> 0)
    :param floor: weight of a transition whose episode moved nothing (> 0)
    :param achieved_goal_key: the storage field holding achieved goals
    :param goal_fn: maps that field's values to goals (None: they are goals)
    """

    movement: MovementWeights

    def __init__(
        self,
        storage: EpisodeStorage,
        *,
        online: bool,
        clip: float,
        floor: float,
        achieved_goal_key: str,
        goal_fn: GoalFn | None,
    ) -> None:
        slots = storage.n_rows * storage.n_envs
        # The weights are drawn as they are (alpha 1); eps only has to be positive.
        super().__init__(
            storage, online=online, prioritizer=ProportionalPrioritizer(slots, alpha=1.0, eps=1e-12)
        )
        self.movement = MovementWeights(slots, clip=clip, floor=floor)
        self.achieved_goal_key = achieved_goal_key
        # The function, not a bound method of the buffer: pickles of a buffer leave its own functions out.
        self.goal_fn = goal_fn

    def _read_goals(self, rings: np.ndarray, columns: np.ndarray) -> np.ndarray:
        values = self.storage.read_field(self.achieved_goal_key, rings, columns)
        return values if self.goal_fn is None else np.asarray(self.goal_fn(values))

    def after_add(self, report: AddReport) -> None:
        super().after_add(report)
        slots, weights = self.movement.after_add(self.storage, report, self._read_goals, online=self.online)
        if slots.size:
            self.prioritizer.assign(slots, weights)

    def update(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        raise ValueError(
            "This buffer was built without prioritized replay; pass prioritized=True instead of "
            "movement_clip (its weights follow the achieved goals)."
        )

    def clear(self) -> None:
        super().clear()
        self.movement.path[:] = 0.0


def make_sampler(
    settings: HindsightSettings,
    storage: EpisodeStorage,
    *,
    eps: float,
    achieved_goal_key: str,
    goal_fn: GoalFn | None = None,
) -> Sampler:
    """The sampler the settings ask for.

    :param settings: ``prioritized`` (with ``alpha``), ``movement_clip`` (with ``movement_floor``), or
        neither (uniform; LaBER draws its large batch uniformly too); ``online`` for what is sampleable
    :param storage: the episodes drawn from
    :param eps: added to priorities before the exponent (prioritized only)
    :param achieved_goal_key: the storage field holding achieved goals (movement weights)
    :param goal_fn: maps that field's values to goals (None: they are goals)
    """
    if settings.prioritized:
        return PrioritizedSampler(storage, online=settings.online, alpha=settings.alpha, eps=eps)
    if settings.movement_clip is not None:
        return MovementSampler(
            storage,
            online=settings.online,
            clip=settings.movement_clip,
            floor=settings.movement_floor,
            achieved_goal_key=achieved_goal_key,
            goal_fn=goal_fn,
        )
    return UniformSampler(storage, online=settings.online)


class MovementWeights:
    """The path length of each stored transition's episode up to it, and the weights it gives.

    :param n_slots: flat slots of the storage (``n_rows * n_envs``)
    :param clip: largest path counted, in the goal's units (> 0)
    :param floor: weight of a transition whose episode moved nothing (> 0)
    """

    def __init__(self, n_slots: int, *, clip: float, floor: float) -> None:
        self.clip = float(clip)
        self.floor = float(floor)
        #: path of the achieved goal from its episode's start through each slot's transition
        self.path = np.zeros(n_slots, dtype=np.float64)

    def weight(self, path: np.ndarray) -> np.ndarray:
        """The sampling weight of transitions whose episode's path is ``path``."""
        return self.floor + np.minimum(path, self.clip)

    def after_add(
        self, storage: EpisodeStorage, report: AddReport, read_goals: GoalReader, *, online: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Extend the paths with the transitions ``report`` adds, and return the weights to set.

        :param storage: the storage the report came from
        :param report: what one write changed
        :param read_goals: reads achieved goals (as goals) at ring rows and columns
        :param online: whether episodes in progress are sampled (then their new transitions get the
            weight of the path so far); otherwise only the transitions of ended episodes get weights
        :return: flat slots and their new weights (a slot may appear twice: the last weight wins)
        """
        n_envs, n_rows = storage.n_envs, storage.n_rows
        new = np.asarray(report.new_transitions, dtype=np.int64)
        slot_parts: list[np.ndarray] = []
        weight_parts: list[np.ndarray] = []
        if new.size:
            rings, columns = np.divmod(new, n_envs)
            # Each transition extends the path of the one before it in its episode: walk them in the
            # order they were written, column by column.
            order = np.lexsort((storage.absolute_rows(rings, columns), columns))
            new, rings, columns = new[order], rings[order], columns[order]
            moves = self._moves(rings, columns, (rings + 1) % n_rows, read_goals)
            steps = storage.step_index.reshape(-1).take(new)
            previous = ((rings - 1) % n_rows) * n_envs + columns
            path = self.path
            for slot, step, before, move in zip(
                new.tolist(), steps.tolist(), previous.tolist(), moves.tolist(), strict=True
            ):
                path[slot] = move + (path[before] if step > 0 else 0.0)
            if online:
                slot_parts.append(new)
                weight_parts.append(self.weight(path[new]))
        for column, start, length in report.finished:
            slots = np.arange(start, start + length) % n_rows * n_envs + column
            slot_parts.append(slots)
            weight_parts.append(np.full(length, self.weight(self.path[slots[-1:]])[0]))
        if not slot_parts:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty.astype(np.float64)
        return np.concatenate(slot_parts), np.concatenate(weight_parts)

    @staticmethod
    def _moves(
        rings: np.ndarray, columns: np.ndarray, next_rings: np.ndarray, read_goals: GoalReader
    ) -> np.ndarray:
        """Distance between the achieved goals before and after each transition."""
        both = read_goals(np.concatenate((rings, next_rings)), np.concatenate((columns, columns)))
        flat = np.asarray(both, dtype=np.float64).reshape(both.shape[0], -1)
        return np.linalg.norm(flat[rings.size :] - flat[: rings.size], axis=1)
