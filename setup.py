"""flashschnet: a fast coarse-grained CGSchNet force field for OpenMM.

One import name, three source folders (the layout is fixed by the design):

* ``model/``   -> ``flashschnet``          network, kernels, CG mapping (never imports openmm)
* ``plugin/``  -> ``flashschnet.openmm``   OpenMM glue: forces, system building, reporters
* ``scripts/`` -> ``flashschnet.scripts``  thin command-line front ends
"""
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).parent


def _packages():
    """Every package under the three source folders (a folder with an ``__init__.py``), so a new sub-package
    needs no entry here; ``model/`` is ``flashschnet``, ``plugin/`` its ``openmm`` sub-package."""
    roots = {"model": "flashschnet", "plugin": "flashschnet.openmm", "scripts": "flashschnet.scripts"}
    found = []
    for folder, name in roots.items():
        for init in sorted((HERE / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(HERE / folder).parts
            found.append(".".join((name,) + rel))
    return found


def _requirements(name):
    lines = (HERE / name).read_text().splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


setup(
    name="flashschnet",
    version="0.1.0",
    description="Fast coarse-grained CGSchNet (mlcg) force field for OpenMM",
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=_packages(),
    package_dir={"flashschnet": "model", "flashschnet.openmm": "plugin", "flashschnet.scripts": "scripts"},
    install_requires=_requirements("requirements.txt"),
    extras_require={"test": [r for r in _requirements("requirements-test.txt") if r.startswith(("pytest", "hypothesis"))]},
    entry_points={
        "console_scripts": [
            "flashschnet-simulate = flashschnet.scripts.simulate:main",
            "flashschnet-benchmark = flashschnet.scripts.benchmark:main",
            "flashschnet-quantization-report = flashschnet.scripts.quantization_report:main",
            "flashschnet-martini = flashschnet.scripts.martini:main",
            "flashschnet-compare = flashschnet.scripts.compare:main",
            "flashschnet-convert = flashschnet.scripts.convert:main",
            "flashschnet-train = flashschnet.scripts.train:main",
            "flashschnet-analyze = flashschnet.scripts.analyze:main",
        ],
        # OpenMM-ML finds our potential here: MLPotential("flashschnet", modelPath=...)
        "openmmml.potentials": [
            "flashschnet = flashschnet.openmm.mlpotential:FlashSchNetPotentialImplFactory",
        ],
    },
)
