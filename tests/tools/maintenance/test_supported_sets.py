"""The two supported sets: requirements.txt (the verified one: openmm 8.5.2, openmm-ml 1.7) and
requirements-openmm86.txt (openmm 8.6.1, openmm-ml 1.8, in place of requirements.txt's lines for them):
``tools/maintenance/merge_pins.py`` makes the second, both lie within setup.py's ranges (``pip install .`` into either
keeps its openmm), the doctor's known XML crash is the second's and not the first's, and ``tools/maintenance/venv.sh``
builds each in a venv of its own (``FLASHSCHNET_PINS``), keyed by its files, the default venv's name unchanged."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import ROOT

PINS = ROOT / "requirements-openmm86.txt"
MERGE = ROOT / "tools" / "maintenance" / "merge_pins.py"
VENV_SH = ROOT / "tools" / "maintenance" / "venv.sh"


def _merged(base: Path = ROOT / "requirements.txt", pins: Path = PINS) -> str:
    res = subprocess.run([sys.executable, str(MERGE), str(base), str(pins)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _requirements(text: str):
    return [Requirement(ln.split("#", 1)[0].strip()) for ln in text.splitlines() if ln.split("#", 1)[0].strip()]


def _pins(text: str):
    return {r.name.lower(): next(iter(r.specifier)).version for r in _requirements(text) if "==" in str(r.specifier)}


def test_the_openmm86_set_replaces_only_openmm_and_openmmml():
    base, merged = (ROOT / "requirements.txt").read_text(), _merged()
    names = [r.name.lower() for r in _requirements(merged)]
    assert len(names) == len(set(names)), names                  # one line per package
    assert _pins(PINS.read_text()) == {"openmm": "8.6.1", "openmmml": "1.8"}
    want = dict(_pins(base), openmm="8.6.1", openmmml="1.8")
    assert _pins(merged) == want
    assert [str(r) for r in _requirements(merged) if "==" not in str(r.specifier)] == \
        [str(r) for r in _requirements(base) if "==" not in str(r.specifier)]      # the ranges kept, in order
    assert set(_pins(PINS.read_text())) <= set(_pins(base))       # replacements, not additions


def test_merge_pins_matches_names_as_pip_does(tmp_path):
    (tmp_path / "base.txt").write_text("# head\nFoo_Bar==1.0  # why\nbaz>=2\nqux.x==3\n")
    (tmp_path / "pins.txt").write_text("# mine\nfoo-bar==1.1\nQux_X==4\n")
    out = _merged(tmp_path / "base.txt", tmp_path / "pins.txt")
    assert out == "# head\nbaz>=2\n# mine\nfoo-bar==1.1\nQux_X==4\n"
    res = subprocess.run([sys.executable, str(MERGE), str(tmp_path / "base.txt")], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and "merge_pins.py" in res.stderr


@pytest.fixture(scope="module")
def ranges():
    """setup.py's requirements (core and every extra but the exact ``pinned``), read by running setup.py with
    ``setup`` replaced (the checkout's file, not an installed copy's metadata)."""
    code = ("import json, setuptools\n"
            "setuptools.setup = lambda **kw: print(json.dumps([kw['install_requires'], kw['extras_require']]))\n"
            "exec(compile(open('setup.py').read(), 'setup.py', 'exec'),\n"
            "     {'__file__': 'setup.py', '__name__': 'setup'})\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    core, extras = json.loads(res.stdout.strip().splitlines()[-1])
    found = {}
    for r in core + [r for name, reqs in extras.items() if name != "pinned" for r in reqs]:
        req = Requirement(r)
        found.setdefault(req.name.lower(), []).append(req.specifier)
    return found


@pytest.mark.parametrize("which", ["requirements.txt", "requirements-openmm86.txt"])
def test_each_set_lies_within_setup_py(ranges, which):
    """``pip install .`` (or '.[all]', '.[cuda13]') into an environment holding either set downgrades nothing."""
    text = (ROOT / "requirements.txt").read_text() if which == "requirements.txt" else _merged()
    for name, version in _pins(text).items():
        for spec in ranges.get(name, []):
            assert spec.contains(version, prereleases=True), f"{which}: {name}=={version} is outside setup.py's {spec}"
    assert ranges["openmm"] and ranges["openmmml"]


def test_the_known_xml_crash_is_the_openmm86_sets_only():
    from flashschnet.openmm.doctor_explain import Env, known_xml_crash

    for text, known in (((ROOT / "requirements.txt").read_text(), False), (_merged(), True)):
        pins = _pins(text)
        env = Env(openmm_version=pins["openmm"],
                  openmmtorch=[("acellera-openmmtorch-cpu", pins["acellera-openmmtorch-cpu"])])
        assert (known_xml_crash(env) is not None) is known, pins["openmm"]


# -- tools/maintenance/venv.sh -----------------------------------------------------------------------------------------

def _key(*files: Path) -> str:
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]


def _fake_python(tmp_path: Path) -> Path:
    """A ``PYTHON`` for tools/maintenance/venv.sh: the real interpreter, except ``-m venv DIR`` makes DIR/bin/python a
    stub that logs its arguments (pip installs nothing) and exits 0."""
    log = tmp_path / "pip.log"
    stub = f"#!/bin/sh\necho \"$@\" >> {log}\nexit 0\n"
    fake = tmp_path / "python"
    fake.write_text(f"""#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin" && printf '%s' '{stub}' > "$3/bin/python" && chmod +x "$3/bin/python"; exit 0
