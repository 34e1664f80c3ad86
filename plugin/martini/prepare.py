"""All-atom protein PDB -> the files of a solvated MARTINI 3 system: martinize2 (PyPI ``vermouth``) makes the
CG protein and its topology, insane (PyPI ``insane``) puts it in a box of MARTINI water with 0.15 M NaCl and
counter-ions, and we write the ``system.top`` that includes the MARTINI 3 parameter files.

The protein's tertiary structure is held by an elastic network (default) or by the MartiniGo model
(``go=True``: ``martinize2 -go``, vermouth 0.15, which computes the contact map itself). MartiniGo adds one
virtual site per residue on its backbone bead (atom name ``CA``, one atom type each, written to
``go_atomtypes.itp``) and LJ contacts between them (``go_nbparams.itp``, ``[ nonbond_params ]``); martinize2
expects a MARTINI file patched to include those two under ``#ifdef GO_VIRT``. The force-field files are never
edited here: our ``system.top`` includes the two files itself, right after ``martini_v3.0.0.itp`` (see
:func:`write_system_top`).

Both tools run as subprocesses of this Python (their command-line scripts next to ``sys.executable``, else on
``PATH``); their output is kept in ``martinize2.log`` / ``insane.log`` and a failure becomes one
:class:`~flashschnet.errors.InputError` line quoting the tool's own last error line.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ...atomic import atomic_write
from ...errors import InputError, OutputError
from ..run_reader import pdb_positions, read_pdb

#: the MARTINI 3.0.0 parameter files a system.top written here includes (all must be in --forcefield-dir)
FORCEFIELD_FILES = ("martini_v3.0.0.itp", "martini_v3.0.0_ions_v1.itp", "martini_v3.0.0_solvents_v1.itp")

WHERE_TO_GET = ("get them with `flashschnet-martini --fetch-forcefield DIR` (from the martini-shaker wheel on PyPI) "
                "or from the MARTINI website (cgmartini.nl, Martini 3 force-field parameters)")

#: insane's molecule names -> the names MARTINI 3's ion and solvent files define
_INSANE_NAMES = {"NA+": "NA", "CL-": "CL", "W": "W"}

#: the files martinize2 -go writes next to the molecule itp: the Go sites' atom types, their LJ contacts
GO_FILES = ("go_atomtypes.itp", "go_nbparams.itp")

#: martinize2's name of the Go virtual sites (-go-atomname, default CA; MARTINI 3 beads are BB, SC1, ...)
GO_ATOM_NAME = "CA"


@dataclass
class PreparedSystem:
    """The files of a solvated MARTINI system (absolute paths) and what is in it."""

    folder: str
    top: str                     # system.top (includes the force-field files by name)
    gro: str                     # system.gro: coordinates (nm) and the cubic box
    cg_pdb: str                  # martinize2's CG protein (Angstrom), the mapped native structure
    protein_molecules: List[Tuple[str, int]] = field(default_factory=list)
    molecules: List[Tuple[str, int]] = field(default_factory=list)
    n_protein_beads: int = 0     # protein particles, the Go virtual sites included
    box_nm: float = 0.0
    warnings: List[str] = field(default_factory=list)   # martinize2's, e.g. missing atoms it rebuilt
    go: bool = False             # MartiniGo (martinize2 -go) instead of an elastic network
    n_go_sites: int = 0          # Go virtual sites (one per residue)
    n_go_contacts: int = 0       # Go LJ contacts ([ nonbond_params ] of go_nbparams.itp)


def check_forcefield_dir(ff_dir: str) -> str:
    """Return ``ff_dir`` as an absolute path, or raise :class:`InputError` naming the missing files."""
    if not ff_dir or not os.path.isdir(ff_dir):
        raise InputError(f"--forcefield-dir {ff_dir!r} is not a folder; it must hold {', '.join(FORCEFIELD_FILES)}: "
                         f"{WHERE_TO_GET}")
    missing = [f for f in FORCEFIELD_FILES if not os.path.isfile(os.path.join(ff_dir, f))]
    if missing:
        raise InputError(f"{ff_dir}: missing MARTINI 3 parameter file(s) {', '.join(missing)}; {WHERE_TO_GET}")
    return os.path.abspath(ff_dir)


def _tool(name: str, package: str) -> str:
    here = os.path.join(os.path.dirname(sys.executable), name)
    path = here if os.access(here, os.X_OK) else shutil.which(name)
    if not path:
        raise InputError(f"{name} not found next to {sys.executable} or on PATH ({package}); "
                         "pip install 'flashschnet[martini]' (martinize2 and insane, pinned)")
    return path


def _last_error(log: str) -> str:
    """The most telling line of a tool's output: the last one that looks like an error, else the last one."""
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    for line in reversed(lines):
        if re.search(r"error|exception|cannot|could not|not found|unknown|missing", line, re.I):
            return line
    return lines[-1] if lines else "(no output)"


