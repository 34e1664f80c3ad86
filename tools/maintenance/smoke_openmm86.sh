#!/usr/bin/env bash
# The second supported set, OpenMM 8.6 (requirements-openmm86.txt: openmm 8.6.1, openmm-ml 1.8, the rest as in
# requirements.txt): build (once) and reuse its venv outside the clone (tools/maintenance/venv.sh with
# FLASHSCHNET_PINS), check that it holds those versions and that pip finds flashschnet's requirements met by them, then
# run a smoke subset of the suite in it: the System with the network as a TorchForce (and the PythonForce), stepping it,
# the simulate CLI (short run, resume), parallel tempering and Dask walkers, flashschnet-doctor (its XML line: the known
# crash's warning), MLPotential("flashschnet") through openmm-ml 1.8, a MARTINI system against GROMACS. A few minutes on
# the 2-core CI machine (the venv ~2 min with pip's cache warm from the first venv). .ci/run runs it after the suite.
#   bash tools/maintenance/smoke_openmm86.sh [pytest arguments]
# Prints the time of each stage on stderr; the exit status is pytest's (1 when the venv is not the 8.6 set).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
pins=requirements-openmm86.txt
start=$SECONDS
venv="$(FLASHSCHNET_PINS="$pins" bash "$root/tools/maintenance/venv.sh")"
echo "smoke_openmm86: venv $venv ready after $((SECONDS - start)) s" >&2
cd "$root"
# the venv holds the pins (so this run tests OpenMM 8.6), and the installed flashschnet accepts them (no downgrade)
"$venv/bin/python" - "$pins" <<'EOF'
import re, sys
from importlib import metadata
wrong = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s#;]+)", line)
    if m and metadata.version(m.group(1)) != m.group(2):
        wrong.append(f"{m.group(1)} {metadata.version(m.group(1))} (pinned {m.group(2)})")
names = ("openmm", "openmmml", "acellera-openmmtorch-cpu", "torch")
print("smoke_openmm86: " + ", ".join(f"{n} {metadata.version(n)}" for n in names), file=sys.stderr)
if wrong:
    sys.exit(f"smoke_openmm86: the venv does not hold {sys.argv[1]}'s pins: " + ", ".join(wrong))
EOF
"$venv/bin/python" -m pip check >&2
smoke=(
  tests/openmm/test_system.py
  tests/openmm/test_force.py
  tests/openmm/test_units.py
  tests/openmm/test_energies.py
  tests/openmm/test_dynamics.py
  tests/openmm/test_platforms.py
  tests/openmm/test_doctor.py
  tests/openmm/test_doctor_explain.py
  tests/scripts/test_doctor.py
  tests/openmm/test_mlpotential.py
  tests/openmm/test__plugins.py
  tests/scripts/test_simulate.py::test_short_run_reads_back_with_mdtraj
  tests/scripts/test_simulate.py::test_resume_continues_the_trajectory
  tests/scripts/test_simulate.py::test_python_force_run
  tests/openmm/ensemble/test_run.py::test_tempering_run_writes_walkers_rungs_exchanges_and_resumes_bitwise
  "tests/openmm/ensemble/test_cluster.py::test_local_workers_repeat_the_single_process_run_bitwise[2]"
  tests/openmm/martini/test_system.py::test_energies_equal_gromacs_term_by_term
  tests/tools/maintenance/test_supported_sets.py
)
tests_start=$SECONDS
rc=0
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n "${FLASHSCHNET_TEST_WORKERS:-auto}" --dist loadfile \
  "${smoke[@]}" "$@" || rc=$?
echo "smoke_openmm86: tests took $((SECONDS - tests_start)) s (exit status $rc); $((SECONDS - start)) s in all" >&2
exit "$rc"
