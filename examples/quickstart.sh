#!/usr/bin/env bash
# Quickstart: set up (a venv cached outside the clone, reused across runs) and run the main job on the
# bundled example: trp-cage (1L2Y, all-atom PDB) -> 5-bead CG -> OpenMM Langevin dynamics with the
# model trained on trp-cage (see README, docs/model-card-trpcage.md) -> runs/quickstart/{replica_000.dcd,...}.
#   STEPS=10000 bash examples/quickstart.sh     # longer run (default 2000 steps = 8 ps at 4 fs)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$root/tools/maintenance/venv.sh")"
out="$root/runs/quickstart"
if [ -e "$out" ]; then      # an earlier quickstart's run: kept aside (the newest one), not deleted silently
    rm -rf "$out.previous"
    mv "$out" "$out.previous"
    echo "note: the earlier quickstart run is now $out.previous (it replaces the one kept there before)"
fi
"$venv/bin/flashschnet-simulate" "$root/examples/1L2Y_trpcage.pdb" \
    --model "$root/examples/trpcage_trained.pt" \
    --steps "${STEPS:-2000}" --replicas "${REPLICAS:-1}" --report-interval 200 --seed 2026 --threads 1 \
    --out "$out"
echo "trajectory: $out/replica_000.dcd (topology: $out/topology.pdb), log: $out/log.csv"
echo "next: put the flashschnet-* commands and 'import flashschnet' into this shell, then see README.md:"
echo "  source $venv/bin/activate"