def _os_error(log: str, what: str, cwd: str) -> Optional[OutputError]:
    """The OS error a Python tool's traceback ends with (``OSError: [Errno 28] No space left on device: 'f'``) as an
    :class:`OutputError` (exit status 5, 6 or 7; a relative file name taken from ``cwd``), or None when its failure
    was something else."""
    found = re.findall(r"\[Errno (\d+)\] ([^:\n']+?)(?:: '([^'\n]*)')?\s*$", log, re.M)
    if not found:
        return None
    code, reason, filename = found[-1]
    return OutputError(what, int(code), reason.strip(), os.path.join(cwd, filename) if filename else None)


def _warnings(log: str) -> List[str]:
    """The distinct WARNING messages of a martinize2 log, in order (logger prefix removed)."""
    out: List[str] = []
    for line in log.splitlines():
        if " WARNING - " in line:
            msg = line.split(" WARNING - ", 1)[1].split(" - ", 1)[-1].strip()
            if msg not in out:
                out.append(msg)
    return out


def _run(cmd: Sequence[str], cwd: str, log_name: str, what: str, env=None) -> List[str]:
    """Run a tool in ``cwd``, keep its output in ``log_name``; return its warnings, raise InputError on failure."""
    try:
        proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, env=env, timeout=3600)
    except subprocess.TimeoutExpired:
        raise InputError(f"{what}: {os.path.basename(cmd[0])} did not finish within an hour") from None
    log = proc.stdout + proc.stderr
    with atomic_write(os.path.join(cwd, log_name), "w", what="writing the log") as f:
        f.write(" ".join(cmd) + "\n" + log)
    warnings = _warnings(log)
    if proc.returncode != 0:
        os_error = _os_error(log, f"{what}: {os.path.basename(cmd[0])} writing", cwd)
        if os_error is not None:               # a full disk or a read-only folder: the output's status, not bad input
            raise os_error
        unknown = sorted({m.group(1) for w in warnings for m in [re.search(r"recognize residue '([^']+)'", w)] if m})
        why = f"; it warned: {warnings[0]}" if warnings else ""
        if unknown:
            why += f" (residues {', '.join(unknown)} are not amino acids MARTINI 3 knows: remove them or pass " \
                   f"--ignore {','.join(unknown)})"
        raise InputError(f"{what}: {os.path.basename(cmd[0])} failed: {_last_error(log)}{why} "
                         f"(full output: {os.path.join(cwd, log_name)})")
    return warnings


def _molecules_section(path: str) -> List[Tuple[str, int]]:
    """The ``[ molecules ]`` entries of a topology that martinize2 or insane wrote."""
    out, on = [], False
    with open(path) as f:
        for line in f:
            line = line.split(";")[0].strip()
            if line.startswith("["):
                on = line.strip("[] ").lower() == "molecules"
            elif on and line:
                name, count = line.split()[:2]
                out.append((name, int(count)))
    return out


def _section_lines(path: str, section: str) -> List[str]:
    """The data lines (comments stripped) of every ``[ section ]`` of one GROMACS file (no preprocessing)."""
    out, on = [], False
    with open(path) as f:
        for line in f:
            line = line.split(";")[0].strip()
            if line.startswith("["):
                on = line.strip("[] ").lower() == section
            elif on and line and not line.startswith("#"):
                out.append(line)
    return out


def _mentions(path: str, word: bytes) -> bool:
    """Whether a (possibly large) file contains ``word``, read in blocks."""
    tail = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 22)
            if not block:
                return False
            if word in tail + block:
                return True
            tail = block[-len(word):]


def write_system_top(path: str, ff_dir: str, protein_itps: Sequence[str], molecules: Sequence[Tuple[str, int]],
                     title: str, go: bool = False) -> None:
    """Write a ``system.top``: the MARTINI 3 files (found in ``ff_dir`` at read time, included by name), with
    ``go`` the Go files (:data:`GO_FILES`, by name: they lie next to it) right after ``martini_v3.0.0.itp``, then
    the protein's itps and the ``[ system ]`` / ``[ molecules ]`` sections.

    With ``go``, ``GO_VIRT`` is defined first as martinize2's own topol.top does, unless ``martini_v3.0.0.itp`` in
    ``ff_dir`` itself uses that name (a copy patched for MartiniGo, which would include the Go files a second
    time): then it stays undefined and only the explicit includes here count."""
    lines = []
    if go:
        lines.append("; MartiniGo (martinize2 -go): the Go virtual sites' atom types and LJ contacts follow the "
                     "force field")
        if not _mentions(os.path.join(ff_dir, FORCEFIELD_FILES[0]), b"GO_VIRT"):
            lines.append("#define GO_VIRT")
    includes = [FORCEFIELD_FILES[0], *(GO_FILES if go else ()), *FORCEFIELD_FILES[1:], *protein_itps]
    lines += [f'#include "{inc}"' for inc in includes]
    lines += ["", "[ system ]", title, "", "[ molecules ]"]
    lines += [f"{mol:<16s}{count:>8d}" for mol, count in molecules]
    with atomic_write(path, "w", what="writing the topology") as f:
        f.write("\n".join(lines) + "\n")


