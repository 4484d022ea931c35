"""Seed 004's 56 Gb/s runs on the network its Sec. 6.2 states: 56 Gbit Ethernet, not the preset's FDR."""

from __future__ import annotations

import pytest

from simcomm.validation import seed004


def test_each_network_runs_on_the_link_its_paper_states(monkeypatch):
    seen = {}

    def fake(scn, ctx, baseline, analytic, on_timeline):
        seen[scn.cluster] = scn.network.inter
        plan = type("Plan", (), {"meta": {"worker_compute_s": 0.0, "server_compute_s": 0.0}})()
        on_timeline("", 1.0, plan, None, None)
        return type("Res", (), {"mean_s": 1.0})()

    monkeypatch.setattr(seed004, "_simulate", fake)
    seed004.run_ps("56g", "ps", 0.05, {})
    seed004.run_ps("1g", "ps", 0.94, {})
    assert seen == {"kisti-neuron": "eth-56g", "seed004-ps": None}  # 1 GbE is the preset's own eth-1g
    seed004.run_ps("56g", "ps", 0.05, {}, inter=None)
    assert seen["kisti-neuron"] is None  # the preset's FDR, for the finding that compares


def test_dropping_pays_tcp_latency_once_per_message():
    """With the bytes cut by dropping, the 161 messages per worker and direction weigh.  Both networks pay TCP's
    small-message latency [M7] once per message: Ethernet in its two 19 us hops (38 us; cpu-ps adds no overhead on
    eth-*, docs/links.md), FDR InfiniBand in cpu-ps's 40 us on top of 2 x 0.7 us (41.4 us).  So at the same
    goodput the dropping iteration on Ethernet is the shorter, by at most the server's receive queue of the 6
    remote workers' 161 messages at three latencies each (rendezvous above 64 KiB) x 3.4 us, plus what the faster
    line (56 against 54.55 Gb/s) saves on the ~61 MB still pushed."""
    opts = {"server_s_per_byte": 5.217e-11, "drop_ratio": 0.9}
    eth = seed004.run_ps("56g", "ps-layer-drop", 0.05, opts, "analytic", inter="eth-56g")[0]
    ib = seed004.run_ps("56g", "ps-layer-drop", 0.05, opts, "analytic", inter="ib-fdr")[0]
    queue = 6 * 161 * 3 * ((1.4 + 40) - 2 * 19) * 1e-6
    saved = 6 * 0.1 * 102.2e6 * (1 / (0.05 * 54.55e9 / 8) - 1 / (0.05 * 56e9 / 8))
    assert 0 < ib - eth <= queue + saved
    assert ib - eth == pytest.approx(0.0096, abs=0.002)
