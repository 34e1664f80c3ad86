"""README.md's Python example keeps working: its first ```python block, run as a script by this venv's Python from
the repository root (the example's relative paths, ``examples/...``, are the checkout's)."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap

from conftest import ROOT


def readme_example() -> str:
    """The first ```python block of README.md (dedented: a block in a list item is indented)."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"^[ \t]*```python[ \t]*\n(.*?)^[ \t]*```", text, re.M | re.S)
    assert match, "README.md has no ```python block"
    return textwrap.dedent(match.group(1))


def test_readme_python_example_runs(tmp_path):
    script = tmp_path / "readme_example.py"
    script.write_text(readme_example())
    res = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"README.md's Python example failed:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
