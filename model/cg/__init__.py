"""Coarse-grained molecules and the PDB -> CG mapping."""
from .mapping import map_pdb, map_pdb_text, map_residues
from .molecule import CGMolecule, CGResidue

__all__ = ["map_pdb", "map_pdb_text", "map_residues", "CGMolecule", "CGResidue"]
