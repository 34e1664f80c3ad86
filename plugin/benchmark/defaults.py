"""The benchmark's default structure and model, available from an installed package (no checkout needed).

* structure: BPTI, ``examples/4PTI_bpti.pdb`` (284 beads in the 5-bead mapping), shipped as package data of
  ``flashschnet.examples`` and found with :func:`flashschnet.examples.example_path`;
* model: a CGSchNet built in code with exactly the hyper-parameters of the mlcg oracle
  ``tests/data/oracles/mlcg_schnet_A.pt`` (mlcg ``StandardSchNet``: hidden 128, filters 128, 3 interaction
  blocks, 50 Gaussian radial basis functions, 15 A cutoff, cosine envelopes, output network 128-64-1, tanh,
  25 bead types), with **random weights**: PyTorch's default initialisation under ``torch.manual_seed``
  (:data:`WEIGHT_SEED`), so every run and machine gets the same network. The oracle's weights are random too.
  The cost of ``energy_forces`` does not depend on the weight values (the same operations run on the same
  shapes whatever the numbers; the neighbour lists depend on the positions only), so the timings and the
  memory are those of a trained model of the same architecture. No priors: the benchmark times the network.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator, Optional

#: file name of the default structure among the bundled examples (``flashschnet.examples``)
DEFAULT_PDB_NAME = "4PTI_bpti.pdb"

#: the seed of the built-in model's random weights
WEIGHT_SEED = 1234

#: the hyper-parameters of mlcg_schnet_A.pt (its ``hyperparameters``, in our config layout; a test checks them
#: against the oracle file)
DEFAULT_CONFIG = {
    "hidden_channels": 128,
    "num_filters": 128,
    "num_interactions": 3,
    "embedding_size": 25,
    "output_hidden_layer_widths": [128, 64],
    "activation": "tanh",
    "rbf": {"kind": "gaussian", "num_rbf": 50,
            "cutoff": {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 15.0}},
    "cutoff": {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 15.0},
    "cg_mapping": "5bead",
}

#: how reports name the built-in model
DEFAULT_MODEL_LABEL = (f"built-in CGSchNet (hyper-parameters of mlcg_schnet_A: hidden 128, filters 128, 3 blocks, "
                       f"50 Gaussian RBF, 15 A cosine cutoff), random weights (seed {WEIGHT_SEED})")


@contextlib.contextmanager
def default_pdb() -> Iterator[Path]:
    """The path of the packaged BPTI structure (a context, as callers use it)."""
    from flashschnet.examples import example_path

    yield Path(example_path(DEFAULT_PDB_NAME))


def default_model(backend: Optional[str] = None, dtype=None, device="cpu", matmul: str = "auto",
                  cuda_graph: bool = False):
    """The built-in model (see the module docstring) as a :class:`flashschnet.LoadedModel`, in ``dtype``
    (default float32) on ``device``, with ``backend`` (None: the default for ``device``), ``matmul`` and
    ``cuda_graph`` (see :class:`flashschnet.CGSchNet`)."""
    import torch

    from flashschnet import CGSchNet, LoadedModel
    from flashschnet.config import DEFAULT_UNITS

    with torch.random.fork_rng(devices=[]):        # the caller's random state is left alone
        torch.manual_seed(WEIGHT_SEED)
        network = CGSchNet(DEFAULT_CONFIG, backend=backend, units=dict(DEFAULT_UNITS), device=str(device),
                           matmul=matmul, cuda_graph=cuda_graph)
    network = network.to(device=device, dtype=dtype or torch.float32).eval()
    return LoadedModel(network=network, metadata={"description": DEFAULT_MODEL_LABEL, "placeholder": True,
                                                  "source": "flashschnet.openmm.benchmark.defaults"})
