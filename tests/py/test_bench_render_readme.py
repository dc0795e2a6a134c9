"""bench/README.md's measured tables come from committed JSON: `bench/render-readme --check`
passes on the repository and fails on a hand-edited generated table or an unmarked table;
compare-allreduce renders medians of per-round ratios from its raw rounds; the benchmark-only
knob that switches ftccl's payload CRC off is echoed and still gives correct results."""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(ROOT, "build"))
RENDER = os.path.join(ROOT, "bench", "render-readme")
README = os.path.join(ROOT, "bench", "README.md")


def render_readme(*args):
    return subprocess.run([sys.executable, RENDER, *args], capture_output=True, text=True,
                          cwd=ROOT)


def test_committed_readme_matches_its_json():
    r = render_readme("--check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_hand_edited_generated_table_fails_the_check(tmp_path):
    text = open(README).read()
    begin = text.index("<!-- table: compare-allreduce -->")
    end = text.index("<!-- /table -->", begin)
    block = text[begin:end]
    row = next(l for l in block.splitlines() if l.startswith("| **median** |"))
    cells = row.split("|")
    cells[2] = " 9.999 "  # ftccl's median busbw, typed over
    edited = text[:begin] + block.replace(row, "|".join(cells)) + text[end:]
    p = tmp_path / "README.md"
    p.write_text(edited)
    r = render_readme("--check", "--readme", str(p))
    assert r.returncode == 1
    assert "9.999" in r.stdout and "differs" in r.stderr
    # Without --check it puts the rendered figures back.
    assert render_readme("--readme", str(p)).returncode == 0
    assert p.read_text() == text


def test_a_table_without_a_marker_fails(tmp_path):
    p = tmp_path / "README.md"
    p.write_text(open(README).read() + "\nNew figures:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    r = render_readme("--check", "--readme", str(p))
    assert r.returncode == 1
    assert "no marker" in r.stderr


def test_an_unknown_or_unclosed_block_fails(tmp_path):
    p = tmp_path / "README.md"
    p.write_text("<!-- table: no-such-bench -->\n<!-- /table -->\n")
    r = render_readme("--check", "--readme", str(p))
    assert r.returncode == 1 and "unknown table" in r.stderr
    p.write_text("<!-- table: policy-mix -->\nx\n")
    r = render_readme("--check", "--readme", str(p))
    assert r.returncode == 1 and "no <!-- /table -->" in r.stderr


def perf(busbw, cpu):
    return {"busbw_gbps": busbw, "time_us": 1.0, "cpu_us": 1.0, "cpu_s_per_gb": cpu,
            "knobs": {}}


def render_compare_allreduce(tmp_path, rounds, meta, disarmed_env=None):
    """bench/compare-allreduce --render of a summary with these rounds; the finished process."""
    doc = {"schema": "faultline.bench.compare-allreduce/v1", "meta": meta,
           "params": {"size": "64M", "ranks": 4, "rails": 2, "iters": 10, "warmup": 3},
           "rounds": rounds, "scaling": {}}
    if disarmed_env is not None:
        doc["params"]["disarmed_env"] = disarmed_env
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-allreduce"),
                        "--render", str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def test_compare_allreduce_renders_medians_of_per_round_ratios(tmp_path):
    # Ratios are taken per round, then their median: ftccl / ceiling is 0.5, 0.5, 0.55 by
    # round, median 0.50, where the ratio of the medians (1.1 / 2.0) would read 0.55.
    rounds = [
        {"order": ["ftccl", "ftccl_bare", "gloo"], "ftccl": perf(2.0, 1.0),
         "ftccl_bare": perf(2.0, 0.8), "gloo": perf(1.0, 1.0), "ceiling_gbps": 4.0},
        {"order": ["ftccl_bare", "ftccl", "gloo"], "ftccl": perf(1.0, 2.0),
         "ftccl_bare": perf(1.0, 2.0), "gloo": perf(1.0, 2.0), "ceiling_gbps": 2.0},
        {"order": ["ftccl", "ftccl_bare", "gloo"], "ftccl": perf(1.1, 1.0),
         "ftccl_bare": perf(1.0, 1.0), "gloo": perf(1.0, 1.0), "ceiling_gbps": 2.0},
    ]
    r = render_compare_allreduce(tmp_path, rounds, {
        "command": "bench/compare-allreduce -k 3", "started_utc": "2026-01-01 00:00 UTC",
        "git_commit": "abc1234", "nproc": 2, "load_start": [3.5, 3, 3],
        "load_end": [4.25, 4, 4], "label": "synthetic"})
    assert "load average 3.50 at start, 4.25 at end" in r.stdout
    assert "commit abc1234 on 2 cores" in r.stdout and "(synthetic)" in r.stdout
    [median] = [l for l in r.stdout.splitlines() if l.startswith("| **median** |")]
    cells = [c.strip() for c in median.strip("|").split("|")]
    # ftccl, bare, gloo, ceiling, f/g, f/ceil, f/bare, cpu f, cpu bare, cpu g, cpu f/g, cpu f/bare
    assert cells[1:8] == ["1.100", "1.000", "1.000", "2.000", "1.10", "0.50", "1.000"]
    assert cells[8:13] == ["1.000", "1.000", "1.000", "1.00", "1.000"]
    assert "moves 1.000 x the busbw of ftccl bare and spends 1.000 x its CPU per GB" in r.stdout
    assert "2 (bare first)" in r.stdout


def test_compare_allreduce_shows_which_part_of_the_overhead_is_the_crc(tmp_path):
    # Per round: ftccl / no-CRC and no-CRC / bare, then their medians. Round 2 has ftccl at
    # 0.9 of no-CRC and no-CRC at 1.0 of bare: the overhead is the checksum's.
    def rnd(order, f, n, b):
        return {"order": order, "ftccl": perf(*f), "ftccl_nocrc": perf(*n),
                "ftccl_bare": perf(*b), "gloo": perf(1.0, 1.0), "ceiling_gbps": 2.0}
    rounds = [rnd(["ftccl", "ftccl_bare", "ftccl_nocrc", "gloo"], (0.8, 1.25), (0.9, 1.0),
                  (1.0, 1.0)),
              rnd(["ftccl_bare", "ftccl_nocrc", "ftccl", "gloo"], (0.9, 1.1), (1.0, 1.0),
                  (1.0, 1.0)),
              rnd(["ftccl_nocrc", "ftccl", "ftccl_bare", "gloo"], (1.0, 1.0), (1.0, 1.0),
                  (1.25, 0.8))]
    r = render_compare_allreduce(tmp_path, rounds, {
        "command": "bench/compare-allreduce -k 3", "started_utc": "x", "git_commit": "c",
        "nproc": 2, "load_start": [1, 1, 1], "load_end": [2, 2, 2], "label": None})
    medians = [l for l in r.stdout.splitlines() if l.startswith("| **median** |")]
    assert len(medians) == 2, r.stdout
    cells = [c.strip() for c in medians[1].strip("|").split("|")]
    # no CRC busbw (0.9, 1, 1), ftccl / no CRC (0.89, 0.9, 1.0), no CRC / bare (0.9, 1, 0.8),
    # the CPU's
    assert cells[1:] == ["1.000", "0.900", "0.900", "1.000", "1.100", "1.000"], medians[1]
    assert "3 (no CRC first)" in r.stdout and "2 (bare first)" in r.stdout


def ftccl_perf():
    exe = os.path.join(BUILD, "bin", "ftccl-perf")
    if not os.access(exe, os.X_OK):
        pytest.skip(f"{exe} not built")
    return exe


def test_payload_crc_bench_knob_is_echoed_and_results_stay_right(tmp_path):
    exe = ftccl_perf()
    out = tmp_path / "p.json"
    env = dict(os.environ, FTCCL_BENCH_PAYLOAD_CRC="0")
    r = subprocess.run([exe, "-b", "1M", "-e", "1M", "-n", "3", "-w", "1", "--ranks", "3",
                        "--check", "-J", str(out)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(out.read_text())
    assert j["knobs"]["bench_payload_crc"] == "0"
    assert j["wrong_total"] == 0
    # The library's default keeps it on.
    env.pop("FTCCL_BENCH_PAYLOAD_CRC")
    r = subprocess.run([exe, "-b", "64K", "-e", "64K", "-n", "1", "-w", "0", "--ranks", "2",
                        "-J", str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(out.read_text())["knobs"]["bench_payload_crc"] == "1"


def test_payload_crc_bench_knob_refuses_other_values():
    exe = ftccl_perf()
    env = dict(os.environ, FTCCL_BENCH_PAYLOAD_CRC="2")
    r = subprocess.run([exe, "-b", "1K", "-e", "1K", "-n", "1", "--ranks", "2"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "FTCCL_BENCH_PAYLOAD_CRC" in r.stderr


def test_compare_small_renders_from_its_raw_rounds_in_size_order(tmp_path):
    # Sizes come back from JSON as strings; the table is in numeric order and its medians and
    # crossover are recomputed from the raw rounds (the stored rows are ignored).
    def rnd(times, cpu):
        return ({v: {str(s): t for s, t in times[v].items()} for v in times},
                {v: {str(s): cpu for s in times[v]} for v in times})
    t1 = {"ftccl": {8: 10, 32: 12, 128: 30}, "ftccl_ring": {8: 20, 32: 20, 128: 20},
          "ftccl_rd": {8: 10, 32: 12, 128: 30}, "gloo": {8: 40, 32: 40, 128: 40},
          "gloo_hd": {8: 20, 32: 24, 128: 60}}
    (r1, c1), (r2, c2), (r3, c3) = rnd(t1, 5.0), rnd(t1, 7.0), rnd(t1, 100.0)
    doc = {"schema": "faultline.bench.compare-small/v2",
           "meta": {"command": "bench/compare-small -k 3", "started_utc": "x", "git_commit": "c",
                    "nproc": 2, "load_start": [1, 1, 1], "load_end": [2, 2, 2], "label": None},
           "rounds": 3, "iters": 5, "warmup": 1, "threshold_as_built": "65536",
           "by_ranks": [{"ranks": 4, "rows": [], "crossover_bytes": 999,
                         "raw_us": [r1, r2, r3], "raw_cpu_us": [c1, c2, c3]}]}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-small"),
                        "--render", str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "up to): 32 B" in r.stdout
    sizes = [l.split("|")[1].strip() for l in r.stdout.splitlines() if l.startswith("| ") and
             l.split("|")[1].strip().endswith(" B")]
    assert sizes == ["8 B", "32 B", "128 B"]
    [row8] = [l for l in r.stdout.splitlines() if l.startswith("| 8 B |")]
    cells = [c.strip() for c in row8.strip("|").split("|")]
    assert cells[4] == "0.50"  # 10 / min(40, 20)
    assert cells[8:11] == ["7", "7", "7"]  # median CPU of 5, 7, 100


def test_compare_shaped_renders_shares_of_the_line_rate_each_library_uses(tmp_path):
    def rnd(order, f, b, g):
        return {"order": order, "ftccl": {"baseline_busbw_gbps": f},
                "ftccl_bare": {"baseline_busbw_gbps": b}, "gloo": {"baseline_busbw_gbps": g}}
    doc = {"schema": "faultline.bench.compare-shaped/v1",
           "meta": {"command": "bench/compare-shaped -k 3", "started_utc": "x", "git_commit": "c",
                    "nproc": 2, "load_start": [1, 1, 1], "load_end": [2, 2, 2], "label": None},
           "params": {}, "rounds": [rnd(["ftccl", "ftccl_bare", "gloo"], 1.8, 1.8, 0.9),
                                    rnd(["ftccl_bare", "ftccl", "gloo"], 1.6, 2.0, 0.8),
                                    rnd(["ftccl", "ftccl_bare", "gloo"], 1.9, 1.9, 1.0)]}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-shaped"),
                        "--render", str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    [median] = [l for l in r.stdout.splitlines() if l.startswith("| **median** |")]
    cells = [c.strip() for c in median.strip("|").split("|")]
    # ftccl over its 2 x 1 Gbps, Gloo over its one rail; ftccl / bare: 1.0, 0.8, 1.0 -> 1.000
    assert cells[1:] == ["1.800", "1.900", "0.900", "2.00", "1.000", "0.90", "0.90"]


def test_metric_noise_renders_nearest_rank_spread_and_counts_nulls(tmp_path):
    def m(stall, loss, busbw):
        return {"stall_ms": stall, "goodput_loss_pct": loss, "baseline_busbw_gbps": busbw}
    doc = {"schema": "faultline.bench.metric-noise/v1",
           "meta": {"command": "bench/metric-noise -n 4", "started_utc": "x", "git_commit": "c",
                    "nproc": 2, "load_start": [1, 1, 1], "load_end": [2, 2, 2], "label": None},
           "scenario": "tests/py/scenarios/clean_allreduce.yaml", "runs_per_library": 4,
           "metrics": {"ftccl": [m(9, 0.5, 1.6), m(7, None, 1.7), m(20, 1.5, 1.5),
                                 m(8, -1.0, 1.6)],
                       "gloo": [m(30, 0, 0.9), m(10, 0, 0.9), m(20, 0, 0.9), m(40, 0, 0.9)]}}
    p = tmp_path / "n.json"
    p.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "metric-noise"),
                        "--render", str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # nearest rank p50 of 4 values is the 2nd smallest
    assert "| ftccl | 7.0 / 8.0 / 20.0 | -1.0 / 0.5 / 1.5 (1 null) | 1.5 / 1.6 / 1.7 |" in r.stdout
    assert "| Gloo | 10.0 / 20.0 / 40.0 |" in r.stdout


def peers_run(kind, config, rnd, outcome, stall, err_ms=None, deadline=None, fb=None,
              reason=None, dr=None, rec=None):
    return {"kind": kind, "config": config, "round": rnd, "outcome": outcome, "wrong": 0,
            "stall_ms": stall, "recovery_ms": rec, "degraded_ratio": dr, "error_ms": err_ms,
            "error_is_deadline": deadline, "versions": {"gloo": "0.5.0"}, "exit_code": 0,
            "failback": {"value": fb, "reason": reason}, "left_behind": {"netns": [],
                                                                         "mpi_pids": []}}


def test_peers_renders_medians_nulls_deadlines_and_failback(tmp_path):
    runs = [
        peers_run("link_down_host", "ftccl", 0, "survived", 100, fb=True, rec=300),
        peers_run("link_down_host", "gloo", 0, "survived", 1000, fb=True, rec=None),
        peers_run("link_down_host", "ftccl", 1, "survived", 300, fb=False, rec=500),
        dict(peers_run("link_down_host", "gloo", 1, "survived", 3000, fb=True, rec=None),
             baseline_busbw_gbps=0.9),  # null recovery with a baseline: never (1 of 2)
        dict(peers_run("port_drop", "gloo", 0, "crashed", 10, reason="permanent fault",
                       dr=0.9), failback={"value": None, "reason": "permanent fault",
                                          "before_gbps": 0.0}),
        peers_run("rank_kill", "ftccl", 0, "aborted_clean", 50, err_ms=1500, deadline=False,
                  reason="no rail fault applied"),
        peers_run("rank_kill", "gloo", 0, "hung", 10000, err_ms=10004, deadline=True,
                  reason="no rail fault applied"),
        peers_run("rank_kill", "ftccl", 1, "aborted_clean", 70, err_ms=1700, deadline=False,
                  reason="no rail fault applied"),
        peers_run("rank_kill", "gloo", 1, "hung", 10000, err_ms=10010, deadline=True,
                  reason="no rail fault applied"),
    ]
    doc = {"schema": "faultline.bench.peers/v1",
           "meta": {"command": "bench/peers -k 2", "started_utc": "x", "git_commit": "c",
                    "nproc": 2, "load_start": [1.5, 1, 1], "load_end": [2.5, 2, 2],
                    "label": None},
           "params": {"kinds": ["link_down_host", "port_drop", "rank_kill"], "configs": ["ftccl", "gloo"],
                      "fault_at": "1500ms", "failback_rule": "THE RULE"},
           "runs": runs}
    p = tmp_path / "p.json"
    p.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "peers"), "--render",
                        str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "load average 1.50 at start, 2.50 at end" in r.stdout
    assert "Failback rule: THE RULE." in r.stdout and "gloo 0.5.0" in r.stdout
    rows = {tuple(c.strip() for c in l.strip("|").split("|")[:2]):
            [c.strip() for c in l.strip("|").split("|")[2:]]
            for l in r.stdout.splitlines() if l.startswith("| ") and "---" not in l}
    # outcome, stall, time to error, degraded ratio, recovery, failback
    assert rows[("link_down_host", "ftccl")] == ["survived", "200", "—", "—", "400", "1/2"]
    assert rows[("link_down_host", "Gloo")] == ["survived", "2000", "—", "—",
                                                "— (1 of 2 never)", "2/2"]
    # The dropped port carried nothing before the fault: the cell says the fault hit nothing.
    assert rows[("port_drop", "Gloo")] == ["**crashed** ‡", "10", "—", "0.90", "—",
                                           "n/a (permanent)"]
    assert rows[("rank_kill", "ftccl")] == ["aborted", "60", "1600", "—", "—",
                                            "n/a (no rail fault)"]
    assert rows[("rank_kill", "Gloo")] == ["**hung**", "10000", "10007 (deadline)", "—", "—",
                                           "n/a (no rail fault)"]


def load_peers():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("bench_peers",
                                                  os.path.join(ROOT, "bench", "peers"))
    spec = importlib.util.spec_from_loader("bench_peers", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_peers_failback_rule():
    m = load_peers()
    # t_s every 0.5 s; the faulted port h1_r0 carries 0.8 before, 0 during, `after` after.
    def rows(after):
        out = []
        for i in range(17):
            t = i * 0.5
            v = 0.8 if t < 1.5 else (0.0 if t < 4.0 else after)
            out.append({"t_s": str(t), "h1_r0_tx_gbps": str(v / 2), "h1_r0_rx_gbps": str(v / 2)})
        return out
    fault = {"target": {"host": 1, "rail": 0}, "applied_s": 1.5, "reverted_s": 2.5}
    assert m.failback(fault, rows(0.5), 8.0)["value"] is True
    assert m.failback(fault, rows(0.1), 8.0)["value"] is False  # under 25 % of 0.8
    assert m.failback(fault, rows(0.5), 4.0)["reason"] == "run ended before the after window"
    assert m.failback(dict(fault, reverted_s=None), rows(0.5), 8.0)["reason"] == \
        "permanent fault"
    # conn_reset has nothing to revert: judged from 1 s after the reset, whatever reverted_s.
    reset = {"type": "conn_reset", "target": {"host": 1, "rail": 0}, "applied_s": 1.5,
             "reverted_s": 8.0}
    assert m.failback(reset, rows(0.5), 8.0)["value"] is True
    # port_drop is never reverted: its reverted_s is the run's final heal.
    drop = {"type": "port_drop", "target": {"host": 1, "rail": 0}, "applied_s": 1.5,
            "reverted_s": 8.0}
    assert m.failback(drop, rows(0.5), 8.0)["reason"] == "permanent fault"
    assert m.failback({"target": {"host": 1, "rank": 0}, "applied_s": 1.5,
                       "reverted_s": None}, rows(0.5), 8.0)["value"] is None
    unused = [dict(x, h1_r0_tx_gbps="0.001", h1_r0_rx_gbps="0.001") for x in rows(0.5)]
    assert m.failback(fault, unused, 8.0)["reason"] == "rail idle before the fault"


def test_compare_allreduce_names_what_bare_had_off_from_the_knobs_it_kept(tmp_path):
    # Hedging got a switch later than the rest: a run whose bare variant had it off says so,
    # one from before (its knobs without it) does not claim it.
    rounds = [{"order": ["ftccl", "ftccl_bare", "gloo"], "ftccl": perf(2.0, 1.0),
               "ftccl_bare": perf(2.0, 1.0), "gloo": perf(1.0, 1.0), "ceiling_gbps": 4.0}]
    meta = {"command": "bench/compare-allreduce -k 1", "started_utc": "2026-01-01 00:00 UTC",
            "git_commit": "abc1234", "nproc": 2, "load_start": [1, 1, 1],
            "load_end": [1, 1, 1], "label": "synthetic"}
    before = {"FTCCL_WATCH_LINKS": "0", "FTCCL_BENCH_PAYLOAD_CRC": "0"}
    old = render_compare_allreduce(tmp_path, rounds, meta, before).stdout
    new = render_compare_allreduce(tmp_path, rounds, meta,
                                   dict(before, FTCCL_HEDGE_FLOOR_MS="0")).stdout
    assert "path suspicion and the payload CRC off" in old and "hedging" not in old
    assert "path suspicion, hedging and the payload CRC off" in new
