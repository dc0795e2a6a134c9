"""ftccl under real network faults, through `faultline run`: the data path must detect the
fault (from the link state, a peer's notice or missing acknowledgements), move its traffic to
the surviving rail without losing or corrupting anything, and say so in its events."""
import csv
import json
import re
import os

import pytest

from test_run import fl, namespaces_possible, scenario  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FINDINGS = os.path.join(ROOT, "scenarios", "findings")


def ccl_events(out_dir):
    with open(os.path.join(out_dir, "events.jsonl")) as f:
        return [e for e in map(json.loads, f) if e["type"] == "ccl_event"]


def run_and_check(fl, name):  # noqa: F811
    r = fl.run(scenario(name))
    # Each scenario expects survival and no wrong result, which is what is checked below: its
    # verdict must be PASS (exit 0).
    assert r.returncode == 0, r.stdout + r.stderr
    rep = fl.report()
    assert rep["outcome"] == "survived", rep["outcome"]
    assert rep["correctness"]["wrong"] == 0
    fault = rep["faults"][0]
    assert fault["applied_s"] is not None and fault["reverted_s"] is not None, fault
    fl.assert_nothing_left(rep["environment"]["run_id"])
    return rep


# Serial: bounds detection to 100/250 ms, a latency that another run's ranks on these cores stretch.
@pytest.mark.serial
@pytest.mark.parametrize("name,max_detect_ms", [
    ("link_down_rail0.yaml", 100),     # the rank's own link goes down: netlink
    ("link_down_switch.yaml", 100),    # carrier loss on one side, the peer's notice on the other
    ("blackhole_rail0.yaml", 250),     # silence on one path while the peer answers on another
])
def test_fault_is_detected_and_survived(fl, name, max_detect_ms):  # noqa: F811
    rep = run_and_check(fl, name)
    m = rep["per_fault"][0]
    assert m["detection_ms"] is not None, "ftccl emitted no path_down event for the fault"
    assert 0 <= m["detection_ms"] <= max_detect_ms, m
    assert m["failover_latency_ms"] is not None, "no chunk was acknowledged after the fault"
    assert m["failover_latency_ms"] <= max_detect_ms + 500, m
    rail = rep["faults"][0]["target"]["rail"]
    applied = rep["faults"][0]["applied_s"]
    kinds = [e["kind"] for e in ccl_events(fl.out) if e["path"] == rail and e["t_s"] >= applied]
    assert "path_down" in kinds and "migrated" in kinds, kinds
    # The path comes back once the fault is reverted.
    assert "path_up" in kinds, kinds


def path_events(out_dir, kind, rank=None, path=None, after=0.0):
    return [e for e in ccl_events(out_dir)
            if e["kind"] == kind and e["t_s"] >= after
            and (rank is None or e["rank"] == rank) and (path is None or e["path"] == path)]


def test_reset_of_every_connection_is_survived_by_reconnecting(fl):  # noqa: F811
    # Both rails' connections destroyed at once: nothing is left to fail over to, so only
    # re-establishing them keeps the job alive.
    rep = run_and_check(fl, "conn_reset_both.yaml")
    applied = min(f["applied_s"] for f in rep["faults"])
    for rail in (0, 1):
        downs = path_events(fl.out, "path_down", path=rail, after=applied)
        ups = path_events(fl.out, "path_up", path=rail, after=applied)
        assert downs, f"no path_down on rail {rail} after the reset"
        assert ups, f"rail {rail} was never re-established"
    # Collectives completed after the reset.
    completed_after = [c for c in collectives(fl.out) if float(c["start_s"]) > applied + 0.2]
    assert completed_after, "no collective completed after the connections were reset"


def collectives(out_dir):
    with open(os.path.join(out_dir, "timeseries.csv")) as f:
        return list(csv.DictReader(f))


