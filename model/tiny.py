"""A tiny random-weight CGSchNet with placeholder priors: a model that runs a CG simulation fast.

:func:`tiny_model` writes a model file that every loader and command line accepts (``flashschnet-simulate
--model``, :func:`flashschnet.load_model`): 16 channels, one interaction block, 8 A cosine cutoff, 8 Gaussian
radial basis functions, the 5-bead mapping, with a PLACEHOLDER prior fitted to one structure
(:func:`flashschnet.priors.fit_priors_to_structure`). Its forces are the prior's plus a random network's, not
physics: it is for what does not depend on the numbers -- run life cycles, reporters, resumes, memory over long
runs -- about 40 times faster per step than the placeholder example (128 channels, three blocks, 15 A) on one
core (2-3 ms per step for trp-cage).
"""
from __future__ import annotations

import copy
import os
from typing import Union

__all__ = ["TINY_CONFIG", "tiny_model"]

_CUTOFF = {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 8.0}

#: the network's hyper-parameters (lengths in A)
TINY_CONFIG = {"activation": "tanh", "cg_mapping": "5bead", "cutoff": _CUTOFF, "embedding_size": 25,
               "hidden_channels": 16, "num_filters": 16, "num_interactions": 1, "output_hidden_layer_widths": [16],
               "rbf": {"kind": "gaussian", "num_rbf": 8, "cutoff": dict(_CUTOFF)}}


def tiny_model(pdb: Union[str, os.PathLike], path: Union[str, os.PathLike], seed: int = 0) -> str:
    """Write a tiny random-weight CGSchNet with priors fitted to ``pdb`` to ``path``.

    Parameters
    ----------
    pdb : str or path
        All-atom structure; the priors' equilibrium values come from its 5-bead CG mapping.
    path : str or path
        The model file to write (a flashschnet checkpoint).
    seed : int
        Seed of the network's random weights (``torch.manual_seed``; the caller's random state is restored).

    Returns
    -------
    str
        ``path``.
    """
    import torch

    from .cg import map_pdb
    from .checkpoint import save_checkpoint
    from .nn.schnet import CGSchNet
    from .priors import fit_priors_to_structure

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = CGSchNet(copy.deepcopy(TINY_CONFIG))
    priors = fit_priors_to_structure(map_pdb(str(pdb), mapping="5bead"), description="tiny test model priors")
    save_checkpoint(str(path), model, priors=priors, metadata={"description": "tiny random-weight test model"})
    return str(path)
