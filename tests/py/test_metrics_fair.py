"""The metrics' rules as users see them in report.json (scenarios/README.md "Metrics"): full
convergence over the affected flows, one rule for every CCL, no made-up value, bad input for an
expectation the run can never measure. Real short runs, as root, in their own namespaces."""
import glob
import json
import os
import textwrap

import pytest

from test_run import check_report_shape, fl, goodput_losses, namespaces_possible, position_of, timeseries  # noqa: F401,E501 (fixtures)


def rank_ops(out_dir):
    """rank -> [(index, start_ns, end_ns)] of its ok collectives, from the rank logs (the
    ranks' own CLOCK_MONOTONIC times), and the workload's time zero on that clock (from the
    first collective, which timeseries.csv gives relative to it)."""
    ops = {}
    for path in glob.glob(os.path.join(out_dir, "ranks", "rank*.jsonl")):
        with open(path) as f:
            for rec in map(json.loads, (line for line in f if line.strip())):
                if rec.get("type") == "op" and rec.get("ok"):
                    rank = int(os.path.basename(path)[len("rank"):-len(".jsonl")])
                    ops.setdefault(rank, []).append((rec["index"], rec["start_ns"], rec["end_ns"]))
    first = timeseries(out_dir)[0]
    assert first[0] == 0, first
    t0 = min(s for v in ops.values() for i, s, _ in v if i == 0) - round(first[1] * 1e9)
    return ops, t0


