# Shared by capture_llm.sh and capture_llm_scale.sh (sourced, not run): the output folder, the Python,
# DEV/IT/SMALL for a GPU run or DRY=1 (CPU, one iteration, a 32-token sequence, shrunk models), cap()
# and the machine header.  The caller sets OUT's default, ITERS and WARMUP first.
set -u -o pipefail
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 SIMCOMM_NO_PROGRESS=1
PY=${PYTHON:-python3}
H=benchmarks/gpu/capture_llm.py
if [ "${DRY:-0}" = 1 ]; then
  DEV=cpu; IT="--iters 1 --warmup 0"; SMALL="--seq 32 --shrink"
else
  DEV=${DEV:-cuda:0}; IT="--iters $ITERS --warmup $WARMUP"; SMALL=""
fi

cap() {  # cap OUTFILE ARGS...: one capture through capture_llm.py, timed
  local out=$1; shift
  echo "+ capture_llm.py capture $* --out $out"
  local t0=$SECONDS
  $PY $H capture "$@" --device $DEV --autocast bf16 $IT $SMALL --out "$out" || echo "  capture FAILED (status $?)"
  echo "  ($((SECONDS - t0)) s)"
}

machine() {  # the GPU, driver and versions, for the log
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv || echo "no nvidia-smi"
  $PY -c "import torch, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda)"
}
