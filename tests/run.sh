#!/usr/bin/env bash
# Set up (a venv cached outside the clone, keyed by the dependency pins) and run the whole test suite.
# Extra arguments go to pytest, e.g.  bash tests/run.sh -m "not slow" -x
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$root/tools/maintenance/venv.sh")"
cd "$root"
# one test process per core (pytest-xdist; FLASHSCHNET_TEST_WORKERS=0 runs them in this process), whole files
# per process so module fixtures are built once
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider -n "${FLASHSCHNET_TEST_WORKERS:-auto}" --dist loadfile \
  tests "$@"
