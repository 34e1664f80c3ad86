"""README.md keeps working as written: its first ```python block, run as a script by this venv's Python from a
folder outside the checkout (the example finds the bundled files through ``flashschnet.examples``); the line that
puts the commands on PATH after the quickstart; its outputs and links; its length."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import ROOT


def readme_example() -> str:
    """The first ```python block of README.md (dedented: a block in a list item is indented)."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"^[ \t]*```python[ \t]*\n(.*?)^[ \t]*```", text, re.M | re.S)
    assert match, "README.md has no ```python block"
    return textwrap.dedent(match.group(1))


def test_readme_python_example_runs_from_any_folder(tmp_path):
    script = tmp_path / "readme_example.py"
    script.write_text(readme_example())
    assert "trpcage_trained.pt" in script.read_text()            # the trained model, not the random placeholder
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"README.md's Python example failed:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    lines = res.stdout.strip().splitlines()                       # what it computed, with its units
    assert len(lines) == 2 and lines[0].endswith(" kJ/mol") and lines[1].endswith(" kcal/mol"), res.stdout


ACTIVATE = 'source "$(bash tools/maintenance/venv.sh)/bin/activate"'


def test_after_the_quickstart_readme_says_how_to_get_the_commands():
    """The quickstart's venv is named to the user (README's ``source`` line, the script's last line) before
    README's first command-line block, and that line gives this venv: the one tools/maintenance/venv.sh made, with the
    commands in its bin/."""
    text = (ROOT / "README.md").read_text()
    assert ACTIVATE in text and text.index(ACTIVATE) < text.index("flashschnet-simulate examples/")
    script = (ROOT / "examples" / "quickstart.sh").read_text()
    assert script.rstrip().splitlines()[-1] == 'echo "  source $venv/bin/activate"'
    venv_sh = (ROOT / "tools" / "maintenance" / "venv.sh").read_text()
    assert 'echo "$venv"' in venv_sh.rstrip().splitlines()[-1]       # venv.sh prints the venv it made, last
    for name in ("activate", "flashschnet-simulate", "flashschnet-analyze", "flashschnet-backmap"):
        assert (Path(sys.prefix) / "bin" / name).exists(), name


def test_readme_lists_what_the_quickstart_writes(tmp_path):
    """The files README says the quickstart writes are the files a run of that command writes (10 steps here)."""
    from flashschnet.scripts.simulate import main

    text = " ".join((ROOT / "README.md").read_text().split())
    listed = re.search(r"into `runs/quickstart/`: (.*?)\. The second", text).group(1)
    out = tmp_path / "q"
    assert main([str(ROOT / "examples" / "1L2Y_trpcage.pdb"), "--model", str(ROOT / "examples" / "trpcage_trained.pt"),
                 "--steps", "10", "--report-interval", "5", "--threads", "1", "--quiet", "--out", str(out)]) == 0
    written = {p.name for p in out.iterdir()}
    named = set(re.findall(r"`([\w.]+)`", listed)) | ({"replica_000.dcd"} if "one DCD per replica" in listed else set())
    assert named == written, (named, written)


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
