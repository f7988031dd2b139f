"""Sampling weights from how far each episode moved its achieved goal (``movement_clip``).

In manipulation tasks most early episodes never touch the object: every achieved goal of such an episode
is the object's start, so its relabeled transitions teach nothing about moving it. Weighting an episode by
the path length of its achieved goal (the idea of energy-based hindsight prioritization, Zhao and Tresp
2018, with the goal's path in place of the object's energy) replays the rare episodes that moved it more
often. Each transition is drawn with weight

    floor + min(path, clip)

where ``path`` is the summed distance between consecutive achieved goals of its episode: of the whole
episode once it has ended, of the steps stored so far while it is in progress. ``floor > 0`` keeps the
episodes that moved nothing in the batches; ``clip`` bounds the weight of an episode whose object flew
off (falling from the table is a long path and teaches little). Weights carry no importance correction:
they change which episodes are replayed, as the goal selection strategy does, not the loss.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from her_wrap.core.storage import AddReport, EpisodeStorage

#: ``read_goals(ring_rows, columns) -> goals``: the achieved goals stored at those rows, shaped ``(n, ...)``.
GoalReader = Callable[[np.ndarray, np.ndarray], np.ndarray]


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
