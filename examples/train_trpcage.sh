#!/usr/bin/env bash
# Regenerates examples/trpcage_trained.pt (the quickstart's model) and its validation figures in docs/:
# all-atom amber14/GBn2 MD of trp-cage (1L2Y) -> 5-bead priors + force matching -> validation run.
# ~40 minutes on 2 CPU cores (about 25 of them the all-atom MD); a GPU makes the MD minutes (--platform CUDA).
#   bash examples/train_trpcage.sh [WORKDIR]       (default runs/train_trpcage)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$root/tools/maintenance/venv.sh")"
work="${1:-$root/runs/train_trpcage}"
pdb="$root/examples/1L2Y_trpcage.pdb"
mkdir -p "$work"
[ -f "$work/reference.npz" ] || "$venv/bin/flashschnet-train" md "$pdb" --out "$work/reference.npz" \
    --frames 400 --interval 250 --equilibration 5000 --seed 2026
rm -rf "$work/model" "$work/validation"
"$venv/bin/flashschnet-train" fit "$pdb" --data "$work/reference.npz" --out "$work/model" \
    --epochs 60 --batch-frames 16 --learning-rate 1e-3 --patience 10 --seed 2026 --threads 2
"$venv/bin/flashschnet-train" validate "$pdb" --model "$work/model/best.pt" --data "$work/reference.npz" \
    --out "$work/validation" --steps 5000 --replicas 4 --report-interval 50 --seed 2026 --threads 2
cp "$work/model/best.pt" "$root/examples/trpcage_trained.pt"
cp "$work/model/loss.png" "$root/docs/trpcage-trained-loss.png"
cp "$work/model/history.json" "$root/docs/trpcage-trained-history.json"
cp "$work/validation/validation.png" "$root/docs/trpcage-trained-validation.png"
cp "$work/validation/validation.json" "$root/docs/trpcage-trained-validation.json"
echo "wrote examples/trpcage_trained.pt and docs/trpcage-trained-*"
