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
    # (the cells before the last eight: stall/op p50, p99, worst abort)
    assert "stall/op" in head, lines[0]
    assert rows["ftccl"][-11:-8] == ["0.50", "1.00", "-"], rows["ftccl"]
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
