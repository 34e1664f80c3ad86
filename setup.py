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
    roots = {"model": "flashschnet", "plugin": "flashschnet.openmm", "scripts": "flashschnet.scripts",
             "examples": "flashschnet.examples"}
    found = []
    for folder, name in roots.items():
        for init in sorted((HERE / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(HERE / folder).parts
            found.append(".".join((name,) + rel))
    return found


def _requirements(name):
    lines = (HERE / name).read_text().splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


# Compatible ranges. The exact set we verified is requirements.txt (tools/maintenance/venv.sh installs it; the extra
# ``pinned`` is that set). Lower bounds: the verified release lines. Upper bounds: known breakages --
# * openmm-torch: acellera's builds (module ``openmmtorch``) are the only ones on PyPI for torch >= 2.10
#   (openmmtorch 1.5 fails at every TorchForce call with torch >= 2.10). We take ``acellera-openmmtorch-cpu``
#   for the core: its Reference/CPU/OpenCL plugins need no CUDA library, so ``pip install .`` works on any
#   Linux machine; the extras ``cuda12`` / ``cuda13`` add the build of the same release whose CUDA plugin
#   matches torch's CUDA major version (a superset of the CPU build's files, same release: the files both ship
#   come from one source, the CUDA plugin only from the CUDA build). Metadata: torch>=2.10,<2.13.
# * openmm < 8.7: 8.5.2 is the verified default (requirements.txt); 8.6.x is supported (requirements-openmm86.txt:
#   openmm 8.6.1 + openmm-ml 1.8; CI runs a smoke subset of the suite with it). With openmm 8.6.x one thing crashes:
#   deserializing a System that holds a TorchForce segfaults inside openmm-torch 1.10's TorchForceProxy::deserialize
#   (acellera's build was compiled against OpenMM 8.5), which flashschnet never does; flashschnet-doctor warns about
#   it, ``python tools/maintenance/openmmtorch_xml_crash.py`` reproduces it without flashschnet (docs/install.md). 8.7:
#   not released yet.
# * openmm-ml < 1.9: 1.7 with openmm 8.5 (1.8 needs openmm >= 8.6.1), 1.8 with openmm 8.6.1.
# * insane 1.2.0 imports pkg_resources, which setuptools 81 removed.
OPENMM = "openmm>=8.5,<8.7"
OPENMMTORCH = ">=1.10,<1.11"
#: what flashschnet-simulate, -convert, -benchmark, -train md and flashschnet.openmm.build_system need
CORE = [
    "torch>=2.10,<2.13",
    OPENMM,
    "acellera-openmmtorch-cpu" + OPENMMTORCH,
    "numpy>=1.26,<2.6",
    "mdtraj>=1.11,<2",
    "pdbfixer>=1.12,<2",   # flashschnet.openmm.cleaning (both force fields read the PDB it cleans)
    "tqdm>=4.66",
]
EXTRAS = {
    # the OpenMM CUDA platform and openmm-torch's CUDA plugin, for a torch built with CUDA 12 or 13 (torch 2.11
    # from PyPI on Linux is CUDA 13): flashschnet-simulate --platform CUDA; flashschnet-doctor checks them
    "cuda12": [OPENMM.replace("openmm", "openmm[cuda12]"), "acellera-openmmtorch-cu12" + OPENMMTORCH],
    "cuda13": [OPENMM.replace("openmm", "openmm[cuda13]"), "acellera-openmmtorch-cu13" + OPENMMTORCH],
    # flashschnet-martini, flashschnet-compare: martinize2 (vermouth) and insane write the MARTINI system
    "martini": ["vermouth>=0.15,<0.16", "insane>=1.2,<1.3", "setuptools>=70,<81"],
    # figures (flashschnet-analyze, -compare, -train fit/validate), HDF5 trajectories (mdtraj via PyTables) and MBAR
    # (flashschnet-analyze's thermodynamics of a parallel-tempering run; pymbar 4's numpy solver, jax not needed)
    "analysis": ["matplotlib>=3.8", "tables>=3.11", "pymbar>=4.0.3,<5"],
    # MLPotential("flashschnet") in OpenMM-ML (1.7 with openmm 8.5; 1.8 needs openmm >= 8.6.1, which pip then keeps)
    "openmmml": ["openmmml>=1.7,<1.9"],
    # flashschnet-simulate --workers N / --scheduler ADDRESS: blocks of walkers as Dask actors
    "cluster": ["dask>=2026.8", "distributed>=2026.8"],
    # flashschnet-backmap: FASPR packs side chains (pyfaspr compiles it with g++ when installed from its source
    # package, and carries a prebuilt Linux x86-64 executable besides), PULCHRA rebuilds backbones from CA atoms
    # (pulchra's Python port reads PDB files with Biopython). Pinned: their output is the backmapped structure.
    "backmap": ["pyfaspr==0.3.1", "pulchra==1.0.1", "biopython>=1.79"],
    "test": [r for r in _requirements("requirements-test.txt") if r.startswith(("pytest", "hypothesis"))],
}
EXTRAS["all"] = sorted({r for extra in ("martini", "analysis", "openmmml", "cluster", "backmap", "test")
                        for r in EXTRAS[extra]})
EXTRAS["pinned"] = _requirements("requirements.txt")      # the verified versions, exactly


setup(
    name="flashschnet",
    version="0.1.0",
    description="Fast coarse-grained CGSchNet (mlcg) force field for OpenMM",
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    license="MIT",
    license_files=["LICENSE"],
    packages=_packages(),
    package_dir={"flashschnet": "model", "flashschnet.openmm": "plugin", "flashschnet.scripts": "scripts",
                 "flashschnet.examples": "examples"},
    # the bundled structures and models (flashschnet.examples.example_path; flashschnet-benchmark's default
    # structure), so that they are found from any folder
    package_data={"flashschnet.examples": ["*.pdb", "*.pt"]},
    install_requires=CORE,
    extras_require=EXTRAS,
    entry_points={
        "console_scripts": [
            "flashschnet-simulate = flashschnet.scripts.simulate:main",
            "flashschnet-benchmark = flashschnet.scripts.benchmark:main",
            "flashschnet-martini = flashschnet.scripts.martini:main",
            "flashschnet-compare = flashschnet.scripts.compare:main",
            "flashschnet-convert = flashschnet.scripts.convert:main",
            "flashschnet-train = flashschnet.scripts.train:main",
            "flashschnet-analyze = flashschnet.scripts.analyze:main",
            "flashschnet-doctor = flashschnet.scripts.doctor:main",
            "flashschnet-backmap = flashschnet.scripts.backmap:main",
            "flashschnet-distill = flashschnet.scripts.distill:main",
        ],
        # OpenMM-ML finds our potential here: MLPotential("flashschnet", modelPath=...)
        "openmmml.potentials": [
            "flashschnet = flashschnet.openmm.mlpotential:FlashSchNetPotentialImplFactory",
        ],
    },
)
