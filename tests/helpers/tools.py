"""The maintainer tools in ``tools/`` (report generators, not installed with the package), imported by tests.

``tool("quantization_report")`` imports ``tools/quantization_report.py`` as the module ``quantization_report``,
with ``tools/`` on ``sys.path`` as when the tool runs as a script, so the tool and the tests share its helper
modules (e.g. ``quant_accuracy``: a test's monkeypatch of it is what the tool calls).
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def tool(name: str) -> ModuleType:
    """The module ``tools/<name>.py``."""
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    return importlib.import_module(name)
