#!/usr/bin/env bash
# How the transformer roofline factor holds across hidden sizes and micro-batches: layer subsets of the
# Megatron-LM SC'21 GPT configurations on one GPU (bf16 autocast), compared with the roofline per leaf kind.
# Run from the repository root:  OUT=out/llm-scale bash benchmarks/gpu/capture_llm_scale.sh   (DRY=1: CPU, shrunk)
# Writes under $OUT: log.txt, compare.json, compare.md and one capture JSON per row (5 files).
OUT=${OUT:-out/llm-scale} ITERS=10 WARMUP=3
. benchmarks/gpu/_llm_capture.sh
{
  date -u
  machine
  SECONDS=0
  # hidden 2304 at micro-batch 1 (the fit row was batch 4); hidden 6144, 12288, 16384 as layer subsets
  cap "$OUT/megatron-1.7b-b1-bf16-capture.json" --model megatron-1.7b --batch 1
  cap "$OUT/megatron-18b-2layers-b2-bf16-capture.json" --model megatron-18b --batch 2 --layers 2
  # Adam's state for hidden >= 12288 plus the 51200-word embedding does not fit beside the model: SGD
  # (the per-layer forward and backward do not depend on the optimizer)
  cap "$OUT/megatron-145b-1layers-b1-bf16-capture.json" --model megatron-145b --batch 1 --layers 1 --optimizer sgd
  cap "$OUT/megatron-310b-1layers-b1-bf16-capture.json" --model megatron-310b --batch 1 --layers 1 --optimizer sgd
  echo "  captures took ${SECONDS}s"
  $PY $H compare --device h100 --out-json "$OUT/compare.json" --out-md "$OUT/compare.md" \
    "$OUT"/megatron-*-capture.json || echo "  compare FAILED (status $?)"
  date -u
} 2>&1 | tee "$OUT/log.txt"
! grep -q "FAILED" "$OUT/log.txt"
