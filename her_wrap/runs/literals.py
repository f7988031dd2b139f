"""Python-literal strings of rl-baselines3-zoo hyperparameter files, read without ``eval``.

The zoo writes nested settings as Python source in YAML strings and runs them through ``eval``::

    policy_kwargs: "dict(net_arch=[256, 256], n_critics=2, activation_fn=nn.ReLU)"

Here such a string is parsed with :mod:`ast` and only these forms are accepted: literals (numbers,
strings, booleans, ``None``, lists, tuples (read as lists), dicts, a leading minus), ``dict(key=value, ...)`` calls
(nested too), and dotted names of torch classes (``nn.ReLU``, ``th.nn.Tanh``, ``th.optim.Adam``), which
stay strings (``"nn.ReLU"``) for :mod:`her_wrap.runs.model_factory` to resolve from a fixed list. Nothing
is executed, so a config file cannot run code.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from her_wrap.runs.errors import UsageError

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
