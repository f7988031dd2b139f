"""What a ``HER`` model zip holds besides SB3's own files, and how it is read back.

SB3's zip gets two more members: ``her_wrap.json`` (the learner class, the policy, the hindsight settings,
the flat key layout, the normalization settings) and, when the model normalizes, ``vecnormalize.pkl``
(the ``VecNormalize`` statistics pickled without an env; SB3's own load skips both).
"""

from __future__ import annotations

import copy
import importlib
import json
import pathlib
import pickle
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecNormalize

from her_wrap.core.settings import HindsightSettings
from her_wrap.envs.goal_wrapper import GoalObservationLayout
from her_wrap.sb3.update_options import UpdateOptions

METADATA_NAME = "her_wrap.json"
NORMALIZER_NAME = "vecnormalize.pkl"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class SavedHER:
    """The HER settings of a model zip, as ``HER.__init__`` takes them.

    :param model_class: the learner class
    :param policy: the policy name (``"MlpPolicy"``) or class
    :param layout: flat key layout (``MlpPolicy``), or None (``MultiInputPolicy``)
    :param settings: hindsight settings
    :param store_infos: whether info dicts are kept for ``compute_reward`` (None: when it reads them)
    :param normalize_kwargs: ``VecNormalize`` arguments of ``normalize=``, or None
    :param update_options: options of the learner's updates and exploration
    """

    model_class: type
    policy: str | type
    layout: GoalObservationLayout | None
    settings: HindsightSettings
    store_infos: bool | None
    normalize_kwargs: dict[str, Any] | None
    update_options: UpdateOptions = field(default_factory=UpdateOptions)


def write_her_members(path: pathlib.Path, saved: SavedHER, normalizer: VecNormalize | None) -> None:
    """Add ``her_wrap.json`` (and ``vecnormalize.pkl``) to the zip SB3 wrote at ``path``."""
    metadata = {
        "format": "her_wrap",
        "version": FORMAT_VERSION,
        "model_class": qualified_name(saved.model_class),
        "policy": saved.policy if isinstance(saved.policy, str) else qualified_name(saved.policy),
        "flat": saved.layout is not None,
        "layout": None if saved.layout is None else saved.layout.to_dict(),
        "her": {**saved.settings.to_dict(), "store_infos": saved.store_infos},
        "normalize": saved.normalize_kwargs,
        "updates": saved.update_options.to_dict(),
    }
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(METADATA_NAME, json.dumps(metadata, indent=2))
        if normalizer is not None:
            archive.writestr(NORMALIZER_NAME, pickle.dumps(detached_normalizer(normalizer)))


def read_saved_her(path: str | pathlib.Path) -> SavedHER:
    """The HER settings of a model zip written by ``HER.save``.

    :raises ValueError: when the file is not such a zip
    """
    metadata = read_metadata(path)
    her_settings = dict(metadata["her"])
    store_infos = her_settings.pop("store_infos", None)
    return SavedHER(
        model_class=import_qualified(metadata["model_class"]),
        policy=metadata["policy"],
        layout=None if metadata["layout"] is None else GoalObservationLayout.from_dict(metadata["layout"]),
        settings=HindsightSettings.from_dict(her_settings),
        store_infos=store_infos,
        normalize_kwargs=metadata.get("normalize"),
        update_options=UpdateOptions.from_dict(metadata.get("updates", {})),
    )


def read_metadata(path: str | pathlib.Path) -> dict[str, Any]:
    """The JSON member of a model zip.

    :raises ValueError: when the file is not a zip written by ``HER.save``
    """
    try:
        with zipfile.ZipFile(path) as archive:
            if METADATA_NAME not in archive.namelist():
                raise ValueError(
                    f"{path} is not a her_wrap model (no {METADATA_NAME} inside): load plain SB3 models with "
                    "their own class, e.g. SAC.load(path)."
                )
            metadata = json.loads(archive.read(METADATA_NAME))
    except (zipfile.BadZipFile, IsADirectoryError) as error:
        raise ValueError(
            f"{path} is not a her_wrap model (not a zip file): pass a file written by HER.save."
        ) from error
    except FileNotFoundError as error:
        raise ValueError(f"{path} does not exist: pass the path given to HER.save.") from error
    if metadata.get("format") != "her_wrap" or metadata.get("version", 0) > FORMAT_VERSION:
        raise ValueError(
            f"{path} has an unknown her_wrap format {metadata.get('version')}: upgrade her_wrap."
        )
    return metadata


def read_normalizer(path: str | pathlib.Path) -> VecNormalize | None:
    """The ``VecNormalize`` statistics stored in a model zip (without an env), or None."""
    with zipfile.ZipFile(path) as archive:
        if NORMALIZER_NAME not in archive.namelist():
            return None
        normalizer = pickle.loads(archive.read(NORMALIZER_NAME))
    if not isinstance(normalizer, VecNormalize):
        raise ValueError(
            f"{path} holds a {type(normalizer).__name__} as {NORMALIZER_NAME}, not a VecNormalize."
        )
    return detached_normalizer(normalizer)


def detached_normalizer(normalizer: VecNormalize) -> VecNormalize:
    """A copy of a ``VecNormalize``'s statistics and settings without its env (``set_venv`` gives it one).

    Unlike an unpickled ``VecNormalize``, the copy pickles again (``VecNormalize.load`` reads it) and
    normalizes observations on its own (what ``predict`` needs without an env).
    """
    state = {
        key: value
        for key, value in vars(normalizer).items()
        if key not in ("venv", "class_attributes", "returns")
    }
    clone = VecNormalize.__new__(VecNormalize)
    clone.__setstate__(copy.deepcopy(state))
    # What VecNormalize.__getstate__ drops; set_venv sets both anew.
    clone.class_attributes = {}
    clone.returns = np.zeros(0)
    return clone


def qualified_name(obj: Any) -> str:
    """``module:QualName`` of a class, for :func:`import_qualified`."""
    return f"{obj.__module__}:{obj.__qualname__}"


def import_qualified(name: str) -> Any:
    """The object a :func:`qualified_name` names."""
    module, _, qualname = name.partition(":")
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target
