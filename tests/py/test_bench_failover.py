"""bench/failover-latency's figures on hand-made run directories (--table DIR: no runs, no
root): both libraries over the same faults, a fault that never converged or recovered counted
as never (+inf) with n / never / n/a, first path beside full convergence, v1 runs read with
their first-path meaning, and runs of two schemas refused."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "failover-latency")
KEYS = ("baseline_busbw_gbps", "stall_ms", "detection_ms", "failover_first_ms",
        "failover_latency_ms", "recovery_ms", "degraded_ratio", "goodput_loss_pct")


def report(ccl, faults, seed=1, schema="faultline.report/v2", kind="link_down"):
    """faults: [(id, rail, {metric: value})]; unnamed metrics null, baseline 1.6."""
    r = {"schema": schema, "scenario": {"name": "bench", "seed": seed}, "ccl": ccl,
         "outcome": "survived", "correctness": {"checked": True, "wrong": 0},
         "metrics": {k: None for k in KEYS}, "faults": [], "per_fault": [], "expectations": []}
    r["metrics"]["baseline_busbw_gbps"] = 1.6
    for i, (fid, rail, values) in enumerate(faults):
        at = 4.0 + 2.5 * i
        r["faults"].append({"id": fid, "type": kind, "target": {"host": 1, "rail": rail},
                            "scheduled_s": at, "applied_s": at, "reverted_s": at + 0.3})
        pf = {k: None for k in KEYS}
        if schema == "faultline.report/v1":
            del pf["failover_first_ms"]
        pf.update({"id": fid, "baseline_busbw_gbps": 1.6}, **values)
        r["per_fault"].append(pf)
    return r


def write(root, ccl, part, name, r):
    d = os.path.join(root, ccl, part, name)
    os.makedirs(d)
    with open(os.path.join(d, "report.json"), "w") as f:
        json.dump(r, f)


def table(out_dir):
    p = subprocess.run([sys.executable, SCRIPT, "--table", str(out_dir)], capture_output=True,
                       text=True, timeout=60)
    return p


def row(text, section, label, ccl):
    """The fields after `label` and `ccl` in the first table under a '## <section>' heading."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("## " + section))
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith(label + " ") and line[28:].split()[0] == ccl:
            return line[28:].split()[1:]
    raise AssertionError(f"no row {label} {ccl} under {section}:\n{text}")


