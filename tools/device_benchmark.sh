#!/usr/bin/env bash
# The prepared GPU benchmark for a lent device machine (see the device tool's README): ONE call, < 8 min,
# JSON to $OUT. The machine's image has torch + triton (no OpenMM, no openmm-torch), so the network is
# benchmarked directly and the OpenMM loop runs through openmm.PythonForce (carried openmm wheels).
#
# Here, once per session:   bash tools/fetch_device_wheels.sh        (fills .whl/, ignored by git)
# Then, with the device tool: run(command="bash tools/device_benchmark.sh", carry=[".whl"], timeout_s=540)
set -euo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-deps --no-build-isolation --no-compile --target /tmp/fs . >/dev/null
export PYTHONPATH=/tmp/fs:/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton, openmm; print('torch', torch.__version__, 'triton', triton.__version__, 'openmm', openmm.__version__)" | tee -a "$OUT/gpu.txt"
# correctness first: the triton backend against the mlcg oracle on the GPU (float64 and float32)
python3 - <<'PY' 2>&1 | tee "$OUT/oracle.txt"
import torch, flashschnet
A = torch.load("tests/data/oracles/mlcg_schnet_A.pt", weights_only=True)
for dtype in (torch.float64, torch.float32):
    m = flashschnet.load_model("tests/data/oracles/mlcg_schnet_A.pt", backend="triton", dtype=dtype, device="cuda")
    e, f = m.energy_forces(A["positions_A"].to("cuda", dtype), A["bead_types"].cuda())
    de = ((e.double().cpu() - A["energies_kcal_mol"]).abs().max() / A["energies_kcal_mol"].abs().max()).item()
    df = ((f.double().cpu() - A["forces_kcal_mol_A"]).abs().max() / A["forces_kcal_mol_A"].abs().max()).item()
    runs = [m.energy_forces(A["positions_A"].to("cuda", dtype), A["bead_types"].cuda())[1] for _ in range(3)]
    print(dtype, "rel. error E", de, "F", df, "bitwise repeatable", all(torch.equal(runs[0], r) for r in runs))
    for v in ("fp16", "bf16"):      # channel-wise 16-bit weights: the kernels vs the plain-PyTorch reference
        q = flashschnet.quantize(m, torch.float16 if v == "fp16" else torch.bfloat16)
        r = flashschnet.quantize(flashschnet.load_model("tests/data/oracles/mlcg_schnet_A.pt", backend="reference",
                                                        dtype=dtype, device="cuda"), torch.float16 if v == "fp16" else torch.bfloat16)
        fq = q.energy_forces(A["positions_A"].to("cuda", dtype), A["bead_types"].cuda())[1]
        fr = r.energy_forces(A["positions_A"].to("cuda", dtype), A["bead_types"].cuda())[1]
        print(dtype, v, "triton vs reference (same 16-bit weights) rel.", ((fq - fr).abs().max() / fr.abs().max()).item())
PY
timeout 300 python3 -m flashschnet.scripts.benchmark --device cuda --replicas 1,8,64,128 \
    --backends reference,torch,triton --openmm-force python --openmm-replicas 64 --openmm-steps 50 \
    --max-memory-gb 100 --out "$OUT/benchmark-gpu.json" | tee "$OUT/benchmark-gpu.txt"
# channel-wise 16-bit weights side by side with float32 weights (same backend, same run)
timeout 120 python3 -m flashschnet.scripts.benchmark --device cuda --replicas 64,128 --backends triton \
    --quantize none,fp16,bf16 --openmm-steps 0 --out "$OUT/benchmark-gpu-quantized.json" | tee "$OUT/benchmark-gpu-quantized.txt"
