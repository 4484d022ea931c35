"""Record torch.profiler (Kineto) profiles of plain CUDA training steps, for `simcomm trace import` on GPU.

    PYTHONPATH=. python3 benchmarks/gpu/profile_cuda.py OUTDIR

For each (zoo model, batch): an unhooked step timed with CUDA events (median of 30 after 10 warm-ups),
then a profile of the same loop with CPU and CUDA activities and ``with_stack=True`` (the importer's
requirement), 2 skipped, 2 warm-up and 4 active steps, saved gzipped.  Results: docs/traces.md.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from simcomm.traces.zoo import build_model, model_spec


def step_fn(model, opt, x):
    def step():
        opt.zero_grad(set_to_none=True)
        out = model(x)
        out.float().square().mean().backward()  # the capture's loss
        opt.step()
    return step


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    res = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    for name, batch in (("resnet20-cifar", 64), ("resnet50", 64)):
        model = build_model(name).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
        x = torch.randn((batch, *model_spec(name).input_shape), device="cuda")
        step = step_fn(model, opt, x)
        times = []
        for it in range(40):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step()
            b.record()
            torch.cuda.synchronize()
            if it >= 10:
                times.append(a.elapsed_time(b) / 1e3)
        times.sort()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True,
                     schedule=schedule(wait=2, warmup=2, active=4)) as prof:
            for _ in range(8):
                step()
                prof.step()
        torch.cuda.synchronize()
        raw = out / f"{name}-b{batch}-cuda-profile.json"
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as src, gzip.open(f"{raw}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        raw.unlink()
        res[name] = {"batch": batch, "unhooked_step_s": times[len(times) // 2]}
        print(name, batch, "unhooked step %.2f ms" % (times[len(times) // 2] * 1e3), flush=True)
    (out / "profile_results.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