def test_fast_flapping_rail_is_damped(fl):  # noqa: F811
    rep = run_and_check(fl, "link_flap_fast.yaml")
    applied = rep["faults"][0]["applied_s"]
    # 30 flaps in 3 s: without damping every one of them would be a failback on each rank's
    # rail-0 path. The hold-down doubles with every flap, so only a handful get through.
    for rank in (0, 1):
        failbacks = path_events(fl.out, "failback", rank=rank, path=0, after=applied)
        downs = path_events(fl.out, "path_down", rank=rank, path=0, after=applied)
        assert downs, f"rank {rank} never saw rail 0 go down"
        assert len(failbacks) <= 6, (rank, [round(e["t_s"] - applied, 3) for e in failbacks])
    # And the rail is back in use on both ranks once the flapping is over: at the latest when
    # the longest hold-down (failback_holddown_max, 5 s) after the last flap has passed.
    # (A rank whose path came back shortly before the last flap and was not hit by it is
    # already back: its last failback is then before the end of the flapping.)
    end = rep["faults"][0]["reverted_s"]
    for rank in (0, 1):
        changes = [e for e in ccl_events(fl.out) if e["rank"] == rank and e["path"] == 0
                   and e["kind"] in ("path_down", "failback") and e["t_s"] >= applied]
        assert changes and changes[-1]["kind"] == "failback", \
            f"rank {rank}'s rail 0 is not in use after the flapping: {changes[-1:]}"
        assert changes[-1]["t_s"] - end <= 5.0 + 1.0, (rank, round(changes[-1]["t_s"] - end, 3))


def downs_counted(out_dir, rank, path, after=0.0):
    """The downs damping counted, as each path_up of `rank` on `path` states them."""
    counts = []
    for e in path_events(out_dir, "path_up", rank=rank, path=path, after=after):
        m = re.search(r"\((\d+) down in the last \d+ ms\)", e["reason"])
        assert m, e
        counts.append(int(m.group(1)))
    return counts


# Serial: the flap's schedule is the test's premise. In the parallel pass of a loaded
# clean-clone check the runner stood still for 3.3 s (its rail sampler wrote nothing from 6.72
# to 9.98 s while the ranks ran 3182 collectives; likely rtnetlink's lock, which both it and the
# flap's link changes take and another test's namespace teardown can hold), the last two cycles
# were applied back to back at 10 s, and the port went down four times instead of five.
@pytest.mark.serial
def test_each_outage_of_a_port_that_keeps_failing_counts_once(fl):  # noqa: F811
    rep = run_and_check(fl, "link_down_every_2s_rail0.yaml")
    applied = rep["faults"][0]["applied_s"]
    # The flap as the runner played it (report.json's cycles): five downs of 700 ms, each
    # followed by 1.3 s up. A runner held off the CPU plays transitions late, back to back; the
    # checks below then judge another scenario than the file's.
    cycles = rep["faults"][0]["cycles"]
    assert len(cycles) == 5 and all(c["down_s"] is not None and c["up_s"] is not None
                                    for c in cycles), cycles
    for c, nxt in zip(cycles, cycles[1:] + [None]):
        assert abs(c["down_s"] - c["down_scheduled_s"]) < 0.1, c
        assert abs(c["up_s"] - c["up_scheduled_s"]) < 0.1, c
        assert abs(c["up_s"] - c["down_s"] - 0.7) < 0.1, c
        if nxt:
            assert abs(nxt["down_s"] - c["up_s"] - 1.3) < 0.1, (c, nxt)
    # Host 0's rank sees its own port go down five times, 2 s apart. Each path_up says how
    # many downs damping counted within its 5 s window: one per outage is at most 3 here. The
    # code that also counted the reset of the connection it had asked the peer to replace
    # said 4 and 6, and held the path out from the third outage to the end of the run.
    counts = downs_counted(fl.out, rank=0, path=0, after=applied)
    assert counts and max(counts) <= 3, counts
    # The five outages, as the kernel told host 0's rank (a "rail 0 link down" each).
    outages = [e for e in path_events(fl.out, "path_down", rank=0, path=0, after=applied)
               if e["reason"].endswith("rail 0 link down")]
    assert len(outages) == 5, [round(e["t_s"] - applied, 3) for e in outages]
    # And with a hold-down of at most 400 ms against 1.3 s up, the rail carries data again
    # after every outage, before the next one, on both ranks.
    for rank in (0, 1):
        failbacks = path_events(fl.out, "failback", rank=rank, path=0, after=applied)
        assert len(failbacks) == 5, (rank, [round(e["t_s"] - applied, 3) for e in failbacks])
        ends = [e["t_s"] for e in outages[1:]] + [float("inf")]
        for down, nxt in zip(outages, ends):
            assert any(down["t_s"] < f["t_s"] < nxt for f in failbacks), (rank, down["t_s"])


