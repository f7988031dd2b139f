"""rl-baselines3-zoo's forms of a config entry, rewritten into her_wrap's.

The zoo writes ``"dict(...)"`` strings for mappings (parsed as literals, never evaluated: see
:mod:`her_wrap.runs.literals`), names HER's buffer as ``replay_buffer_class: HerReplayBuffer`` with its
``replay_buffer_kwargs``, and older files put ``n_sampled_goal``/``goal_selection_strategy``/
``online_sampling`` at the top level; :func:`translate_zoo_keys` turns all of these into the ``her``
section of a her_wrap entry. A file named after a learner (``tqc.yml``) gives entries without a
``model_class`` that learner (:func:`algo_from_file_name`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from her_wrap.core.settings import SETTING_NAMES
from her_wrap.runs.errors import UsageError
from her_wrap.runs.literals import looks_like_python_mapping, parse_python_literal
from her_wrap.sb3.learners import LEARNERS
from her_wrap.sb3.update_options import UPDATE_OPTION_NAMES

#: Keys of the ``her`` section: the hindsight settings (:class:`her_wrap.HindsightSettings`), HER's
#: ``store_infos`` and its update options (:class:`her_wrap.sb3.update_options.UpdateOptions`; ``clip_target``
#: may also be ``true``, the return range of -1 / 0 rewards).
HER_SETTINGS: tuple[str, ...] = (*SETTING_NAMES, "store_infos", *UPDATE_OPTION_NAMES)

# Zoo keys that name Python code to import: her_wrap never imports code a config names.
_CODE_KEYS = ("env_wrapper", "vec_env_wrapper", "callback", "frame_stack")
# Zoo HER keys her_wrap has no use for: its storage needs no episode length, infos are never deep-copied.
_IGNORED_ZOO_HER_KEYS = ("max_episode_length", "copy_info_dict", "handle_timeout_termination")
# Zoo HER key names -> her_wrap's.
_ZOO_HER_RENAMES = {"online_sampling": "online"}


def parse_literal_strings(value: Any) -> Any:
    """``value`` with every zoo ``"dict(...)"`` string in it (nested too) parsed as a literal."""
    if looks_like_python_mapping(value):
        return parse_python_literal(value)
    if isinstance(value, dict):
        return {key: parse_literal_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [parse_literal_strings(item) for item in value]
    return value


def translate_zoo_keys(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Rewrite rl-baselines3-zoo forms into her_wrap's: literal strings parsed, HER keys into ``her``.

    Native entries pass through unchanged (apart from ``"dict(...)"`` strings, which are parsed wherever
    they appear).

    :param entry: one entry, as read
    :param where: ``"file: env id"`` for error messages
    :raises UsageError: for a replay buffer other than HER, a HER key given twice, or a key that names code
    """
    result: dict[str, Any] = parse_literal_strings(dict(entry))
    for key in _CODE_KEYS:
        if key in result:
            raise UsageError(
                f"{where}: {key!r} is not supported: her_wrap does not import code named in a config; "
                "remove it from the entry"
            )
    her = dict(result.pop("her", None) or {})
    zoo_her: dict[str, Any] = {}
    buffer_class = result.pop("replay_buffer_class", None)
    buffer_kwargs = result.pop("replay_buffer_kwargs", None) or {}
    if buffer_class is not None:
        if str(buffer_class).rsplit(".", 1)[-1] != "HerReplayBuffer":
            raise UsageError(
                f"{where}: replay_buffer_class {buffer_class!r} is not supported; her_wrap runs HER "
                "(replay_buffer_class: HerReplayBuffer, or leave it out)"
            )
        if not isinstance(buffer_kwargs, dict):
            raise UsageError(f"{where}: replay_buffer_kwargs must be a mapping, got {buffer_kwargs!r}")
        zoo_her.update(buffer_kwargs)
    for key in (*HER_SETTINGS, *_ZOO_HER_RENAMES, *_IGNORED_ZOO_HER_KEYS):
        if key in result:
            zoo_her[key] = result.pop(key)
    for key, value in zoo_her.items():
        key = _ZOO_HER_RENAMES.get(key, key)
        if key in _IGNORED_ZOO_HER_KEYS:
            continue
        if key in her and her[key] != value:
            raise UsageError(f"{where}: HER setting {key!r} is given twice ({her[key]!r} and {value!r})")
        her[key] = value
    result["her"] = her
    return result


def algo_from_file_name(path: str | Path) -> str | None:
    """The learner a zoo file is for, from its name (``tqc.yml`` -> ``tqc``), or ``None``."""
    stem = Path(path).stem.lower()
    return stem if stem in LEARNERS else None
