"""PDB text built line by line for small test structures (tests/model/cg/test_mapping.py,
tests/openmm/test_topology.py): ATOM/HETATM records in the PDB's fixed columns, an ideal backbone, peptides."""
from __future__ import annotations

import numpy as np


def atom_line(serial, name, resname, chain, resseq, xyz, record="ATOM", altloc=" ", occ=1.0,
              element=None, icode=" "):
    element = element if element is not None else name.lstrip("0123456789")[0]
    pname = name if len(name) == 4 else f" {name:<3s}"
    rname = resname if len(resname) == 4 else f"{resname:>3s} "
    return (f"{record:<6s}{serial:5d} {pname}{altloc}{rname}{chain}{resseq:4d}{icode}   "
            f"{xyz[0]:8.3f}{xyz[1]:8.3f}{xyz[2]:8.3f}{occ:6.2f}{0.0:6.2f}          {element:>2s}")


# A planar-ish ideal backbone: residues 3.8 A apart along x, C(i)-N(i+1) 1.33 A.
BB = {"N": (0.0, 0.0, 0.0), "CA": (1.46, 0.0, 0.0), "CB": (1.9, 1.4, 0.0), "C": (2.55, -0.6, 0.0),
      "O": (2.5, -1.8, 0.2)}


def residue_lines(resname, resseq, chain="A", shift=None, atoms=("N", "CA", "CB", "C", "O"),
                  record="ATOM", serial0=1):
    shift = np.array(shift if shift is not None else (3.8 * (resseq - 1), 0.0, 0.0))
    if resname == "GLY":
        atoms = tuple(a for a in atoms if a != "CB")
    return [atom_line(serial0 + k, a, resname, chain, resseq, np.array(BB[a]) + shift, record=record)
            for k, a in enumerate(atoms)]


def peptide(seq=("ALA", "GLY", "SER"), chain="A"):
    lines = []
    for k, name in enumerate(seq, start=1):
        lines += residue_lines(name, k, chain=chain, serial0=len(lines) + 1)
    return lines


def write_pdb(tmp_path, lines, name="bad.pdb"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\nEND\n")
    return p


def write_lines(tmp_path, lines, name="edited.pdb"):
    """``lines`` written as a file in ``tmp_path`` (no END record added); its path."""
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def atoms_of(text, resseq=None):
    """{(resname, resseq, atom name): (x, y, z)} of the ATOM/HETATM records of PDB text."""
    out = {}
    for line in text.splitlines():
        if line.startswith(("ATOM", "HETATM")) and (resseq is None or int(line[22:26]) == resseq):
            out[(line[17:20].strip(), int(line[22:26]), line[12:16].strip())] = tuple(
                float(line[a:a + 8]) for a in (30, 38, 46))
    return out
