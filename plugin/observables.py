"""Structure over a run, from one bead per residue (CA of the 5-bead mapping, BB of MARTINI): backbone RMSD to
the native structure, radius of gyration, per-residue RMSF, fraction of native contacts Q and secondary-structure
retention; contact maps and free-energy surfaces for flashschnet-analyze. All lengths in nm; NumPy arrays in
and out.

Superposition, RMSD, radius of gyration and RMSF are mdtraj's (``md.superpose``, ``md.rmsd``, ``md.compute_rg``,
``md.rmsf``), which compute in float32: expect ~1e-6 nm of rounding. Native contacts Q, the contact map, the
free-energy surface and secondary-structure retention are computed here (see the comment above
:func:`native_contacts`).

Secondary-structure retention needs the native assignment per residue (DSSP's H/E/C, e.g. mdtraj's DSSP of
the all-atom PDB: :func:`native_dssp`) and asks whether each helix/strand residue keeps its local backbone
geometry (distances to the beads 2-4 residues along the same segment within 15 % of the native ones): the
same criterion for any one-bead-per-residue model, measured against that model's own mapping of the PDB.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np


def _trajectory(frames: np.ndarray):
    """An mdtraj Trajectory of frames [T, N, 3] (or one structure [N, 3]), nm, on a topology of N plain beads."""
    import mdtraj as md

    x = np.asarray(frames, dtype=float)
    x = x[None] if x.ndim == 2 else x
    top = md.Topology()
    chain = top.add_chain()
    for _ in range(x.shape[1]):
        top.add_atom("X", md.element.carbon, top.add_residue("UNK", chain))
    return md.Trajectory(x.astype(np.float32), top)


def _superposed(frames: np.ndarray, ref: np.ndarray):
    """(frames superimposed on ref, ref) as mdtraj Trajectories, both centred on the origin, and ref's centre."""
    frames = np.asarray(frames, dtype=float)
    ref = np.asarray(ref, dtype=float)
    centre = ref.mean(axis=0)
    # centred in float64 first (float32 keeps ~7 digits of a coordinate, not of its distance from the origin);
    # superposed twice, as mdtraj's float32 rotation can be off by ~1e-4 nm for a few beads (e.g. three) and
    # a second pass removes that
    target = _trajectory(frames - frames.mean(axis=1, keepdims=True))
    native = _trajectory(ref - centre)
    target.superpose(native)
    target.superpose(native)
    return target, native, centre


