"""``flashschnet-simulate --resume --out DIR``, fuzzed (hypothesis): any mix of options, each the run's own value, another
valid one or an invalid one, and the model or PDB as the same bytes under another path or other bytes under the
old name. Oracle: when every given setting that fixes the run agrees with run.json (files by content), the resume is
accepted -- here "nothing to do", exit 0, since the run is already at its step count -- and otherwise it is exit 2
with one line naming every option that disagrees and none that agrees; the run directory is never touched."""
from __future__ import annotations

import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import EXAMPLES
from flashschnet.scripts.simulate import main

PDB = EXAMPLES / "1L2Y_trpcage.pdb"
MODEL = EXAMPLES / "trpcage_placeholder.pt"
OTHER_MODEL = EXAMPLES / "trpcage_trained.pt"
STEPS = 10

#: option -> (the run's value, other values), for the options that fix a run (strings as typed)
FIXED = {
    "--dt": ("4", ["2", "4.5", "-1", "nan"]),
    "--temperature": ("300", ["310", "0"]),
    "--friction": ("1", ["0.5"]),
    "--report-interval": ("10", ["5", "0"]),
    "--replicas": ("1", ["2"]),
    "--seed": ("11", ["12"]),
    "--precision": ("single", ["double"]),
    "--quantize": ("none", ["fp16"]),
    "--compress": ("float32", ["none"]),           # the run's: the default, float32 filter tables
    "--matmul": ("auto", ["ieee"]),
    "--on-blowup": ("stop", ["drop"]),
    "--mapping": ("5bead", ["ca"]),
    "--platform": ("Reference", ["CPU"]),          # the run's: a CG run's default
}
#: options a resume may change
FREE = {"--threads": ["1", "2"], "--max-force": ["1e6"], "--network-force": ["torch", "python"]}
#: the shown spelling of an option's value in the message (floats as %g)
SHOWN = {"4.5": "4.5", "nan": "nan"}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz_resume")
    files = root / "files"
    files.mkdir()
    for name, src in (("model.pt", MODEL), ("copy.pt", MODEL), ("other.pt", OTHER_MODEL), ("in.pdb", PDB)):
        shutil.copy(src, files / name)
    (files / "edited.pdb").write_text("REMARK   1 EDITED\n" + PDB.read_text())     # other bytes, same atoms
    out = root / "run"
    argv = [str(files / "in.pdb"), "--model", str(files / "model.pt"), "--steps", str(STEPS), "--out", str(out),
            "--report-interval", "10", "--seed", "11", "--quiet", "--threads", "1"]
    assert main(argv) == 0
    return out, files


def _snapshot(out):
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


@st.composite
def resume_argv(draw, files):
    argv, differ = [], []
    for opt, (own, others) in FIXED.items():
        choice = draw(st.sampled_from(["leave out", "own", "other"]))
        if choice == "own":
            argv += [opt, own]
        elif choice == "other":
            value = draw(st.sampled_from(others))
            argv += [opt, value]
            differ.append((opt, value))
    for opt, values in FREE.items():
        if draw(st.booleans()):
            argv += [opt, draw(st.sampled_from(values))]
    model = draw(st.sampled_from([None, "model.pt", "copy.pt", "other.pt"]))
    if model:
        argv += ["--model", str(files / model)]
        if model == "other.pt":
            differ.append(("--model", str(files / model)))
    pdb = draw(st.sampled_from([None, "in.pdb", "edited.pdb"]))
    if pdb:
        argv = [str(files / pdb)] + argv
        if pdb == "edited.pdb":
            differ.append(("PDB", str(files / pdb)))
    steps = draw(st.sampled_from([None, STEPS, STEPS - 5]))
    if steps is not None:
        argv += ["--steps", str(steps)]
    return argv, differ


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_resume_accepts_agreement_and_names_every_disagreement(base, capsys, data):
    out, files = base
    argv, differ = data.draw(resume_argv(files))
    before = _snapshot(out)
    capsys.readouterr()
    rc = main(argv + ["--resume", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert _snapshot(out) == before
    assert len(err) == 1, err
    if not differ:
        assert rc == 0 and "nothing to do" in err[0], err
        return
    assert rc == 2 and err[0].startswith("flashschnet-simulate: error:") and "--resume with settings" in err[0], err
    for opt, value in differ:
        assert f"{opt} {SHOWN.get(value, value)}" in err[0], (opt, err[0])
    for opt, (own, _) in FIXED.items():
        if opt in argv and opt not in dict(differ):
            assert f"{opt} {own} (the run's" not in err[0]
