"""The emulated cluster: cleanup under failure, and calibration recovering the shaped rate.

Needs root and iproute2 (CI runs as root); skipped otherwise.
"""

import json

import pytest

from simcomm.calibrate.emulate import EmulatedCluster, emulation_available, list_namespaces

# Real shaped links and real TCP: timing-sensitive, so these run in the serial pass.
pytestmark = [pytest.mark.skipif(emulation_available() is not None, reason=str(emulation_available())),
              pytest.mark.serial]

def test_namespaces_are_removed_when_the_body_raises():
    cl = EmulatedCluster(3, "100Mb/s", topology="two-tier", leaves=2)
    with pytest.raises(ZeroDivisionError), cl:
        made = cl.namespaces
        assert len(made) == 1 + 2 + 3 and all(ns.startswith("sc-") for ns in made)
        assert set(made) <= set(list_namespaces())
        raise ZeroDivisionError  # an error inside the block: the namespaces must still go
    assert not [ns for ns in list_namespaces() if ns.startswith(cl.prefix)]


def test_namespaces_are_removed_when_the_run_is_terminated():
    # SIGTERM (timeout, a cancelled CI job) must unwind like an exception, not leave namespaces
    import signal
    import subprocess
    import sys

    code = ("import sys, time\n"
            "from simcomm.calibrate.emulate import EmulatedCluster\n"
            "with EmulatedCluster(2, '100Mb/s') as cl:\n"
            "    print(cl.prefix, flush=True)\n"
            "    time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    prefix = ""
    try:
        prefix = p.stdout.readline().strip()
        assert prefix.startswith("sc-") and [ns for ns in list_namespaces() if ns.startswith(prefix)]
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        left = [ns for ns in list_namespaces() if prefix and ns.startswith(prefix)]
        for ns in left:  # the test itself never leaves any behind, even when it fails
            subprocess.run(["ip", "netns", "del", ns], check=False)
    assert not left


def test_flow_queueing_builds_one_class_per_host_pair():
    import subprocess

    cl = EmulatedCluster(3, "200Mb/s", qdisc="fq", mtu=9000)
    with cl:
        assert cl.describe()["qdisc"].startswith("fq") and cl.describe()["mtu"] == 9000
        out = subprocess.run(["ip", "netns", "exec", cl.hosts[0].netns, "tc", "class", "show", "dev", "eth0"],
                             capture_output=True, text=True, check=True).stdout
        # 3 hosts: 6 ordered pairs, plus the root, priority and shared-FIFO classes
        assert out.count("class htb") == 6 + 3
    assert not [ns for ns in list_namespaces() if ns.startswith(cl.prefix)]


def test_namespaces_are_removed_when_setup_fails():
    cl = EmulatedCluster(2, "100Mb/s", burst=-5)  # tc refuses a negative bucket mid-build
    with pytest.raises(RuntimeError, match="tc "), cl:
        pass
    assert not [ns for ns in list_namespaces() if ns.startswith(cl.prefix)]


@pytest.mark.slow
@pytest.mark.parametrize("mbit", [100, 200])
def test_calibration_recovers_the_shaped_rate(mbit):
    """One run, no retries: the expectation is this run's own stream probe.

    The stream probe (bench._stream: 4 back-to-back 1 MiB messages minus one, so latency
    and TCP's ramp-up cancel) measures what the shaped link sustains during this very run,
    under this run's load; the ping-pong fit is held to it.  The band is asymmetric on
    purpose: a ping-pong leaves the pipe empty after every message, so a host delay (a
    vCPU waking, preemption by another process) can only add time to it and lower the
    fitted rate, while the stream keeps the pipe full and hides such delays.  Below: up
    to 4 % (the robust fit takes the Theil-Sen slope of the large sizes, which cancels the
    per-message ramp that made 256 KB-1 MB ping-pongs 1.5-3.8 % slow; measured
    -0.8...+0.9 % on 2026-11-26 at load 2).  Above: 2 %, the stream's own timer noise
    (+0.7 % seen at 100 Mb/s, where the bucket's first burst shortens t_K), over the higher of the stream and
    the shaped rate (a busy CPU can slow the stream more than the ping-pongs).  The stream is
    held to the shaped goodput (rate x 1448/1514) from above only (2 %): an emulated link can only
    lose rate to the CPU, never gain it, and on a busy machine it does lose some.
    """
    from simcomm.calibrate.accept import shaped_goodput
    from simcomm.calibrate.bench import BenchSpec
    from simcomm.calibrate.launch import fit_record, launch_emulated

    spec = BenchSpec(p2p_sizes=(1024, 16384, 65536, 262144, 1048576), coll_sizes=(), repeats=3, collectives=())
    with EmulatedCluster(2, f"{mbit}Mb/s") as cl:
        rec = launch_emulated(cl, spec, limit=120)
    d = rec["p2p"]["inter"]
    fit = fit_record(rec)[0]["inter"]
    stream = d["stream"]["goodput_Bps"]
    assert 1 <= len(d["rounds"]["bandwidths_Bps"]) <= spec.rounds
    # The stream can only lose rate to the CPU, never gain it: above, its timer noise (2 %); below, whatever
    # this machine's load takes from the emulator itself (-4.7 % at 200 Mb/s under two busy loops on the 2
    # cores), which tests the emulator, not the fit: the fit is held to this same run's stream just below.
    shaped = shaped_goodput(mbit * 1e6 / 8)
    assert 0.5 <= stream / shaped <= 1.02
    # The link's true rate lies between this run's stream (which can only lose rate to a busy CPU) and the shaped
    # goodput: the fit may be up to 4 % under the stream (a ping-pong's host delays only add time) and at most
    # the stream's 2 % timer noise over the higher of the two (under two busy loops the stream lost 5.5 % at
    # 200 Mb/s while the ping-pongs lost 2.3 %: the fit was 3.4 % over the stream, 2.3 % under the shaped rate).
    assert stream * 0.96 <= fit.bandwidth <= max(stream, shaped) * 1.02
    times = d["samples"][0]  # the 1 KB one-way times of every round
    # alpha is the fit's intercept, clamped at 0 (fit.py), and never above a measured 1 KB time's worst.
    # No tighter band: at 100 Mb/s a 1 KB message is ~82 us of serialisation, more than the fastest 1 KB
    # time (the token bucket's burst sends it faster than the rate), so the 1 KB times are not latency
    # and the intercept is poorly pinned by them: two runs on 2026-11-26 fitted 2.9 us and 66 us against
    # fastest 1 KB times of 69 us and 54 us, with the bandwidth within 1 % both times.
    assert 0 <= fit.alpha <= max(times)


@pytest.mark.slow
def test_the_cli_reproduces_the_accuracy_setup(tmp_path, capsys):
    """--mtu, --qdisc, --burst, --trunk-rate, --leaves reach the emulator and the record.

    (--ranks-per-host is passed through in test_calibrate_accept, without root: with two ranks
    per host on 2 shared cores the loopback ping-pong is scheduling noise at these sizes, and
    the fit refuses it, rightly.)  What is checked is where the flags go, not the fit: on a busy
    machine the fit's gates may rightly refuse this short run's line (a collective 31 % off under a load
    of 7; a fitted bandwidth at the shaped rate under two busy loops): --allow-misfit passes the first, and
    a refusal of another gate still keeps the record (``emu.refused.json``), which is read instead, so the
    test holds under load by design rather than by retry.
    """
    from simcomm.cli.app import main

    out = tmp_path / "emu.toml"
    code = main(["calibrate", "--emulate", "3", "--topology", "two-tier", "--leaves", "2", "--trunk-rate", "100Mb/s",
                 "--rate", "200Mb/s", "--mtu", "9000", "--qdisc", "fq", "--burst", "20KB",
                 "--sizes", "1KB,64KB,512KB,1MB", "--coll-sizes", "256KB", "--repeats", "2", "--rounds", "1",
                 "--allow-misfit", "--out", str(out), "--json"])
    err = capsys.readouterr().err
    record = out.with_suffix(".json")
    if code != 0:  # a gate of the fit refused this busy machine's timings: the measurements are kept beside
        assert code == 2 and "no link file written, the measurements are in" in err, err
        record = out.with_name("emu.refused.json")
        assert not out.exists()
    rec = json.loads(record.read_text())
    assert rec["cluster"] == {"hosts": 3, "topology": "two-tier", "leaves": 2, "rate_Bps": 25e6,
                              "trunk_rate_Bps": 12.5e6, "mtu": 9000, "qdisc": "fq on both veth ends",
                              "burst_B": 20000}
    assert rec["world"] == 3 and rec["nodes"] == ["h0", "h1", "h2"]
    assert set(rec["p2p"]) == {"inter", "cross"}  # h0 and h1 on leaf 0, h2 on leaf 1
    # a written record holds the fit's warnings; a refused one says why it was refused
    assert len(rec["load"]) == 2 and ("warnings" in rec if code == 0 else bool(rec["refused"]))
