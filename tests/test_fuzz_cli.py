"""Command-line arguments, fuzzed (hypothesis), for every console entry point: flashschnet-simulate, -martini,
-compare, -convert, -train (md, fit, validate), -benchmark; and the maintainer tool tools/quantization_report.py.

Each test starts from a valid, cheap argv of one command and changes one or two options to values typed by
what the option expects -- integers and floats: negative, zero, huge (1e308, 10**30, 2**31), nan, +-inf, '',
text, '1e3' for an integer, a Unicode digit; paths: missing, a directory, an empty file, random bytes, a
Unicode path with spaces, a place that cannot be written (an existing file, a path below a file, /sys), '';
choices: random text -- and sometimes adds an unknown option, repeats one, or drops a required one. main(argv)
runs in-process. Properties:

* an invalid value gives exit status 2 (an oracle per option says which values are valid); a valid one 0;
* stderr never holds a traceback; a failure is one ``PROG: error: ...`` line, after ``PROG: ...`` lines (notes,
  progress) or after argparse's usage (argparse's own errors);
* a failure leaves nothing that looks complete (no run.json / checkpoint, OUTPUT, JSON report, .npz, best.pt,
  validation.json that was not there before); a success leaves the complete output.

The heavy part of an accepted command is kept short, not skipped: the step loop
(``flashschnet.openmm.simulate.integrate``, the same function flashschnet-simulate, -train validate and the
quantization report run) stops after two or three steps; the all-atom MD of ``train md`` minimises for 5
iterations and makes at most 2 steps per call; the MARTINI system is prepared once (martinize2 + insane) and
copied. Where even that is too heavy, a stub marks the point where the work would start (``Accepted``):
``train fit``'s force matching, the compare runs, the quantization report's Langevin runs and frame errors,
the benchmark's worker subprocesses. A huge value that must be refused before anything is allocated
(``--replicas 10**30``, ``--frames 10**30``) is refused by the commands themselves (``flashschnet.limits``).
"""
from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import DATA, EXAMPLES, SHARED
from helpers.tools import tool

PDB = EXAMPLES / "1L2Y_trpcage.pdb"
MODEL = EXAMPLES / "trpcage_placeholder.pt"
MLCG = DATA / "oracles" / "real" / "model_and_prior_S.pt"
ORACLE = DATA / "oracles" / "mlcg_schnet_A.pt"
M3 = SHARED / "martini" / "m3"
FF_FILES = ("martini_v3.0.0.itp", "martini_v3.0.0_ions_v1.itp", "martini_v3.0.0_solvents_v1.itp")


def _settings(n: int):
    """``n`` examples per test; derandomized or not as the profile says (tests/conftest.py)."""
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much])


class Accepted(BaseException):
    """Raised by a stub where a command's heavy work would start: it accepted its input."""


def _accept(*args, **kwargs):
    raise Accepted()


# ------------------------------------------------------------------------------------------------ values
INTS = ["-1", "0", "1", "2", "3", "\u0663", str(10**30), "2147483648", "1e308", "nan", "inf", "-inf", "", "text",
        "1e3"]
# thread counts: valid ones stay 1 (more threads only slow a shared 2-core CI machine down); 1025 is past the limit
THREAD_INTS = ["-1", "0", "1", "\u0661", "1025", str(10**30), "2147483648", "1e308", "nan", "inf", "-inf", "",
               "text", "1e3"]
FLOATS = ["-1", "-0", "0", "1e-300", "0.5", "1", "2", "4", "20", "300", "1e3", "1e308", "nan", "inf", "-inf", "",
          "text"]
IN_PATHS = ["@missing", "@dir", "@empty", "@random", "@blank"]
OUT_DIRS = ["@fresh", "@fresh_nested", "@fresh_unicode", "@a_file", "@under_file", "@readonly", "@blank"]
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")       # what argparse takes for a value, not an option


def as_int(text: str) -> Optional[int]:
    if text.startswith("-") and not NEGATIVE_NUMBER.match(text):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def as_float(text: str) -> Optional[float]:
    if text.startswith("-") and not NEGATIVE_NUMBER.match(text):
        return None
    try:
        return float(text)
    except ValueError:
        return None


#: an oracle's verdict on a valid value whose run may rightly end in exit status 3 ("simulation unstable"), e.g.
#: a MARTINI system left unminimised: valid input, but not judged as one that must succeed
MAY_BLOW_UP = "may blow up"

Oracle = Callable[[str, Dict[str, str]], Union[bool, None, str]]   # (value, all option values) -> valid?
#                                                                   None: either; MAY_BLOW_UP: valid, exit 0 or 3


def ints(low: int, high: Optional[int] = None) -> Oracle:
    def ok(text, ctx):
        v = as_int(text)
        return v is not None and v >= low and (high is None or v <= high)
    return ok


def floats(low: float, high: float = math.inf, low_open: bool = False, allow_inf: bool = False,
           sure_below: float = math.inf) -> Oracle:
    """Valid: a number in the range (finite unless ``allow_inf``); values above ``sure_below`` may fail at run
    time (exit 3 or a blow-up refused as input) and are not judged."""
    def ok(text, ctx):
        v = as_float(text)
        if v is None or math.isnan(v) or (math.isinf(v) and not allow_inf):
            return False
        if (v <= low if low_open else v < low) or v > high:
            return False
        return True if v <= sure_below else None
    return ok


def one_of(*valid: str) -> Oracle:
    return lambda text, ctx: text in valid


def tokens(**valid: Optional[bool]) -> Oracle:
    """Path tokens: those named are valid (True), not judged (None) or invalid (False); others invalid."""
    return lambda text, ctx: valid.get(text.lstrip("@"), False)


RANDOM_TEXT = "@text"                      # in a pool: random text (hypothesis st.text)