def prepare_system(pdb: str, ff_dir: str, folder: str, name: str = "protein", padding_nm: float = 1.5,
                   salt_molar: float = 0.15, seed: int = 1, ignore: Sequence[str] = ("HOH",),
                   elastic: Optional[bool] = None, go: bool = False,
                   go_eps: Optional[float] = None) -> PreparedSystem:
    """Write a solvated MARTINI 3 system of the all-atom protein ``pdb`` into ``folder``.

    Parameters
    ----------
    pdb : str
        All-atom protein structure (PDB). Water (HOH) and the residues in ``ignore`` are dropped; hydrogens
        are ignored (martinize2 ``-ignh``).
    ff_dir : str
        Folder with :data:`FORCEFIELD_FILES`.
    folder : str
        Output folder (created).
    name : str
        Molecule name prefix for martinize2 (``name_0``, ``name_1``, ... per chain).
    padding_nm : float
        Least distance from any protein bead to the faces of the cubic box (so periodic images of the protein
        are at least ``2 * padding_nm`` apart), nm.
    salt_molar : float
        NaCl concentration, mol/L; insane adds counter-ions to make the system neutral.
    seed : int
        insane's random seed (water placement), for reproducible systems.
    elastic : bool, optional
        martinize2 ``-elastic``: an elastic network holds the tertiary structure (MARTINI 3's default for
        folded proteins). Default: on unless ``go``. Secondary structure always comes from DSSP (mdtraj's,
        ``-dssp``).
    go : bool
        martinize2 ``-go`` (MartiniGo, instead of the elastic network; ``elastic=True`` with it is an error):
        Go virtual sites on the backbone beads and LJ contacts from the structure's contact map, written to
        :data:`GO_FILES` in ``folder`` and included by ``system.top``. All chains become one molecule ``name``.
    go_eps : float, optional
        martinize2 ``-go-eps``: depth of the Go contacts, kJ/mol (default: martinize2's, 9.414).

    Returns
    -------
    PreparedSystem
    """
    if not os.path.isfile(pdb):
        raise InputError(f"{pdb}: no such file")
    if go and elastic:
        raise InputError("the Go model replaces the elastic network (martinize2 -go, no -elastic): "
                         "ask for one of them")
    if go_eps is not None:
        try:
            good = go and float(go_eps) > 0.0          # NaN fails too
        except (TypeError, ValueError):
            good = False
        if not good:
            raise InputError(f"go_eps {go_eps!r}: the Go contacts' depth must be a positive number (kJ/mol), and "
                             "needs go=True")
    elastic = (not go) if elastic is None else bool(elastic)
    ff_dir = check_forcefield_dir(ff_dir)
    folder = os.path.abspath(folder)
    os.makedirs(folder, exist_ok=True)
    pdb = os.path.abspath(pdb)

    # 1. martinize2: CG protein + its itp files ---------------------------------------------------------------
    cmd = [_tool("martinize2", "vermouth"), "-f", pdb, "-x", "cg.pdb", "-o", "martinize2.top", "-ff", "martini3001",
           "-dssp", "-ignh", "-cys", "auto", "-name", name]
    for res in ignore:
        cmd += ["-ignore", res]
    if elastic:
        cmd += ["-elastic"]
    if go:
        for stale in GO_FILES:     # martinize2 keeps #backups# of old files; a stale one must not count
            if os.path.exists(os.path.join(folder, stale)):
                os.remove(os.path.join(folder, stale))
        cmd += ["-go"] + (["-go-eps", f"{float(go_eps)!r}"] if go_eps is not None else [])
    warnings = _run(cmd, folder, "martinize2.log", f"{pdb}: building the MARTINI protein")
    protein = _molecules_section(os.path.join(folder, "martinize2.top"))
    atoms = [l for l in open(os.path.join(folder, "cg.pdb")) if l.startswith(("ATOM", "HETATM"))]
    if not protein or not atoms:
        raise InputError(f"{pdb}: martinize2 produced no protein (no amino-acid residues in the file?)")
    itps = [f"{m}.itp" for m, _ in protein]
    for itp in itps:
        if not os.path.isfile(os.path.join(folder, itp)):
            raise InputError(f"{pdb}: martinize2 wrote no {itp} for its molecule (see {folder}/martinize2.log)")
    n_sites = n_contacts = 0
    if go:
        missing = [f for f in GO_FILES if not os.path.isfile(os.path.join(folder, f))]
        if missing:
            raise InputError(f"{pdb}: martinize2 -go wrote no {', '.join(missing)} (see {folder}/martinize2.log)")
        n_sites = len(_section_lines(os.path.join(folder, GO_FILES[0]), "atomtypes"))
        n_contacts = len(_section_lines(os.path.join(folder, GO_FILES[1]), "nonbond_params"))
        named = sum(1 for l in atoms if l[12:16].strip() == GO_ATOM_NAME)
        if named != n_sites:
            raise InputError(f"{pdb}: martinize2 -go wrote {n_sites} Go atom types but cg.pdb has {named} "
                             f"{GO_ATOM_NAME} sites (see {folder}/martinize2.log)")

    # 2. insane: centred protein in a cubic box of water and ions ------------------------------------------------
    xyz = pdb_positions(read_pdb(os.path.join(folder, "cg.pdb")))      # nm, in the order of the records
    if len(xyz) != len(atoms):
        raise InputError(f"{pdb}: martinize2's cg.pdb has {len(atoms)} ATOM/HETATM records but {len(xyz)} atoms "
                         "(several models or alternate locations?); check the input structure")
    centre = xyz.mean(axis=0)
    box = 2.0 * (float(np.linalg.norm(xyz - centre, axis=1).max()) + float(padding_nm))
    with atomic_write(os.path.join(folder, "protein_centred.pdb"), "w", what="writing") as f:  # insane puts the origin at the box centre
        for line, p in zip(atoms, (xyz - centre) * 10.0):
            if go and line[12:16].strip() == GO_ATOM_NAME:
                # insane counts a residue's charge again whenever the residue recurs, and the Go sites (all
                # after the beads) repeat every residue: names starting with "v" are virtual sites to it
                line = f"{line[:12]}{'v' + GO_ATOM_NAME:<4s}{line[16:]}"
            f.write(f"{line[:30]}{p[0]:8.3f}{p[1]:8.3f}{p[2]:8.3f}{line[54:].rstrip()}\n")
        f.write("END\n")
    env = dict(os.environ, INSANE_SEED=str(int(seed)))
    cmd = [_tool("insane", "insane"), "-f", "protein_centred.pdb", "-o", "system.gro", "-p", "insane.top",
           "-pbc", "cubic", "-box", f"{box:.3f},{box:.3f},{box:.3f}", "-sol", "W", "-salt", f"{salt_molar:g}"]
    _run(cmd, folder, "insane.log", f"{pdb}: solvating the MARTINI protein", env=env)
    if go:
        _rename_gro_atoms(os.path.join(folder, "system.gro"), "v" + GO_ATOM_NAME, GO_ATOM_NAME)

    # 3. system.top: the force field, the protein's molecule types, then insane's solvent and ions --------------
    molecules = list(protein)
    for mol, count in _molecules_section(os.path.join(folder, "insane.top")):
        if mol == "Protein":
            continue
        if mol not in _INSANE_NAMES:
            raise InputError(f"{pdb}: insane added molecule {mol!r}, which MARTINI 3's files do not define")
        molecules.append((_INSANE_NAMES[mol], count))
    write_system_top(os.path.join(folder, "system.top"), ff_dir, itps, molecules,
                     f"{name}{' (MartiniGo)' if go else ''} in MARTINI 3 water, {salt_molar:g} M NaCl", go=go)
    return PreparedSystem(folder=folder, top=os.path.join(folder, "system.top"), gro=os.path.join(folder, "system.gro"),
                          cg_pdb=os.path.join(folder, "cg.pdb"), protein_molecules=protein, molecules=molecules,
                          n_protein_beads=len(atoms), box_nm=box, warnings=warnings, go=go, n_go_sites=n_sites,
                          n_go_contacts=n_contacts)


def _rename_gro_atoms(path: str, old: str, new: str) -> None:
    """Rename atoms ``old`` -> ``new`` in a .gro file (fixed columns: the atom name is characters 10-15, written
    as insane does, `` %-4s``)."""
    with open(path) as f:
        lines = f.read().splitlines()
    n = int(lines[1])
    for k in range(2, 2 + n):
        if lines[k][10:15].strip() == old:
            lines[k] = f"{lines[k][:10]} {new:<4s}{lines[k][15:]}"
    with atomic_write(path, "w", what="writing the coordinates") as f:
        f.write("\n".join(lines) + "\n")
