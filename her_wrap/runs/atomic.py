"""Atomic file replacement: a file is either its old complete version or its new complete version.

The new content is written to a temporary file in the destination's folder (same file system), flushed to
disk with ``fsync``, and moved over the destination with ``os.replace``, which POSIX makes atomic; the
folder is then synced so the rename itself survives a power cut. A process killed at any point leaves the
previous file intact, plus at worst a stray temporary file whose name starts with ``.tmp-`` (never a name
a checkpoint search matches).
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from her_wrap.runs.errors import RunError

TEMPORARY_PREFIX = ".tmp-"
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _fsync_path(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def atomic_write(destination: Path, write: Callable[[Path], object]) -> None:
    """Produce ``destination`` atomically with a writer that takes a path.

    :param destination: final path of the file
    :param write: called with a temporary path in the same folder that ends with the destination's suffix
        (stable-baselines3's ``save`` functions append ``.zip``/``.pkl`` to paths that lack it); it must
        create exactly that file
    :raises FileNotFoundError: when ``write`` did not create the temporary file
    :raises RunError: when the disk (or quota) is full, naming the path and the space needed; the
        previous version of ``destination`` is left as it was, and no temporary file is left behind
    """
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(
        prefix=f"{TEMPORARY_PREFIX}{destination.stem}-", suffix=destination.suffix, dir=destination.parent
    )
    os.close(handle)
    temporary = Path(name)
    # The name stays unique (random); removing the empty file lets the check below catch a writer that
    # saved somewhere else (a suffix appended twice, say) instead of silently installing an empty file.
    temporary.unlink()
    try:
        write(temporary)
        if not temporary.is_file():
            raise FileNotFoundError(f"the writer did not create {temporary}")
        _fsync_path(temporary)
        os.replace(temporary, destination)
    except OSError as error:
        written = temporary.stat().st_size if temporary.is_file() else 0
        temporary.unlink(missing_ok=True)
        if error.errno in _NO_SPACE:
            raise RunError(_no_space_message(destination, written)) from None
        raise
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_path(destination.parent)


def _no_space_message(destination: Path, written: int) -> str:
    """One line on a write the disk had no room for: the path, the space it needs and the space free.

    The space needed is estimated from what the write had put down before it failed, the file it was to
    replace, and the largest file of the same kind beside it (the previous checkpoint, for a checkpoint).
    """
    previous = destination.stat().st_size if destination.is_file() else 0
    siblings = [
        path.stat().st_size for path in destination.parent.glob(f"*{destination.suffix}") if path.is_file()
    ]
    needed = max(written, previous, *siblings)
    free = shutil.disk_usage(destination.parent).free
    kept = "its previous version is intact" if previous else "nothing was written there"
    return (
        f"no space left on the device to write {destination} (it needs about {_size(needed)}, "
        f"{_size(free)} free); {kept}. Free some space, or point -f/--log-folder at another disk."
    )


def _size(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"


def atomic_write_text(destination: Path, text: str) -> None:
    """Write a text file atomically (UTF-8)."""
    atomic_write(destination, lambda path: path.write_text(text, encoding="utf-8"))


def remove_stale_temporaries(folder: Path) -> None:
    """Delete temporary files a killed writer left in ``folder`` (they are never complete files)."""
    for stale in Path(folder).glob(f"{TEMPORARY_PREFIX}*"):
        stale.unlink(missing_ok=True)
