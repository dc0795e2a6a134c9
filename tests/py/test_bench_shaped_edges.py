"""bench/shaped-edges on run directories whose collectives and rail samples are known: it must
find the ramp, the skew and the middle's rate where they were put, and count only the rails
the ranks used."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EDGES = os.path.join(ROOT, "bench", "shaped-edges")


def write_run(d, rails_used, starts_ms, on_from_ms, on_until_ms, level, idle_rail_level=0.0):
    """One collective from 0 to 500 ms on 2 hosts x 2 rails of 1 Gbps, sampled every 20 ms:
    the used rails send `level` Gbps from `on_from_ms` to `on_until_ms`, nothing outside it;
    a rail not used sends `idle_rail_level` throughout."""
    os.makedirs(os.path.join(d, "ranks"))
    with open(os.path.join(d, "scenario.yaml"), "w") as f:
        f.write("name: t\ntopology: {hosts: 2, ranks_per_host: 1, rails: 2, rail_gbps: 1}\n")
    for rank, start in enumerate(starts_ms):
        with open(os.path.join(d, "ranks", "rank%d.jsonl" % rank), "w") as f:
            f.write(json.dumps({"type": "header", "ccl": "x", "rank": rank,
                                "rails_used": rails_used}) + "\n")
            f.write(json.dumps({"type": "op", "index": 0, "warmup": False,
                                "start_ns": 10**12 + int(start * 1e6),
                                "end_ns": 10**12 + int(500e6)}) + "\n")
    with open(os.path.join(d, "timeseries.csv"), "w") as f:
        f.write("index,start_s,end_s,duration_ms,bytes,busbw_gbps\n0,0.0,0.5,500.0,1,1\n")
    cols = ["h%d_r%d_%s_gbps" % (h, r, x) for h in (0, 1) for r in (0, 1) for x in ("tx", "rx")]
    with open(os.path.join(d, "rails.csv"), "w") as f:
        f.write("t_s," + ",".join(cols) + "\n")
        for i in range(26):  # 0, 20, .., 500 ms
            t = i * 20
            on = on_from_ms <= t <= on_until_ms
            vals = []
            for c in cols:
                rail = int(c.split("_")[1][1:])
                if rail in rails_used:
                    vals.append(level if on and "_tx_" in c else 0.0)
                else:
                    vals.append(idle_rail_level)
            f.write("%.3f," % (t / 1000) + ",".join("%.6f" % v for v in vals) + "\n")


def edges(*dirs):
    r = subprocess.run([EDGES, "--json", *dirs], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_finds_the_ramps_skew_and_middle_where_they_were_put(tmp_path):
    d = str(tmp_path / "one")
    write_run(d, [0], starts_ms=[0, 30], on_from_ms=100, on_until_ms=440, level=0.9)
    (r,) = edges(d)
    assert r["ports"] == 2 and r["collectives"] == 1
    assert abs(r["ramp_up_ms"] - 100) < 1e-6
    assert abs(r["ramp_down_ms"] - 60) < 1e-6
    assert abs(r["skew_ms"] - 30) < 1e-3
    assert abs(r["middle"] - 0.9) < 1e-6
    # 18 of the 26 samples at 0.9
    assert abs(r["whole"] - 0.9 * 18 / 26) < 1e-6
    assert abs(r["edges"] - 160 / 500) < 1e-6


def test_a_rail_the_ranks_did_not_use_does_not_count(tmp_path):
    # Rail 1 idle at 0: were it counted, no sample would have every rail at rate (no ramp).
    idle = str(tmp_path / "idle")
    write_run(idle, [0], starts_ms=[0, 0], on_from_ms=40, on_until_ms=460, level=1.0)
    # Both rails used and both sending: four ports.
    both = str(tmp_path / "both")
    write_run(both, [0, 1], starts_ms=[0, 0], on_from_ms=40, on_until_ms=460, level=1.0)
    a, b = edges(idle, both)
    assert a["ports"] == 2 and abs(a["ramp_up_ms"] - 40) < 1e-6 and abs(a["middle"] - 1) < 1e-6
    assert b["ports"] == 4 and abs(b["ramp_up_ms"] - 40) < 1e-6


def test_not_a_run_directory_is_a_clear_error(tmp_path):
    r = subprocess.run([EDGES, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "not a run directory" in r.stderr and "scenario.yaml" in r.stderr
