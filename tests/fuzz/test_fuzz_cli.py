"""Command-line arguments, fuzzed (hypothesis), for every console entry point: flashschnet-simulate, -martini,
-compare, -convert, -train (md, fit, validate), -benchmark; and the maintainer tool
tools/benchmarks/quantization_report.py.

Each test starts from a valid, cheap argv of one command and changes one or two options to values typed by what
the option expects, sometimes adding an unknown option, repeating one or dropping a required one; main(argv) runs
in-process. An invalid value must give exit status 2 and one ``PROG: error: ...`` line, never a traceback, and
leave nothing that looks complete; a valid one must succeed with the complete output. The framework (value pools,
oracles, the runner and its checks): tests/helpers/fuzz_cli.py; the files the path tokens stand for and the stubs
that keep an accepted command short: tests/helpers/fuzz_cli_workspace.py. Below: the commands, then the tests
(each ``@example`` a case the fuzzer once found).
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import List

import numpy as np
import pytest
import torch
from hypothesis import example, given

from tests.conftest import platforms
from tests.helpers.fuzz_cli import (FLOATS, INTS, IN_PATHS, OUT_DIR_ORACLE, OUT_DIRS, MAY_BLOW_UP, RANDOM_TEXT, THREAD_INTS,
                              Command, Opt, as_float, as_int, cases, choices, cli_settings, floats, ints, one_of,
                              path_values, run_case, tokens)
from tests.helpers.fuzz_cli_workspace import (FF_FILES, M3, PDB, benchmark_stubs, capped_integrate, compare_stubs,
                                        fit_stubs, make_workspace, martini_stubs, md_stubs, quant_stubs)

pytestmark = pytest.mark.usefixtures("one_torch_thread")     # the commands' own computing, on one thread

PLATFORMS = platforms()
MARTINIZE2 = shutil.which("martinize2") or (Path(sys.executable).parent / "martinize2").exists()
CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def ws(tmp_path_factory, one_torch_thread):
    return make_workspace(tmp_path_factory.mktemp("fuzz_cli"))


@pytest.fixture
def scratch_cwd(ws, monkeypatch):
    """Run in a scratch folder: a command that wrongly took '' for '.' writes there, not into the checkout."""
    cwd = ws.root / "cwd"
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    return monkeypatch


# ------------------------------------------------------------------------------------------- the commands
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


#: --temperatures values and their walker counts (None: refused); no random text (it could spell a valid ladder)
LADDERS = {"300:400:3": 3, "300,350": 2, "300": None, "400,300": None, "0:300:2": None, "nan,300": None,
           "300,300.01": None, "300:400:1": None, "hot": None, "": None}


def _walkers(ctx):
    """Walkers of the case: its ladder's (with --replicas 1), else --replicas; None when those are refused."""
    replicas = as_int(ctx.get("--replicas", "1"))
    if "--temperatures" in ctx:
        return LADDERS.get(ctx["--temperatures"]) if replicas == 1 else None
    return replicas if replicas is not None and 1 <= replicas <= 3 else None


def _ladder_ok(text, ctx):
    return LADDERS.get(text) is not None and as_int(ctx.get("--replicas", "1")) == 1


def _blocks_ok(text, ctx):
    v, walkers = as_int(text), _walkers(ctx)
    return v is not None and walkers is not None and 1 <= v <= walkers


def _run_dir_markers(v):
    out = v.get("--out")
    return [os.path.join(out, "run.json"), os.path.join(out, "checkpoint.chk")] if out else []


SIMULATE = Command(
    module="simulate", prog="flashschnet-simulate",
    base=[("<pdb>", "@pdb"), ("--model", "@model"), ("--steps", "2"), ("--out", "@fresh"), ("--report-interval", "1"),
          ("--seed", "5"), ("--threads", "1"), ("--quiet", None)],
    opts=_run_opts(50.0, 8.0) + [
        Opt("<pdb>", path_values("@pdb", "@pdb_unicode", "@model"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--model", path_values("@model", "@model_unicode", "@pdb"), tokens(model=True, model_unicode=True)),
        Opt("--priors", path_values("@priors", "@model"), tokens(priors=True)),
        Opt("--out", (OUT_DIRS + ["@existing_run"]), OUT_DIR_ORACLE),
        Opt("--replicas", (INTS), ints(1, 3)),
        Opt("--mapping", choices(["5bead", "ca"]), one_of("5bead")),      # the model is a 5-bead one
        Opt("--precision", choices(["single", "double"]), one_of("single", "double")),
        Opt("--backend", choices(["reference", "torch"]), one_of("reference", "torch")),
        Opt("--quantize", choices(["none", "fp16", "bf16", "fp16-cast", "bf16-cast"]),
            one_of("none", "fp16", "bf16", "fp16-cast", "bf16-cast")),
        Opt("--network-force", choices(["torch", "python"]), one_of("torch", "python")),
        Opt("--on-blowup", choices(["stop", "drop"]), one_of("stop", "drop")),
        Opt("--temperatures", list(LADDERS), _ladder_ok),
        Opt("--exchange-interval", (INTS), ints(1)),
        Opt("--blocks", (INTS), _blocks_ok),
    ],
    required=["<pdb>", "--model", "--steps", "--out"],
    markers=_run_dir_markers,
    complete=lambda v: [os.stat(os.path.join(v["--out"], f)) for f in ("topology.pdb", "replica_000.dcd")],
    stubs=lambda mp, ws: capped_integrate(mp),
    duplicate=("--seed", "7"),
)


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
        Opt("--go", (["@on"]), lambda t, c: True),
        Opt("--ignore", ["HOH", "", "NA,CL", RANDOM_TEXT], lambda t, c: True),
    ],
    required=["<pdb>", "--forcefield-dir", "--steps", "--out"],
    markers=_run_dir_markers,
    complete=lambda v: [os.stat(os.path.join(v["--out"], f)) for f in ("topology.pdb", "trajectory.dcd")],
    stubs=martini_stubs,
    duplicate=("--seed", "9"),
)