def events(out_dir):
    with open(os.path.join(out_dir, "events.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def write(tmp_path, name, text):
    path = str(tmp_path / name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


def test_full_convergence_is_the_last_affected_flow_from_the_report_s_own_data(fl):
    sc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios",
                      "link_down_rail0.yaml")
    r = fl.run(sc)
    # The scenario expects survival and no wrong result, which ftccl promises: exit 0.
    assert r.returncode == 0, r.stdout + r.stderr
    rep = fl.report()
    check_report_shape(rep, sc)
    assert rep["outcome"] == "survived"
    [f] = rep["faults"]
    [pf] = rep["per_fault"]
    assert pf["convergence"] == "path_events", pf
    assert pf["never_converged"] is False
    counted = [x for x in pf["flows"] if x["counted"]]
    assert counted, pf["flows"]
    # Every flow crosses the fault: on rail 0, with an end on host 1 (rank 1).
    for x in pf["flows"]:
        assert x["path"] == 0 and 1 in (x["rank"], x["peer"]), x
        assert x["down_s"] >= f["applied_s"], x
    # Every listed flow is in the library's own event log: its down is that rank's first
    # path_down on the path at or after the fault, its resume that rank's first resumed event
    # after the down (two ranks: a rank's only peer is the other one).
    ev = events(fl.out)
    for x in pf["flows"]:
        assert x["peer"] == 1 - x["rank"], x
        downs = [e["t_s"] for e in ev if e.get("kind") == "path_down" and e.get("rank") == x["rank"]
                 and e.get("path") == x["path"] and e["t_s"] >= f["applied_s"]]
        assert downs and x["down_s"] == pytest.approx(min(downs), abs=1e-6), (x, downs)
        ups = [e["t_s"] for e in ev if e.get("kind") == "resumed" and e.get("rank") == x["rank"]
               and e["t_s"] >= x["down_s"]]
        if x["resumed_s"] is None:
            assert not ups or min(ups) > rep["window"]["end_s"], (x, ups)
        else:
            assert x["resumed_s"] == pytest.approx(min(ups), abs=1e-6), (x, ups)
    # The numbers follow from those flows.
    applied = f["applied_s"]
    first = min(x["resumed_s"] for x in counted) - applied
    full = max(x["resumed_s"] for x in counted) - applied
    assert pf["failover_first_ms"] == pytest.approx(first * 1000, abs=1e-3)
    assert pf["failover_latency_ms"] == pytest.approx(full * 1000, abs=1e-3)
    assert pf["failover_latency_ms"] >= pf["failover_first_ms"]
    assert pf["detection_ms"] == pytest.approx(
        (min(x["down_s"] for x in pf["flows"]) - applied) * 1000, abs=1e-3)
    # The library-neutral figure is there too, and is an upper bound of full convergence.
    assert pf["progress_ms"] is not None and pf["progress_ms"] > 0
    fl.assert_nothing_left(rep["environment"]["run_id"])


# Serial: it bounds throughput (70 % of the baseline held for 500 ms), which another run's
# ranks on these cores pull under: in the parallel pass it failed 2 of 3 clean-clone runs on
# 2026-12-07 (Gloo at 0.838 and 0.883 of its baseline, never 500 ms at 70 %), code unchanged.
@pytest.mark.serial
def test_gloo_fault_on_a_rail_it_does_not_use_costs_nothing(fl, tmp_path):
    # Gloo carries data on rail 0 only: a link_down on rail 1 must neither read as a goodput
    # loss (it did: 28.7 % when the time between collectives counted as lost) nor lower the
    # level it has to recover to (the capacity model counts Gloo's real rail set).
    sc = write(tmp_path, "gloo_rail1.yaml", """\
        name: py-gloo-unused-rail
        seed: 3
        topology: {hosts: 2, ranks_per_host: 1, rails: 2, rail_gbps: 1}
        ccl: gloo
        workload: {op: allreduce, dtype: f32, bytes: 1MiB, duration: 4s, warmup: 500ms}
        faults:
          - {id: r1, at: 1500ms, type: link_down, target: {host: 0, rail: 1}}
        expect:
          outcome: survive
          failover_latency_ms: {max: 2000}
          recovery: {pct: 70, within_ms: 2000, sustain_ms: 500}
        """)
    r = fl.run(sc)
    # Every expectation holds: it survives, converges and recovers in time.
    assert r.returncode == 0, r.stdout + r.stderr
    rep = fl.report()
    check_report_shape(rep, sc)
    assert rep["outcome"] == "survived"
    assert rep["window"]["rails_used"] == [0]
    [f] = rep["faults"]
    [pf] = rep["per_fault"]
    # The loss is the definition's over this run's own collectives, not the regression's
    # reading (time between collectives counted as lost, 28.7 % here once): a bound on the
    # value alone cannot tell the two apart on a loaded machine, whose noise is of that size.
    e = min(f["reverted_s"] or rep["window"]["end_s"], rep["window"]["end_s"])
    cycle_loss, own_loss = goodput_losses(timeseries(fl.out), f["applied_s"], e, 0.5)
    assert pf["goodput_loss_pct"] == pytest.approx(cycle_loss, abs=0.05), (pf, cycle_loss)
    if abs(cycle_loss - own_loss) > 5:
        assert abs(pf["goodput_loss_pct"] - own_loss) > 5, (pf, own_loss)
    # Permanent, on an unused rail: the expected level is the whole baseline (70 % of it here,
    # for a loaded machine's jitter), and it is met.
    assert pf["recovery_ms"] is not None, pf
    assert pf["degraded_ratio"] is not None and pf["degraded_ratio"] > 0.6, pf
    # No path events: detection and first-path are null; full convergence from progress.
    assert pf["detection_ms"] is None and pf["failover_first_ms"] is None
    assert pf["convergence"] == "collective_progress"
    assert pf["flows"] == []
    # Progress from the rank logs: the fault is on host 0, whose one rank is rank 0; progress
    # is when rank 0 completed the first collective it started at or after the fault.
    ops, t0 = rank_ops(fl.out)
    a_ns = t0 + f["applied_s"] * 1e9
    end_ns = t0 + rep["window"]["end_s"] * 1e9
    ends = [e for _, s, e in ops[0] if s >= a_ns and e <= end_ns]
    assert ends, "rank 0 completed no collective after the fault"
    assert pf["progress_ms"] == pytest.approx((min(ends) - a_ns) / 1e6, abs=0.005), pf
    assert pf["failover_latency_ms"] == pf["progress_ms"]
    [check] = [c for c in rep["expectations"] if c["name"] == "failover_latency_ms"]
    assert check["pass"] is True and check["limit"] == {"max": 2000}
    fl.assert_nothing_left(rep["environment"]["run_id"])


def test_an_expectation_the_overriding_ccl_cannot_measure_is_bad_input(fl, tmp_path):
    sc = write(tmp_path, "detect.yaml", """\
        name: py-detect
        topology: {hosts: 2, ranks_per_host: 1, rails: 2}
        workload: {op: allreduce, bytes: 1MiB, duration: 3s}
        faults:
          - {id: d, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 500ms}
        expect:
          failover_first_ms: {max: 100}
        """)
    r, left = fl.run_refused(sc, "--ccl", "gloo")
    assert r.returncode == 2, r.stdout + r.stderr
    line, col = position_of(sc, "failover_first_ms:", "{max")
    assert f"{sc}:{line}:{col}: expect.failover_first_ms needs CCL path events, which gloo" \
        in r.stderr, r.stderr
    assert "--ccl gloo" in r.stderr
    assert left == [], f"namespaces created by a refused run: {left}"
    assert not os.path.exists(os.path.join(fl.out, "ranks"))
    assert root_state_unchanged(fl)


def root_state_unchanged(fl):
    from test_run import root_state
    return root_state() == fl.before


def test_wrong_results_without_checking_is_bad_input(fl, tmp_path):
    sc = write(tmp_path, "unchecked.yaml", """\
        name: py-unchecked
        topology: {hosts: 2, ranks_per_host: 1, rails: 2}
        workload: {op: allreduce, bytes: 1MiB, duration: 3s, check: false}
        expect:
          wrong_results: 0
        """)
    r = fl.faultline("validate", sc)
    assert r.returncode == 2, r.stdout + r.stderr
    line, col = position_of(sc, "wrong_results:", "0")
    assert f"{sc}:{line}:{col}: expect.wrong_results needs the results checked" in \
        r.stdout + r.stderr
