"""Griffe extension for the documentation site: her_wrap's docstrings are Sphinx style (reStructuredText
inside), while mkdocstrings renders docstring text as Markdown. Before a docstring is parsed this turns

- roles (``:class:`~her_wrap.core.laber.LaBER```, ``:meth:`load```, ...) into inline code, linked to the
  object's entry when the site documents it (an optional cross-reference: no warning when it does not);
- ``.. note::`` (and the other admonitions) into Material's ``!!! note`` blocks;
- literal blocks (a paragraph ending in ``::`` and the indented block after it) into fenced code.

mkdocs.yml loads it (``extensions:`` of the mkdocstrings handler); it is not part of the package.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|data|mod|attr|exc|obj|const):`(~?)([\w.]+)(?:\(\))?`")
ADMONITION = re.compile(r"^(\s*)\.\. (note|warning|tip|important|seealso|caution|danger|attention)::\s*(.*)$")
LITERAL_INTRO = re.compile(r"^(?!\s*\.\. )(.*?)(\s*)::\s*$")


def indentation(line: str) -> int:
    return len(line) - len(line.lstrip())


def is_python(code: str) -> bool:
    try:
        compile(code, "<docstring>", "exec")
    except SyntaxError:
        return False
    return True


def convert_roles(text: str, obj: griffe.Object) -> str:
    def replace(match: re.Match[str]) -> str:
        short, target = match.group(1) == "~", match.group(2)
        shown = target.rsplit(".", 1)[-1] if short else target
        try:
            identifier = obj.resolve(target) if "." not in target else target
        except (griffe.NameResolutionError, AttributeError, KeyError):
            identifier = None
        code = f"<code>{shown}</code>"
        return f'<autoref identifier="{identifier}" optional>{code}</autoref>' if identifier else code

    return ROLE.sub(replace, text)


def convert_blocks(text: str) -> str:
    lines = text.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        admonition = ADMONITION.match(line)
        if admonition:
            indent, kind, title = admonition.groups()
            kind = "info" if kind == "seealso" else kind
            out.append(f'{indent}!!! {kind} "{title}"' if title else f"{indent}!!! {kind}")
            index += 1
            continue
        literal = LITERAL_INTRO.match(line)
        if literal and index + 1 < len(lines):
            # The block: the following lines indented deeper than the introducing line (blank ones included).
            start = index + 1
            while start < len(lines) and not lines[start].strip():
                start += 1
            end = start
            while end < len(lines) and (
                not lines[end].strip() or indentation(lines[end]) > indentation(line)
            ):
                end += 1
            while end > start and not lines[end - 1].strip():
                end -= 1
            if end > start:
                prefix = literal.group(1)
                if prefix.strip():
                    out.append(prefix + ":")
                out.append("")
                indent = " " * indentation(line)
                block = lines[start:end]
                depth = min(indentation(text_line) for text_line in block if text_line.strip())
                code = "\n".join(text_line[depth:] for text_line in block)
                out.append(f"{indent}```{'python' if is_python(code) else 'text'}")
                out.extend(f"{indent}{text_line[depth:]}" if text_line.strip() else "" for text_line in block)
                out.append(f"{indent}```")
                index = end
                continue
        out.append(line)
        index += 1
    return "\n".join(out)


class SphinxMarkup(griffe.Extension):
    """Rewrites every docstring's reStructuredText markup into the Markdown mkdocstrings renders."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert_roles(convert_blocks(obj.docstring.value), obj)