def choices(valid: Sequence[str]) -> List[str]:
    return list(valid) + [RANDOM_TEXT]


@dataclass
class Opt:
    """A fuzzed option: its value pool (strings, path tokens ``@...``, ``@text``) and the oracle. Half the
    draws come from the pool values the oracle accepts with the base argv, so valid runs are common."""

    name: str                              # "--steps", or "<pdb>" for a positional
    pool: Sequence[str]
    valid: Oracle

    @property
    def values(self) -> st.SearchStrategy:
        def draw(items):
            return st.one_of(*[st.text(max_size=8) if v == RANDOM_TEXT else st.just(v) for v in items])

        good = [v for v in self.pool if v != RANDOM_TEXT and self.valid(v, {}) is not False]
        return st.one_of(draw(good), draw(self.pool)) if good else draw(self.pool)


@dataclass
class Command:
    module: str                            # flashschnet.scripts.<module>, or tools.<name> (tools/<name>.py)
    prog: str
    base: List[Tuple[str, Optional[str]]]  # the valid argv: (name, value); positionals "<x>", flags value None
    opts: List[Opt]
    required: List[str]                    # names whose removal must be refused
    markers: Callable[[Dict[str, str]], List[str]]     # files a complete output has
    complete: Callable[[Dict[str, str]], None] = lambda v: None   # more checks after status 0
    stubs: Callable[..., None] = lambda mp, ws: None
    duplicate: Optional[Tuple[str, str]] = None         # an option repeated by the "duplicate" mutation
    never: Callable[[Dict[str, str]], List[str]] = lambda v: []   # files no run may leave (temporaries)
    sub: List[str] = field(default_factory=list)        # subcommand


# ------------------------------------------------------------------------------------------------ fixtures
class Workspace:
    """Files the tokens stand for; per-example paths under a fresh folder."""

    def __init__(self, root: Path):
        self.root = root
        (root / "empty").write_bytes(b"")
        rng = np.random.default_rng(0)
        (root / "random.bin").write_bytes(rng.integers(0, 256, 600, dtype=np.uint8).tobytes())
        (root / "dir").mkdir()
        uni = root / "ünï cödé"
        uni.mkdir()
        shutil.copy(PDB, uni / "trp cage ü.pdb")
        shutil.copy(MODEL, uni / "mödel ö.pt")
        self.pdb_unicode, self.model_unicode = uni / "trp cage ü.pdb", uni / "mödel ö.pt"
        from flashschnet.checkpoint import load_model
        from flashschnet.priors import save_priors

        save_priors(load_model(str(MODEL)).priors, str(root / "priors.pt"))
        fake = root / "fake_ff"                      # the three MARTINI file names, empty (compare's checks)
        fake.mkdir()
        for f in FF_FILES:
            (fake / f).write_text("")
        run = root / "existing_run"                  # looks like a run already made there
        run.mkdir()
        (run / "run.json").write_text("{}")
        (run / "checkpoint.chk").write_bytes(b"not a checkpoint")
        (root / "empty_object.json").write_text("{}")
        self.ref: Optional[Path] = None

    def resolve(self, token: Optional[str], example: Path, suffix: str = "") -> Optional[str]:
        if token is None or not token.startswith("@"):
            return token
        name = token[1:]
        a_file = example / "a_file"
        if name in ("a_file", "under_file") and not a_file.exists():
            a_file.write_text("x")
        fixed = {
            "missing": self.root / "missing.pdb", "dir": self.root / "dir", "empty": self.root / "empty",
            "random": self.root / "random.bin", "blank": "", "pdb": PDB, "pdb_unicode": self.pdb_unicode,
            "model": MODEL, "model_unicode": self.model_unicode, "mlcg": MLCG, "oracle": ORACLE,
            "priors": self.root / "priors.pt", "ff_fake": self.root / "fake_ff", "m3": M3,
            "existing_run": self.root / "existing_run", "empty_object": self.root / "empty_object.json",
            "ref": self.ref, "readonly": "/sys/flashschnet-fuzz/out" + suffix,
            "fresh": example / ("out" + suffix), "fresh_nested": example / "a" / "b" / ("out" + suffix),
            "fresh_unicode": example / "ö u t" / ("rün" + suffix), "a_file": a_file,
            "under_file": a_file / ("out" + suffix),
        }
        return str(fixed[name]) if name in fixed else token      # random text that happens to start with @


class CappedSimulation:
    """``openmm.app.Simulation`` that minimises for at most 5 iterations and steps at most 2 per call."""

    @staticmethod
    def make():
        import openmm.app as app

        class _Capped(app.Simulation):
            def minimizeEnergy(self, tolerance=10, maxIterations=0, reporter=None):
                return super().minimizeEnergy(maxIterations=min(int(maxIterations) or 5, 5))

            def step(self, steps):
                return super().step(min(int(steps), 2))

        return _Capped


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The commands' own computing (conversion, priors fit, model loading) on one thread, as the CI machine
    is shared; restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def ws(tmp_path_factory, one_torch_thread):
    w = Workspace(tmp_path_factory.mktemp("fuzz_cli"))
    import openmm.app

    from flashschnet.openmm.reference_md import reference_md

    with pytest.MonkeyPatch.context() as mp:     # reference data for fit/validate: 10 frames, seconds
        mp.setattr(openmm.app, "Simulation", CappedSimulation.make())
        w.ref = w.root / "ref.npz"
        reference_md(str(PDB), str(w.ref), frames=10, interval=1, equilibration_steps=0, progress=False,
                     echo=lambda m: None)
    return w


def _capped_integrate(mp):
    """The step loop of both engines' run scaffold stops after 2 steps (at least one report interval, so a frame
    is written)."""
    from flashschnet.openmm.runner import job, loop

    real = loop.integrate

    def integrate(simulation, steps, report_interval, *args, **kwargs):
        return real(simulation, min(steps, max(2, report_interval)), report_interval, *args, **kwargs)

    mp.setattr(job, "integrate", integrate)


