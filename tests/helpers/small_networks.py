"""Small random-weight CGSchNets for the fused-kernel tests: float64, exact filters (or tables), any output MLP,
an 8 A cutoff so a chain of 20 beads has culled and active tile pairs; interpreted steps of a few seconds."""
from __future__ import annotations

import copy

import torch

from flashschnet.nn.schnet import CGSchNet

_CUT = {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 8.0}


def network(widths=(16, 8), H=16, F=16, blocks=2, seed=0, backend="triton", dtype=torch.float64):
    """A random-weight CGSchNet (weights ~ N(0, 0.5): every layer matters) with output MLP hidden ``widths``."""
    cfg = {"activation": "tanh", "cg_mapping": "5bead", "cutoff": dict(_CUT), "embedding_size": 25,
           "hidden_channels": H, "num_filters": F, "num_interactions": blocks,
           "output_hidden_layer_widths": list(widths), "rbf": {"kind": "gaussian", "num_rbf": 8, "cutoff": dict(_CUT)}}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = CGSchNet(cfg, backend=backend).to(dtype)
        for p in net.parameters():
            p.data.normal_(0.0, 0.5)
    return net


def reference_of(net):
    """The same network on the reference backend (mlcg-style autograd)."""
    ref = copy.deepcopy(net)
    ref.backend = "reference"
    return ref


def types_of(N: int) -> torch.Tensor:
    """Bead types 1..20 cycling (types of the 25-type embedding)."""
    return torch.arange(N) % 20 + 1
