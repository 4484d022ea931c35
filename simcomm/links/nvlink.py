"""NVLink and NVSwitch presets (peak per direction; ``-nccl`` variants effective).

``nvlinkN`` is ONE NVLink (a "brick") between two GPUs, per direction (a
DGX-1 pair joined by two bricks uses ``nvlink2`` scaled x2).  An
``nvswitch-*`` class is a GPU's whole port into a non-blocking NVSwitch plane:
all of the GPU's links together (links x per-link rate), which is how the
two-level builder joins each GPU to its node's switch.  The latency is per
traversal: a GPU-to-GPU path is one hop on a direct link and two hops through
an NVSwitch, so the switch classes carry half of NCCL's NVLink hop latency and
both paths cost NCCL's LL value (0.6 us) end to end.
"""

from __future__ import annotations

from simcomm.links.base import define

GB = 1e9
_NVL_LAT = 0.6e-6  # NCCL hwLat NVLINK, LL protocol, per hop [NCCL-tuning]
_REF = "[NVL-wiki] NVLink table; latency: NCCL hwLat NVLINK LL 0.6 us [NCCL-tuning]"

define("nvlink1", bandwidth=20 * GB, latency=_NVL_LAT, family="nvlink",
       summary="NVLink 1.0 (P100), one link: 20 GB/s per direction", reference=_REF)
define("nvlink2", bandwidth=25 * GB, latency=_NVL_LAT, family="nvlink",
       summary="NVLink 2.0 (V100), one link: 25 GB/s per direction", reference=_REF)
define("nvlink3", bandwidth=25 * GB, latency=_NVL_LAT, family="nvlink",
       summary="NVLink 3.0 (A100), one link (4 pairs x 50 Gb/s): 25 GB/s per direction", reference=_REF)
define("nvlink4", bandwidth=25 * GB, latency=_NVL_LAT, family="nvlink",
       summary="NVLink 4.0 (H100), one link (900 GB/s bidir / 18 links): 25 GB/s per direction",
       reference=_REF)
# NVLink 5 (Blackwell): 18 links give 1.8 TB/s bidirectional per GPU (DGX B200: 2 NVSwitches, 14.4 TB/s
# aggregate over 8 GPUs), so one link carries 100 GB/s bidirectional = 50 GB/s per direction.
define("nvlink5", bandwidth=50 * GB, latency=_NVL_LAT, family="nvlink",
       summary="NVLink 5.0 (B200/GB200), one link (1.8 TB/s bidir / 18 links): 50 GB/s per direction",
       reference="[DGXB200-ug] 14.4 TB/s / 8 GPUs, [NVL72]; latency [NCCL-tuning]")

_SW_LAT = _NVL_LAT / 2  # two traversals (GPU->switch->GPU) per NVLink hop
_SW_REF = "[NVL-wiki], [A100-gk], [H100-gk]; non-blocking star is a modelling assumption; latency [NCCL-tuning]"
define("nvswitch-v100", bandwidth=150 * GB, latency=_SW_LAT, family="nvswitch",
       summary="GPU port into an NVSwitch (DGX-2, V100): 6 x 25 = 150 GB/s per direction",
       reference=_SW_REF)
define("nvswitch-a100", bandwidth=300 * GB, latency=_SW_LAT, family="nvswitch",
       summary="GPU port into an NVSwitch (DGX A100): 12 x 25 = 300 GB/s per direction",
       reference=_SW_REF)
define("nvswitch-h100", bandwidth=450 * GB, latency=_SW_LAT, family="nvswitch",
       summary="GPU port into an NVSwitch (DGX H100): 18 links, 450 GB/s per direction",
       reference=_SW_REF)
# H200 keeps H100's NVLink 4 and NVSwitch: a separate name only so reports say which system it is.
define("nvswitch-h200", bandwidth=450 * GB, latency=_SW_LAT, family="nvswitch",
       summary="GPU port into an NVSwitch (DGX/HGX H200): NVLink 4, 18 links, 450 GB/s per direction",
       reference="[MLPerf-H200] '18x 4th Gen NVLink, 900GB/s'; non-blocking star assumed; latency [NCCL-tuning]")
# H800 (the export H100): GH100 with 8 of the 18 NVLink 4 links, 400 GB/s bidirectional per GPU (NVIDIA's H800 SXM
# datasheet); DeepSeek-V3's report (arXiv 2412.19437, section 3.2.2) measures ~160 GB/s of it in use, which is NCCL's
# own model rate (8 x 20.6 = 164.8 GB/s, simcomm.nccl.layout)
define("nvswitch-h800", bandwidth=200 * GB, latency=_SW_LAT, family="nvswitch",
       summary="GPU port into an NVSwitch (HGX H800): NVLink 4, 8 links, 400 GB/s bidir = 200 GB/s per direction",
       reference="[H800] NVIDIA H800 SXM: NVLink 400 GB/s; [DSV3] 160 GB/s effective; non-blocking star assumed; "
                 "latency [NCCL-tuning]")
define("nvswitch-b200", bandwidth=900 * GB, latency=_SW_LAT, family="nvswitch",
       summary="GPU port into an NVSwitch (DGX/HGX B200): NVLink 5, 18 x 50 = 900 GB/s per direction",
       reference="[DGXB200-ug] 2 NVSwitches, 14.4 TB/s aggregate; non-blocking star assumed; latency [NCCL-tuning]")
# GB200 NVL72: every GPU has 18 NVLink 5 links, one to each NVSwitch chip of the rack's 9 switch trays;
# modelled, like a DGX, as one non-blocking star over the 72 GPUs of the rack.
define("nvswitch-nvl72", bandwidth=900 * GB, latency=_SW_LAT, family="nvswitch",
       summary="GPU port into the GB200 NVL72 NVLink Switch System: 18 x 50 = 900 GB/s per direction",
       reference="[NVL72] 1.8 TB/s per GPU, 130 TB/s per rack; non-blocking star assumed; latency [NCCL-tuning]")

# NCCL-effective: NCCL's per-link model bandwidth (topo.h) times the link count.
define("nvswitch-a100-nccl", bandwidth=240 * GB, latency=_SW_LAT, family="nvswitch",
       summary="DGX A100 NVSwitch port at NCCL's model rate: 12 x 20 = 240 GB/s",
       reference="NCCL SM80 NVLink 20 GB/s/link [NCCL-topo]; measured AR busbw 200-233 GB/s [M1], [M2]")
define("nvswitch-h100-nccl", bandwidth=370.8 * GB, latency=_SW_LAT, family="nvswitch",
       summary="DGX H100 NVSwitch port at NCCL's model rate: 18 x 20.6 = 370.8 GB/s",
       reference="NCCL SM90 NVLink 20.6 GB/s/link [NCCL-topo]; measured ring busbw ~370 GB/s [M3]")
define("nvswitch-b200-nccl", bandwidth=721.8 * GB, latency=_SW_LAT, family="nvswitch",
       summary="DGX B200 NVSwitch port at NCCL's model rate: 18 x 40.1 = 721.8 GB/s",
       reference="NCCL SM100 NVLink 40.1 GB/s/link [NCCL-topo]")
define("nvlink2-nccl", bandwidth=20 * GB, latency=_NVL_LAT, family="nvlink",
       summary="NVLink 2.0 (V100), one link at NCCL's model rate: 20 GB/s",
       reference="NCCL SM70 NVLink 20 GB/s/link [NCCL-topo]")
