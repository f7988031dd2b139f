"""What a hindsight buffer finds out on real data: whether ``compute_reward`` reads the info dicts.

Keeping every step's info dict costs memory and time, and most goal envs' ``compute_reward`` never reads
them. :class:`InfoProbe` asks on the first ``add``, with info dicts that record reads
(:func:`~her_wrap.envs.checks.reads_infos`); when that call cannot tell (it raised before reading
anything), infos are kept and the question is asked again at the first sample, where unread infos are
dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from her_wrap.core.replay import HindsightReplay
from her_wrap.envs.checks import reads_infos
from her_wrap.sb3.goal_functions import GoalFunctions


class InfoProbe:
    """The first-add and first-sample checks of :class:`~her_wrap.sb3.HerReplayBuffer`.

    The class that mixes it in sets the attributes annotated here and calls :meth:`_start_probing` before
    the first step.
    """

    replay: HindsightReplay
    goal_functions: GoalFunctions | None
    store_infos: bool | None
    copy_info_dict: bool

    def _start_probing(self) -> None:
        # What is still to find out on real data: whether compute_reward reads infos (None: not yet); the
        # first add writes at once, so that a setup whose shapes do not fit fails there, not at a sample.
        self._infos_read: bool | None = True if self.store_infos else None
        self._awaiting_first_add = True
        self._first_sample_done = False
        self._copy_infos = self.copy_info_dict and self.store_infos is True

    def _first_add(
        self, obs: dict[str, np.ndarray], next_obs: dict[str, np.ndarray], infos: list[dict[str, Any]]
    ) -> None:
        """Find out, on the first step's real data, whether ``compute_reward`` reads infos; keep them if so
        (and, when it cannot tell yet, until the first sample tells)."""
        self._awaiting_first_add = False
        if self._infos_read is not None or self.goal_functions is None:
            reads = self._infos_read
        else:
            reads = reads_infos(
                self.goal_functions.compute_reward,
                next_obs["achieved_goal"],
                obs["desired_goal"],
                infos,
            )
        self._check_infos_kept(reads)
        self._infos_read = reads
        if self.store_infos is None:
            self.replay.storage.store_infos(reads is not False)
        self._copy_infos = self.copy_info_dict and self.stores_infos

    def _check_infos_kept(self, reads: bool | None) -> None:
        if reads and self.store_infos is False:
            raise ValueError(
                "compute_reward reads the info dicts, but this buffer was built with store_infos=False: "
                "relabeled rewards would be computed without them. Pass store_infos=True (or None: keep them "
                "when compute_reward reads them)."
            )

    def _settle_infos(self, batch: dict[str, np.ndarray]) -> None:
        """At the first sample: ask again whether ``compute_reward`` reads infos, if the first add could not
        tell, and drop them (from the storage and ``batch``) if it does not."""
        if self._infos_read is None:
            assert self.goal_functions is not None
            reads = reads_infos(
                self.goal_functions.compute_reward,
                batch["next_achieved_goal"],
                batch["desired_goal"],
                batch.get("infos"),
            )
            self._check_infos_kept(reads)
            self._infos_read = reads is not False
            if self.store_infos is None and not self._infos_read:
                self.replay.storage.store_infos(False)
                batch.pop("infos", None)

    @property
    def stores_infos(self) -> bool:
        """Whether info dicts are being kept now."""
        return self.replay.storage.stores_infos