# ------------------------------------------------------------------------------------------------ runner
def invoke(cmd: Command, argv: List[str]) -> Tuple[object, str]:
    """main(argv) in-process: (exit status or "accepted", stderr)."""
    main = (tool(cmd.module[len("tools."):]) if cmd.module.startswith("tools.")        # tools/<name>.py
            else importlib.import_module(f"flashschnet.scripts.{cmd.module}")).main
    err, out = io.StringIO(), io.StringIO()
    threads = torch.get_num_threads()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = main(argv)
            except SystemExit as exc:            # argparse
                rc = exc.code
            except Accepted:
                rc = "accepted"
            except Exception:                    # reported below as a traceback on stderr
                import traceback

                traceback.print_exc(file=err)
                rc = "exception"
    finally:
        torch.set_num_threads(threads)
    return rc, err.getvalue()


def build_argv(cmd: Command, pairs: List[Tuple[str, Optional[str]]]) -> List[str]:
    argv = list(cmd.sub)
    argv += [v for n, v in pairs if n.startswith("<")]
    for n, v in pairs:
        if not n.startswith("<"):
            argv += [n] if v is None else [n, v]
    return argv


def run_case(cmd: Command, case, ws: Workspace, mp) -> None:
    mutations, structural = case
    pairs = list(cmd.base)
    names = [n for n, _ in pairs]
    opts = {o.name: o for o in cmd.opts}
    for name, value in mutations:
        if value == "@off":                           # a flag switched off
            pairs = [(n, v) for n, v in pairs if n != name]
        elif name in names:
            pairs = [(n, (None if value == "@on" else value) if n == name else v) for n, v in pairs]
        else:
            pairs.append((name, None if value == "@on" else value))
    ctx = {n: (v if v is not None else "@on") for n, v in pairs}
    verdicts = [opts[n].valid(v, ctx) for n, v in mutations]
    expected: Union[bool, None, str] = (False if False in verdicts else None if None in verdicts else
                                        MAY_BLOW_UP if MAY_BLOW_UP in verdicts else True)
    if structural == "unknown":
        pairs.append(("--no-such-option", "1"))
        expected = False
    elif structural == "missing" and cmd.required:
        drop = cmd.required[len(mutations) % len(cmd.required)]
        pairs = [(n, v) for n, v in pairs if n != drop]
        expected = False
    elif structural == "duplicate" and cmd.duplicate and cmd.duplicate[0] not in dict(mutations):
        pairs.append(cmd.duplicate)                   # argparse: the last one wins; still valid

    example = Path(tempfile.mkdtemp(dir=ws.root, prefix="ex"))
    suffix = {"convert": ".pt", "benchmark": ".json"}.get(cmd.module, ".npz" if cmd.sub == ["md"] else "")
    resolved = [(n, ws.resolve(v, example, suffix if n in ("<output>", "--out") else "")) for n, v in pairs]
    values = {n: v for n, v in resolved}
    markers = [m for m in cmd.markers(values) if m]
    before = {m for m in markers if os.path.exists(m)}
    argv = build_argv(cmd, resolved)
    cmd.stubs(mp, ws)
    t0 = time.perf_counter()
    rc, err = invoke(cmd, argv)
    seconds = time.perf_counter() - t0

    where = f"{cmd.prog} {argv}: exit {rc}; stderr:\n{err}"
    assert "Traceback" not in err and rc != "exception", where
    lines = err.strip().splitlines()
    if expected is True:
        assert rc in (0, "accepted"), where
    elif expected == MAY_BLOW_UP:
        assert rc in (0, "accepted", 3), where
    elif expected is False:
        assert rc == 2, where
    if os.environ.get("FUZZ_CLI_LOG"):                      # what the fuzzer tried, for a look by hand
        with open(os.environ["FUZZ_CLI_LOG"], "a") as f:
            f.write(f"{cmd.prog} {' '.join(cmd.sub)}\t{case}\texpected={expected}\trc={rc}\t{seconds:.2f}s\t"
                    f"{lines[-1] if lines else ''}\n")
    if rc == 2:
        if lines and lines[0].startswith("usage:"):         # argparse's usage + error form (subcommand: its prog)
            progs = (f"{cmd.prog}: error: ", f"{' '.join([cmd.prog] + cmd.sub)}: error: ")
            assert lines[-1].startswith(progs), where
            assert sum(l.startswith(progs) for l in lines) == 1, where
        else:
            assert lines and lines[-1].startswith(f"{cmd.prog}: error: "), where                                                # ours: PROG: lines, the last and only error one
            assert all(l.startswith(f"{cmd.prog}: ") for l in lines), where
            assert sum(": error:" in l for l in lines) == 1, where
        left = {m for m in markers if os.path.exists(m)} - before
        assert not left, f"{where}\nleft behind: {left}"
    elif rc == 3:
        assert lines[-1].startswith(f"{cmd.prog}: simulation unstable: "), where
    elif rc == 0:
        missing = [m for m in markers if not os.path.exists(m)]
        assert not missing, f"{where}\nmissing output: {missing}"
        cmd.complete(values)
    else:
        assert rc == "accepted", where
    stray = [p for p in cmd.never(values) if os.path.exists(p)]
    assert not stray, f"{where}\nleft behind: {stray}"
    shutil.rmtree(example, ignore_errors=True)


def cases(cmd: Command):
    """One or two (option, value) changes, plus maybe an unknown, repeated or missing option."""
    by_name = {o.name: o for o in cmd.opts}
    picks = st.lists(st.sampled_from(list(by_name)), min_size=1, max_size=2, unique=True)
    changes = picks.flatmap(lambda names: st.tuples(*[st.tuples(st.just(n), by_name[n].values) for n in names]))
    return st.tuples(changes, st.sampled_from([None, None, None, None, "unknown", "duplicate", "missing"]))


