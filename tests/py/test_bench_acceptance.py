"""bench/acceptance's table on hand-made run directories (--table DIR: no runs, no root): full
convergence beside first-path and the library-neutral progress_ms for every library, where each
full-convergence cell came from, a fault that never converged counted as never (+inf) and in
n/never, not dropped."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "acceptance")


def run_report(ccl, per_fault):
    """per_fault: [(first, full, never, progress, convergence)]; every fault applied."""
    r = {"schema": "faultline.report/v2", "scenario": {"name": "acc", "seed": 1}, "ccl": ccl,
         "outcome": "survived", "correctness": {"checked": True, "wrong": 0},
         "metrics": {"stall_ms": 50.0}, "window": {"baseline_op_ms": 10.0},
         "faults": [], "per_fault": [],
         "expectations": [{"name": "outcome", "pass": True}]}
    for i, (first, full, never, progress, source) in enumerate(per_fault):
        fid = f"f{i}"
        r["faults"].append({"id": fid, "type": "link_down", "applied_s": 1.0 + i,
                            "reverted_s": 1.5 + i})
        r["per_fault"].append({"id": fid, "detection_ms": 1.0 if source == "path_events" else None,
                               "failover_first_ms": first, "failover_latency_ms": full,
                               "never_converged": never, "progress_ms": progress,
                               "stall_ms": 5.0 * (i + 1), "convergence": source})
    return r


def test_first_and_full_with_never(tmp_path):
    ev, pr = "path_events", "collective_progress"
    runs = {
        # The third fault's full convergence came from collective progress (no crossing flow
        # was reported down), the others' from path events.
        "ftccl": [[(2.0, 10.0, False, 40.0, ev), (3.0, 20.0, False, 60.0, ev)],
                  [(None, 50.0, False, 50.0, pr)]],
        "gloo": [[(None, 300.0, False, 300.0, pr), (None, None, True, None, pr)],
                 [(None, 500.0, False, 500.0, pr)]],
    }
    for ccl, rs in runs.items():
        for i, pf in enumerate(rs):
            d = tmp_path / ccl / "link_down" / f"run{i}"
            d.mkdir(parents=True)
            (d / "report.json").write_text(json.dumps(run_report(ccl, pf)))
    p = subprocess.run([sys.executable, SCRIPT, "--table", str(tmp_path)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    head = lines[0].split()
    assert "first" in head and "full" in head and "n/never" in head, lines[0]
    assert "progress" in head and "from" in head, lines[0]
    rows = {l.split()[1]: l.split() for l in lines[1:] if l.startswith("link_down")}
    # ftccl: first 2, 3 -> p50 2.0, p99 3.0; full 10, 20, 50 -> p50 20.0, p99 50.0.
    # progress 40, 60, 50 -> p50 50.0, p99 60.0; full from two path-event faults, one progress.
    # Stall in baseline collective times: 5 and 10 ms over 10 ms, then 5 ms: 0.5, 1.0, 0.5.
    # (the cells before the last eight: stall/op p50, p99, floor p50, p99, worst abort; no
    # fault-free twins were run, so no floor)
    assert "stall/op" in head and "floor" in head, lines[0]
    assert rows["ftccl"][-13:-8] == ["0.50", "1.00", "-", "-", "-"], rows["ftccl"]
    assert rows["ftccl"][-8:] == ["2.0", "3.0", "20.0", "50.0", "3/0", "50.0", "60.0",
                                  "events:2,progress:1"], rows["ftccl"]
    # Gloo: no first-path figure; full 300, never, 500 -> p50 500.0, p99 never; progress the
    # same (a fault that never progressed counts as never there too), all from progress.
    assert rows["gloo"][-8:] == ["-", "-", "500.0", "never", "3/1", "500.0", "never",
                                 "progress:3"], rows["gloo"]


def test_out_that_cannot_be_made_is_bad_input(tmp_path):
    # --out names a folder the bench makes; where it cannot (a file in the way) that is bad
    # input, said in one line, before any run.
    blocker = tmp_path / "file"
    blocker.write_text("")
    p = subprocess.run([sys.executable, SCRIPT, "-n", "1", "--out", str(blocker / "runs")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--out" in p.stderr and "Not a directory" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr, p.stderr


def write_run(d, report, ends):
    d.mkdir(parents=True)
    (d / "report.json").write_text(json.dumps(report))
    (d / "timeseries.csv").write_text("index,start_s,end_s,duration_ms,bytes,busbw_gbps\n" + "".join(
        f"{i},{t - 0.005:.6f},{t:.6f},5.0,1048576,1.0\n" for i, t in enumerate(ends)))


def test_floor_reads_the_same_windows_in_the_fault_free_twin(tmp_path):
    # Completions every 10 ms over 4 s, baseline collective 10 ms. The faulted runs have an
    # 80 ms gap from 1.50 s inside their fault's window [1.5, 2.0]: stall 70 ms, 7 collectives.
    # The twin has a 30 ms gap from 1.70 s (inside that window: floor (30 - 10) / 10 = 2.0) and
    # a 60 ms gap from 3.0 s, outside it, which must not count.
    tick = [round(0.01 * i, 2) for i in range(1, 401)]
    faulted = [t for t in tick if not 1.50 < t < 1.58]
    twin = [t for t in tick if not 1.70 < t < 1.73 and not 3.00 < t < 3.06]
    scenario = {"file": "/src/scenarios/acceptance/link_flap.yaml", "name": "accept-link-flap[hosts=2]",
                "seed": 1}
    for i, reported in enumerate([70.0, 99.0]):  # the second run's report disagrees with its
        r = run_report("ftccl", [(1.0, 2.0, False, 3.0, "path_events")])  # completions
        r["scenario"] = scenario
        r["window"] = {"baseline_op_ms": 10.0, "start_s": 0.0, "end_s": 4.0}
        r["faults"][0].update(applied_s=1.5, reverted_s=2.0)
        r["per_fault"][0]["stall_ms"] = reported
        write_run(tmp_path / "ftccl" / "link_flap" / f"run{i}", r, faulted)
    t = {"schema": "faultline.report/v2", "outcome": "survived", "faults": [], "per_fault": [],
         "scenario": {"file": "x", "name": "fault-free-1[hosts=2]", "seed": 1},
         "window": {"baseline_op_ms": 10.0, "start_s": 0.0, "end_s": 4.0}}
    write_run(tmp_path / "floor" / "ftccl" / "fault-free-1" / "run0", t, twin)
    (tmp_path / "floor" / "twins.json").write_text(
        json.dumps({"link_flap.yaml": "fault-free-1"}))
    p = subprocess.run([sys.executable, SCRIPT, "--table", str(tmp_path), "--ccl", "ftccl"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    row = next(l.split() for l in lines if l.startswith("link_flap"))
    # stall/op 7.0 and 9.9 -> p50 7.00, p99 9.90; the floor 2.0 for both faults.
    assert row[-13:-9] == ["7.00", "9.90", "2.00", "2.00"], lines
    assert any(l.startswith("rule check: 1 of 2 faults") for l in lines), lines
    assert any("run1" in l and "99.000" in l and "70.000" in l for l in lines), lines


def test_render_puts_the_floor_beside_issue_43s_bar(tmp_path):
    # From a summary JSON alone: nearest-rank p50 / p99 of each kind's stall/op, and of the
    # floor, with its max; a kind outside the bar's list (loss) gets no row in that table.
    doc = {"schema": "faultline.bench.acceptance/v1",
           "meta": {"command": "bench/acceptance -n 3", "started_utc": "x", "git_commit": "c",
                    "nproc": 2, "load_start": [1, 1, 1], "load_end": [2, 2, 2], "label": None},
           "folder": "scenarios/acceptance", "seeds": 3, "only": ["hosts=2"], "ccls": ["ftccl"],
           "floor": True, "exit": 0, "head": ["fault kind", "ccl"], "rows": [],
           "rule_check": {"faults": 4, "agree": 4, "disagree": []}, "misses": [],
           "raw": [{"kind": "link_flap", "ccl": "ftccl", "stall_per_op": [1.0, 3.0, 2.0],
                    "floor_per_op": [0.5, 2.5, 1.5, 4.0]},
                   {"kind": "loss", "ccl": "ftccl", "stall_per_op": [50.0],
                    "floor_per_op": [1.0]}]}
    p = tmp_path / "a.json"
    p.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, SCRIPT, "--render", str(p)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Rule check: 4 of 4" in r.stdout
    [row] = [l for l in r.stdout.splitlines() if l.startswith("| link_flap")]
    assert [c.strip() for c in row.strip("|").split("|")][1:] == [
        "3", "2.00", "3.00", "1.50", "4.00", "4.00"], row
    assert not any(l.startswith("| loss") for l in r.stdout.splitlines()), r.stdout
