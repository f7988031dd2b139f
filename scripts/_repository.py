"""Puts the repository root on ``sys.path``: a script run as ``python scripts/NAME.py`` sees only
``scripts/`` there, and the lab it runs (``lab/``, not installed with her_wrap) lives beside it."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
