"""The one exception the ``her-wrap`` command turns into a one-line message and a non-zero exit."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: an unknown env id, a config entry that is missing or malformed, a storage
    URL that cannot be reached, ...

    The message is one line that names the problem and, where there is one, the fix. ``her-wrap`` prints
    it without a traceback and exits with status 2; anything else that goes wrong is a bug and keeps its
    traceback.
    """
