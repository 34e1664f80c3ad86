"""The wording of the ingestion notes: one line each for what the cleaning step
(:mod:`flashschnet.openmm.cleaning`) and the CG mapping (:mod:`flashschnet.cg.mapping`) changed, ignored or chose
on the user's behalf. Every note starts with the input's path (``src``) and is written here once; the two steps
build their notes with these functions.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import List, Sequence

__all__ = ["format_counts", "format_list", "residue_label", "several_models", "alternate_locations",
           "alternative_residue_names", "standardised_names", "unbonded_disulfides", "modified_residues",
           "removed_non_protein", "ideal_cb_placed", "incomplete_backbone", "rebuilt_atoms", "short_peptide_bond",
           "chain_break", "terminal_o_placed", "ignored_non_protein", "noted_alias"]


def format_counts(counter: Counter) -> str:
    """``"HOH x53, NA x2"``: most frequent first, then by name (for one-line notes)."""
    return ", ".join(f"{name} x{n}" for name, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def format_list(labels: List[str], limit: int = 5) -> str:
    """``"a, b, c and 4 more"``: the first ``limit`` labels (for one-line notes and errors)."""
    return ", ".join(labels[:limit]) + (f" and {len(labels) - limit} more" if len(labels) > limit else "")


def residue_label(resname: str, number, chain: str) -> str:
    """``"LYS 12A (chain A)"``: residue name, number with its insertion code, chain id (``-`` when blank)."""
    return f"{resname} {number} (chain {chain.strip() or '-'})"


# --- notes of both steps -------------------------------------------------------------------------------------------

def several_models(src: str, n_models: int) -> str:
    return f"{src}: {n_models} models found; using the first (MODEL 1) only"


def alternate_locations(src: str, n_atoms: int, what: str = "atoms") -> str:
    """``what``: ``"atoms"`` (cleaning counts every atom) or ``"protein atoms"`` (the mapping counts those it maps)."""
    return (f"{src}: {n_atoms} {what} have alternate locations; kept, per atom, the one with the highest occupancy "
            "(first in the file on ties)")


# --- notes of the cleaning step ------------------------------------------------------------------------------------

def alternative_residue_names(src: str, labels: List[str]) -> str:
    return f"{src}: residues with alternative residue names; kept the name of highest occupancy: " + format_list(labels)


def standardised_names(src: str, changes: Sequence[str]) -> str:
    """``changes``: ``"HSD->HIS"`` per residue renamed."""
    return f"{src}: residue names standardised (OpenMM's and the CG mapping's tables): {format_counts(Counter(changes))}"


def unbonded_disulfides(src: str, pairs: List[str], max_distance_a: float) -> str:
    return (f"{src}: {len(pairs)} disulfide bonds the file declares (SSBOND records, CYX names) are not in its "
            f"coordinates (SG-SG beyond {max_distance_a:g} A): {format_list(pairs, 4)}; neither force field bonds them "
            "(martinize2 bonds cysteines from their coordinates, the CG model has no disulfide term): fix the "
            "structure if they should be bonded")


def modified_residues(src: str, replaced: List[str]) -> str:
    return f"{src}: modified residues replaced by their standard parents (pdbfixer): {format_list(replaced)}"


def removed_non_protein(src: str, names: Sequence[str]) -> str:
    return (f"{src}: removed {len(names)} non-protein residues (waters, ions, ligands, capping groups, nucleic "
            f"acids): {format_counts(Counter(names))}")


def ideal_cb_placed(src: str, labels: List[str]) -> str:
    return (f"{src}: placed the missing CB of {len(labels)} residues by ideal geometry from N, CA, C (pdbfixer then "
            f"rebuilt the rest of the side chain): {format_list(labels)}")


def incomplete_backbone(src: str, labels: List[str]) -> str:
    return (f"{src}: {len(labels)} residues lack backbone atoms (N, CA or C); not rebuilt (a backbone cannot be "
            f"guessed): {format_list(labels)}")


def rebuilt_atoms(src: str, rebuilt: List[str]) -> str:
    return f"{src}: rebuilt missing heavy atoms (pdbfixer) of {len(rebuilt)} residues: {format_list(rebuilt, 3)}"


# --- notes of the CG mapping ---------------------------------------------------------------------------------------

def short_peptide_bond(src: str, before: str, after: str, distance: float, minimum: float) -> str:
    return (f"{src}: suspiciously short peptide bond between {before} and {after} (C-N distance {distance:.2f} A < "
            f"{minimum:.1f} A); bonded anyway, check the structure (minimise it or rebuild that junction)")


def chain_break(src: str, before: str, after: str, what: str, distance: float, limit: float) -> str:
    """``what``: the distance measured (``"C-N"`` or ``"CA-CA"``)."""
    return (f"{src}: chain break between {before} and {after} ({what} distance {distance:.2f} A > {limit:.1f} A); "
            "no CG bond across, they start separate chains")


def terminal_o_placed(src: str, label: str, bond: float, angle: float, dihedral_rad: float) -> str:
    return (f"{src}: C-terminal residue {label} has no O atom; placed its O bead by ideal geometry (C=O {bond} A, "
            f"CA-C-O {angle} deg, N-CA-C-O {math.degrees(dihedral_rad):.0f} deg)")


def ignored_non_protein(src: str, ignored: Counter) -> str:
    return (f"{src}: ignored {sum(ignored.values())} non-protein residues (waters, ions, caps, ligands): "
            f"{format_counts(ignored)}")


def noted_alias(src: str, name: str, read_as: str, labels: List[str]) -> str:
    """``"MSE read as MET (selenomethionine): ..."``."""
    return f"{src}: {name} read as {read_as}: {format_list(labels)}"
