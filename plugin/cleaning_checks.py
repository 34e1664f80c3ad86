"""The cleaning step's checks of the input as OpenMM read it (:mod:`flashschnet.openmm.cleaning`): they change
nothing, each gives the residues a note names. Residues are matched between our reader's
(:func:`~flashschnet.cg.pdb.parse_pdb`) and OpenMM's by (chain id, residue number, insertion code).
"""
from __future__ import annotations

from typing import List

from ..cg.notes import residue_label

__all__ = ["DISULFIDE_MAX_A", "label", "residue_key", "raw_key", "unbonded_disulfides", "standardised_names"]

#: SG-SG distance (Angstrom) up to which two cysteines count as bonded: OpenMM's rule (``Topology.
#: createDisulfideBonds``), which makes the CONECT records martinize2 reads; a real disulfide is about 2.05 A
DISULFIDE_MAX_A = 3.0


def label(res) -> str:
    """``"LYS 12 (chain A)"`` for an OpenMM Topology residue."""
    return residue_label(res.name, f"{res.id}{(res.insertionCode or '').strip()}", res.chain.id or "")


def residue_key(res) -> tuple:
    """(chain id, residue number, insertion code) of an OpenMM Topology residue: :func:`raw_key`'s key."""
    return ((res.chain.id or "").strip(), str(res.id).strip(), (res.insertionCode or "").strip())


def raw_key(raw) -> tuple:
    """(chain id, residue number, insertion code) of a residue of :func:`~flashschnet.cg.pdb.parse_pdb`."""
    return (raw.chain.strip(), str(raw.resseq), raw.icode.strip())


def unbonded_disulfides(text: str, parsed, topology, positions) -> List[str]:
    """The disulfide bonds a PDB file declares whose SG atoms are more than :data:`DISULFIDE_MAX_A` apart (or
    missing), as ``"CYS 28 (chain -)-CYS 44 (chain -) 3.66 A"``; a CYX residue left without a CYX partner as
    ``"CYS 5 (chain A) (CYX, no partner)"``.

    Declared are the pairs of the SSBOND records (fixed columns: the PDB format's, read here because neither
    OpenMM's reader nor mdtraj keeps them) and the residues named CYX (AMBER's name for a bonded cysteine), paired
    nearest first among those no SSBOND record names. ``topology``/``positions`` are OpenMM's (nm), first model."""
    import numpy as np
    import openmm.unit as unit

    residues = {residue_key(r): r for r in topology.residues()}
    xyz = np.asarray(positions.value_in_unit(unit.angstrom))
    sg = {k: xyz[a.index] for k, r in residues.items() for a in r.atoms() if a.name == "SG"}

    def dist(a, b):
        return float(np.linalg.norm(sg[a] - sg[b])) if a in sg and b in sg else float("inf")

    pairs = []
    for line in text.splitlines():
        if not line.startswith("SSBOND"):
            continue
        line = line.ljust(72)
        # a bond to a symmetry mate (an operator other than 1555) is not between atoms of this file
        if {line[59:65].strip(), line[66:72].strip()} <= {"", "1555"}:
            pairs.append(((line[15].strip(), line[17:21].strip(), line[21].strip()),
                          (line[29].strip(), line[31:35].strip(), line[35].strip())))
    named = {k for p in pairs for k in p}
    cyx_keys = {raw_key(raw) for raw in parsed.residues if raw.resname == "CYX"} - named
    cyx = [k for k in residues if k in cyx_keys]                         # file order
    candidates = sorted((dist(a, b), i, j) for i, a in enumerate(cyx) for j, b in enumerate(cyx) if i < j)
    paired, cyx_pairs = set(), []
    for d, i, j in candidates:                                           # nearest first
        if i not in paired and j not in paired and d < float("inf"):
            cyx_pairs.append((i, j))
            paired |= {i, j}
    pairs += [(cyx[i], cyx[j]) for i, j in sorted(cyx_pairs)]            # listed in file order

    def named_as(k):
        return label(residues[k]) if k in residues else f"{k[1]}{k[2]} (chain {k[0] or '-'}; not in the file)"

    out = [f"{named_as(a)}-{named_as(b)} " + (f"{dist(a, b):.2f} A" if dist(a, b) < float("inf") else "(no SG atom)")
           for a, b in pairs if not dist(a, b) <= DISULFIDE_MAX_A]
    out += [f"{named_as(cyx[i])} (CYX, no partner)" for i in range(len(cyx)) if i not in paired]
    return out


def standardised_names(parsed, topology) -> List[str]:
    """``"HSD->HIS"`` for every residue whose name OpenMM's reader changed (matched by chain, number, insertion
    code)."""
    read = {}
    for raw in parsed.residues:
        read.setdefault(raw_key(raw), raw.resname)
    out = []
    for res in topology.residues():
        name = read.get(residue_key(res))
        if name and name != res.name:
            out.append(f"{name}->{res.name}")
    return out
