"""Reading and writing the YAML files of a run: hyperparameter files, ``config.yml``, ``args.yml``.

Only the safe loader is used (no Python objects from YAML), with one change: numbers written like ``1e6``
or ``3e-4`` are read as numbers. PyYAML follows YAML 1.1, where a float needs a dot (``1.0e6``), so a plain
``yaml.safe_load`` reads ``1e6`` as the *string* ``"1e6"``; the zoo works around it with ``!!float 1e6``
(still accepted). A quoted ``"1e6"`` stays a string.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from her_wrap.runs.atomic import atomic_write_text
from her_wrap.runs.errors import UsageError


class _NumberFriendlySafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also resolves ``1e6``-style scalars (no dot) to floats."""


# YAML 1.2's float syntax: the exponent form needs no dot. Appended after SafeLoader's own resolvers, so it
# only decides scalars that neither the int nor the YAML 1.1 float resolver claimed.
_NumberFriendlySafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def parse_yaml(text: str, source: str = "<string>") -> Any:
    """Parse YAML text with the number-friendly safe loader.

    :param text: YAML document
    :param source: name used in error messages (a file path)
    :return: the parsed data
    :raises UsageError: on malformed YAML, naming the source, line and column
    """
    try:
        return yaml.load(text, Loader=_NumberFriendlySafeLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{source}, line {mark.line + 1}, column {mark.column + 1}" if mark else source
        problem = error.problem or error.context or "malformed YAML"
        raise UsageError(f"malformed YAML in {where}: {problem}") from None
    except yaml.YAMLError as error:
        raise UsageError(f"malformed YAML in {source}: {' '.join(str(error).split())}") from None


def load_yaml_file(path: str | Path) -> Any:
    """Read and parse a YAML file.

    :param path: file to read
    :return: the parsed data
    :raises UsageError: when the file is missing or malformed
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"config file not found: {path}") from None
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None
    return parse_yaml(text, source=str(path))


def dump_yaml(data: Any) -> str:
    """Serialize plain data (dicts, lists, numbers, strings) as block-style YAML, keys in insertion order."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def flow_yaml(data: Any) -> str:
    """Plain data as one line of flow-style YAML (``[256, 256]``, ``{future: 0.5}``)."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=True, width=10_000).strip()


def write_yaml_file(path: str | Path, data: Any) -> None:
    """Write plain data as YAML, atomically (a reader never sees half a file).

    :param path: destination
    :param data: plain data accepted by ``yaml.safe_dump``
    """
    atomic_write_text(Path(path), dump_yaml(data))
