"""The CA mapping's backbone: N, C and O rebuilt from the CA trace by PULCHRA, CB placed on them.

PULCHRA (Rotkiewicz & Skolnick, J. Comput. Chem. 29:1460, 2008) puts each peptide plane where the statistics of
real proteins put it for the local CA geometry (the distances CA(i-1)..CA(i+2)). We use PyPI's ``pulchra``, a
Python port (MIT), with the CA positions kept as given (its CA optimisation off: the beads are the model's), its
side chains off (FASPR or pdbfixer builds them from this backbone, as for the 5-bead mapping) and each chain
rebuilt on its own. CB goes where N, CA and C put it in ideal geometry (:func:`flashschnet.cg.geometry.ideal_cb`,
the cleaning step's), so that the side-chain builders get the same skeleton as from 5 beads.
"""
from __future__ import annotations

import warnings
from typing import List, Sequence

import numpy as np

from ...cg.geometry import ideal_cb
from ...cg.mapping import one_letter_code
from ...errors import InputError

#: what to install when PULCHRA is missing
INSTALL = "pip install pulchra==1.0.1 biopython==1.88 (or the package's extra: pip install 'flashschnet[backmap]')"


def check_pulchra() -> None:
    """InputError (one line) when the ``pulchra`` package is missing."""
    try:
        import pulchra  # noqa: F401
    except ImportError:
        raise InputError(f"backmapping a CA structure needs the Python package pulchra, which is not installed: "
                         f"{INSTALL}") from None


def rebuild_backbone(residue_names: Sequence[str], chains: Sequence[Sequence[int]], ca_nm: np.ndarray) -> np.ndarray:
    """N, CA, C, O and CB of every residue from its CA.

    Parameters
    ----------
    residue_names : sequence of str
        Per residue (names :func:`flashschnet.cg.mapping.one_letter_code` knows).
    chains : sequence of sequences of int
        Residue indices of each chain, in order (each chain is rebuilt on its own).
    ca_nm : numpy.ndarray, float, shape [n_residues, 3]
        CA positions, nm.

    Returns
    -------
    numpy.ndarray, float64, shape [n_residues, 5, 3]
        N, CA (as given), C, O, CB per residue, nm (glycine's CB too, in ideal geometry; the caller drops it).

    Raises
    ------
    RuntimeError
        PULCHRA left a backbone atom out or not finite.
    """
    from pulchra import Pulchra

    ca_nm = np.asarray(ca_nm, dtype=np.float64)
    out = np.full((len(residue_names), 5, 3), np.nan)
    rebuilder = Pulchra(ca_optimize=False, rebuild_sidechains=False, optimize_xvol=False, check_chirality=False)
    for chain in chains:
        idx = list(chain)
        if len(idx) < 2:
            raise RuntimeError(f"PULCHRA cannot rebuild a chain of {len(idx)} residue")
        sequence = "".join(one_letter_code(residue_names[i]) or "G" for i in idx)
        with warnings.catch_warnings():      # scipy's "Optimal rotation is not uniquely ... defined" at chain ends
            warnings.simplefilter("ignore", UserWarning)
            mol = rebuilder.reconstruct_coords(10.0 * ca_nm[idx], sequence)
        if len(mol.residues) != len(idx):
            raise RuntimeError(f"PULCHRA rebuilt {len(mol.residues)} of {len(idx)} residues")
        for i, res in zip(idx, mol.residues):
            for k, name in enumerate(("N", "CA", "C", "O")):
                atom = res.get_atom(name)
                if atom is None:
                    raise RuntimeError(f"PULCHRA did not rebuild {name} of {residue_names[i]} {i + 1}")
                out[i, k] = np.asarray(atom.coords, dtype=np.float64) / 10.0
    out[:, 1] = ca_nm
    out[:, 4] = ideal_cb(10.0 * out[:, 0], 10.0 * out[:, 1], 10.0 * out[:, 2]) / 10.0
    if not np.isfinite(out).all():
        raise RuntimeError("PULCHRA gave a backbone atom that is not finite")
    return out


def chains_of(topology) -> List[List[int]]:
    """Residue indices per chain of an OpenMM topology."""
    return [[r.index for r in chain.residues()] for chain in topology.chains() if any(True for _ in chain.residues())]
