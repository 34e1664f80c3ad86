"""Whether each figure of ``flashschnet-analyze``'s report has enough data to mean something, and if not, how much
more it needs (docs/analysis.md, "Too little data").

A figure whose data fall short of ``MIN_TRACE_POINTS`` ... ``MIN_FES_FRAMES`` is still drawn;
:func:`too_little_data` says (report.json ``too_little_data``, report.md, a ``warning:`` line) how many more frames
and steps it needs. Used by :func:`flashschnet.openmm.analyze.analyze`.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

# The fewest frames (log rows, for energy.png) a figure needs to mean something; below them the report says so
# and how many more are needed (docs/analysis.md, "Too little data"):
#: a time trace (RMSD, Rg, Q; energy and temperature): fewer points cannot tell a drift from a fluctuation
MIN_TRACE_POINTS = 10
#: an RMSF (a standard deviation per residue): from n independent frames it is uncertain by ~1/sqrt(2(n - 1)),
#: 16 % at 20 frames, and successive frames are not independent
MIN_RMSF_FRAMES = 20
#: a contact map: its fractions come in steps of 1/frames
MIN_CONTACT_FRAMES = 10
#: F(RMSD, Rg): F of a bin of n samples is uncertain by ~kT/sqrt(n); only from ~100 frames up do the populated
#: bins of even the coarsest default grid (5 x 5 .. 10 x 10) hold ~10 samples, F known there to ~0.3 kT
MIN_FES_FRAMES = 100


def too_little_data(records: Sequence[Dict[str, object]], key: str, logs: Dict[object, Dict[str, np.ndarray]],
                    pooled: bool, interval: int, stride: int) -> List[Dict[str, object]]:
    """The figures whose data fall short of ``MIN_TRACE_POINTS`` ... ``MIN_FES_FRAMES``, and how much more they need.

    Parameters
    ----------
    records : list of dict
        One per replica (``key="replica"``) or per temperature (``key="temperature_K"``), with ``"frames"``.
    key : {"replica", "temperature_K"}
    logs : dict {replica or temperature: log columns}
        The log.csv rows behind the energy traces.
    pooled : bool
        The contact map and F pool every record's frames (replicas of one temperature), rather than one each
        (the temperatures of a tempering run).
    interval : int
        Steps per report (a frame per record and a log row); 0 when unknown.
    stride : int
        ``--stride``: every stride-th frame is analysed (log rows are not thinned).

    Returns
    -------
    list of dict
        Per shortfall: ``figure``, ``quantity``, ``subjects`` (replica numbers or temperatures, K; None when
        pooled), ``frames`` (the fewest), ``needed``, ``more_frames``, ``more_steps`` (None when the interval is
        unknown) and ``message`` (one line).
    """
    out: List[Dict[str, object]] = []

    def named(subjects) -> str:
        if key == "replica":
            return ("replica " if len(subjects) == 1 else "replicas ") + ", ".join(str(r) for r in subjects)
        return ", ".join(f"{t:.1f}" for t in subjects) + " K"

    def add(figure, quantity, counts, need, per_report=1, unit="frames", thinned=True):
        short = {k: int(n) for k, n in counts.items() if n < need}
        if not short:
            return
        have = min(short.values())
        more = need - have
        reports = -(-more * (stride if thinned else 1) // per_report)
        steps = reports * interval if interval > 0 else None
        if None in short:
            what = f"{quantity} from {have} {unit}" + (f" ({len(records)} replicas pooled)" if len(records) > 1 else "")
        else:
            spread = (f"{have} {unit}" + (" each" if len(short) > 1 else "") if len(set(short.values())) == 1
                      else f"{have}-{max(short.values())} {unit}")
            what = f"{quantity} of {named(list(short))} from {spread}"
        how = (f"about {steps} more steps at the report interval of {interval}" if steps is not None
               else f"{reports} more reports")
        how += ", or a smaller --report-interval" + (f" or --stride (now {stride})" if thinned and stride > 1 else "")
        out.append({"figure": figure, "quantity": quantity, "subjects": None if None in short else list(short),
                    "frames": have, "needed": int(need), "more_frames": more, "more_steps": steps,
                    "message": f"too little data for {figure}: {what}; at least {need} are needed "
                               f"({more} more: {how})"})

    frames = {rec[key]: rec["frames"] for rec in records}
    add("energy.png", "the energy and temperature traces", {k: len(v["step"]) for k, v in logs.items()},
        MIN_TRACE_POINTS, unit="log rows", thinned=False)
    add("structure.png", "the RMSD, Rg and Q traces", frames, MIN_TRACE_POINTS, unit="points")
    add("structure.png", "the RMSF", frames, MIN_RMSF_FRAMES)
    maps = {None: sum(frames.values())} if pooled else frames
    per_report = len(records) if pooled else 1
    add("contacts.png", "the contact map", maps, MIN_CONTACT_FRAMES, per_report)
    add("fes.png", "F(RMSD, Rg)", maps, MIN_FES_FRAMES, per_report)
    return out