def _ns_ok(text, ctx):
    v = as_float(text)
    return v is not None and v > 0 and math.isfinite(v * 1e6 / 4.0)


COMPARE = Command(
    module="compare", prog="flashschnet-compare",
    base=[("<pdb>", "@pdb"), ("--model", "@model"), ("--forcefield-dir", "@ff_fake"), ("--out", "@fresh"),
          ("--threads", "1"), ("--quiet", None)],
    opts=[
        Opt("<pdb>", path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--model", path_values("@model", "@model_unicode", "@pdb"), tokens(model=True, model_unicode=True)),
        Opt("--forcefield-dir", path_values("@ff_fake"), tokens(ff_fake=True)),
        Opt("--out", (OUT_DIRS), OUT_DIR_ORACLE),
        Opt("--priors", path_values("@priors", "@model"), tokens(priors=True)),
        Opt("--martini-ns", (FLOATS), _ns_ok),
        Opt("--flashschnet-ns", (FLOATS), _ns_ok),
        Opt("--replicas", (INTS), ints(1, 3)),
        Opt("--frames", (INTS), ints(1)),
        Opt("--seed", (INTS), ints(1, 2**31 - 1)),
        Opt("--threads", THREAD_INTS, ints(1, 1024)),
        Opt("--platform", choices(PLATFORMS), one_of(*PLATFORMS)),
        Opt("--backend", choices(["reference", "torch", "triton"]), one_of("reference", "torch", "triton")),
        Opt("--analyse-only", (["@on"]), lambda t, c: False),
        Opt("--go", (["@on"]), lambda t, c: True),
    ],
    required=["<pdb>", "--model", "--forcefield-dir", "--out"],
    markers=lambda v: [os.path.join(v["--out"], f) for f in ("comparison.json", "martini/run.json",
                                                              "flashschnet/run.json")] if v.get("--out") else [],
    stubs=compare_stubs,
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
        Opt("<input>", path_values("@mlcg", "@model"), tokens(mlcg=True)),
        Opt("<output>", (OUT_DIRS + ["@dir"]), _convert_output_ok),
        Opt("--force", (["@on"]), lambda t, c: True),
    ],
    required=["<input>", "<output>"],
    markers=lambda v: [v["<output>"]] if v.get("<output>") else [],
    complete=lambda v: __import__("flashschnet").load_model(v["<output>"]),
    never=lambda v: [v["<output>"] + ".tmp"] if v.get("<output>") else [],
)


def _int_list_ok(text, ctx):
    vals = [as_int(x) for x in text.split(",") if x.strip()] if not text.startswith("-") else [None]
    return bool(vals) and all(v is not None and v >= 1 for v in vals)


