"""rl-baselines3-zoo's forms of a config entry, read as her_wrap's.

- **Python-literal strings.** The zoo writes nested settings as Python source in YAML strings and runs them
  through ``eval``::

      policy_kwargs: "dict(net_arch=[256, 256], n_critics=2, activation_fn=nn.ReLU)"

  Here such a string is parsed with :mod:`ast` (:func:`parse_python_literal`) and only these forms are
  accepted: literals (numbers, strings, booleans, ``None``, lists, tuples (read as lists), dicts, a leading
  minus), ``dict(key=value, ...)`` calls (nested too), and dotted names of torch classes (``nn.ReLU``,
  ``th.nn.Tanh``, ``th.optim.Adam``), which stay strings (``"nn.ReLU"``) for
  :mod:`her_wrap.runs.model_factory` to resolve from a fixed list. Nothing is executed, so a config file
  cannot run code.
- **HER's keys.** The zoo names HER's buffer as ``replay_buffer_class: HerReplayBuffer`` with its
  ``replay_buffer_kwargs``, and older files put ``n_sampled_goal``/``goal_selection_strategy``/
  ``online_sampling`` at the top level; :func:`translate_zoo_keys` turns all of these into the ``her``
  section of a her_wrap entry. A file named after a learner (``tqc.yml``) gives entries without a
  ``model_class`` that learner (:func:`algo_from_file_name`).
- **Env ids of another version.** The zoo's files name the robotics tasks by the ids they were tuned on
  (``FetchReach-v1``), while gymnasium-robotics registers newer versions (``FetchReach-v4``). When a file
  has no entry for the requested id but has one for the same env under another version, that entry is
  used, and one line says which (:func:`with_other_version_entry`): the task is the same, only the id
  moved on. An exact entry always wins, and a file with neither still fails with the error that lists
  its entries.
- **``-params`` items.** ``key:value`` changes to an entry, applied after the default merge
  (:func:`apply_overrides`).
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gymnasium.envs.registration import parse_env_id

from her_wrap.core.settings import SETTING_NAMES
from her_wrap.runs.errors import UsageError
from her_wrap.runs.yaml_io import parse_yaml
from her_wrap.sb3.learners import LEARNERS
from her_wrap.sb3.update_options import UPDATE_OPTION_NAMES

# --------------------------------------------------------------------------- Python-literal strings

# Strings that look like Python source of a mapping: the zoo's "dict(...)" and "{...}" forms.
_MAPPING_SOURCE = re.compile(r"^\s*(dict\s*\(|\{)", re.DOTALL)

# Dotted names a config may mention; model_factory decides what each one means.
_TORCH_NAME_PREFIXES = ("nn.", "th.nn.", "torch.nn.", "th.optim.", "torch.optim.", "optim.")


def looks_like_python_mapping(value: Any) -> bool:
    """Whether a YAML value is a zoo-style ``"dict(...)"`` or ``"{...}"`` string."""
    return isinstance(value, str) and _MAPPING_SOURCE.match(value) is not None


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        parent = _dotted_name(node.value)
        return None if parent is None else f"{parent}.{node.attr}"
    return None


def _convert(node: ast.expr, source: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _convert(node.operand, source)
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    elif isinstance(node, (ast.List, ast.Tuple)):
        # YAML has no tuples: both become lists (model_factory turns train_freq back into a tuple).
        return [_convert(element, source) for element in node.elts]
    elif isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise UsageError(f"'**' unpacking is not allowed in {source!r}")
        return {
            _convert(key, source): _convert(value, source)
            for key, value in zip(node.keys, node.values, strict=True)
            if key is not None
        }
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        if node.args or any(keyword.arg is None for keyword in node.keywords):
            raise UsageError(f"only dict(key=value, ...) is allowed, in {source!r}")
        return {keyword.arg: _convert(keyword.value, source) for keyword in node.keywords}
    else:
        name = _dotted_name(node)
        if name is not None and name.startswith(_TORCH_NAME_PREFIXES):
            return name
    raise UsageError(
        f"cannot read {ast.unparse(node)!r} in {source!r}: only literals, dict(...) and torch names "
        "such as nn.ReLU are allowed (nothing is evaluated)"
    )


def parse_python_literal(source: str) -> Any:
    """Parse a zoo-style Python expression string into plain data, evaluating nothing.

    :param source: e.g. ``"dict(net_arch=[64, 64], activation_fn=nn.Tanh)"``
    :return: plain data, e.g. ``{"net_arch": [64, 64], "activation_fn": "nn.Tanh"}``
    :raises UsageError: on a syntax error or any form other than those listed in the module docstring
    """
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as error:
        raise UsageError(f"cannot parse {source!r}: {error.msg}") from None
    return _convert(tree.body, source)


# --------------------------------------------------------------------------- HER's keys

#: Keys of the ``her`` section: the hindsight settings (:class:`her_wrap.HindsightSettings`), HER's
#: ``store_infos`` and its update options (:class:`her_wrap.sb3.update_options.UpdateOptions`; ``clip_target``
#: may also be ``true``, the return range of -1 / 0 rewards).
HER_SETTINGS: tuple[str, ...] = (*SETTING_NAMES, "store_infos", "check_finite", *UPDATE_OPTION_NAMES)

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


# --------------------------------------------------------------------------- env ids of another version


def _split_env_id(env_id: object) -> tuple[tuple[str | None, str], int] | None:
    """``((namespace, name), version)`` of a versioned gymnasium id, else ``None`` (``default``, ``Foo``)."""
    if not isinstance(env_id, str):
        return None
    try:
        namespace, name, version = parse_env_id(env_id)
    except Exception:  # gymnasium raises its own error type for ids it cannot parse
        return None
    return ((namespace, name), version) if version is not None else None


def other_version_entry(entries: Mapping[str, Any], env_id: str) -> str | None:
    """The key of ``entries`` for the same env as ``env_id`` under another version, or ``None``.

    ``None`` when ``env_id`` has an entry of its own or no other version does. Among several versions,
    the newest is taken (``FetchReach-v2`` before ``FetchReach-v1`` for ``FetchReach-v4``).

    :param entries: a hyperparameter file as read: env id (or ``default``) to entry
    :param env_id: the id asked for, e.g. ``FetchReach-v4``
    """
    wanted = _split_env_id(env_id)
    if env_id in entries or wanted is None:
        return None
    versions = {key: split[1] for key in entries if (split := _split_env_id(key)) and split[0] == wanted[0]}
    return max(versions, key=versions.__getitem__) if versions else None


def with_other_version_entry(entries: Mapping[str, Any], env_id: str, source: str) -> Mapping[str, Any]:
    """``entries``, with ``env_id`` added as a copy of another version's entry when it has none.

    Prints one line naming the entry used, so a run's log says which settings it trained with.

    :param entries: a hyperparameter file as read
    :param env_id: the id asked for
    :param source: the file's name, for the note
    :return: ``entries`` itself when nothing is added, else a new mapping
    """
    key = other_version_entry(entries, env_id)
    if key is None:
        return entries
    print(f"Note: {source} has no entry for {env_id!r}; using its {key!r} entry", flush=True)
    return {**entries, env_id: entries[key]}


# --------------------------------------------------------------------------- -params items


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """Parse one ``-params`` item ``key:value`` into a key path and a value.

    The key may be a dotted path into a section (``her.n_sampled_goal:2``, ``env_kwargs.n_bits:12``); a
    bare HER setting (``n_sampled_goal:2``) goes into ``her`` as in the zoo. The value is read as YAML
    (``1e-3`` a number, ``[64, 64]`` a list, ``true`` a boolean), and ``"dict(...)"`` as a literal.

    :raises UsageError: when the item has no ``:`` or an empty key
    """
    key, separator, raw = text.partition(":")
    key = key.strip()
    if not separator or not key:
        raise UsageError(f"-params expects key:value items, got {text!r}")
    value = parse_override_value(raw, key)
    path = tuple(part for part in key.split("."))
    if len(path) == 1 and (path[0] in HER_SETTINGS or path[0] in _ZOO_HER_RENAMES):
        path = ("her", _ZOO_HER_RENAMES.get(path[0], path[0]))
    if any(not part for part in path):
        raise UsageError(f"-params key {key!r} has an empty part")
    return path, value


def parse_override_value(text: str, key: str) -> Any:
    """The value of an override, read as YAML (``1e-3`` a number, ``[64, 64]`` a list, ``true`` a
    boolean), and ``"dict(...)"`` as a literal; ``key`` names it in errors."""
    return parse_literal_strings(parse_yaml(text, source=f"-params {key}"))


def set_in(entry: dict[str, Any], path: Sequence[str], value: Any) -> None:
    """Set ``entry[path[0]][path[1]]... = value`` in place, creating sections that are missing."""
    target = entry
    for part in path[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            child = {}
            target[part] = child
        target = child
    target[path[-1]] = value


def apply_overrides(entry: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """The entry with ``-params`` items applied (see :func:`parse_override`); a new object."""
    result = copy.deepcopy(dict(entry))
    for text in overrides:
        set_in(result, *parse_override(text))
    return result
