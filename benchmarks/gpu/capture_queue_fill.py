"""Re-capture ResNet-50 (b64) and VGG-16 (b32) on CUDA with the queue-filling capture, beside an unhooked step.

    PYTHONPATH=. python3 benchmarks/gpu/capture_queue_fill.py OUTDIR

Checks that simcomm's hooked CUDA capture (simcomm/traces/capture.py, _QueueFill) times the GPU's own work:
its layer sum should be close to an unhooked training step of the same model (torchvision, SGD, synthetic
data, CUDA events over 30 iterations after 10 warm-ups).  Results of 2026-11-26: docs/traces.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torchvision

from simcomm.traces.capture import CaptureConfig, capture_trace
from simcomm.traces.io import save_trace


def unhooked(name: str, batch: int) -> float:
    model = getattr(torchvision.models, name)().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    times = []
    for it in range(40):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        b.record()
        torch.cuda.synchronize()
        if it >= 10:
            times.append(a.elapsed_time(b) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    res = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    for model, batch in (("resnet50", 64), ("vgg16", 32)):
        t = capture_trace(CaptureConfig(model=model, batches=(batch,), device="cuda", iters=30, warmup=5))
        save_trace(t, out / f"{model}-h100-capture.json")
        step = unhooked(model, batch)
        res[model] = {"batch": batch, "layer_sum_s": t.layer_sum_s, "hooked_iteration_s": t.iteration_s,
                      "unhooked_step_s": step}
        print(model, batch, f"layer sum {t.layer_sum_s * 1e3:.2f} ms, hooked iteration {t.iteration_s * 1e3:.2f} ms, "
              f"unhooked step {step * 1e3:.2f} ms", flush=True)
    (out / "queue_fill_results.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
