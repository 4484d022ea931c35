"""The host work of seed 001's AWS timing loop that is neither forward, backward nor communication.

The timer of ``220606_aws/imagenet_test.py`` starts (``batch_time = time.time()``)
*before* the synthetic batch is made and stops after the closing barrier, and
everything in between runs one op after another on one Python thread.  Besides
forward, backward (the trace) and the exchange (the strategy), each timed
iteration does, for every method and for the single-instance reference alike:

1. **Input.**  ``torch.rand(batch, 3, 224, 224).cuda()`` and
   ``torch.zeros(batch, 1000, dtype=int64).cuda()``: the batch is drawn on the
   *CPU* (PyTorch's CPU ``uniform_`` draws element by element from one
   mt19937 generator, whatever the thread count) and copied from pageable
   memory to the GPU.
2. **Per-tensor loops with host synchronisations**, over the model's
   parameter tensors (torchvision ResNet-50: 161, i.e. 53 conv weights, 53
   batch-norm weights and biases, the fc weight and bias):

   * ``optimizer.zero_grad()`` (``Optimizer.zero_grad``: one ``p.grad.zero_()``
     per tensor);
   * ``torch.nn.utils.clip_grad_norm``: one ``p.grad.norm()`` per tensor, the
     norms stacked on the GPU (PyTorch >= 1.5, pytorch/pytorch#38615; up to 1.4
     it read every norm back with ``.item()``, pytorch/pytorch#31474).  The AWS
     code needs PyTorch >= 1.8 whatever the paper's "PyTorch 1.4" (S1:L235):
     it calls ``dist.send``/``dist.recv`` on the NCCL backend, which
     ProcessGroupNCCL supports from 1.8 (pytorch/pytorch#44921, NCCL >= 2.7);
     one read back of the clip coefficient is counted (1.8's ``if clip_coef <
     1``), not 1.9+'s multiplication of every gradient by the clamped one;
   * the norms loop (aws: ``norms = []`` ... ``optimizer.set_norms``): per
     tensor ``torch.norm(w).item()``, ``torch.isnan(g).any()`` and
     ``torch.isinf(g).any()`` read as Python bools, ``torch.norm(g).item()``;
   * the LARS step (``lars.py`` ``LARS.step``, imported by the AWS code): per
     tensor ``grad.clone()``, the isnan/isinf checks of the gradient, the
     momentum update as five separate tensor ops, the isnan/isinf checks of the
     buffer, ``p.data.add_(-buf)``; tensors of two or more dimensions also
     compare ``grad_norm > 0 and weight_norm > 0`` (two 0-d CUDA tensors read
     as bools) and build the local rate from them in six 0-d tensor ops.

   This replaces the trace's fused optimizer update (SGD's five words per
   parameter), so the trace's ``update_s`` is subtracted.
3. **Apex AMP's unscale** on leaving ``amp.scale_loss`` (O1: the fp32
   gradients multiplied by 1/scale in place, one fused ``multi_tensor_scale``
   pass, 8 bytes per parameter; ``delay_overflow_check=True``, so no read back).

Priced a priori, nothing fitted (the paper prints no time of the AWS runs):

* the CPU draw at :data:`RAND_S_PER_ELEMENT`, measured; the copies at PCIe
  Gen3 x16's 12 GB/s (NCCL's figure for the link, ``pcie3-nccl`` in
  docs/links.md);
* the unscale as one launch plus its bytes at the memory roofline;
* per tensor, ``max(kernels · call, bytes / (mem_bw · memory_eff)) +
  syncs · call``: between two synchronisations the GPU runs the kernels as
  the host issues them, so a tensor costs its calls or its memory traffic,
  whichever is longer; each synchronisation (a 4-byte device-to-host copy and
  a stream wait) then costs one more call, serially.  A call is PyTorch's
  host dispatch from Python (:data:`DISPATCH_S`, measured) plus the device's
  per-kernel launch (5 us, simcomm.traces.devices); the bandwidth is the
  device's calibrated memory roofline.

Both host constants are measured on the development machine's 2.1 GHz core,
not on g4dn's Cascade Lake (up to 3.5 GHz), and the launch is the device's
bare figure: the result is uncertain by tens of percent either way, which
docs/validation.md's seed 001 findings carry through to the rows.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LoopCost", "loop_cost", "parameter_tensors", "OPS", "MATRIX_OPS", "CLIP_ONCE", "RAND_S_PER_ELEMENT",
           "DISPATCH_S", "H2D_RATE"]

#: seconds per float ``torch.rand`` draws on one CPU core: 51.3 ms of CPU time for 64 x 3 x 224 x 224
#: (torch 2.13, one thread, the best of 120 draws in four sessions (the sessions' best: 65.9, 51.3, 52.2,
#: 54.4 ms), the 2.1 GHz Xeon core of the development machine, 2026-11-28); PyTorch's CPU
#: uniform_ draws serially from one mt19937 generator under its lock (cpu_serial_kernel in
#: aten/src/ATen/native/cpu/DistributionTemplates.h) in the versions the AWS code can run on
RAND_S_PER_ELEMENT = 51.3e-3 / (64 * 3 * 224 * 224)
#: host seconds of one PyTorch call from Python (dispatch, output allocation, a trivial kernel): one 1-D
#: tensor's calls of this loop (24 ops and 8 reads as Python values) on a 4-element CPU tensor took 76.2 us
#: of CPU time (torch 2.13, one thread, best of 30 x 1000, the same core); a CUDA call adds the launch
DISPATCH_S = 76.2e-6 / 32
#: host-to-device copy rate over PCIe Gen3 x16 (the T4's link on g4dn): NCCL's 12 GB/s for the link
H2D_RATE = 12e9
#: per parameter tensor, every tensor: (kernels launched, host synchronisations, bytes of memory traffic per
#: fp32 element), one entry per loop of the timed region
OPS = {
    # Optimizer.zero_grad: p.grad.zero_() (write 4 B)
    "zero_grad": (1, 0, 4),
    # clip_grad_norm_ (PyTorch >= 1.5): p.grad.norm (read 4 B), stacked on the GPU; its one read back is
    # counted once per iteration (CLIP_ONCE)
    "clip_grad_norm": (1, 0, 4),
    # norm(w) 4 B; isnan(g) 4+1, any 1; isinf(g) 4+1, any 1; norm(g) 4 B; four reads back to the host
    "norms": (6, 4, 20),
    # lars.py: clone 8; isnan/isinf(grad) + any 6 + 6; wd * p 8; d_p + (.) 12; mul(., lr) 8; buf.mul_ 8;
    # .add_(.) 12; isnan/isinf(buf) + any 6 + 6; -buf 8; p.add_ 12 (16 kernels, 100 B, four bools)
    "lars": (16, 4, 100),
}
#: tensors of two or more dimensions (conv and fc weights) in the LARS step: grad_norm > 0, weight_norm > 0
#: (two kernels, two bools) and the local rate in six 0-d ops (wd * w, g +, + 1e-9, w /, * eta, * lr)
MATRIX_OPS = (8, 2, 0)
#: clip_grad_norm_ once per iteration: stack, norm, add, div kernels and the read back of ``clip_coef < 1``
CLIP_ONCE = (4, 1)


@dataclass(frozen=True)
class LoopCost:
    """The loop's host work per iteration (seconds) and what it is made of."""

    input_s: float  # CPU draw of the batch and the pageable copies of batch and target
    loops_s: float  # the per-tensor loops (zero_grad, clip, norms, LARS)
    unscale_s: float  # Apex AMP's fused unscale of the gradients
    replaced_update_s: float  # the trace's own optimizer update, which the LARS step replaces
    tensors: int
    kernels: int
    syncs: int

    @property
    def total_s(self) -> float:
        """What the loop adds to the trace's iteration."""
        return self.input_s + self.loops_s + self.unscale_s - self.replaced_update_s


