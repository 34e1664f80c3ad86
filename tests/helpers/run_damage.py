"""Run directories under damage (tests/fuzz/test_fuzz_run_dirs.py, tests/openmm/test_compare.py): damage one file
of a copy of a real run, run one reader of run directories on it, and check what it did.

Damage (:func:`damage`): ``delete`` the file, make it ``empty``, ``truncate`` it at a drawn byte, ``overwrite`` 16
bytes at a drawn offset with 0xFF (bytes no file of its kind holds: not UTF-8 text, not a finite float, not a
record length; an overwrite with values the file could hold -- a digit for a digit -- cannot be told from the run's
own numbers by any reader, and is not tried), or replace it with ``other``: the same file of another run (or, where
that run has none, its file of the same kind).

Readers (:class:`Reader`): ``main(argv)`` of a command, in-process, with the figures stubbed out (drawing is not
reading) and backmapping stopped where the rebuilding would start (its input read and checked:
:func:`quiet_readers`). The oracle (:meth:`Damage.check`), for every case:

* no traceback, and every stderr line is the command's (``PROG: ...``);
* the run directory's files unchanged (``--resume`` may rewrite a file it names in a ``note:``);
* exit 2: one ``PROG: error:`` line naming the damaged file;
* exit 0: a ``note:`` line naming the damaged file (and the JSON report's ``input_warnings`` holding it), or an
  outcome identical to the undamaged run's (the damage did not reach what the reader reads);
* nothing else (no other exit status).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

DAMAGES = ("delete", "empty", "truncate", "overwrite", "other")
OVERWRITE = b"\xff" * 16


class Stopped(BaseException):
    """Raised by the backmapping stub where the frames would be rebuilt: the input was read and accepted."""


def damage(path: Path, kind: str, rng: random.Random, donor: Optional[Path]) -> bool:
    """Damage ``path`` (module docstring); False when ``kind`` does not apply (no donor, or the donor's file is
    the same bytes)."""
    data = path.read_bytes()
    if kind == "delete":
        path.unlink()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncate":
        if len(data) < 2:
            return False
        path.write_bytes(data[:rng.randrange(1, len(data))])
    elif kind == "overwrite":
        at = rng.randrange(0, max(len(data) - len(OVERWRITE), 0) + 1)
        path.write_bytes(data[:at] + OVERWRITE + data[at + len(OVERWRITE):])
    elif kind == "other":
        if donor is None or not donor.is_file() or donor.read_bytes() == data:
            return False
        shutil.copyfile(donor, path)
    else:
        raise ValueError(kind)
    return True


def snapshot(root: Path, own: Sequence[str] = ()) -> Dict[str, str]:
    """sha256 of every file under ``root`` (but those named in ``own``, at its top), by relative path."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and str(p.relative_to(root)) not in own}


def pick_cases(files: Sequence[str], n: int, seed: int) -> List[Tuple[str, str, int]]:
    """``n`` (file, damage, draw seed) cases of ``files`` x :data:`DAMAGES` (``truncate`` twice: two cut points),
    drawn by a seeded generator so that every file and every damage is in at least one."""
    rng = random.Random(seed)
    pool = [(f, d) for f in files for d in DAMAGES + ("truncate",)]
    rng.shuffle(pool)
    chosen: List[Tuple[str, str]] = []

    def take(want) -> bool:
        for i, c in enumerate(pool):
            if want(c):
                chosen.append(pool.pop(i))
                return True
        return False

    for f in files:
        used = {d for _, d in chosen}
        take(lambda c: c[0] == f and c[1] not in used) or take(lambda c: c[0] == f)
    for d in DAMAGES:
        if d not in {k for _, k in chosen}:
            take(lambda c: c[1] == d)
    while len(chosen) < n and pool:
        chosen.append(pool.pop())
    return [(f, d, rng.randrange(2**31)) for f, d in chosen]


@dataclass
class Reader:
    """A command that reads a run directory: ``argv(run, scratch)`` its arguments (``scratch``: a fresh folder for
    its output), ``report(run, scratch)`` its JSON report (``input_warnings``; what is compared with the undamaged
    run's, less ``volatile`` keys), if it writes one; ``own``: names of files it writes into ``run`` itself."""

    name: str
    module: str
    argv: Callable[[Path, Path], List[str]]
    report: Optional[Callable[[Path, Path], Path]] = None
    volatile: Sequence[str] = ()
    own: Sequence[str] = ()
    rewrites: bool = False            # --resume: may rewrite a file it names in a note

    @property
    def prog(self) -> str:
        return "flashschnet-" + self.module


def invoke(module: str, argv: List[str]) -> Tuple[object, str]:
    """``main(argv)`` of ``flashschnet.scripts.<module>`` in-process: (exit status, "stopped" or "exception";
    stderr)."""
    main = importlib.import_module(f"flashschnet.scripts.{module}").main
    err, threads = io.StringIO(), torch.get_num_threads()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = main([str(a) for a in argv])
            except SystemExit as exc:
                rc = exc.code
            except Stopped:
                rc = "stopped"
            except Exception:                    # reported as a traceback on stderr
                import traceback

                traceback.print_exc(file=err)
                rc = "exception"
    finally:
        torch.set_num_threads(threads)
    return rc, err.getvalue()


