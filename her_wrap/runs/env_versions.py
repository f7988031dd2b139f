"""Hyperparameter files keyed by another version of an env id.

rl-baselines3-zoo's files name the robotics tasks by the ids they were tuned on (``FetchReach-v1``),
while gymnasium-robotics registers newer versions (``FetchReach-v4``). When a file has no entry for
the requested id but has one for the same env under another version, that entry is used, and one line
says which: the task is the same, only the id moved on. An exact entry always wins, and a file with
neither still fails with the error that lists its entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gymnasium.envs.registration import parse_env_id


def _split(env_id: object) -> tuple[tuple[str | None, str], int] | None:
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
    wanted = _split(env_id)
    if env_id in entries or wanted is None:
        return None
    versions = {key: split[1] for key in entries if (split := _split(key)) and split[0] == wanted[0]}
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
