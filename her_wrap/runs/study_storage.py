"""Optuna storages for ``her-wrap optimize``: SQLite by default, PostgreSQL for studies many machines share.

Many processes may open one new study at once: the first creates the schema, the others wait
(:func:`schema_lock`); SQLite connections wait for each other's writes; a trial whose process died is
failed once it misses its heartbeats and run again (Optuna's heartbeat and retry callback).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import re
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from her_wrap.runs.errors import UsageError

#: Seconds a PostgreSQL connection attempt may take before the storage counts as unreachable.
CONNECT_TIMEOUT_S = 10
#: Seconds a SQLite connection waits for another worker's write before it fails.
SQLITE_BUSY_TIMEOUT_S = 60
#: Default seconds between a running trial's heartbeats.
DEFAULT_HEARTBEAT_S = 60
#: Times a trial whose worker died is run again.
TRIAL_RETRIES = 2
# Concurrent workers may race to create Optuna's tables in PostgreSQL; the loser retries.
_STORAGE_ATTEMPTS = 5


def hide_password(url: str) -> str:
    """A storage URL fit for printing: the password replaced by ``***``."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def sqlalchemy_url(url: str) -> str:
    """A storage URL with an installed PostgreSQL driver: ``postgresql://`` selects psycopg 3 when
    psycopg2 (SQLAlchemy's default driver) is absent.

    :raises UsageError: for a PostgreSQL URL when neither driver is installed
    """
    match = re.match(r"^(postgresql|postgres)(\+\w+)?://", url)
    if match is None or match.group(2):
        return url
    rest = url[match.end() :]
    if importlib.util.find_spec("psycopg2") is not None:
        return f"postgresql+psycopg2://{rest}"
    if importlib.util.find_spec("psycopg") is not None:
        return f"postgresql+psycopg://{rest}"
    raise UsageError("a PostgreSQL storage needs the psycopg driver: pip install her_wrap[postgres]")


def open_storage(url: str, *, heartbeat_interval: int | None = None) -> Any:
    """An Optuna storage for a URL, connected and with its tables created.

    Workers that open one new database at the same moment create its tables once: on a SQLite file the
    first holds a lock (:func:`schema_lock`) while the others wait; on PostgreSQL a worker that loses the
    race retries.

    :param heartbeat_interval: seconds between a running trial's heartbeats (``None``: none); a trial silent
        for twice that long is failed by the next trial a worker starts and run again, up to
        :data:`TRIAL_RETRIES` times
    :raises UsageError: when the URL is malformed or its database unreachable, in one line
    """
    import optuna
    import sqlalchemy.exc

    resolved = sqlalchemy_url(url)
    engine_kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if resolved.startswith("postgresql"):
        engine_kwargs["connect_args"] = {"connect_timeout": CONNECT_TIMEOUT_S}
    elif resolved.startswith("sqlite"):
        engine_kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_S}
    for attempt in range(_STORAGE_ATTEMPTS):
        try:
            with schema_lock(resolved), warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    resolved, engine_kwargs=engine_kwargs, **_heartbeat_options(heartbeat_interval)
                )
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            if attempt == _STORAGE_ATTEMPTS - 1:
                raise
            time.sleep(0.5 * (attempt + 1))  # another worker is creating the tables
        except Exception as error:  # any driver or URL error: report it in one line
            detail = " ".join(str(getattr(error, "orig", None) or error).split())
            raise UsageError(f"cannot open the Optuna storage {hide_password(url)}: {detail}") from None
    raise AssertionError("unreachable")


def _heartbeat_options(heartbeat_interval: int | None) -> dict[str, Any]:
    """RDBStorage's keywords for heartbeats and the retry of stale trials, in this Optuna's names."""
    import optuna

    if not heartbeat_interval:
        return {}
    retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)  # Optuna >= 4.9
    if retry is None:
        retry = optuna.storages.RetryFailedTrialCallback(max_retry=TRIAL_RETRIES)
        return {"heartbeat_interval": heartbeat_interval, "failed_trial_callback": retry}
    return {
        "heartbeat_interval": heartbeat_interval,
        "heartbeat_stale_trial_callback": retry(max_retry=TRIAL_RETRIES),
    }


@contextlib.contextmanager
def schema_lock(url: str) -> Iterator[None]:
    """Hold, on a SQLite file, a lock that every worker on this machine opening that file takes.

    SQLite has no transactional ``CREATE TABLE IF NOT EXISTS`` across Optuna's tables: two workers that
    create them at once both try, and one fails (``table ... already exists``). The lock file lives in the
    temporary folder, named after the database's path, so that the study's folder holds only its results.
    Other URLs, in-memory databases and systems without ``fcntl`` take no lock.
    """
    path = url.split(":///", 1)[1] if url.startswith("sqlite:///") else ""
    try:
        import fcntl
    except ImportError:  # Windows
        path = ""
    if not path or path == ":memory:":
        yield
        return
    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"her_wrap-optuna-{digest}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