def test_same_faults_never_counted_first_beside_full(tmp_path):
    # ftccl: f03 on rail 0 was noticed and never converged nor recovered.
    write(tmp_path, "ftccl", "link-down-host", "run", report("ftccl", [
        ("f01", 0, {"detection_ms": 1.0, "failover_first_ms": 3.0, "failover_latency_ms": 10.0,
                    "recovery_ms": 400.0, "never_converged": False}),
        ("f02", 1, {"detection_ms": 1.0, "failover_first_ms": 2.0, "failover_latency_ms": 8.0,
                    "recovery_ms": 300.0, "never_converged": False}),
        ("f03", 0, {"detection_ms": 5.0, "never_converged": True}),
        ("f04", 1, {"detection_ms": 1.0, "failover_first_ms": 4.0, "failover_latency_ms": 12.0,
                    "recovery_ms": 500.0, "never_converged": False})]))
    # Gloo: no path events; rail-1 faults touch none of its flows (n/a), f03 never resumed.
    write(tmp_path, "gloo", "link-down-host", "run", report("gloo", [
        ("f01", 0, {"failover_latency_ms": 700.0, "recovery_ms": 900.0, "never_converged": False}),
        ("f02", 1, {"recovery_ms": 50.0, "never_converged": False}),
        ("f03", 0, {"never_converged": True}),
        ("f04", 1, {"recovery_ms": 60.0, "never_converged": False})]))
    p = table(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "## link-down-host: ftccl and gloo over the same 4 faults" in out, out
    assert "ftccl: 1 run(s), 4 faults" in out and "gloo: 1 run(s), 4 faults" in out, out
    sec = "link-down-host"
    # n, never, n/a, min, p50, p99, max
    assert row(out, sec, "failover_latency_ms (full)", "ftccl")[:7] == \
        ["4", "1", "0", "8.000", "10", "never", "never"]
    assert row(out, sec, "failover_first_ms (first)", "ftccl")[:7] == \
        ["4", "1", "0", "2.000", "3.000", "never", "never"]
    assert row(out, sec, "failover_latency_ms (full)", "gloo")[:7] == \
        ["2", "1", "2", "700", "700", "never", "never"]
    assert row(out, sec, "failover_first_ms (first)", "gloo")[:7] == \
        ["0", "0", "4", "-", "-", "-", "-"]
    # Dropping the never would give a p50 of 400 over 3 faults; +inf makes it the 2nd of 4.
    assert row(out, sec, "recovery_ms", "ftccl")[:7] == \
        ["4", "1", "0", "300", "400", "never", "never"]
    assert row(out, sec, "recovery_ms", "gloo")[:7] == ["4", "1", "0", "50", "60", "never", "never"]
    # after_heal_ms follows recovery_ms: 400 - 300 ms held = 100.
    assert row(out, sec, "after_heal_ms", "ftccl")[:5] == ["4", "1", "0", "0.000", "100"]


def test_progress_for_every_library_and_where_each_cell_comes_from(tmp_path):
    # ftccl: f01/f02 converged by path events, f03 by collective progress (no crossing flow
    # was reported down), f04 never progressed again.
    write(tmp_path, "ftccl", "blackhole", "run", report("ftccl", [
        ("f01", 0, {"detection_ms": 1.0, "failover_latency_ms": 10.0, "progress_ms": 40.0,
                    "all_flows_ms": 15.0, "flows": [{"rank": 0}],
                    "convergence": "path_events", "never_converged": False}),
        # An idle flow that never resumed: left out of full convergence, not of all_flows_ms.
        ("f02", 0, {"detection_ms": 1.0, "failover_latency_ms": 20.0, "progress_ms": 50.0,
                    "all_flows_ms": None, "flows": [{"rank": 0}, {"rank": 1}],
                    "convergence": "path_events", "never_converged": False}),
        ("f03", 0, {"failover_latency_ms": 30.0, "progress_ms": 30.0,
                    "convergence": "collective_progress", "never_converged": False}),
        ("f04", 0, {"progress_ms": None, "convergence": "collective_progress",
                    "never_converged": True})]))
    write(tmp_path, "gloo", "blackhole", "run", report("gloo", [
        (f, 0, {"failover_latency_ms": v, "progress_ms": v, "convergence": "collective_progress",
                "never_converged": False})
        for f, v in (("f01", 400.0), ("f02", 500.0), ("f03", 600.0), ("f04", 700.0))]))
    p = table(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out, sec = p.stdout, "blackhole"
    # progress_ms for both libraries; ftccl's f04 counts as never, not as a dropped null.
    assert row(out, sec, "progress_ms (every ccl)", "ftccl")[:8] == \
        ["4", "1", "0", "30", "40", "never", "never", "progress"]
    assert row(out, sec, "progress_ms (every ccl)", "gloo")[:8] == \
        ["4", "0", "0", "400", "500", "700", "700", "progress"]
    # Full convergence says how many of its faults came from each source (f04's never too).
    assert row(out, sec, "failover_latency_ms (full)", "ftccl")[7] == "events:2,progress:2"
    assert row(out, sec, "failover_latency_ms (full)", "gloo")[7] == "progress:4"
    assert row(out, sec, "detection_ms", "ftccl")[7] == "events"
    # Convergence with no idle flow left out: f02 never; f03/f04 had no flows (n/a).
    assert row(out, sec, "all_flows_ms (no idle)", "ftccl")[:8] == \
        ["2", "1", "2", "15", "15", "never", "never", "events"]
    assert row(out, sec, "stall_ms", "gloo")[7] == "collectives"


def test_sets_that_differ_side_by_side_over_the_common_faults(tmp_path):
    for seed in (1, 2, 3):
        write(tmp_path, "ftccl", "port-drop", f"s{seed}", report(
            "ftccl", [("drop", 0, {"recovery_ms": 10.0 * seed, "degraded_ratio": 0.5})],
            seed=seed, kind="port_drop"))
    write(tmp_path, "gloo", "port-drop", "s1", report(
        "gloo", [("drop", 0, {"degraded_ratio": 0.5})], seed=1, kind="port_drop"))
    p = table(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "## port-drop: ftccl and gloo over the same 1 faults" in out, out
    assert row(out, "port-drop: ftccl and", "recovery_ms", "ftccl")[:5] == ["1", "0", "0", "10", "10"]
    assert row(out, "port-drop: ftccl and", "recovery_ms", "gloo")[:5] == ["1", "1", "0", "never", "never"]
    assert "## port-drop: ftccl alone, all its 3 faults (2 not run with the other library)" in out
    assert row(out, "port-drop: ftccl alone", "recovery_ms", "ftccl")[:5] == \
        ["3", "0", "0", "10", "20"]
    # A permanent fault has no after_heal_ms.
    assert row(out, "port-drop: ftccl alone", "after_heal_ms", "ftccl")[:3] == ["0", "0", "3"]


def test_v1_runs_show_first_path_only_and_schemas_do_not_mix(tmp_path):
    v1 = tmp_path / "v1"
    write(v1, "ftccl", "blackhole", "run", report("ftccl", [
        ("f01", 0, {"detection_ms": 60.0, "failover_latency_ms": 70.0, "recovery_ms": 800.0})],
        schema="faultline.report/v1"))
    p = table(v1)
    assert p.returncode == 0, p.stdout + p.stderr
    # v1's failover_latency_ms was first-path: shown as first, full convergence unknown.
    assert row(p.stdout, "blackhole", "failover_first_ms (first)", "ftccl")[:5] == \
        ["1", "0", "0", "70", "70"]
    assert row(p.stdout, "blackhole", "failover_latency_ms (full)", "ftccl")[:7] == \
        ["0", "0", "1", "-", "-", "-", "-"]
    mixed = tmp_path / "mixed"
    write(mixed, "ftccl", "blackhole", "run", report("ftccl", [("f01", 0, {})]))
    write(mixed, "gloo", "blackhole", "run", report("gloo", [("f01", 0, {})],
                                                     schema="faultline.report/v1"))
    p = table(mixed)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "faultline.report/v1" in p.stderr and "faultline.report/v2" in p.stderr
    assert "full convergence instead of first-path" in p.stderr
    assert "## blackhole" not in p.stdout
