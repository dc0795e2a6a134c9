"""`faultline calibrate` and `faultline simulate` end to end: reports in, calibration file,
simulation.json/.md/.html out; bad input exits 2 with the reason and writes nothing."""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(ROOT, "build"))
FAULTLINE = os.path.join(BUILD, "bin", "faultline")


def fl(*args):
    return subprocess.run([FAULTLINE, *args], capture_output=True, text=True, timeout=120)


def report(ccl, kind, outcome, stall_ms, ratio=None):
    return {"schema": "faultline.report/v2", "ccl": ccl, "outcome": outcome,
            "faults": [{"id": "f", "type": kind, "applied_s": 2.0, "reverted_s": 2.3}],
            "per_fault": [{"id": "f", "stall_ms": stall_ms, "failover_latency_ms": 9.0,
                           "recovery_ms": None, "degraded_ratio": ratio}]}


@pytest.fixture
def runs(tmp_path):
    if not os.path.exists(FAULTLINE):
        pytest.skip(f"{FAULTLINE} is not built")
    d = tmp_path / "runs"
    for i, (ccl, kind, outcome, stall, ratio) in enumerate([
            ("ftccl", "link_down", "survived", 30.0, None),
            ("ftccl", "port_drop", "survived", 12.0, 0.875),
            ("gloo", "link_down", "survived", 900.0, None),
            ("gloo", "port_drop", "hung", 10000.0, None)]):
        (d / f"r{i}").mkdir(parents=True)
        (d / f"r{i}" / "report.json").write_text(json.dumps(report(ccl, kind, outcome, stall, ratio)))
    (d / "old").mkdir()
    (d / "old" / "report.json").write_text(json.dumps({"schema": "faultline.report/v1"}))
    return d


def test_calibrate_then_simulate_prices_each_policy(runs, tmp_path):
    cal = tmp_path / "cal.json"
    r = fl("calibrate", str(runs), "--out", str(cal))
    assert r.returncode == 0, r.stdout + r.stderr
    c = json.loads(cal.read_text())
    assert c["schema"] == "faultline.calibration/v1"
    kinds = {(e["ccl"], e["kind"]): (e["faults"], e["survived"]) for e in c["entries"]}
    assert kinds == {("ftccl", "link_down"): (1, 1), ("ftccl", "port_drop"): (1, 1),
                     ("gloo", "link_down"): (1, 1), ("gloo", "port_drop"): (1, 0)}
    assert len(c["skipped"]) == 1 and "faultline.report/v1" in c["skipped"][0]

    results = {}
    for ccl in ("ftccl", "gloo"):
        out = tmp_path / f"sim-{ccl}"
        r = fl("simulate", "--gpus", "1024,8192", "--days", "30", "--seeds", "8",
               "--calibration", str(cal), "--ccl", ccl, "--out", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        for f in ("simulation.json", "simulation.md", "simulation.html"):
            assert (out / f).stat().st_size > 0, f
        s = json.loads((out / "simulation.json").read_text())
        assert s["schema"] == "faultline.simulation/v1"
        assert [x["gpus"] for x in s["scales"]] == [1024, 8192]
        assert s["policies"] == s["scales"][0]["policies"]
        for p in ("fail_stop", "failover", "adaptive"):
            g = s["policies"][p]["gpu_hours_lost"]
            assert g["ci95"][0] <= g["mean"] <= g["ci95"][1]
        assert s["calibration"]["ccl"] == ccl
        assert "--calibration" in s["command"]
        results[ccl] = s
    # Gloo dies of a permanent port failure: its failover loses more than ftccl's.
    assert (results["gloo"]["policies"]["failover"]["gpu_hours_lost"]["mean"]
            > results["ftccl"]["policies"]["failover"]["gpu_hours_lost"]["mean"])
    # No failures at all (--rate-scale 0): nothing is lost under any policy.
    out = tmp_path / "none"
    r = fl("simulate", "--gpus", "1024", "--days", "30", "--seeds", "2", "--rate-scale", "0",
           "--out", str(out))
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "simulation.json").read_text())
    assert all(p["gpu_hours_lost"]["mean"] == 0 for p in s["policies"].values())


def test_bad_input_exits_2_with_the_reason(runs, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("restart_cost: 10min\nrepair: forever\n")
    out = tmp_path / "o"
    r = fl("simulate", "--gpus", "1024", "--config", str(bad), "--out", str(out))
    assert r.returncode == 2 and f"{bad}:2:9: repair must be a duration" in r.stderr, r.stderr
    assert not out.exists()
    notcal = tmp_path / "notcal.json"
    notcal.write_text("{}")
    r = fl("simulate", "--gpus", "1024", "--calibration", str(notcal), "--out", str(out))
    assert r.returncode == 2 and "not a calibration file" in r.stderr, r.stderr
    r = fl("calibrate", str(tmp_path / "nowhere"), "--out", str(tmp_path / "c.json"))
    assert r.returncode == 2 and "no such run directory" in r.stderr
    r = fl("simulate", "--gpus", "1024", "--days", "nan", "--out", str(out))
    assert r.returncode == 2 and "days must be a finite number" in r.stderr, r.stderr
    assert not out.exists()
    r = fl("calibrate", str(runs), "--out", str(tmp_path / "no" / "such" / "dir" / "c.json"))
    assert r.returncode == 2 and "cannot write" in r.stderr, r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = fl("calibrate", str(empty), "--out", str(tmp_path / "c.json"))
    assert r.returncode == 2 and "no usable report.json" in r.stderr
    assert not (tmp_path / "c.json").exists()
