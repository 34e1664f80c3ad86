"""flashschnet: a fast coarse-grained CGSchNet (mlcg) force field for OpenMM.

This package (the ``model/`` folder) never imports openmm; the OpenMM glue lives in ``flashschnet.openmm``.
"""
from .errors import FlashSchNetError, InputError, SimulationInstabilityError
from . import fused  # noqa: F401  (registers the flashschnet::energy_forces op that TorchScript networks call)
from .checkpoint import load_model, save_checkpoint
from .loaded import LoadedModel
from .nn.schnet import CGSchNet
from .options import ModelOptions, prepare_model
from .transforms import compress, quantize
from .cg import map_pdb

__all__ = ["CGSchNet", "FlashSchNetError", "InputError", "LoadedModel", "ModelOptions", "SimulationInstabilityError",
           "load_model", "map_pdb", "compress", "prepare_model", "quantize", "save_checkpoint"]
__version__ = "0.1.0"