def quiet_readers(monkeypatch, captured: Dict[str, object]) -> None:
    """Stub the figures of analyze and compare (drawing, not reading) and stop backmapping where the frames would
    be rebuilt (``captured["frames"]``: what it was handed: the skeleton from the reference, the CG frames)."""
    import flashschnet.openmm.analyze as analyze
    import flashschnet.openmm.backmap.command as command
    import flashschnet.openmm.compare as compare
    import flashschnet.openmm.exchange_diagnostics as exchange
    import flashschnet.openmm.thermo_report as thermo_report

    def rebuild(skeleton, frames_nm, *args, **kwargs):
        captured["frames"] = [skeleton.text, skeleton.bead_index.tolist(), skeleton.disulfides, frames_nm.tolist()]
        raise Stopped()

    monkeypatch.setattr(analyze, "plot_report", lambda result, out: None)
    monkeypatch.setattr(thermo_report, "_plot_thermo", lambda thermo, out: None)
    monkeypatch.setattr(exchange, "plot", lambda diag, out: None)
    monkeypatch.setattr(command, "backmap_frames", rebuild)
    monkeypatch.setattr(compare, "plot", lambda result, path: None)
    monkeypatch.setattr(compare.sampling_report, "plot", lambda result, path: None)


@dataclass
class Damage:
    """The fuzzing of one run directory: ``source`` (never touched), copied to ``work / name`` for each case;
    ``donors``: file name -> the other run's file; ``readers`` of it."""

    name: str
    source: Path
    work: Path
    readers: List[Reader]
    donors: Dict[str, Path]
    captured: Dict[str, object] = field(default_factory=dict)
    baselines: Dict[str, object] = field(default_factory=dict)
    log: List[str] = field(default_factory=list)

    def fresh(self) -> Path:
        """A clean copy of the run at the one path every case uses (the outcomes name it)."""
        run = self.work / self.name
        if run.exists():
            shutil.rmtree(run)
        shutil.copytree(self.source, run)
        return run

    def _run(self, reader: Reader, run: Path) -> Tuple[object, str, object, Optional[dict]]:
        """(exit status, stderr, outcome, JSON report) of ``reader`` on ``run``."""
        scratch = self.work / f"{self.name}-{reader.name}-out"
        if scratch.exists():
            shutil.rmtree(scratch)
        self.captured.clear()
        rc, err = invoke(reader.module, reader.argv(run, scratch))
        report = None
        if reader.report is not None and reader.report(run, scratch).is_file():
            report = json.loads(reader.report(run, scratch).read_text())
        if reader.name == "backmap":
            outcome = self.captured.get("frames")
        elif report is not None:
            outcome = {k: v for k, v in report.items() if k not in reader.volatile}
        else:
            outcome = err
        return rc, err, outcome, report

    def baseline(self) -> None:
        """Every reader on the undamaged run: it must succeed without a note about any file of the run."""
        names = {p.name for p in self.source.rglob("*") if p.is_file()}
        for reader in self.readers:
            rc, err, outcome, report = self._run(reader, self.fresh())
            assert rc in (0, "stopped"), (reader.name, err)
            noted = [line for line in err.splitlines() if ": note:" in line and any(n in line for n in names)]
            assert not noted and not _warnings(report or {}), (reader.name, err)
            self.baselines[reader.name] = outcome

    def check(self, rel: str, kind: str, seed: int) -> int:
        """Damage ``rel`` by ``kind`` (``seed``: its draws) in a fresh copy for each reader and check the oracle
        (module docstring); returns the number of reader runs (0 when the damage does not apply)."""
        runs = 0
        for reader in self.readers:
            run = self.fresh()
            if not damage(run / rel, kind, random.Random(seed), self.donors.get(rel)):
                return runs
            before = snapshot(run, reader.own)
            rc, err, outcome, report = self._run(reader, run)
            runs += 1
            where = f"{self.name}: {rel} {kind} (seed {seed}), {reader.name}: rc {rc}\n{err}"
            lines = err.strip().splitlines()
            self.log.append(f"{self.name}\t{rel}\t{kind}\t{reader.name}\t{rc}\t{lines[-1] if lines else ''}")
            assert rc != "exception" and "Traceback" not in err, where
            assert all(line.startswith(f"{reader.prog}: ") for line in lines), where
            base = Path(rel).name
            notes = [line for line in lines if line.startswith(f"{reader.prog}: note:") and base in line]
            if not (reader.rewrites and rc == 0 and notes):
                assert snapshot(run, reader.own) == before, f"input changed: {where}"
            if rc == 2:
                assert lines and lines[-1].startswith(f"{reader.prog}: error: ") and base in lines[-1], where
                assert not any(": error:" in line for line in lines[:-1]), where
                continue
            assert rc in (0, "stopped"), where
            if notes:
                if report is not None:
                    assert any(base in w for w in _warnings(report)), f"no input_warnings: {where}"
                continue
            assert outcome == self.baselines[reader.name], f"damage not noted, outcome changed: {where}"
        return runs


def _warnings(report: dict) -> List[str]:
    """``input_warnings`` of a report (compare's: per run, each line prefixed with the run's folder)."""
    found = list(report.get("input_warnings") or [])
    for run in ("martini", "flashschnet"):
        if isinstance(report.get(run), dict):
            found += [f"{run}/{w}" for w in report[run].get("input_warnings") or []]
    return found
