"""The options of the commands that read a run directory (``flashschnet-analyze``, ``flashschnet-backmap``), checked
against the run they read, with one set of messages: ``OPTION VALUE: RUN_DIR is/has ...; what to do``.

* :func:`describe` -- what a run is, in a few words (for the messages);
* :func:`tempering_only` -- an option that needs a parallel-tempering run, on another run;
* :func:`not_for_tempering` -- an option a parallel-tempering run has no use for;
* :func:`replica_choice`, :func:`temperature_choice` -- a replica or temperature the run must have;
* :func:`reference_residues` -- a reference structure of another protein (its residues, by count and name).

Each raises :class:`~flashschnet.errors.InputError` (one line; the commands exit 2 before any work).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence

from ..errors import InputError

if TYPE_CHECKING:
    from .run_reader import RunDir

#: a temperature given on the command line is a rung of the ladder when within this (K): names are to 0.1 K
RUNG_TOLERANCE_K = 0.05


def describe(rd: "RunDir", ladder: Optional[Dict[float, str]]) -> str:
    """``"a parallel-tempering run (3 temperatures, 300.0-400.0 K)"``, ``"a run of 2 replicas (0, 1)"``, ..."""
    if ladder:
        return f"a parallel-tempering run ({len(ladder)} temperatures, {min(ladder):.1f}-{max(ladder):.1f} K)"
    if rd.kind == "martini":
        return "a flashschnet-martini run (one trajectory)"
    reps = sorted(rd.trajectories)
    return f"a run of {len(reps)} replica{'s' if len(reps) != 1 else ''} ({', '.join(map(str, reps))})"


def tempering_only(options: Iterable[str], rd: "RunDir", ladder: Optional[Dict[float, str]], why: str) -> None:
    """Refuse the first of ``options`` (those given) when the run is not parallel tempering."""
    given = list(options)
    if given and not ladder:
        raise InputError(f"{given[0]}: {rd.path} is not a parallel-tempering run but {describe(rd, ladder)}; {why}")


def not_for_tempering(option: str, value: str, rd: "RunDir", ladder: Optional[Dict[float, str]], why: str) -> None:
    """Refuse ``option`` on a parallel-tempering run (``why``: what the run is analysed by instead)."""
    if ladder:
        raise InputError(f"{option} {value}: {rd.path} is {describe(rd, ladder)}; {why}; drop {option}")


def replica_choice(option: str, wanted: Sequence[int], rd: "RunDir", ladder: Optional[Dict[float, str]] = None,
                   ) -> List[int]:
    """``wanted`` replicas, each one the run has (a trajectory of its own)."""
    for r in wanted:
        if r not in rd.trajectories:
            raise InputError(f"{option} {','.join(map(str, wanted))}: {rd.path} has no replica {r} (it is "
                             f"{describe(rd, ladder)}); choose among {', '.join(map(str, rd.trajectories))}")
    return list(wanted)


def temperature_choice(option: str, value: float, rd: "RunDir", ladder: Optional[Dict[float, str]],
                       instead: str) -> float:
    """The rung of ``ladder`` at ``value`` K (within :data:`RUNG_TOLERANCE_K`); ``instead``: what to choose on a
    run that is not parallel tempering."""
    if not ladder:
        raise InputError(f"{option} {value:g}: {rd.path} is not a parallel-tempering run but "
                         f"{describe(rd, ladder)}; {instead}")
    near = min(ladder, key=lambda t: abs(t - value))
    if abs(near - value) > RUNG_TOLERANCE_K:
        raise InputError(f"{option} {value:g}: not a temperature of {rd.path} (its ladder: "
                         + ", ".join(f"{t:g}" for t in ladder) + " K); choose one of them")
    return near


def reference_residues(source: str, residues: Sequence[str], reference: str, ref_residues: Sequence[str],
                       give: str = "give a structure of the run's protein (its cleaned.pdb)") -> None:
    """A reference of another protein: ``source`` (the run's structure) has ``residues`` (names, in order), the
    ``reference`` file ``ref_residues``; they must agree in number and amino acid (by one-letter code, so HIE is
    HIS; by name where there is none). The message is flashschnet-backmap's for the same mismatch."""
    from ..cg.mapping import one_letter_code

    if len(residues) != len(ref_residues):
        raise InputError(f"{source}: {len(residues)} residues, but the reference {reference} has "
                         f"{len(ref_residues)}; {give}")
    for i, (a, b) in enumerate(zip(residues, ref_residues)):
        if (one_letter_code(a) or a) != (one_letter_code(b) or b):
            raise InputError(f"{source}: residue {i + 1} is {a}, but the reference {reference} has {b} there; {give}")