def test_a_peer_connecting_afresh_after_an_outage_is_not_another_down(fl):  # noqa: F811
    rep = run_and_check(fl, "link_flap_host_then_switch_side_rail1.yaml")
    heal = max(f["reverted_s"] for f in rep["faults"])
    # Four outages of host 0's rail 1: each path_up of host 0's rank counts at most four
    # downs within the 5 s window. Counting the reset of the connection its peer replaced
    # after an outage as a down said 6 and held the rail out past the end of the run.
    counts = downs_counted(fl.out, rank=0, path=1)
    assert counts and max(counts) <= 4, counts
    # With four downs the hold-down is 800 ms after the last: rail 1 carries again within a
    # second and a half of the heal on both ranks.
    for rank in (0, 1):
        back = path_events(fl.out, "failback", rank=rank, path=1, after=heal)
        assert back and back[0]["t_s"] - heal <= 1.5, (rank, heal, back[:1], counts)


# Serial: bounds a stall, which another run's ranks on these cores stretch.
@pytest.mark.serial
def test_flap_storm_on_one_rail_costs_only_its_share(fl):  # noqa: F811
    rep = run_and_check(fl, "link_flap_storm_rail1.yaml")
    # Collectives take ~30 ms on two rails, ~60 ms on one. A peer that kept sending into the
    # flapping rail until its suspicion timeout (stretched to ~500 ms by the flaps) stalled
    # 200-750 ms at load 4-5; failing over on the peer's notice or on being overtaken by the
    # surviving rail stalls 75-100 ms there. The bound leaves room for a loaded machine.
    stall = rep["per_fault"][0]["stall_ms"]
    assert stall is not None and stall <= 200, rep["per_fault"][0]


# Serial: bounds a stall and a reaction time, which another run's ranks on these cores stretch.
# The second file's link is up for less than ftccl's link_settle between the two downs: both
# downs count all the same. A rank that counted an up only once its settle time ended saw one
# down there every time, and once in CI in the first file too (its settle timer most likely
# read late: the settle ends 10 ms before the second down and is read on a 10 ms tick).
@pytest.mark.serial
@pytest.mark.parametrize("scenario", ["link_flap_then_other_rail_down.yaml",
                                      "link_flap_faster_than_settle_then_other_rail_down.yaml"])
def test_damped_rail_is_taken_back_when_the_other_rail_goes_down(fl, scenario):  # noqa: F811
    rep = run_and_check(fl, scenario)
    other = next(f for f in rep["faults"] if f["id"] == "other")
    applied = other["applied_s"]
    released = []
    for rank in (0, 1):
        # Rail 0 flapped twice and is held down (damping) when rail 1 goes down: it answers
        # probes, and it is the only path left, so it must be back in use at once, not when
        # its hold-down ends ~130 ms later. Measured from the rank's own notice of rail 1's
        # down: 0 to 19 ms on the fixed code at load 10 (a probe's round trip); 0 to 70 ms in
        # 16 idle runs, the long ones where what the socket sent into the flap waits for its
        # retransmission and the probe's answer queues behind it (after 30 ms unanswered, a
        # socket that waits for its first retransmission is connected afresh; before that,
        # 80 ms was seen, and the first retransmission is up to 200 ms away). The hold-down
        # honoured regardless fails the `released` check below.
        downs = path_events(fl.out, "path_down", rank=rank, path=1, after=applied - 0.01)
        assert downs, f"rank {rank} never saw rail 1 go down"
        notice = downs[0]["t_s"]
        # A rank that noticed late (host 1's, told by its peer) may find rail 0 back already.
        before = [e for e in ccl_events(fl.out) if e["rank"] == rank and e["path"] == 0
                  and e["kind"] in ("path_down", "path_up") and e["t_s"] < notice]
        if before and before[-1]["kind"] == "path_up":
            continue
        ups = path_events(fl.out, "path_up", rank=rank, path=0, after=notice)
        assert ups, f"rank {rank}'s rail 0 never came back"
        assert ups[0]["t_s"] - notice <= 0.120, (rank, ups[0], downs[0])
        released += [e for e in ups[:1] if "released from its hold-down" in e["reason"]]
    # At least host 0's rank counted both flaps (its own link events) and says why it took
    # the path back early.
    assert released, "no rank said it released rail 0 from its hold-down"
    # The stall around rail 1's fault: the fixed code stalled 93 to 335 ms at load 10-11 on
    # 2 cores (a one-rail allreduce of 1 MiB takes ~20 ms and detection a few ms there; the
    # rest is the loaded machine and the rails' TCP recovery after the flaps). 700 ms is about
    # twice the worst, for a machine as loaded again; it catches a path left out until its
    # connection is redialled after a second of silence, not a stall of one retransmission
    # timeout (the reaction time above is the finer check).
    stall = next(f for f in rep["per_fault"] if f["id"] == "other")["stall_ms"]
    assert stall is not None and stall <= 700, rep["per_fault"]


