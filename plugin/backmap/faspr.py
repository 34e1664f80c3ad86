"""Side chains packed by FASPR on a frame's backbone (Huang, Pearce & Zhang, Bioinformatics 36:3758, 2020).

FASPR chooses every side chain's rotamer from the Dunbrack 2010 backbone-dependent library with a
physics/statistics energy and a dead-end-elimination / tree-decomposition search: on native backbones its chi1
is right for about 9 residues in 10 (the paper), where one template rotamer per residue type
(:mod:`.templates`) is right only for the most common one. We run the FASPR executable that PyPI's ``pyfaspr``
carries (MIT; the rotamer library file next to it has the Dunbrack group's own terms): it reads the backbone
(N, CA, C, O) of a PDB file and writes the whole residues (CB and side chains in ideal geometry on that backbone).

Why a subprocess and not ``pyfaspr.run_FASPR``: that helper goes through a shell and re-reads the PDB with another
package (``pdbutil``); the executable itself needs only a file in and a file out. FASPR exits with status 0 even
when it fails (it prints an error and stops), so the output is checked: every residue, every side-chain atom.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...cg.mapping import one_letter_code
from ...errors import InputError

#: the standard residue name FASPR knows, per one-letter code
THREE = {"A": "ALA", "C": "CYS", "D": "ASP", "E": "GLU", "F": "PHE", "G": "GLY", "H": "HIS", "I": "ILE", "K": "LYS",
         "L": "LEU", "M": "MET", "N": "ASN", "P": "PRO", "Q": "GLN", "R": "ARG", "S": "SER", "T": "THR", "V": "VAL",
         "W": "TRP", "Y": "TYR"}
#: the heavy side-chain atoms past CB FASPR writes, per residue (PDB names, as amber14 and pdbfixer name them)
SIDE_CHAIN = {"ALA": (), "GLY": (), "SER": ("OG",), "CYS": ("SG",), "THR": ("OG1", "CG2"), "VAL": ("CG1", "CG2"),
              "PRO": ("CG", "CD"), "ASP": ("CG", "OD1", "OD2"), "ASN": ("CG", "OD1", "ND2"),
              "ILE": ("CG1", "CG2", "CD1"), "LEU": ("CG", "CD1", "CD2"), "MET": ("CG", "SD", "CE"),
              "GLU": ("CG", "CD", "OE1", "OE2"), "GLN": ("CG", "CD", "OE1", "NE2"), "LYS": ("CG", "CD", "CE", "NZ"),
              "HIS": ("CG", "ND1", "CD2", "CE1", "NE2"), "PHE": ("CG", "CD1", "CD2", "CE1", "CE2", "CZ"),
              "ARG": ("CG", "CD", "NE", "CZ", "NH1", "NH2"), "TYR": ("CG", "CD1", "CD2", "CE1", "CE2", "CZ", "OH"),
              "TRP": ("CG", "CD1", "CD2", "NE1", "CE2", "CE3", "CZ2", "CZ3", "CH2")}
#: seconds one FASPR run may take (a 1,000-residue protein takes about one)
TIMEOUT_S = 120.0
#: what to install when FASPR is missing
INSTALL = ("pip install pyfaspr==0.3.1 (or the package's extra: pip install 'flashschnet[backmap]'), or build side "
           "chains from templates with --side-chains templates")

_FOUND: Dict[str, str] = {}


def faspr_executable() -> str:
    """The path of a FASPR executable that runs on this machine (found once).

    pyfaspr compiles FASPR with g++ when it is installed from its source package; where that compiler was missing,
    its package still holds prebuilt executables (``FASPR_x86_64_linux``, ...), tried in turn.

    Raises
    ------
    InputError
        pyfaspr is not installed, or none of its executables runs here.
    """
    if "path" in _FOUND:
        return _FOUND["path"]
    try:
        import pyfaspr
    except ImportError:
        raise InputError(f"side chains by FASPR need the Python package pyfaspr, which is not installed: {INSTALL}") \
            from None
    folder = os.path.join(os.path.dirname(os.path.abspath(pyfaspr.__file__)), "bin")
    names = ["FASPR", f"FASPR_{platform.machine()}_{'linux' if sys.platform.startswith('linux') else 'macosx'}"]
    tried = []
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        try:       # without arguments FASPR prints its usage and exits
            subprocess.run([path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError) as exc:        # e.g. "Exec format error": built for another OS
            tried.append(f"{name} ({exc.__class__.__name__})")
            continue
        if not os.path.isfile(os.path.join(folder, "dun2010bbdep.bin")):
            raise InputError(f"{folder}: FASPR's rotamer library dun2010bbdep.bin is missing (a broken pyfaspr "
                             f"install?); reinstall it: {INSTALL}")
        _FOUND["path"] = path
        return path
    raise InputError(f"{folder}: no FASPR executable of pyfaspr runs on this machine (tried "
                     f"{', '.join(tried) or 'none found'}); reinstall pyfaspr where g++ is available: {INSTALL}")


def backbone_pdb(names: Sequence[str], backbone_A: np.ndarray) -> str:
    """FASPR's input: one residue per entry of ``names`` (standard three-letter), its N, CA, C, O at
    ``backbone_A`` [n_residues, 4, 3] (angstrom), numbered 1, 2, ... in chain A (FASPR tells residues apart by
    number; it finds chain breaks itself, from the N-C distance)."""
    lines = []
    k = 0
    for i, (name, xyz) in enumerate(zip(names, backbone_A)):
        for atom, (x, y, z) in zip(("N", "CA", "C", "O"), xyz):
            k += 1
            el = atom[0]
            lines.append(f"ATOM  {k % 100000:5d}  {atom:<3s} {name} A{(i + 1) % 10000:4d}    "
                         f"{x:8.3f}{y:8.3f}{z:8.3f}  1.00  0.00          {el:>2s}")
    lines.append("END")
    return "\n".join(lines) + "\n"


def read_faspr_pdb(text: str) -> List[Dict[str, np.ndarray]]:
    """FASPR's output: per residue, in order, ``{atom name: xyz (angstrom)}``."""
    out: List[Dict[str, np.ndarray]] = []
    last = None
    for line in text.splitlines():
        if not line.startswith("ATOM"):
            continue
        key = line[22:27]
        if key != last:
            out.append({})
            last = key
        out[-1][line[12:16].strip()] = np.array([float(line[30:38]), float(line[38:46]), float(line[46:54])])
    return out