BENCHMARK = Command(
    module="benchmark", prog="flashschnet-benchmark",
    base=[("--pdb", "@pdb"), ("--model", "@model"), ("--replicas", "1"), ("--backends", "torch"), ("--repeats", "1"),
          ("--warmup", "0"), ("--openmm-steps", "0"), ("--threads", "1"), ("--device", "cpu"), ("--out", "@fresh")],
    opts=[
        Opt("--pdb", path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--model", path_values("@model", "@model_unicode", "@pdb"), tokens(model=True, model_unicode=True)),
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
    stubs=benchmark_stubs,
    duplicate=("--warmup", "0"),
)


QUANT = Command(
    module="flashschnet.openmm.quantization.report", prog="tools/benchmarks/quantization_report.py",   # the tool's main
    base=[("--pdb", "@pdb"), ("--model", "@model"), ("--out", "@fresh"), ("--threads", "1"), ("--quick", None),
          ("--quiet", None)],
    opts=[
        Opt("--pdb", path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--model", path_values("@model", "@model_unicode", "@pdb"), tokens(model=True, model_unicode=True)),
        Opt("--oracle", path_values("@oracle"), tokens(oracle=True)),
        Opt("--from-json", path_values("@model", "@empty_object"), lambda t, c: False),
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
    stubs=quant_stubs,
    duplicate=("--seed", "4"),
)


def _npz(v):
    out = v.get("--out")
    return [out if out.endswith(".npz") else out + ".npz"] if out else []


TRAIN_MD = Command(
    module="train", prog="flashschnet-train", sub=["md"],
    base=[("<pdb>", "@pdb"), ("--out", "@fresh"), ("--frames", "2"), ("--interval", "1"), ("--equilibration", "0"),
          ("--quiet", None)],
    opts=[
        Opt("<pdb>", path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
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
    stubs=md_stubs,
    duplicate=("--seed", "2"),
)


TRAIN_FIT = Command(
    module="train", prog="flashschnet-train", sub=["fit"],
    base=[("<pdb>", "@pdb"), ("--data", "@ref"), ("--out", "@fresh"), ("--threads", "1"), ("--quiet", None)],
    opts=[
        Opt("<pdb>", path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--data", path_values("@ref", "@model", "@pdb"), tokens(ref=True)),
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
    stubs=fit_stubs,
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
        Opt("<pdb>", path_values("@pdb", "@pdb_unicode"), tokens(pdb=True, pdb_unicode=True)),
        Opt("--model", path_values("@model", "@model_unicode", "@pdb"), tokens(model=True, model_unicode=True)),
        Opt("--data", path_values("@ref", "@model"), tokens(ref=True)),
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
    stubs=lambda mp, ws: capped_integrate(mp),
    duplicate=("--seed", "2"),
)


# ------------------------------------------------------------------------------------------------ tests
@cli_settings(40)
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
@example(case=((("--report-interval", "5"),), None))                # 2 steps: a warning, step 0's frame, exit 0
def test_simulate_arguments(case, ws, scratch_cwd):
    run_case(SIMULATE, case, ws, scratch_cwd)


@pytest.mark.skipif(not (M3 / FF_FILES[0]).exists(),
                    reason=f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
@pytest.mark.skipif(not MARTINIZE2, reason="martinize2 is not installed (pip install 'flashschnet[martini]')")
@cli_settings(15)
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


@cli_settings(25)
@given(case=cases(COMPARE))
@example(case=((("--martini-ns", "nan"),), None))                   # was: ValueError traceback
@example(case=((("--flashschnet-ns", "1e308"),), None))             # was: OverflowError traceback
@example(case=((("--model", "@random"),), None))                    # was: found only after the MARTINI run
@example(case=((("--replicas", str(10**30)),), None))               # likewise
@example(case=((("--out", "@a_file"),), None))                      # likewise
def test_compare_arguments(case, ws, scratch_cwd):
    run_case(COMPARE, case, ws, scratch_cwd)


@cli_settings(20)
@given(case=cases(CONVERT))
@example(case=((("<output>", "@under_file"),), None))               # was: RuntimeError traceback (torch.save)
@example(case=((("<output>", "@readonly"),), None))                 # likewise
@example(case=((("<output>", "@blank"),), None))                    # likewise
@example(case=((("<output>", "@a_file"), ("--force", "@on")), None))   # overwriting with --force: fine
def test_convert_arguments(case, ws, scratch_cwd):
    run_case(CONVERT, case, ws, scratch_cwd)


@cli_settings(30)
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


@cli_settings(30)
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


@cli_settings(20)
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


@cli_settings(25)
@given(case=cases(TRAIN_FIT))
@example(case=((("--threads", "-1"),), None))                       # was: RuntimeError traceback
@example(case=((("--device", "tpu"),), None))                       # was: RuntimeError traceback
@example(case=((("--n-degs", str(10**30)),), None))                 # was: a 10**30-term fit
@example(case=((("--val-fraction", "nan"),), None))                 # was: ValueError traceback
@example(case=((("--data", "@empty"),), None))                      # was: EOFError traceback
@example(case=((("--out", "@a_file"),), None))                      # was: FileExistsError traceback
def test_train_fit_arguments(case, ws, scratch_cwd):
    run_case(TRAIN_FIT, case, ws, scratch_cwd)


@cli_settings(15)
@given(case=cases(TRAIN_VALIDATE))
@example(case=((("--report-interval", "3"),), None))                # was: ValueError after the run (no frames)
@example(case=((("--out", "@a_file"),), None))                      # was: FileExistsError traceback
@example(case=((("--threads", "0"),), None))                        # was: accepted
def test_train_validate_arguments(case, ws, scratch_cwd):
    run_case(TRAIN_VALIDATE, case, ws, scratch_cwd)