def test_a_path_back_in_use_repeats_the_notice_of_a_path_still_down(fl):  # noqa: F811
    # scenarios/findings/ftccl/path_down_notice_waits_on_a_dead_path.yaml: rail 1 blackholed,
    # then host 0's rail 0 down on the host side while host 0's rank has no working path; its
    # notice of rail 0's down waited in a dead path's queue. Host 1's rank must stop using rail
    # 0 while rail 0 is still down, soon after rail 1 is back in use at host 0's rank. Before the
    # fix it moved its chunks only on the notice that arrived with rail 0's link, in about
    # half the runs (the others judged rail 0 by themselves).
    r = fl.run(os.path.join(FINDINGS, "ftccl", "path_down_notice_waits_on_a_dead_path.yaml"))
    assert r.returncode == 0, r.stdout + r.stderr
    rep = fl.report()
    assert rep["outcome"] == "survived" and rep["correctness"]["wrong"] == 0
    down = next(f for f in rep["faults"] if f["id"] == "down")
    back = path_events(fl.out, "path_up", rank=0, path=1, after=down["applied_s"])
    assert back, "host 0's rank never took rail 1 back"
    left = path_events(fl.out, "path_down", rank=1, path=0, after=down["applied_s"])
    assert left and left[0]["t_s"] < down["reverted_s"], (back[0], left[:1], down)
    # Within 100 ms of the path's return (the notice goes out with it: under 0.1 ms apart in 6
    # idle runs; the margin is for a loaded machine).
    assert left[0]["t_s"] - back[0]["t_s"] <= 0.1, (back[0], left[0])


def test_throttled_rail_gets_a_smaller_share(fl):  # noqa: F811
    rep = run_and_check(fl, "bandwidth_rail0.yaml")
    fault = rep["faults"][0]
    applied, reverted = fault["applied_s"], fault["reverted_s"]
    # Host 1 sends on the throttled rail: its rank must shift the striping away from rail 0
    # soon after the fault, from the throughput it measured, and back after the revert.
    during = [e for e in path_events(fl.out, "rebalanced", rank=1, after=applied) if e["t_s"] < reverted]
    assert during, "no rebalanced event while rail 0 was throttled"
    first = during[0]
    assert first["t_s"] - applied <= 1.0, first
    # (A rail whose TCP connection stalls under the throttle is out of the striping: 0%.)
    shares = {int(r): int(pct) for r, pct in re.findall(r"rail (\d+) (\d+)%", first["reason"])}
    assert 1 in shares and shares.get(0, 0) < shares[1], first["reason"]
    after = path_events(fl.out, "rebalanced", after=reverted)
    assert after, "the striping never returned to the healed rail"


