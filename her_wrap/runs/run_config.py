"""A validated config entry (:class:`RunConfig`): what :mod:`her_wrap.runs.config` makes of a file's entry."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from her_wrap.core.settings import SETTING_NAMES, HindsightSettings

_DEFAULT_SETTINGS = HindsightSettings().to_dict()


@dataclass(frozen=True, init=False)
class RunConfig:
    """A validated config entry: everything a run needs besides the command-line flags.

    The ``her`` section is held as what it means: :attr:`hindsight`, the :class:`HindsightSettings` built
    once from the file's values, and :attr:`her_options`, HER's other keyword arguments (``store_infos`` and
    the update options). Every other value is plain data (numbers, strings, lists, mappings), so
    :meth:`to_entry` writes the config back as YAML that loads into the same config.
    """

    env_id: str
    model_class: str
    n_timesteps: int
    policy: str
    n_envs: int
    #: torch CPU threads (``None``: the command's default)
    num_threads: int | None
    #: how batches are drawn and relabeled
    hindsight: HindsightSettings
    #: HER's keyword arguments besides the hindsight settings (``store_infos``, update options)
    her_options: dict[str, Any]
    learner_kwargs: dict[str, Any]
    env_kwargs: dict[str, Any]
    #: HER's ``normalize``: ``False``, ``True`` (HER's defaults) or ``VecNormalize`` arguments over them
    normalize: bool | dict[str, Any]
    noise_type: str | None
    noise_std: float | None
    #: worker processes of ``her-wrap train`` (``None``: one; ``--workers`` replaces it)
    workers: int | None
    #: share of training episodes started with the object in the gripper (``None``: none)
    grasp_start: float | None

    def __init__(
        self,
        env_id: str,
        model_class: str,
        n_timesteps: int,
        policy: str = "MultiInputPolicy",
        n_envs: int = 1,
        num_threads: int | None = None,
        learner_kwargs: dict[str, Any] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        normalize: bool | dict[str, Any] = False,
        noise_type: str | None = None,
        noise_std: float | None = None,
        *,
        hindsight: HindsightSettings | None = None,
        her_options: dict[str, Any] | None = None,
        workers: int | None = None,
        grasp_start: float | None = None,
    ) -> None:
        values = {
            "env_id": env_id,
            "model_class": model_class,
            "n_timesteps": n_timesteps,
            "policy": policy,
            "n_envs": n_envs,
            "num_threads": num_threads,
            "hindsight": HindsightSettings() if hindsight is None else hindsight,
            "her_options": dict(her_options or {}),
            "learner_kwargs": dict(learner_kwargs or {}),
            "env_kwargs": dict(env_kwargs or {}),
            "normalize": normalize,
            "noise_type": noise_type,
            "noise_std": noise_std,
            "workers": workers,
            "grasp_start": grasp_start,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)  # a frozen dataclass sets its fields only this way

    @property
    def her(self) -> dict[str, Any]:
        """The ``her`` section as plain values: the settings that differ from the defaults, and the options."""
        settings = self.hindsight.to_dict()
        changed = {key: value for key, value in settings.items() if value != _DEFAULT_SETTINGS[key]}
        return {**changed, **copy.deepcopy(self.her_options)}

    def to_entry(self) -> dict[str, Any]:
        """The config as a native entry (what ``config.yml`` holds under the env id)."""
        entry: dict[str, Any] = {
            "model_class": self.model_class,
            "policy": self.policy,
            "n_timesteps": self.n_timesteps,
            "n_envs": self.n_envs,
            "her": self.her,
            **copy.deepcopy(self.learner_kwargs),
            "env_kwargs": copy.deepcopy(self.env_kwargs),
            "normalize": copy.deepcopy(self.normalize),
        }
        if self.num_threads is not None:
            entry["num_threads"] = self.num_threads
        if self.workers is not None:
            entry["workers"] = self.workers
        if self.grasp_start is not None:
            entry["grasp_start"] = self.grasp_start
        if self.noise_type is not None:
            entry["noise_type"] = self.noise_type
            entry["noise_std"] = self.noise_std
        return entry


def hindsight_settings(her: Mapping[str, Any]) -> HindsightSettings:
    """The :class:`HindsightSettings` of a ``her`` section (its other keys are HER's own options).

    :raises ValueError: for a bad value
    """
    return HindsightSettings.from_dict({key: value for key, value in her.items() if key in SETTING_NAMES})
