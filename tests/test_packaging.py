"""Packaging: one import name, every source folder shipped, the layout the design fixes."""
import re

from conftest import ROOT


def test_every_package_folder_is_listed_in_setup_py():
    setup = (ROOT / "setup.py").read_text()
    listed = dict(re.findall(r'"(flashschnet(?:\.\w+)*)": "([\w/]+)"', setup))
    folders = {"model": "flashschnet", "plugin": "flashschnet.openmm", "scripts": "flashschnet.scripts"}
    for top, name in folders.items():
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top).parts
            pkg = ".".join((name,) + rel)
            assert listed.get(pkg) == "/".join((top,) + rel), f"{pkg} ({init.parent}) missing from setup.py"


def test_model_never_imports_openmm():
    for py in (ROOT / "model").rglob("*.py"):
        text = py.read_text()
        assert not re.search(r"^\s*(import openmm|from openmm)", text, re.M), f"{py} imports openmm"


def test_no_top_level_model_or_plugin_import_names():
    import importlib.util

    assert importlib.util.find_spec("flashschnet") is not None
    for name in ("model", "plugin"):
        spec = importlib.util.find_spec(name)
        assert spec is None or "site-packages" not in str(spec.origin), f"a top-level {name!r} package is installed"
