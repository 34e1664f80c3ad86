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


# --------------------------------------------------------------------- the README, the docs index, the licence
LINKED = ("README.md", "docs/README.md", "docs/usage.md", "docs/install.md", "docs/development.md")


def relative_links(path):
    """The relative targets of a Markdown file's ``[text](target)`` links, without ``#anchors`` (web addresses and
    in-page anchors left out), resolved against the file's folder."""
    text = path.read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [(t, (path.parent / t.split("#", 1)[0]).resolve()) for t in targets
            if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_readme_is_a_five_minute_read():
    words = len((ROOT / "README.md").read_text().split())        # what `wc -w README.md` counts
    assert words <= 1000, f"README.md has {words} words; keep it <= 1,000 (details belong in docs/)"


def test_relative_links_point_to_files_that_exist():
    broken = [f"{name}: {t}" for name in LINKED for t, target in relative_links(ROOT / name) if not target.exists()]
    assert not broken, "links to missing files:\n" + "\n".join(broken)


def test_the_docs_index_lists_every_file_in_docs():
    listed = {target for _, target in relative_links(ROOT / "docs" / "README.md")}
    missing = sorted(p.name for p in (ROOT / "docs").iterdir()
                     if p.is_file() and p.name != "README.md" and p.resolve() not in listed)
    assert not missing, f"docs/README.md does not list: {missing} (one line each: what it answers)"


def test_license_and_citation_file():
    import yaml

    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["title"] == "flashschnet" and cff["license"] == "MIT"
    version = re.search(r'^\s*version="([^"]+)"', (ROOT / "setup.py").read_text(), re.M).group(1)
    assert cff["version"] == version, (cff["version"], version)
    assert {"message", "authors", "date-released"} <= set(cff)
    titles = " | ".join(ref["title"] for ref in cff["references"])
    assert "FlashSchNet" in titles and "Coarse graining molecular dynamics with graph neural networks" in titles