def platform_names() -> List[str]:
    import openmm

    return [openmm.Platform.getPlatform(i).getName() for i in range(openmm.Platform.getNumPlatforms())]


def _path_values(*extra: str) -> List[str]:
    return IN_PATHS + list(extra)


PLATFORMS = platform_names()
MARTINIZE2 = shutil.which("martinize2") or (Path(sys.executable).parent / "martinize2").exists()
CUDA = torch.cuda.is_available()
OUT_DIR_ORACLE = tokens(fresh=True, fresh_nested=True, fresh_unicode=True)


def _checkpoint_ok(text, ctx):
    v, ri = as_int(text), as_int(ctx.get("--report-interval", "1"))
    if v is None or v < 1:
        return False
    return None if ri is None or ri < 1 else v % ri == 0


def _run_opts(max_dt: float, sure_dt: float) -> List[Opt]:
    """The options flashschnet-simulate and -martini share (scripts/_cli.add_run_arguments)."""
    return [
        Opt("--steps", (INTS), ints(0)),
        Opt("--seed", (INTS), ints(1, 2**31 - 1)),
        Opt("--threads", THREAD_INTS, ints(1, 1024)),
        Opt("--report-interval", (INTS), ints(1, 2**31 - 1)),
        Opt("--checkpoint-interval", (INTS), _checkpoint_ok),
        Opt("--dt", (FLOATS), floats(0.0, max_dt, low_open=True, sure_below=sure_dt)),
        Opt("--temperature", (FLOATS), floats(0.0, low_open=True, sure_below=1e4)),
        Opt("--friction", (FLOATS), floats(0.0, sure_below=1e4)),
        Opt("--max-force", (FLOATS), lambda t, c: (
            False if as_float(t) is None or not as_float(t) > 0 else (True if as_float(t) >= 1e5 else None))),
        Opt("--platform", choices(PLATFORMS + ["Reference"]), one_of(*PLATFORMS)),
        Opt("--resume", (["@on"]), lambda t, c: False),     # nothing to resume in a fresh --out
    ]


# ------------------------------------------------------------------------------------------- the commands
def _run_dir_markers(v):
    out = v.get("--out")
    return [os.path.join(out, "run.json"), os.path.join(out, "checkpoint.chk")] if out else []