def kabsch_align(frames: np.ndarray, ref: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Superimpose every frame on ``ref`` (rotation + translation, equal weights; ``md.superpose``).

    Parameters
    ----------
    frames : ndarray [T, N, 3]
    ref : ndarray [N, 3]

    Returns
    -------
    rmsd : ndarray [T]
        Root-mean-square deviation after superposition (``md.rmsd``).
    aligned : ndarray [T, N, 3]
        The frames superimposed on ``ref``.
    """
    import mdtraj as md

    target, native, centre = _superposed(frames, ref)
    aligned = target.xyz.astype(float) + centre
    # the RMSD of the superposed frames: md.rmsd's own QCP value loses ~1e-3 nm near zero in float32 (by
    # cancellation in (G_a + G_b - 2 lambda) / N)
    return md.rmsd(target, native, superpose=False).astype(float), aligned


def radius_of_gyration(frames: np.ndarray) -> np.ndarray:
    """Radius of gyration [T] (equal bead weights; ``md.compute_rg``) of frames [T, N, 3] (or one structure
    [N, 3] -> scalar)."""
    import mdtraj as md

    x = np.asarray(frames, dtype=float)
    rg = md.compute_rg(_trajectory(x - x.mean(axis=-2, keepdims=True))).astype(float)
    return rg if x.ndim == 3 else float(rg[0])


def rmsf(frames: np.ndarray, ref: Optional[np.ndarray] = None) -> np.ndarray:
    """Root-mean-square fluctuation [N] about the mean position of frames [T, N, 3] superimposed on ``ref``
    [N, 3] (``md.rmsf``); without ``ref`` the frames are taken as already superimposed."""
    if ref is None:
        # md.rmsf always superimposes the frames again (on a reference or on their mean)
        a = np.asarray(frames, dtype=float)
        return np.sqrt(((a - a.mean(axis=0)) ** 2).sum(axis=2).mean(axis=0))
    import mdtraj as md

    target, native, _ = _superposed(frames, ref)
    return md.rmsf(target, native, 0).astype(float)


# mdtraj has none of what follows for a one-bead-per-residue model: its native-contact example (Best-Hummer Q)
# is smoothed and made for all-atom heavy atoms, and it has no contact-frequency map, free-energy surface or
# secondary-structure retention without the backbone atoms DSSP needs; so these few NumPy lines stay ours.

def native_contacts(ref: np.ndarray, cutoff: float = 0.8, min_separation: int = 3) -> np.ndarray:
    """Bead pairs [P, 2] closer than ``cutoff`` nm in ``ref`` and at least ``min_separation`` apart in sequence."""
    ref = np.asarray(ref, dtype=float)
    i, j = np.triu_indices(len(ref), k=min_separation)
    d = np.linalg.norm(ref[i] - ref[j], axis=1)
    keep = d < cutoff
    return np.stack([i[keep], j[keep]], axis=1)


def fraction_native_contacts(frames: np.ndarray, ref: np.ndarray, pairs: np.ndarray, tolerance: float = 1.2) -> np.ndarray:
    """Q [T]: the fraction of native ``pairs`` whose distance is within ``tolerance`` times the native one."""
    if len(pairs) == 0:
        return np.full(len(frames), np.nan)
    frames, ref = np.asarray(frames, dtype=float), np.asarray(ref, dtype=float)
    d0 = np.linalg.norm(ref[pairs[:, 0]] - ref[pairs[:, 1]], axis=1)
    d = np.linalg.norm(frames[:, pairs[:, 0]] - frames[:, pairs[:, 1]], axis=2)
    return (d < tolerance * d0).mean(axis=1)


def ss_segments(ss) -> np.ndarray:
    """Segment id [N] of each residue in a DSSP string/sequence (``H``/``E`` runs get ids 0, 1, ...; others -1)."""
    seg = np.full(len(ss), -1, dtype=int)
    k, prev = -1, None
    for i, c in enumerate(ss):
        if c in ("H", "E"):
            if c != prev:
                k += 1
            seg[i] = k
        prev = c
    return seg


def ss_pairs(ss) -> np.ndarray:
    """Bead pairs [P, 2] (i, i+k), k = 2, 3, 4, both in the same native helix (H) or strand (E) segment."""
    seg = ss_segments(ss)
    pairs = [(i, i + k) for k in (2, 3, 4) for i in range(len(seg) - k) if seg[i] >= 0 and seg[i] == seg[i + k]]
    return np.array(pairs, dtype=int).reshape(-1, 2)


def ss_retention(frames: np.ndarray, ref: np.ndarray, ss, tolerance: float = 0.15) -> np.ndarray:
    """[T]: fraction of the native helix/strand residues whose local backbone geometry is kept.

    A residue of a native helix or strand (``ss``: DSSP's H/E/C per residue, e.g. of the all-atom PDB) is
    retained in a frame when every distance from it to the beads 2, 3 and 4 residues along in the same
    segment is within ``tolerance`` (relative) of the native one in ``ref``. Residues without such a partner
    (segments shorter than 3) are not counted; NaN when there are none.
    """
    pairs = ss_pairs(ss)
    if len(pairs) == 0:
        return np.full(len(frames), np.nan)
    frames, ref = np.asarray(frames, dtype=float), np.asarray(ref, dtype=float)
    d0 = np.linalg.norm(ref[pairs[:, 0]] - ref[pairs[:, 1]], axis=1)
    d = np.linalg.norm(frames[:, pairs[:, 0]] - frames[:, pairs[:, 1]], axis=2)
    ok = np.abs(d - d0) <= tolerance * d0                                   # [T, P]
    residues = np.unique(pairs)
    kept = np.ones((len(frames), len(residues)), dtype=bool)
    for col, r in enumerate(residues):
        kept[:, col] = ok[:, (pairs == r).any(axis=1)].all(axis=1)
    return kept.mean(axis=1)


def native_dssp(pdb: str) -> str:
    """DSSP of the protein residues of an all-atom PDB (mdtraj, simplified: H helix, E strand, C other), one
    letter per amino-acid residue in file order."""
    import warnings

    import mdtraj

    with warnings.catch_warnings():          # e.g. "dummy CRYST1 record": irrelevant for DSSP
        warnings.simplefilter("ignore")
        ss = mdtraj.compute_dssp(mdtraj.load_pdb(pdb), simplified=True)[0]
    return "".join(c for c in ss if c in ("H", "E", "C"))


def structure_metrics(frames: np.ndarray, ref: np.ndarray, ss=None) -> Dict[str, np.ndarray]:
    """Everything above for frames [T, N, 3] against the native ``ref`` [N, 3] (one bead per residue, nm);
    ``ss``: native secondary structure per residue (H/E/C), or None (no retention).

    Returns a dict of arrays: ``rmsd`` [T], ``rg`` [T], ``rg_native`` (scalar), ``rmsf`` [N], ``q`` [T],
    ``ss_retention`` [T], ``n_contacts`` (scalar).
    """
    frames = np.asarray(frames, dtype=float)
    ref = np.asarray(ref, dtype=float)
    if frames.ndim != 3 or frames.shape[1:] != ref.shape or ref.ndim != 2 or ref.shape[1] != 3:
        raise ValueError(f"frames {frames.shape} and native {ref.shape} must be [T, N, 3] and [N, 3]")
    if ss is not None and len(ss) != len(ref):
        raise ValueError(f"{len(ss)} secondary-structure letters for {len(ref)} residues")
    rmsd, _ = kabsch_align(frames, ref)
    pairs = native_contacts(ref)
    return {"rmsd": rmsd, "rg": radius_of_gyration(frames), "rg_native": radius_of_gyration(ref),
            "rmsf": rmsf(frames, ref), "q": fraction_native_contacts(frames, ref, pairs),
            "ss_retention": ss_retention(frames, ref, ss) if ss is not None else np.full(len(frames), np.nan),
            "n_contacts": np.asarray(len(pairs))}


# -- maps and free-energy surfaces (flashschnet-analyze) ------------------------------------------------------

#: Boltzmann's constant times Avogadro's number, kJ/mol/K (CODATA 2018, as OpenMM's unit module)
MOLAR_GAS_CONSTANT_KJ_MOL_K = 0.008314462618


def contact_map(frames: np.ndarray, cutoff: float = 0.8, min_separation: int = 3, chunk: int = 256) -> np.ndarray:
    """Fraction of frames in which beads i and j are closer than ``cutoff`` nm.

    Parameters
    ----------
    frames : ndarray [T, N, 3] (or one structure [N, 3]), nm
    cutoff : float
        Contact distance, nm.
    min_separation : int
        Pairs closer than this in sequence (``|i - j| < min_separation``, the diagonal included) are NaN.
    chunk : int
        Frames per distance block (bounds memory to ``chunk * N * N`` floats).

    Returns
    -------
    ndarray [N, N], float64
        Symmetric; in [0, 1] for ``|i - j| >= min_separation``, NaN on the band around the diagonal.
    """
    x = np.asarray(frames, dtype=float)
    if x.ndim == 2:
        x = x[None]
    n = x.shape[1]
    if len(x) == 0:
        raise ValueError("contact_map needs at least one frame")
    counts = np.zeros((n, n))
    for s in range(0, len(x), chunk):
        block = x[s:s + chunk]
        d = np.linalg.norm(block[:, :, None, :] - block[:, None, :, :], axis=-1)
        counts += (d < cutoff).sum(axis=0)
    out = counts / len(x)
    i, j = np.indices((n, n))
    out[np.abs(i - j) < min_separation] = np.nan
    return out


def free_energy_surface(x: np.ndarray, y: np.ndarray, kT: float, bins: int = 30, range_=None):
    """2-D free-energy surface F(x, y) = -kT ln p(x, y) from samples, shifted so that its minimum is 0.

    Parameters
    ----------
    x, y : ndarray [S]
        Samples (e.g. RMSD and Rg in nm, all replicas pooled).
    kT : float
        Thermal energy in the unit wanted for F (kJ/mol: ``MOLAR_GAS_CONSTANT_KJ_MOL_K * T``).
    bins : int
        Bins per axis.
    range_ : ((xmin, xmax), (ymin, ymax)), optional
        Histogram range; default the samples' (widened a little when all samples are equal).

    Returns
    -------
    F : ndarray [bins, bins], float64
        ``F[i, j]`` for ``x`` in bin ``i`` and ``y`` in bin ``j``; NaN where no sample fell (unsampled, not
        infinitely high).
    x_edges, y_edges : ndarray [bins + 1]
    """
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) == 0:
        raise ValueError("free_energy_surface needs at least one finite sample")
    if range_ is None:
        range_ = []
        for v in (x, y):
            lo, hi = float(v.min()), float(v.max())
            pad = 0.05 * (hi - lo) if hi > lo else max(1e-3, 1e-3 * abs(lo))
            range_.append((lo - pad, hi + pad))
    h, xe, ye = np.histogram2d(x, y, bins=int(bins), range=range_)
    p = h / h.sum()
    with np.errstate(divide="ignore"):
        f = -float(kT) * np.log(p)
    f[h == 0] = np.nan
    f -= np.nanmin(f)
    return f, xe, ye