def pack_side_chains(residue_names: Sequence[str], backbone_nm: np.ndarray,
                     executable: Optional[str] = None) -> List[Dict[str, np.ndarray]]:
    """Side chains packed by FASPR on a backbone.

    Parameters
    ----------
    residue_names : sequence of str
        Residue names (any that :func:`flashschnet.cg.mapping.one_letter_code` knows: HIE, CYX, ... too).
    backbone_nm : numpy.ndarray, float, shape [n_residues, 4, 3]
        N, CA, C, O of each residue, nm.
    executable : str, optional
        FASPR (default :func:`faspr_executable`).

    Returns
    -------
    list of dict
        Per residue ``{atom name: xyz (nm)}``: N, CA, C (as given), CB and the heavy side-chain atoms
        (:data:`SIDE_CHAIN`).

    Raises
    ------
    InputError
        FASPR is missing or a residue is not one of the 20 standard ones.
    RuntimeError
        FASPR failed (its message), timed out or wrote fewer atoms than asked for.
    """
    names = []
    for name in residue_names:
        code = one_letter_code(name)
        if code not in THREE:
            raise InputError(f"residue {name}: FASPR packs the 20 standard amino acids only")
        names.append(THREE[code])
    backbone_A = 10.0 * np.asarray(backbone_nm, dtype=np.float64)
    if backbone_A.shape != (len(names), 4, 3) or not np.isfinite(backbone_A).all():
        raise ValueError(f"backbone_nm: expected finite [{len(names)}, 4, 3], got {backbone_A.shape}")
    exe = executable or faspr_executable()
    with tempfile.TemporaryDirectory(prefix="flashschnet-faspr-") as tmp:
        src, dst = os.path.join(tmp, "backbone.pdb"), os.path.join(tmp, "packed.pdb")
        with open(src, "w") as fh:
            fh.write(backbone_pdb(names, backbone_A))
        try:
            run = subprocess.run([exe, "-i", src, "-o", dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"FASPR took more than {TIMEOUT_S:g} s on {len(names)} residues") from None
        said = run.stdout.decode(errors="replace")
        text = open(dst).read() if os.path.isfile(dst) else ""
    packed = read_faspr_pdb(text)
    errors = [s.strip() for s in said.splitlines() if "error" in s.lower()]
    if run.returncode != 0 or errors or len(packed) != len(names):
        why = errors[0] if errors else f"exit status {run.returncode}, {len(packed)} of {len(names)} residues written"
        raise RuntimeError(f"FASPR failed: {why}")
    out = []
    for i, (name, res) in enumerate(zip(names, packed)):
        want = ("N", "CA", "C") + (("CB",) if name != "GLY" else ()) + SIDE_CHAIN[name]
        lost = [a for a in want if a not in res]
        if lost:
            raise RuntimeError(f"FASPR wrote residue {i + 1} ({name}) without {', '.join(lost)}")
        out.append({a: res[a] / 10.0 for a in want})
    return out


def kabsch(mobile: np.ndarray, target: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Rotation R and translation t that put ``mobile`` [n, 3] on ``target`` [n, 3] (least squares):
    ``mobile @ R.T + t``."""
    mc, tc = mobile.mean(axis=0), target.mean(axis=0)
    h = (mobile - mc).T @ (target - tc)
    u, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(vt.T @ u.T))
    r = vt.T @ np.diag([1.0, 1.0, d]) @ u.T
    return r, tc - mc @ r.T


def fit_side_chain(packed: Dict[str, np.ndarray], anchors: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """One packed residue moved rigidly so that its N, CA, C and CB lie (least squares) on ``anchors`` (the
    frame's N, CA, C and CB bead): the side chain leaves CA along the CB bead, as the CG model put it."""
    keys = [k for k in ("N", "CA", "C", "CB") if k in packed and k in anchors]
    if "CB" not in keys:
        return dict(packed)
    r, t = kabsch(np.stack([packed[k] for k in keys]), np.stack([anchors[k] for k in keys]))
    return {k: v @ r.T + t for k, v in packed.items()}