# Serial: it bounds collective times, which another run's ranks on these cores stretch.
@pytest.mark.serial
def test_a_throttled_rail_is_seen_within_a_collective_or_two(fl):  # noqa: F811
    """A rail throttled to a tenth is measured again within tens of milliseconds, against its
    sibling, and what it holds is copied there. Before, its rate followed only periods of
    100 ms in which it was pressed (blocked, or holding more than a chunk on average), which a
    rail given a chunk or two per step of a ring never is: 12 collectives in a row took 43 ms,
    and the throttled steady state read 21 ms, 3.5 x the baseline (one rail of two: about 2)."""
    rep = run_and_check(fl, "bandwidth_rail0_1mib.yaml")
    fault = rep["faults"][0]
    applied, reverted = fault["applied_s"], fault["reverted_s"]
    with open(os.path.join(fl.out, "timeseries.csv")) as f:
        ops = [(float(x["start_s"]), float(x["duration_ms"])) for x in csv.DictReader(f)]
    base = sorted(d for s, d in ops if s < applied)
    b = base[len(base) // 2]  # about 6 ms
    steady = sorted(d for s, d in ops if applied + 0.5 <= s <= reverted - 0.1)
    assert len(steady) >= 50, len(steady)
    m = steady[len(steady) // 2]  # about 11.5 ms
    assert 1.4 * b < m <= 2.5 * b, (b, m)
    # Seeing it: at most three collectives in the 300 ms after the throttle take over 2.5 x
    # the steady state. (Later, the rail's probes for recovery, every second, still cost one
    # or two collectives of 40 to 95 ms in about one run in six: not asserted here, it is
    # issue 43's open work, bench/README.md's acceptance notes.)
    slow = [(round(s, 3), d) for s, d in ops
            if applied - 0.02 <= s <= applied + 0.3 and d > 2.5 * m]
    assert len(slow) <= 3, (m, slow)


# Serial: a rank descheduled for long on these two cores stalls its acknowledgements as a dead
# path would; the run judges the data path, not the machine's load.
@pytest.mark.serial
def test_fault_free_shaped_run_suspects_no_path(fl):  # noqa: F811
    """Every rail at its line rate, no fault: no path may be suspected. A probe's answer queued
    behind the peer's data on the same connection (over 100 ms on these rails) once read as a
    dead path, in one fault-free run of two, and moved chunks off a working rail."""
    r = fl.run(scenario("clean_shaped_2x2.yaml"))
    assert r.returncode == 0, r.stdout + r.stderr
    rep = fl.report()
    assert rep["outcome"] == "survived" and rep["correctness"]["wrong"] == 0
    assert rep["correctness"]["checked"] > 0, rep["correctness"]
    false = [e for e in ccl_events(fl.out) if e["kind"] in ("path_down", "migrated", "relay_on")]
    assert not false, false
    # Both rails carried the data (the check above means something only if they did).
    with open(os.path.join(fl.out, "rails.csv")) as f:
        rows = [x for x in csv.DictReader(f) if 2.0 <= float(x["t_s"]) <= 7.0]
    for col in ("h0_r0_tx_gbps", "h0_r1_tx_gbps", "h1_r0_tx_gbps", "h1_r1_tx_gbps"):
        got = [float(x[col]) for x in rows if x[col] != ""]  # "": a tick the sampler missed
        assert len(got) >= len(rows) / 2, (col, len(got), len(rows))
        mean = sum(got) / len(got)
        assert mean > 0.05, (col, mean)
    fl.assert_nothing_left(rep["environment"]["run_id"])


# A campaign's finding kept as a regression scenario (see its header): both rails go down,
# rail 0 comes back first and rank 1 connects it afresh. Rank 0 must read the old connection
# as broken, not as rank 1's process ending, and wait for the new one: every run survives.
# Before the fix 3 of 5 runs aborted ("lost every connection to rank 1"), so three runs miss
# it with a chance of about 6 %. Not serial: it bounds no time.
def test_redial_of_the_last_path_is_not_read_as_the_peer_ending(fl):  # noqa: F811
    r = fl.run(scenario("both_rails_down_rail0_back_first.yaml"), "--seeds", "3", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    reports = []
    for root, _, files in os.walk(fl.out):
        reports += [os.path.join(root, f) for f in files if f == "report.json"]
    assert len(reports) == 3, reports
    redialled = 0
    for path in reports:
        with open(path) as f:
            rep = json.load(f)
        assert rep["outcome"] == "survived", (path, rep["outcome"])
        assert rep["correctness"]["wrong"] == 0
        fl.assert_nothing_left(rep["environment"]["run_id"])
        # The case itself: rank 0 read the old rail-0 connection's reset while rail 1 was down.
        with open(os.path.join(os.path.dirname(path), "ranks", "rank0.err")) as f:
            log = f.read()
        assert "lost every connection" not in log
        redialled += "rank 1 rail 0 channel 0 failed (recv: Connection reset by peer)" in log
    assert redialled >= 1, "no run redialled rail 0: the scenario no longer makes the case"
