#!/usr/bin/env bash
# Per-layer CUDA captures with simcomm's own capture code, plus an independent whole-step throughput
# check, on one GPU.  Run from the repository root:  OUT=out/gpu bash benchmarks/gpu/capture_h100.sh
# It imports only simcomm's trace-capture path (no simpy needed).  DRY=1 runs the same steps on CPU
# with tiny batches and one iteration, to check the script without a GPU.  DEV (default cuda:0) picks
# the GPU: simcomm's capture refused a bare 'cuda' on 2026-11-26 (torch.cuda.set_device needs an index).
# CAPTURE_ONLY=1 skips the throughput loop and the pytest step.
# Writes under $OUT (6 files): log.txt, results.json, resnet50-h100-capture.json,
# resnet50-h100-bf16amp-capture.json, vgg16-h100-capture.json (b32), vgg16-h100-b64-capture.json.
# Results of the run of 2026-11-26 are in docs/traces.md ("Measured on an H100 (CUDA capture)").
set -u -o pipefail
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 SIMCOMM_NO_PROGRESS=1
PY=${PYTHON:-python3}
H=benchmarks/gpu/capture_h100.py
if [ "${DRY:-0}" = 1 ]; then
  DEV=cpu; B64=2; B32=2; IT="--iters 1 --warmup 0"; Q="--device cpu --quick"
else
  DEV=${DEV:-cuda:0}; B64=64; B32=32; IT="--iters 30 --warmup 5"; Q=""
fi

cap() {  # cap OUTFILE ARGS...: the CLI first; if it cannot start, the same capture through the API
  local out=$1; shift
  echo "+ simcomm trace capture $* --out $out"
  local t0=$SECONDS
  $PY -m simcomm trace capture "$@" --out "$out" || {
    echo "  CLI failed; same capture through simcomm.traces.capture.capture_trace"
    $PY - "$out" "$@" <<'PYEOF'
import sys
from simcomm.traces.capture import CaptureConfig, capture_trace
from simcomm.traces.io import save_trace
out, a = sys.argv[1], sys.argv[2:]
kw = dict(zip(a[::2], a[1::2]))
cfg = CaptureConfig(model=kw["--model"], batches=tuple(int(b) for b in kw["--batch"].split(",")),
                    device=kw["--device"], iters=int(kw["--iters"]), warmup=int(kw["--warmup"]))
t = capture_trace(cfg)
print("wrote", save_trace(t, out), "layer sum", t.layer_sum_s, "iteration", t.iteration_s)
PYEOF
  }
  echo "  ($((SECONDS - t0)) s)"
}

{
  date -u
  echo "== 1. machine and versions"
  nvidia-smi || echo "no nvidia-smi"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv || true
  $PY $H env --results "$OUT/results.json"
  SECONDS=0
  echo "== 2. per-layer captures (simcomm trace capture, CUDA events in forward/backward hooks)"
  cap "$OUT/resnet50-h100-capture.json" --model resnet50 --batch $B64 --device $DEV $IT
  cap "$OUT/vgg16-h100-capture.json" --model vgg16 --batch $B32 --device $DEV $IT
  cap "$OUT/vgg16-h100-b64-capture.json" --model vgg16 --batch $B64 --device $DEV $IT
  echo "+ capture_h100.py amp-capture (capture_trace inside torch.autocast bf16)"
  $PY $H amp-capture --model resnet50 --batch $B64 --device $DEV $IT --out "$OUT/resnet50-h100-bf16amp-capture.json"
  echo "  captures took ${SECONDS}s"
  SECONDS=0
  echo "== 3. whole-step throughput, plain torch loop (no hooks)"
  [ "${CAPTURE_ONLY:-0}" = 1 ] || $PY $H throughput --results "$OUT/results.json" $Q
  echo "  throughput took ${SECONDS}s"
  if [ "$DEV" != cpu ] && [ "${CAPTURE_ONLY:-0}" != 1 ]; then
    echo "== 4. the repository's CUDA capture test"
    $PY -m pytest -q -p no:cacheprovider tests/traces/test_traces_capture.py -k cuda_capture 2>&1 | tail -5
    nvidia-smi --query-gpu=temperature.gpu,clocks.sm,power.draw --format=csv || true
  fi
  date -u
} 2>&1 | tee "$OUT/log.txt"
ls -la "$OUT"
