# Sourced (not run) by tools/device/device_benchmark.sh on the device and by tools/device/device_rehearsal.sh here:
# installs the carried wheels (.whl/) into $SITE and this checkout into $FS with the interpreter $PY, then exports
# PYTHONPATH and LD_LIBRARY_PATH so that OpenMM's CUDA plugin finds the NVIDIA libraries torch brought. One set of
# commands for both, so that the rehearsal installs exactly what the device gets, the same way. The baseline tree
# (.baseline/, tools/device/fetch_device_baseline.sh) is not installed: its row workers put it first on PYTHONPATH in
# place of $FS (flashschnet.openmm.benchmark.device_rows).
#   PY (python3)   SITE (/tmp/site)   FS (/tmp/fs)
PY="${PY:-python3}"; SITE="${SITE:-/tmp/site}"; FS="${FS:-/tmp/fs}"
echo "== installing the carried wheels (.whl/) into $SITE and this checkout into $FS, with $PY"
ls .whl/*.whl 2>/dev/null || echo "no .whl/: run tools/device/fetch_device_wheels.sh here and pass carry=[\".whl\"]"
echo "carried: $(du -cb .whl/*.whl 2>/dev/null | tail -1 | cut -f1) bytes of wheels"
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
  || echo "INSTALL FAILED: the carried wheels (the openmm stage will fail)"
if ! "$PY" -m pip install -q --no-deps --no-build-isolation --no-compile --target "$FS" . >/dev/null 2>&1; then
  echo "pip install of the checkout failed: using a copy of the source tree in $FS instead"
  rm -rf "$FS" && mkdir -p "$FS" && cp -r model "$FS/flashschnet" && cp -r plugin "$FS/flashschnet/openmm" \
    && cp -r scripts "$FS/flashschnet/scripts" && cp -r examples "$FS/flashschnet/examples"
fi
# The OpenMM CUDA plugin's RUNPATH looks for libnvrtc.so.13 / libcufft.so.12 in ../../../nvidia/cu13/lib next to
# OpenMM.libs, i.e. $SITE/nvidia: point that at the nvidia wheels torch brought (LD_LIBRARY_PATH too).
nv="$("$PY" -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null || true)"
if [ -n "$nv" ] && [ ! -e "$SITE/nvidia" ]; then ln -s "$nv" "$SITE/nvidia"; fi
libs="$([ -n "$nv" ] && ls -d "$nv"/*/lib "$nv"/*/*/lib 2>/dev/null | paste -sd: -)"
echo "nvidia wheels: ${nv:-none found}"
if [ -n "$libs" ]; then export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
export PYTHONPATH="$FS:$SITE" PYTHONUNBUFFERED=1
"$PY" -c 'import sys, torch, triton, numpy, openmm, openmmtorch; print("python", sys.version.split()[0], "torch",
torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "numpy", numpy.__version__, "openmm",
openmm.__version__, "openmmtorch", openmmtorch.__file__)' || echo "IMPORT FAILED: see above"