fi
exec {sys.executable} "$@"
""")
    fake.chmod(0o755)
    return fake


def _venv_sh(tmp_path: Path, **env):
    full = {k: v for k, v in os.environ.items() if k != "FLASHSCHNET_PINS"}
    full.update(FLASHSCHNET_VENV_ROOT=str(tmp_path / "venvs"), PYTHON=str(_fake_python(tmp_path)), **env)
    return subprocess.run(["bash", str(VENV_SH)], capture_output=True, text=True, env=full, timeout=120)


def test_venv_sh_builds_each_set_in_a_venv_of_its_own(tmp_path):
    pyver = "%d.%d" % sys.version_info[:2]
    res = _venv_sh(tmp_path)
    assert res.returncode == 0, res.stderr
    default = tmp_path / "venvs" / f"py{pyver}-{_key(ROOT / 'requirements.txt', ROOT / 'requirements-test.txt')}"
    assert res.stdout.strip() == str(default) and (default / ".complete").exists()
    assert f"-r {ROOT}/requirements.txt -r {ROOT}/requirements-test.txt" in (tmp_path / "pip.log").read_text()

    res = _venv_sh(tmp_path, FLASHSCHNET_PINS="requirements-openmm86.txt")
    assert res.returncode == 0, res.stderr
    key = _key(ROOT / "requirements.txt", ROOT / "requirements-test.txt", PINS)
    second = tmp_path / "venvs" / f"py{pyver}-openmm86-{key}"
    assert res.stdout.strip() == str(second) and (second / ".complete").exists()
    assert (second / "requirements.txt").read_text() == _merged()
    assert f"-r {second}/requirements.txt -r {ROOT}/requirements-test.txt" in (tmp_path / "pip.log").read_text()
    assert re.search(r"install -q --no-deps --no-build-isolation -e " + re.escape(str(ROOT)),
                     (tmp_path / "pip.log").read_text())


def test_venv_sh_refuses_a_missing_pins_file(tmp_path):
    res = _venv_sh(tmp_path, FLASHSCHNET_PINS="requirements-nope.txt")
    assert res.returncode == 1 and "FLASHSCHNET_PINS: no such file" in res.stderr and not res.stdout


def test_the_upstream_report_shows_the_reproducer_as_it_is():
    """docs/install.md's code block of the report is tools/maintenance/openmmtorch_xml_crash.py's code (below its
    docstring), and the reproducer imports nothing of flashschnet."""
    tool = (ROOT / "tools" / "maintenance" / "openmmtorch_xml_crash.py").read_text()
    code = tool.split('"""', 2)[2].lstrip("\n")
    doc = (ROOT / "docs" / "install.md").read_text()
    report = doc[doc.index("### Upstream-ready report"):]
    block = re.search(r"```python\n(.*?)```", report, re.S).group(1)
    assert block == code
    assert "flashschnet" not in code
