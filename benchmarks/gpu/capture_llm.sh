#!/usr/bin/env bash
# Per-layer CUDA captures of the zoo's dense transformers with simcomm's own capture code (bf16 autocast,
# Adam), and their comparison with the roofline synthesis of the same models.  From the repository root:
#   OUT=out/llm bash benchmarks/gpu/capture_llm.sh
# It imports only simcomm's trace-capture path and simcomm.traces (no simpy needed).  DRY=1 runs the same
# steps on CPU with batch 1, one iteration, a 32-token sequence and shrunk models (hidden 64, vocab 512;
# same norm, MLP, bias, tying and KV grouping), to check the script without a GPU.  DEV (default cuda:0)
# picks the GPU.  It took 107 s on one H100 80GB on 2026-11-26 (three captures of 25 iterations, models
# built on the GPU; peak memory 42, 54 and 33 GiB); results in docs/traces.md, "Transformer capture".
# Writes under $OUT (6 files): log.txt, megatron-1.7b-b4-bf16-capture.json, gpt3-1.3b-b8-bf16-capture.json,
# llama3-8b-2layers-b1-bf16-capture.json, compare.json, compare.md.
OUT=${OUT:-out/llm} ITERS=20 WARMUP=5
. benchmarks/gpu/_llm_capture.sh
if [ "${DRY:-0}" = 1 ]; then BM=1; BG=1; else BM=4; BG=8; fi

{
  date -u
  echo "== 1. machine and versions"
  machine
  SECONDS=0
  echo "== 2. per-layer captures (bf16 autocast, Adam, CUDA events in forward/backward hooks)"
  cap "$OUT/megatron-1.7b-b4-bf16-capture.json" --model megatron-1.7b --batch $BM
  cap "$OUT/gpt3-1.3b-b8-bf16-capture.json" --model gpt3-1.3b --batch $BG
  # Llama 3 8B does not fit with Adam on one 80 GB GPU: its first two blocks with the full embedding and head
  cap "$OUT/llama3-8b-2layers-b1-bf16-capture.json" --model llama3-8b --batch 1 --layers 2
  echo "  captures took ${SECONDS}s"
  echo "== 3. roofline (h100, bf16, Adam, same batch) over captured, per leaf kind"
  $PY $H compare --device h100 --out-json "$OUT/compare.json" --out-md "$OUT/compare.md" \
    "$OUT/megatron-1.7b-b4-bf16-capture.json" "$OUT/gpt3-1.3b-b8-bf16-capture.json" \
    "$OUT/llama3-8b-2layers-b1-bf16-capture.json" || echo "  compare FAILED (status $?)"
  [ "$DEV" = cpu ] || nvidia-smi --query-gpu=temperature.gpu,clocks.sm,power.draw,memory.used --format=csv || true
  date -u
} 2>&1 | tee "$OUT/log.txt"
ls -la "$OUT"
! grep -q "FAILED" "$OUT/log.txt"  # the exit status says whether every step worked
