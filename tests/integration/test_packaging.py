"""Packaging: one import name, every source folder shipped, the layout the design fixes; the core dependencies
without the optional ones; a wheel installed outside the checkout runs ``flashschnet-benchmark``; a command
whose optional dependency is missing says which extra to install, in one line."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT

SOURCES = {"model": "flashschnet", "plugin": "flashschnet.openmm", "scripts": "flashschnet.scripts",
           "examples": "flashschnet.examples"}
OPTIONAL = ("vermouth", "insane", "matplotlib", "tables", "pymbar", "openmmml", "dask", "distributed", "pyfaspr",
            "pulchra", "biopython", "pytest", "hypothesis")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel of this checkout, built from a copy of its sources (a build writes build/ and *.egg-info beside
    setup.py; the checkout stays untouched), with the venv's setuptools (no network)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for folder in SOURCES:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("setup.py", "README.md", "LICENSE", "requirements.txt", "requirements-test.txt"):
        shutil.copy(ROOT / name, src / name)
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                          "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    (whl,) = (tmp / "dist").glob("flashschnet-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """The wheel installed (no dependencies: the venv's are used) into a folder of its own."""
    target = tmp_path_factory.mktemp("target")
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target",
                          str(target), str(wheel)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return target


def _metadata(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as z:
        (path,) = [n for n in z.namelist() if n.endswith(".dist-info/" + name)]
        return z.read(path).decode()


def test_every_package_folder_and_the_data_are_in_the_wheel(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    for folder, package in SOURCES.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.relative_to(ROOT / folder)
            path = "/".join(package.split(".") + list(rel.parts))
            assert path in names, f"{init.parent} is not shipped as {path}"
    for example in ("4PTI_bpti.pdb", "1L2Y_trpcage.pdb", "trpcage_trained.pt", "trpcage_inner.pt"):
        assert f"flashschnet/examples/{example}" in names
    assert "flashschnet/openmm/benchmark/worker.py" in names
    assert not any(n.startswith(("model/", "plugin/", "scripts/", "examples/", "tools/", "tests/")) for n in names)
    assert any(".dist-info/" in n and n.endswith("/LICENSE") for n in names), "LICENSE is not in the wheel"
    meta = _metadata(wheel, "METADATA").splitlines()
    assert "License-Expression: MIT" in meta or "License: MIT" in meta, [m for m in meta if "icense" in m]


def test_core_requirements_leave_the_optional_packages_to_extras(wheel):
    requires = [ln.split(":", 1)[1].strip() for ln in _metadata(wheel, "METADATA").splitlines()
                if ln.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    names = {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in core}
    assert names == {"torch", "openmm", "acellera-openmmtorch-cpu", "numpy", "mdtraj", "tqdm", "pdbfixer"}, core
    assert not any("==" in r for r in core), core                 # ranges, not pins
    extras = set(re.findall(r'extra == "([\w-]+)"', "\n".join(requires)))
    assert extras >= {"martini", "analysis", "openmmml", "cluster", "backmap", "test", "all", "pinned", "cuda12",
                      "cuda13"}
    from packaging.requirements import Requirement

    core_omt = next(Requirement(r) for r in core if r.startswith("acellera-openmmtorch-cpu"))
    for major in ("12", "13"):   # the OpenMM CUDA platform and openmm-torch's CUDA plugin, one release with the core's
        extra = [Requirement(r) for r in requires if f'extra == "cuda{major}"' in r]
        assert any(r.name == "openmm" and r.extras == {f"cuda{major}"} for r in extra), extra
        cuda_omt = next(r for r in extra if r.name == f"acellera-openmmtorch-cu{major}")
        assert cuda_omt.specifier == core_omt.specifier, (core_omt, cuda_omt)
    for name in OPTIONAL:
        assert any(r.lower().startswith(name) and 'extra == "all"' in r for r in requires), name


def test_the_verified_pins_lie_within_the_ranges(wheel):
    """requirements.txt (what tools/maintenance/venv.sh installs) is one point of setup.py's ranges, core and extras."""
    from packaging.requirements import Requirement

    ranges = {}
    for ln in _metadata(wheel, "METADATA").splitlines():
        if ln.startswith("Requires-Dist:"):
            req = Requirement(ln.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate({"extra": "all"}):
                ranges.setdefault(req.name.lower(), []).append(req.specifier)
    pins = [Requirement(ln.split("#", 1)[0].strip()) for ln in (ROOT / "requirements.txt").read_text().splitlines()
            if "==" in ln.split("#", 1)[0]]
    assert len(pins) >= 8
    for pin in pins:
        version = next(iter(pin.specifier)).version
        assert pin.name.lower() in ranges, f"{pin} is in requirements.txt but not in setup.py"
        for spec in ranges[pin.name.lower()]:
            assert spec.contains(version, prereleases=True), f"{pin} is outside setup.py's {pin.name}{spec}"


def test_console_scripts(wheel):
    scripts = _metadata(wheel, "entry_points.txt")
    for name in ("simulate", "benchmark", "martini", "compare", "convert", "train", "analyze", "doctor", "backmap"):
        assert f"flashschnet-{name} = flashschnet.scripts.{name}:main" in scripts
    assert "quantization" not in scripts          # a maintainer's tool: python tools/benchmarks/quantization_report.py


def test_benchmark_runs_from_the_installed_wheel_outside_the_checkout(installed, tmp_path):
    """``cd /tmp && flashschnet-benchmark --help`` and a small run, with the package (its default structure and
    model included) from the installed wheel, not from the checkout."""
    env = dict(os.environ, PYTHONPATH=str(installed), OMP_NUM_THREADS="1")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    which = subprocess.run([sys.executable, "-c", "import flashschnet, flashschnet.openmm.benchmark.worker as w; "
                            "print(flashschnet.__file__); print(w.__file__)"],
                           capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert which.returncode == 0, which.stderr
    for line in which.stdout.split():
        assert Path(line).resolve().is_relative_to(installed.resolve()), which.stdout

    entry = installed / "bin" / "flashschnet-benchmark"
    res = subprocess.run([str(entry), "--help"], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "--pdb" in res.stdout and "built-in CGSchNet" in res.stdout

    res = subprocess.run([str(entry), "--replicas", "1", "--backends", "torch", "--repeats", "1", "--warmup", "0",
                          "--openmm-steps", "2", "--openmm-replicas", "1", "--threads", "1", "--device", "cpu",
                          "--compress", "auto", "--out", "b.json"],       # the default network only
                         capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert res.returncode == 0, res.stderr
    report = json.loads((cwd / "b.json").read_text())
    s = report["settings"]
    assert Path(s["pdb"]).resolve() == (installed / "flashschnet" / "examples" / "4PTI_bpti.pdb").resolve()
    assert s["pdb_name"] == "4PTI_bpti.pdb" and s["n_beads"] == 284 and s["model"].startswith("built-in CGSchNet")
    (r,) = report["results"]
    assert r["status"] == "ok" and r["outputs_finite"] and r["weights_kb"] > 0 and r["compress"] == "float32", r
    (o,) = report["openmm"]
    assert o["status"] == "ok" and o["positions_finite"], o
    assert "4PTI_bpti.pdb (284 beads)" in res.stdout


# ------------------------------------------------------------------------------- optional dependencies
def test_a_missing_martini_program_names_the_extra(tmp_path, monkeypatch, capsys):
    from flashschnet.scripts.martini import main

    ff = tmp_path / "ff"
    ff.mkdir()
    for f in ("martini_v3.0.0.itp", "martini_v3.0.0_ions_v1.itp", "martini_v3.0.0_solvents_v1.itp"):
        (ff / f).write_text("")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python"))   # martinize2 is looked for
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))                            # beside it, then on PATH
    rc = main([str(EXAMPLES / "1L2Y_trpcage.pdb"), "--forcefield-dir", str(ff), "--steps", "1",
               "--out", str(tmp_path / "out"), "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("flashschnet-martini: error: martinize2 not found"), err
    assert err[-1].endswith("pip install 'flashschnet[martini]' (martinize2 and insane, pinned)"), err
    assert "Traceback" not in "\n".join(err)


def test_a_missing_matplotlib_names_the_extra(tmp_path, monkeypatch, capsys):
    from flashschnet.scripts.analyze import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)          # as if not installed
    assert main([str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["flashschnet-analyze: error: matplotlib is not installed (an optional dependency); "
                   "pip install 'flashschnet[analysis]'"]


def test_an_optional_import_failing_late_names_the_extra(capsys):
    from flashschnet.scripts._cli import finish

    def job(echo):
        raise ModuleNotFoundError("No module named 'tables'", name="tables")

    assert finish("flashschnet-x", job, str) == 2
    assert capsys.readouterr().err.strip() == ("flashschnet-x: error: tables is not installed (an optional "
                                               "dependency); pip install 'flashschnet[analysis]'")

    def other(echo):
        raise ModuleNotFoundError("No module named 'nonsense'", name="nonsense")

    with pytest.raises(ModuleNotFoundError):                       # not ours to explain: a real bug
        finish("flashschnet-x", other, str)


# ------------------------------------------------------------------------------------------ the layout
def test_no_top_level_model_or_plugin_import_names():
    import importlib.util

    assert importlib.util.find_spec("flashschnet") is not None
    for name in ("model", "plugin"):
        spec = importlib.util.find_spec(name)
        assert spec is None or "site-packages" not in str(spec.origin), f"a top-level {name!r} package is installed"
