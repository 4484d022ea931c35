"""The what-if report answers the pairwise question for every varied parameter (hand-made rows)."""

from __future__ import annotations

from simcomm.whatif.summary import answers, assumptions


def _row(strategy, inter, nodes, it, comm, samples=None, ranks=None):
    return {"status": "ok", "strategy": strategy, "inter": inter, "nodes": nodes, "iteration_s": it,
            "comm_exposed_s": comm, "samples_per_s": samples or 64 * nodes / it, "n_ranks": ranks or nodes,
            "assumed": ["shared line", f"own {strategy}"]}


SWEEP = {"axes": [["inter", ["ib-edr", "ib-hdr"]], ["nodes", [8, 64]], ["strategy", ["allreduce", "node-based"]]]}
ROWS = [
    _row("allreduce", "ib-edr", 8, 0.100, 0.010), _row("allreduce", "ib-hdr", 8, 0.099, 0.009),
    _row("allreduce", "ib-edr", 64, 0.200, 0.050), _row("allreduce", "ib-hdr", 64, 0.1972, 0.0472),
    _row("node-based", "ib-edr", 8, 0.090, 0.0), _row("node-based", "ib-hdr", 8, 0.090, 0.0),
    _row("node-based", "ib-edr", 64, 0.150, 0.020), _row("node-based", "ib-hdr", 64, 0.1503, 0.020),
]


def test_each_neighbouring_pair_is_stated_at_the_largest_node_count():
    out = answers(SWEEP, ROWS)
    # (0.1972 - 0.200) / 0.200 = -1.4 %; node-based moves 0.2 % < 0.5 %: unchanged
    assert out[0] == ("inter=ib-hdr instead of inter=ib-edr: allreduce 1.4% faster (exposed communication 50.0 ms -> "
                      "47.2 ms); node-based unchanged (at nodes=64).")
    # nodes: samples/s 64*64/0.2 over 64*8/0.1 = 4.0x for 8x the ranks: 50 % of linear
    assert out[1] == ("nodes=64 instead of nodes=8: allreduce 4.00x the samples/s (50% of linear); node-based "
                      "4.80x the samples/s (60% of linear) (at inter=ib-edr).")


def test_assumptions_are_the_lines_every_point_shares():
    assert assumptions(ROWS) == ["shared line"]


def test_the_busiest_individual_link_is_named_as_the_cause():
    from simcomm.whatif.summary import findings

    rows = [dict(r, busiest_links=[{"link": "edge0 -> agg0", "class": "ib-edr-os4", "util": 0.85 if i == 2 else 0.3}],
                 util_infiniband=0.2, time_per_sample_s=r["iteration_s"] / 64, inter_used=r["inter"])
            for i, r in enumerate(ROWS)]
    text = " ".join(findings(SWEEP, rows))
    assert ("The busiest single link is edge0 -> agg0 (ib-edr-os4), busy 85% of the iteration for allreduce at 64 "
            "nodes on ib-edr; it is saturated: adding bandwidth there pays off.") in text


def test_a_point_reports_its_busiest_links():
    from simcomm.whatif.point import evaluate

    row = evaluate({"strategy": "allreduce", "nodes": 8, "oversubscription": 4.0})
    links = row["busiest_links"]
    assert len(links) == 3 and all(0 < x["util"] <= 1 for x in links)
    assert links[0]["class"].startswith("ib-edr-os4")  # the tapered uplink, not a NIC or PCIe link


def test_the_bottleneck_that_grew_is_named_from_per_link_loads():
    """A 4:1 trunk: exposed communication 1 ms -> 3.5 ms; the trunk's load 0.32 x 42 ms = 13.44 ms against
    0.085 x 39.6 ms = 3.366 ms before (3.99x), 13.44 / 14 ms = 96 % of the communication time, while it is
    busy only 32 % of the iteration: the summary names it and calls it saturated while communication runs."""
    from simcomm.whatif.summary import findings

    def point(os, it, exposed, hidden, link, util):
        return {"status": "ok", "strategy": "allreduce", "oversubscription": os, "nodes": 16, "iteration_s": it,
                "comm_exposed_s": exposed, "comm_hidden_s": hidden, "samples_per_s": 1.0 / it, "n_ranks": 128,
                "time_per_sample_s": it, "busiest_links": [{"link": link, "class": "ib-ndr" + ("-os4" if os > 1 else ""),
                                                             "util": util}]}

    sweep = {"axes": [["oversubscription", [1, 4]], ["strategy", ["allreduce"]]]}
    rows = [point(1, 0.0396, 0.001, 0.0103, "edge0 -> agg0", 0.085), point(4, 0.042, 0.0035, 0.0105, "agg6.2 -> edge6.1", 0.32)]
    text = " ".join(findings(sweep, rows))
    assert ("the bottleneck that grew is agg6.2 -> edge6.1 (ib-ndr-os4), busy 13.4 ms per iteration against 3.4 ms on "
            "the other setting's busiest link (4.0x), 96% of the 14.0 ms that communication runs") in text
    assert "saturated while communication runs" in text and "comes from latency" not in text
    # a link busy for a small part of the communication is not called the bottleneck
    calm = [dict(rows[0]), dict(rows[1], busiest_links=[{"link": "x -> y", "class": "ib-ndr-os4", "util": 0.1}])]
    text = " ".join(findings(sweep, calm))
    assert "bottleneck that grew" not in text and "comes from latency" in text