SIMULATE = Command(
    module="simulate", prog="flashschnet-simulate",
    base=[("<pdb>", "@pdb"), ("--model", "@model"), ("--steps", "2"), ("--out", "@fresh"), ("--report-interval", "1"),
          ("--seed", "5"), ("--threads", "1"), ("--quiet", None)],
    opts=_run_opts(50.0, 8.0) + [
        Opt("<pdb>", _path_values("@pdb", "@pdb_unicode", "@model"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--model", _path_values("@model", "@model_unicode", "@pdb"), tokens(model=True, model_unicode=True)),
        Opt("--priors", _path_values("@priors", "@model"), tokens(priors=True)),
        Opt("--out", (OUT_DIRS + ["@existing_run"]), OUT_DIR_ORACLE),
        Opt("--replicas", (INTS), ints(1, 3)),
        Opt("--mapping", choices(["5bead", "ca"]), one_of("5bead")),      # the model is a 5-bead one
        Opt("--precision", choices(["single", "double"]), one_of("single", "double")),
        Opt("--backend", choices(["reference", "torch"]), one_of("reference", "torch")),
        Opt("--quantize", choices(["none", "fp16", "bf16", "fp16-cast", "bf16-cast"]),
            one_of("none", "fp16", "bf16", "fp16-cast", "bf16-cast")),
        Opt("--network-force", choices(["torch", "python"]), one_of("torch", "python")),
        Opt("--on-blowup", choices(["stop", "drop"]), one_of("stop", "drop")),
    ],
    required=["<pdb>", "--model", "--steps", "--out"],
    markers=_run_dir_markers,
    complete=lambda v: [os.stat(os.path.join(v["--out"], f)) for f in ("topology.pdb", "replica_000.dcd")],
    stubs=lambda mp, ws: _capped_integrate(mp),
    duplicate=("--seed", "7"),
)


def _prepared_martini(ws: Workspace):
    """martinize2 + insane once for the whole module (the stub copies the result)."""
    from flashschnet.openmm.martini.prepare import prepare_system

    if getattr(ws, "martini", None) is None:
        folder = ws.root / "martini_prepared"
        ws.martini = prepare_system(str(PDB), str(M3), str(folder), name="protein", padding_nm=1.5, salt_molar=0.15,
                                    seed=5, ignore=["HOH"], elastic=True)
    return ws.martini


def _martini_stubs(mp, ws):
    import dataclasses

    import flashschnet.openmm.martini.run as mr

    prepared = _prepared_martini(ws)

    def prepare(pdb, ff, folder, **kwargs):
        shutil.copytree(prepared.folder, folder, dirs_exist_ok=True)
        return dataclasses.replace(prepared, folder=folder)

    mp.setattr(mr, "prepare_system", prepare)
    _capped_integrate(mp)


MARTINI = Command(
    module="martini", prog="flashschnet-martini",
    base=[("<pdb>", "@pdb"), ("--forcefield-dir", "@m3"), ("--steps", "2"), ("--out", "@fresh"),
          ("--report-interval", "1"), ("--seed", "5"), ("--threads", "1"), ("--minimize-iterations", "3"),
          ("--quiet", None)],
    opts=_run_opts(40.0, 30.0) + [
        Opt("<pdb>", (["@missing", "@dir", "@blank", "@pdb", "@pdb_unicode"]),
            tokens(pdb=True, pdb_unicode=True)),
        Opt("--forcefield-dir", (IN_PATHS + ["@m3"]), tokens(m3=True)),
        Opt("--out", (OUT_DIRS + ["@existing_run"]), OUT_DIR_ORACLE),
        Opt("--padding", (FLOATS), floats(1.1, 10.0)),
        Opt("--salt", (FLOATS), floats(0.0, 6.0)),
        # the pool's other valid ints: none. 0: no minimisation -- the unminimised system may hold a force beyond
        # --max-force (trp-cage: 1.15e5 kJ/mol/nm on SER13 BB), and exit 3 naming it is then the right answer
        Opt("--minimize-iterations", (INTS), lambda t, c: MAY_BLOW_UP if as_int(t) == 0 else ints(0, 3)(t, c)),
        Opt("--no-elastic", (["@on"]), lambda t, c: True),
        Opt("--ignore", ["HOH", "", "NA,CL", RANDOM_TEXT], lambda t, c: True),
    ],
    required=["<pdb>", "--forcefield-dir", "--steps", "--out"],
    markers=_run_dir_markers,
    complete=lambda v: [os.stat(os.path.join(v["--out"], f)) for f in ("topology.pdb", "trajectory.dcd")],
    stubs=_martini_stubs,
    duplicate=("--seed", "9"),
)


def _compare_stubs(mp, ws):
    import flashschnet.openmm.martini.run as mr
    import flashschnet.openmm.simulate as sim

    mp.setattr(mr, "run_martini", _accept)
    mp.setattr(sim, "run", _accept)


def _ns_ok(text, ctx):
    v = as_float(text)
    return v is not None and v > 0 and math.isfinite(v * 1e6 / 4.0)


COMPARE = Command(
    module="compare", prog="flashschnet-compare",
    base=[("<pdb>", "@pdb"), ("--model", "@model"), ("--forcefield-dir", "@ff_fake"), ("--out", "@fresh"),
          ("--threads", "1"), ("--quiet", None)],
    opts=[
        Opt("<pdb>", _path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--model", _path_values("@model", "@model_unicode", "@pdb"), tokens(model=True, model_unicode=True)),
        Opt("--forcefield-dir", _path_values("@ff_fake"), tokens(ff_fake=True)),
        Opt("--out", (OUT_DIRS), OUT_DIR_ORACLE),
        Opt("--priors", _path_values("@priors", "@model"), tokens(priors=True)),
        Opt("--martini-ns", (FLOATS), _ns_ok),
        Opt("--flashschnet-ns", (FLOATS), _ns_ok),
        Opt("--replicas", (INTS), ints(1, 3)),
        Opt("--frames", (INTS), ints(1)),
        Opt("--seed", (INTS), ints(1, 2**31 - 1)),
        Opt("--threads", THREAD_INTS, ints(1, 1024)),
        Opt("--platform", choices(PLATFORMS), one_of(*PLATFORMS)),
        Opt("--backend", choices(["reference", "torch", "triton"]), one_of("reference", "torch", "triton")),
        Opt("--analyse-only", (["@on"]), lambda t, c: False),
    ],
    required=["<pdb>", "--model", "--forcefield-dir", "--out"],
    markers=lambda v: [os.path.join(v["--out"], f) for f in ("comparison.json", "martini/run.json",
                                                              "flashschnet/run.json")] if v.get("--out") else [],
    stubs=_compare_stubs,
    duplicate=("--seed", "3"),
)


def _convert_output_ok(text, ctx):
    if text == "@a_file":
        return "--force" in ctx
    return text in ("@fresh", "@fresh_nested", "@fresh_unicode")


CONVERT = Command(
    module="convert", prog="flashschnet-convert",
    base=[("<input>", "@mlcg"), ("<output>", "@fresh")],
    opts=[
        Opt("<input>", _path_values("@mlcg", "@model"), tokens(mlcg=True)),
        Opt("<output>", (OUT_DIRS + ["@dir"]), _convert_output_ok),
        Opt("--force", (["@on"]), lambda t, c: True),
    ],
    required=["<input>", "<output>"],
    markers=lambda v: [v["<output>"]] if v.get("<output>") else [],
    complete=lambda v: __import__("flashschnet").load_model(v["<output>"]),
    never=lambda v: [v["<output>"] + ".tmp"] if v.get("<output>") else [],
)


def _benchmark_stubs(mp, ws):
    import flashschnet.scripts.benchmark as bm

    mp.setattr(bm, "_run_worker", lambda cfg: {"status": "error", "error": "not run (test stub)",
                                                "subprocess_wall_s": 0.0})


def _int_list_ok(text, ctx):
    vals = [as_int(x) for x in text.split(",") if x.strip()] if not text.startswith("-") else [None]
    return bool(vals) and all(v is not None and v >= 1 for v in vals)


BENCHMARK = Command(
    module="benchmark", prog="flashschnet-benchmark",
    base=[("--pdb", "@pdb"), ("--model", "@model"), ("--replicas", "1"), ("--backends", "torch"), ("--repeats", "1"),
          ("--warmup", "0"), ("--openmm-steps", "0"), ("--threads", "1"), ("--device", "cpu"), ("--out", "@fresh")],
    opts=[
        Opt("--pdb", _path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--model", _path_values("@model", "@model_unicode", "@pdb"), tokens(model=True, model_unicode=True)),
        Opt("--out", (OUT_DIRS + ["@dir"]), tokens(fresh=True, fresh_nested=True, fresh_unicode=True,
                                                                    a_file=True)),
        Opt("--replicas", (INTS + ["1,2", "2,,3", "1,0"]), _int_list_ok),
        Opt("--backends", choices(["torch", "reference", "triton", "torch,reference"]),
            one_of("torch", "reference", "triton", "torch,reference")),
        Opt("--quantize", choices(["none", "fp16", "bf16-cast", "none,fp16"]),
            one_of("none", "fp16", "bf16-cast", "none,fp16")),
        Opt("--device", choices(["cpu", "cuda"]), one_of("cpu", "cuda") if CUDA else one_of("cpu")),
        Opt("--dtype", choices(["float32", "float64"]), one_of("float32", "float64")),
        Opt("--repeats", (INTS), ints(1)),
        Opt("--warmup", (INTS), ints(0)),
        Opt("--openmm-steps", (INTS), ints(0)),
        Opt("--openmm-replicas", (INTS), ints(1)),
        Opt("--openmm-force", choices(["torch", "python"]), one_of("torch", "python")),
        Opt("--threads", THREAD_INTS, ints(1, 1024)),
        Opt("--max-memory-gb", (FLOATS), floats(0.0, low_open=True, allow_inf=True)),
    ],
    required=[],
    markers=lambda v: [v["--out"]] if v.get("--out") else ["benchmark.json"],
    complete=lambda v: json.loads(Path(v["--out"]).read_text())["results"],
    stubs=_benchmark_stubs,
    duplicate=("--warmup", "0"),
)


def _quant_stubs(mp, ws):
    qa = tool("quant_accuracy")

    mp.setattr(qa, "frame_errors", lambda *a, **k: [])
    mp.setattr(qa, "langevin_check", _accept)


QUANT = Command(
    module="tools.quantization_report", prog="tools/quantization_report.py",
    base=[("--pdb", "@pdb"), ("--model", "@model"), ("--out", "@fresh"), ("--threads", "1"), ("--quick", None),
          ("--quiet", None)],
    opts=[
        Opt("--pdb", _path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--model", _path_values("@model", "@model_unicode", "@pdb"), tokens(model=True, model_unicode=True)),
        Opt("--oracle", _path_values("@oracle"), tokens(oracle=True)),
        Opt("--from-json", _path_values("@model", "@empty_object"), lambda t, c: False),
        Opt("--out", (OUT_DIRS), OUT_DIR_ORACLE),
        Opt("--variants", choices(["fp16", "bf16", "fp16-cast", "bf16-cast", "fp16,bf16", "none"]),
            one_of("fp16", "bf16", "fp16-cast", "bf16-cast", "fp16,bf16")),
        Opt("--backends", choices(["torch", "reference", "torch,reference"]),
            one_of("torch", "reference", "torch,reference")),
        Opt("--langevin-steps", (INTS), ints(1)),
        Opt("--report-interval", (INTS), ints(1, 2**31 - 1)),
        Opt("--nve-steps", (INTS), ints(1)),
        Opt("--nve-dt", (FLOATS), floats(0.0, 50.0, low_open=True)),
        Opt("--nve-interval", (INTS), ints(1)),
        Opt("--platform", choices(PLATFORMS), one_of(*PLATFORMS)),
        Opt("--threads", THREAD_INTS, ints(1, 1024)),
        Opt("--seed", (INTS), ints(1, 2**31 - 1)),
    ],
    required=[],
    markers=lambda v: [os.path.join(v["--out"], "quantization.json")] if v.get("--out") else [],
    stubs=_quant_stubs,
    duplicate=("--seed", "4"),
)


def _md_stubs(mp, ws):
    import openmm.app

    mp.setattr(openmm.app, "Simulation", CappedSimulation.make())


def _npz(v):
    out = v.get("--out")
    return [out if out.endswith(".npz") else out + ".npz"] if out else []


TRAIN_MD = Command(
    module="train", prog="flashschnet-train", sub=["md"],
    base=[("<pdb>", "@pdb"), ("--out", "@fresh"), ("--frames", "2"), ("--interval", "1"), ("--equilibration", "0"),
          ("--quiet", None)],
    opts=[
        Opt("<pdb>", _path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--out", (OUT_DIRS + ["@dir"]), tokens(fresh=True, fresh_nested=True, fresh_unicode=True,
                                                                    a_file=True)),
        Opt("--frames", (INTS), ints(1, 3)),
        Opt("--interval", (INTS), ints(1, 2**31 - 1)),
        Opt("--dt", (FLOATS), floats(0.0, 10.0, low_open=True)),
        Opt("--temperature", (FLOATS), floats(0.0, low_open=True, sure_below=1e4)),
        Opt("--equilibration", (INTS), ints(0)),
        Opt("--seed", (INTS), ints(1, 2**31 - 1)),
        Opt("--platform", choices(PLATFORMS), one_of(*PLATFORMS)),
    ],
    required=["<pdb>", "--out", "--frames"],
    markers=_npz,
    complete=lambda v: np.load(_npz(v)[0], allow_pickle=False)["positions_nm"],
    stubs=_md_stubs,
    duplicate=("--seed", "2"),
)


def _fit_stubs(mp, ws):
    import flashschnet.train

    mp.setattr(flashschnet.train, "train_force_matching", _accept)


TRAIN_FIT = Command(
    module="train", prog="flashschnet-train", sub=["fit"],
    base=[("<pdb>", "@pdb"), ("--data", "@ref"), ("--out", "@fresh"), ("--threads", "1"), ("--quiet", None)],
    opts=[
        Opt("<pdb>", _path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--data", _path_values("@ref", "@model", "@pdb"), tokens(ref=True)),
        Opt("--out", (OUT_DIRS + ["@existing_run"]), tokens(fresh=True, fresh_nested=True,
                                                                           fresh_unicode=True, existing_run=True)),
        Opt("--epochs", (INTS), ints(1)),
        Opt("--batch-frames", (INTS), ints(1)),
        Opt("--learning-rate", (FLOATS), floats(0.0, low_open=True)),
        Opt("--val-fraction", (FLOATS), lambda t, c: (as_float(t) is not None
                                                                    and 0.0 < as_float(t) < 1.0)),
        Opt("--patience", (INTS), ints(1)),
        Opt("--n-degs", (INTS), ints(1, 17)),
        Opt("--seed", (INTS), ints(1, 2**31 - 1)),
        Opt("--threads", THREAD_INTS, ints(1, 1024)),
        Opt("--device", choices(["cpu", "cuda", "cuda:0"]), one_of("cpu", "cuda", "cuda:0") if CUDA else one_of("cpu")),
    ],
    required=["<pdb>", "--data", "--out"],
    markers=lambda v: [os.path.join(v["--out"], "best.pt")] if v.get("--out") else [],
    stubs=_fit_stubs,
    duplicate=("--seed", "2"),
)


def _steps_ok(text, ctx):
    v, ri = as_int(text), as_int(ctx.get("--report-interval", "1"))
    return v is not None and ri is not None and 1 <= ri <= v


def _ri_ok(text, ctx):
    v, steps = as_int(text), as_int(ctx.get("--steps", "2"))
    return v is not None and steps is not None and 1 <= v <= steps and v <= 2**31 - 1


TRAIN_VALIDATE = Command(
    module="train", prog="flashschnet-train", sub=["validate"],
    base=[("<pdb>", "@pdb"), ("--model", "@model"), ("--data", "@ref"), ("--out", "@fresh"), ("--steps", "2"),
          ("--replicas", "1"), ("--report-interval", "1"), ("--threads", "1"), ("--quiet", None)],
    opts=[
        Opt("<pdb>", _path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--model", _path_values("@model", "@model_unicode", "@pdb"), tokens(model=True, model_unicode=True)),
        Opt("--data", _path_values("@ref", "@model"), tokens(ref=True)),
        Opt("--out", (OUT_DIRS), OUT_DIR_ORACLE),
        Opt("--steps", (INTS), _steps_ok),
        Opt("--report-interval", (INTS), _ri_ok),
        Opt("--dt", (FLOATS), floats(0.0, 50.0, low_open=True, sure_below=8.0)),
        Opt("--replicas", (INTS), ints(1, 3)),
        Opt("--seed", (INTS), ints(1, 2**31 - 1)),
        Opt("--platform", choices(PLATFORMS), one_of(*PLATFORMS)),
        Opt("--threads", THREAD_INTS, ints(1, 1024)),
    ],
    required=["<pdb>", "--model", "--data", "--out", "--steps"],
    markers=lambda v: [os.path.join(v["--out"], "validation.json")] if v.get("--out") else [],
    stubs=lambda mp, ws: _capped_integrate(mp),
    duplicate=("--seed", "2"),
)


@pytest.fixture
def scratch_cwd(ws, monkeypatch):
    """Run in a scratch folder: a command that wrongly took '' for '.' writes there, not into the checkout."""
    cwd = ws.root / "cwd"
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    return monkeypatch


# ------------------------------------------------------------------------------------------------ tests
@_settings(40)
@given(case=cases(SIMULATE))
@example(case=((("--threads", "-1"),), None))                       # was: RuntimeError traceback
@example(case=((("--seed", str(10**30)),), None))                   # was: OverflowError traceback
@example(case=((("--seed", "0"),), None))                           # was: accepted (OpenMM: a random seed)
@example(case=((("--temperature", "nan"),), None))                  # was: accepted
@example(case=((("--max-force", "nan"),), None))                    # was: accepted, the check off
@example(case=((("--max-force", "0"),), None))                      # was: exit 3, "unstable"
@example(case=((("--out", "@a_file"),), None))                      # was: FileExistsError traceback
@example(case=((("--out", "@under_file"),), None))                  # was: NotADirectoryError traceback
@example(case=((("--out", "@readonly"),), None))                    # was: PermissionError traceback
@example(case=((("--out", "@blank"),), None))                       # was: a run written into the cwd
@example(case=((("--priors", "@blank"),), None))                    # was: accepted, the model's priors used
@example(case=((("--replicas", str(10**30)),), None))               # was: allocation until out of memory
@example(case=((("--report-interval", str(10**30)),), None))        # was: struct.error in the DCD header
@example(case=((("--steps", str(10**30)),), None))                  # legal: 10**30 steps (the loop is capped)
def test_simulate_arguments(case, ws, scratch_cwd):
    run_case(SIMULATE, case, ws, scratch_cwd)


@pytest.mark.skipif(not (M3 / FF_FILES[0]).exists(),
                    reason=f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
@pytest.mark.skipif(not MARTINIZE2, reason="martinize2 is not installed (pip install 'flashschnet[martini]')")
@_settings(15)
@given(case=cases(MARTINI))
@example(case=((("--padding", "nan"),), None))                      # was: accepted
@example(case=((("--padding", "1e308"),), None))                    # was: accepted (a box of 1e308 nm)
@example(case=((("--salt", "inf"),), None))                         # was: accepted
@example(case=((("--minimize-iterations", str(10**30)),), None))    # was: OverflowError in OpenMM
@example(case=((("--steps", "0"), ("--minimize-iterations", "0")), None))   # exit 3 (unminimised): the oracle was wrong
@example(case=((("--threads", "0"),), None))                        # was: accepted
@example(case=((("<pdb>", "@missing"),), None))                     # now refused before the output folder
def test_martini_arguments(case, ws, scratch_cwd):
    run_case(MARTINI, case, ws, scratch_cwd)


@pytest.mark.parametrize("args, message", [
    (["--padding", "nan"], "--padding nan nm is outside"),
    (["--salt", "inf"], "--salt must be between 0 and 6"),
    (["--minimize-iterations", str(10**30)], "--minimize-iterations must be between 0 and"),
    (["--threads", "0"], "--threads must be between 1 and 1024"),
    (["--seed", "0"], "--seed must be between 1 and"),
    (["--out", ""], "--out is empty"),
])
def test_martini_bad_arguments_without_the_forcefield(ws, scratch_cwd, capsys, args, message):
    """Cheap failures need neither the MARTINI files nor martinize2 (the file names suffice)."""
    from flashschnet.scripts.martini import main

    out = ws.root / "martini_bad"
    argv = [str(PDB), "--forcefield-dir", str(ws.root / "fake_ff"), "--steps", "1", "--out", str(out), "--quiet"]
    i = argv.index(args[0]) if args[0] in argv else None
    if i is not None:
        argv[i + 1] = args[1]
    else:
        argv += args
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flashschnet-martini: error: ") and message in err[0], err
    assert not out.exists()


@_settings(25)
@given(case=cases(COMPARE))
@example(case=((("--martini-ns", "nan"),), None))                   # was: ValueError traceback
@example(case=((("--flashschnet-ns", "1e308"),), None))             # was: OverflowError traceback
@example(case=((("--model", "@random"),), None))                    # was: found only after the MARTINI run
@example(case=((("--replicas", str(10**30)),), None))               # likewise
@example(case=((("--out", "@a_file"),), None))                      # likewise
def test_compare_arguments(case, ws, scratch_cwd):
    run_case(COMPARE, case, ws, scratch_cwd)


@_settings(20)
@given(case=cases(CONVERT))
@example(case=((("<output>", "@under_file"),), None))               # was: RuntimeError traceback (torch.save)
@example(case=((("<output>", "@readonly"),), None))                 # likewise
@example(case=((("<output>", "@blank"),), None))                    # likewise
@example(case=((("<output>", "@a_file"), ("--force", "@on")), None))   # overwriting with --force: fine
def test_convert_arguments(case, ws, scratch_cwd):
    run_case(CONVERT, case, ws, scratch_cwd)


@_settings(30)
@given(case=cases(BENCHMARK))
@example(case=((("--threads", "0"),), None))                        # was: RuntimeError traceback
@example(case=((("--threads", str(10**30)),), None))                # was: ValueError traceback
@example(case=((("--pdb", "@missing"),), None))                     # was: InputError traceback
@example(case=((("--model", "@random"),), None))                    # was: exit 0, an error row per worker
@example(case=((("--repeats", "0"),), None))                        # was: exit 1, no "error:" line
@example(case=((("--max-memory-gb", "nan"),), None))                # was: accepted, the limit off
@example(case=((("--out", "@dir"),), None))                         # was: IsADirectoryError after the run
@example(case=((("--replicas", str(10**30)),), None))               # now skipped: does not fit in memory
def test_benchmark_arguments(case, ws, scratch_cwd):
    run_case(BENCHMARK, case, ws, scratch_cwd)


@_settings(30)
@given(case=cases(QUANT))
@example(case=((("--threads", "-1"),), None))                       # was: RuntimeError traceback
@example(case=((("--langevin-steps", "0"),), None))                 # was: accepted
@example(case=((("--nve-dt", "nan"),), None))                       # was: accepted
@example(case=((("--platform", "X"),), None))                       # was: found after the weight stage
@example(case=((("--pdb", "@random"),), None))                      # likewise
@example(case=((("--oracle", "@missing"),), None))                  # was: silently ignored
@example(case=((("--oracle", "@blank"),), None))                    # was: silently the default oracle
@example(case=((("--from-json", "@random"),), None))                # was: UnicodeDecodeError traceback
@example(case=((("--from-json", "@empty_object"),), None))          # was: KeyError traceback
@example(case=((("--from-json", "@dir"),), None))                   # was: IsADirectoryError traceback
@example(case=((("--from-json", "@blank"),), None))                 # was: silently a full measurement
@example(case=((("--out", "@a_file"),), None))                      # was: FileExistsError traceback
def test_quantization_report_arguments(case, ws, scratch_cwd):
    run_case(QUANT, case, ws, scratch_cwd)


@_settings(20)
@given(case=cases(TRAIN_MD))
@example(case=((("--frames", "0"),), None))                         # was: accepted (an empty data set)
@example(case=((("--frames", str(10**30)),), None))                 # was: allocation failure after the MD
@example(case=((("--temperature", "-1"),), None))                   # was: OpenMMException traceback
@example(case=((("--seed", str(10**30)),), None))                   # was: OverflowError traceback
@example(case=((("--platform", "X"),), None))                       # was: OpenMMException traceback
@example(case=((("--out", "@under_file"),), None))                  # was: found only after the MD
@example(case=((("--temperature", "1e308"),), None))                # was: OpenMMException traceback (NaN)
@example(case=((("--platform", "@"),), None))                       # random text that looks like a token
def test_train_md_arguments(case, ws, scratch_cwd):
    run_case(TRAIN_MD, case, ws, scratch_cwd)


@_settings(25)
@given(case=cases(TRAIN_FIT))
@example(case=((("--threads", "-1"),), None))                       # was: RuntimeError traceback
@example(case=((("--device", "tpu"),), None))                       # was: RuntimeError traceback
@example(case=((("--n-degs", str(10**30)),), None))                 # was: a 10**30-term fit
@example(case=((("--val-fraction", "nan"),), None))                 # was: ValueError traceback
@example(case=((("--data", "@empty"),), None))                      # was: EOFError traceback
@example(case=((("--out", "@a_file"),), None))                      # was: FileExistsError traceback
def test_train_fit_arguments(case, ws, scratch_cwd):
    run_case(TRAIN_FIT, case, ws, scratch_cwd)


@_settings(15)
@given(case=cases(TRAIN_VALIDATE))
@example(case=((("--report-interval", "3"),), None))                # was: ValueError after the run (no frames)
@example(case=((("--out", "@a_file"),), None))                      # was: FileExistsError traceback
@example(case=((("--threads", "0"),), None))                        # was: accepted
def test_train_validate_arguments(case, ws, scratch_cwd):
    run_case(TRAIN_VALIDATE, case, ws, scratch_cwd)
