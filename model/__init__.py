"""flashschnet: a fast coarse-grained CGSchNet (mlcg) force field for OpenMM.

This package (the ``model/`` folder) never imports openmm; the OpenMM glue lives in ``flashschnet.openmm``.
"""
from .errors import FlashSchNetError, InputError, SimulationInstabilityError
from .checkpoint import load_model, save_checkpoint
from .nn.schnet import CGSchNet
from .nn.quant import quantize
from .cg import map_pdb

__all__ = ["CGSchNet", "FlashSchNetError", "InputError", "SimulationInstabilityError", "load_model", "map_pdb",
           "quantize", "save_checkpoint"]
__version__ = "0.1.0"
