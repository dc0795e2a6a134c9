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
        small, large = s["scales"]
        # Failure rates scale with the job: 8x the GPUs (and hosts), 8x the failures per day.
        assert large["failures_per_day"] == pytest.approx(8 * small["failures_per_day"], rel=1e-9)
        assert large["mtbf_h"] == pytest.approx(small["mtbf_h"] / 8, rel=1e-9)
        for p in ("fail_stop", "failover", "adaptive"):
            for scale in s["scales"]:
                check_policy(scale, scale["policies"][p], days=30)
            # The seeds drew about failures_per_day x days failures each (Poisson, 8 seeds).
            for scale in s["scales"]:
                want = scale["failures_per_day"] * 30
                assert abs(scale["policies"][p]["failures_mean"] - want) < 0.35 * want, (p, scale)
            # A larger job loses more GPU-hours under every policy.
            assert (large["policies"][p]["gpu_hours_lost"]["mean"]
                    > small["policies"][p]["gpu_hours_lost"]["mean"]), p
        # "policies" is the first scale's, not the last's.
        assert (s["policies"]["fail_stop"]["gpu_hours_lost"]["mean"]
                == small["policies"]["fail_stop"]["gpu_hours_lost"]["mean"])
        assert s["calibration"]["ccl"] == ccl
        assert "--calibration" in s["command"]
        results[ccl] = s
    # Gloo dies of a permanent port failure (a restart), ftccl rides it out; Gloo, on one of
    # the 8 rails, sees only the failures of that rail, so fail-stop restarts it less often.
    for g in range(2):
        gloo, ftccl = results["gloo"]["scales"][g]["policies"], results["ftccl"]["scales"][g]["policies"]
        assert ftccl["failover"]["restarts_mean"] < gloo["failover"]["restarts_mean"]
        assert gloo["fail_stop"]["restarts_mean"] < ftccl["fail_stop"]["restarts_mean"]
    assert any("uses 1 of 8 rails" in n for n in results["gloo"]["policies"]["failover"]["notes"])
    # The paired differences are in the file, and a calibration's resamples behind the intervals.
    assert set(results["ftccl"]["scales"][0]["differences_gpu_hours_lost"]) == {
        "failover - fail_stop", "adaptive - fail_stop", "adaptive - failover"}
    assert results["ftccl"]["scales"][0]["bootstrap"] == 20
    # No failures at all (--rate-scale 0): nothing is lost under any policy.
    out = tmp_path / "none"
    r = fl("simulate", "--gpus", "1024", "--days", "30", "--seeds", "2", "--rate-scale", "0",
           "--out", str(out))
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "simulation.json").read_text())
    assert all(p["gpu_hours_lost"]["mean"] == 0 for p in s["policies"].values())


def check_policy(scale, p, days):
    """What one policy's figures must satisfy, each computed independently of the others:
    lost GPU-hours are the GPUs' hours not spent on useful work (gpus x horizon x (1 - the
    effective ratio), per seed and so for the mean and the interval), the breakdown by cause
    sums to the loss, and the interval is the mean's over seeds (nonzero with failures)."""
    hours = scale["gpus"] * days * 24
    lost, ratio = p["gpu_hours_lost"], p["effective_training_time_ratio"]
    assert lost["mean"] == pytest.approx(hours * (1 - ratio["mean"]), rel=1e-6)
    assert lost["ci95"][1] - lost["mean"] == pytest.approx(
        hours * (ratio["mean"] - ratio["ci95"][0]), rel=1e-6, abs=1e-6)
    assert sum(p["breakdown_gpu_hours"].values()) == pytest.approx(lost["mean"], rel=1e-6)
    assert lost["ci95"][0] < lost["mean"] < lost["ci95"][1]
    assert lost["mean"] - lost["ci95"][0] == pytest.approx(lost["ci95"][1] - lost["mean"], rel=1e-9)
    assert 0 < ratio["mean"] < 1


def test_confidence_interval_is_the_means_over_seeds(tmp_path):
    """The 95 % interval of the mean narrows as 1/sqrt(seeds): 4x the seeds, about half the
    width. An interval of the spread of single runs (not of their mean) would not narrow."""
    if not os.path.exists(FAULTLINE):
        pytest.skip(f"{FAULTLINE} is not built")
    width = {}
    for seeds in (8, 32):
        out = tmp_path / f"s{seeds}"
        r = fl("simulate", "--gpus", "8192", "--days", "30", "--seeds", str(seeds),
               "--out", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        s = json.loads((out / "simulation.json").read_text())
        g = s["policies"]["fail_stop"]["gpu_hours_lost"]
        width[seeds] = g["ci95"][1] - g["ci95"][0]
        assert width[seeds] > 0
    assert 0.3 < width[32] / width[8] < 0.75, width


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


def test_simulation_page_reads_well(runs, tmp_path):
    """simulation.html renders its Markdown sections as HTML (no '###' or '|---|' on the page),
    and with one scale simulated the scale plot still shows a point per policy that lost
    GPU-hours; in Chromium at 1400 px nothing runs past the page's right edge."""
    from page_check import check_page
    import re
    cal = tmp_path / "cal.json"
    assert fl("calibrate", str(runs), "--out", str(cal)).returncode == 0
    out = tmp_path / "one"
    r = fl("simulate", "--gpus", "1024", "--days", "30", "--seeds", "4", "--calibration", str(cal),
           "--ccl", "ftccl", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    page = (out / "simulation.html").read_text()
    s = json.loads((out / "simulation.json").read_text())
    assert "###" not in page and "|---" not in page and "| ---" not in page
    assert "<h3>Inputs and their sources</h3>" in page, page[-3000:]
    assert re.search(r"<table>\s*<tr><th>input</th>", page)
    lost = [p for p, v in s["scales"][0]["policies"].items() if v["gpu_hours_lost"]["mean"] > 0]
    assert lost, "the calibration should make some policy lose GPU-hours"
    plot = page.split("<h2>Lost GPU-hours vs scale</h2>", 1)[1].split("</svg>", 1)[0]
    assert plot.count('<circle class="point"') == len(lost), plot
    # Rendered in Chromium: nothing past the page's column at 1400 px, no raw Markdown.
    check_page(str(out / "simulation.html"), tmp_path)
