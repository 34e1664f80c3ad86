"""Training a CGSchNet from all-atom data: the force map, mapped data, Boltzmann-inverted priors and force
matching (the all-atom MD itself runs in OpenMM: :mod:`flashschnet.openmm.reference_md`)."""
from .dataset import CGData, load_reference, map_reference
from .fit import DEFAULT_NETWORK, TrainSettings, residual_forces, train_force_matching
from .forcemap import ForceMap, build_force_map
from .priors_fit import fit_priors

__all__ = ["CGData", "DEFAULT_NETWORK", "ForceMap", "TrainSettings", "build_force_map", "fit_priors",
           "load_reference", "map_reference", "residual_forces", "train_force_matching"]