def parameter_tensors(trace) -> list[tuple[int, int]]:
    """(elements, dimensions) of each parameter tensor of a CNN trace: a conv has its weight (no bias in
    torchvision's ResNets), a batch norm a weight and a bias, a linear layer a weight and a bias."""
    out: list[tuple[int, int]] = []
    for layer in trace.layers:
        if not layer.params:
            continue
        kind = layer.module_type
        if kind.startswith("Conv"):
            out.append((layer.params, 4))
        elif kind.startswith("BatchNorm"):
            out += [(layer.params // 2, 1)] * 2
        elif kind == "Linear":
            bias = int(layer.output_shape[-1])
            out += [(layer.params - bias, 2), (bias, 1)]
        else:
            raise ValueError(f"{layer.name}: no parameter tensors known for a {kind} layer")
    return out


def loop_cost(trace, device, batch: int, image: tuple[int, int, int] = (3, 224, 224), classes: int = 1000,
              rand_s_per_element: float = RAND_S_PER_ELEMENT, dispatch_s: float = DISPATCH_S) -> LoopCost:
    """The AWS loop's host work for ``trace`` on ``device`` (a :class:`simcomm.traces.devices.DeviceSpec`);
    the two host constants can be changed to show what they do (validate's seed 001 findings)."""
    c, h, w = image
    elements = batch * c * h * w
    input_s = elements * rand_s_per_element + (4 * elements + 8 * batch * classes) / H2D_RATE
    bandwidth = device.mem_bw * device.memory_eff
    call = device.launch_s + dispatch_s  # one call from Python: dispatch, then the kernel launch
    loops = 0.0
    kernels = syncs = 0
    tensors = parameter_tensors(trace)
    for numel, dims in tensors:
        k = sum(op[0] for op in OPS.values())
        s = sum(op[1] for op in OPS.values())
        nbytes = numel * sum(op[2] for op in OPS.values())
        if dims >= 2:
            k, s = k + MATRIX_OPS[0], s + MATRIX_OPS[1]
        loops += max(k * call, nbytes / bandwidth) + s * call
        kernels += k
        syncs += s
    loops += (CLIP_ONCE[0] + CLIP_ONCE[1]) * call
    kernels += CLIP_ONCE[0]
    syncs += CLIP_ONCE[1]
    params = sum(numel for numel, _ in tensors)
    unscale = call + 8 * params / bandwidth
    update = sum(layer.update_s for layer in trace.layers)
    return LoopCost(input_s, loops, unscale, update, len(tensors), kernels + 1, syncs)
