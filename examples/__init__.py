"""The bundled example files, installed with the package as ``flashschnet.examples`` (from this folder of the
checkout), so scripts and notebooks find them from any folder:

* ``1L2Y_trpcage.pdb`` -- trp-cage, all atoms (NMR model 1);
* ``4PTI_bpti.pdb`` -- BPTI, all atoms (flashschnet-benchmark's default structure);
* ``trpcage_trained.pt`` -- a CGSchNet trained on trp-cage only (docs/model-card-trpcage.md);
* ``trpcage_inner.pt`` -- its distilled inner model for multiple time stepping (docs/sampling.md);
* ``trpcage_placeholder.pt`` -- random weights with trp-cage priors (tests and speed, not science).

    >>> from flashschnet.examples import example_path
    >>> model = flashschnet.load_model(example_path("trpcage_trained.pt"))
"""
from __future__ import annotations

from pathlib import Path


def example_path(name: str) -> str:
    """The path of the bundled example file ``name`` (one of the files listed above), as a string.

    Raises
    ------
    FileNotFoundError
        No such example; the message lists the ones there are.
    """
    here = Path(__file__).resolve().parent       # the installed package's folder (or the checkout's examples/)
    path = here / name
    if name != path.name or not path.is_file():
        there = sorted(p.name for p in here.iterdir() if p.suffix in (".pdb", ".pt"))
        raise FileNotFoundError(f"no bundled example {name!r}; there are: {', '.join(there)}")
    return str(path)
