"""Incident replay end to end: `faultline import` of a multi-host incident (per-host kernel
clocks, a switch's log, an NCCL job's error lines) and `faultline run` of the scenario it
writes, where Gloo must reproduce the production job's fail-stop symptom (the ranks that
printed NCCL errors return errors) and ftccl must survive the same fault."""
import glob
import json
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(ROOT, "build"))
FAULTLINE = os.path.join(BUILD, "bin", "faultline")
DATA = os.path.join(ROOT, "tests", "data", "incidents")

MAPS = ["--map", "gpu-node-17:ens1f0np0=host0/rail0",
        "--map-switch", "leaf1:Ethernet1/1=host0/rail0",
        "--map-rank", "gpu-node-17:0=host0/rank0", "--map-rank", "gpu-node-17:1=host0/rank1",
        "--map-rank", "gpu-node-18:0=host1/rank0", "--map-rank", "gpu-node-18:1=host1/rank1"]


def faultline(*args, timeout=60, env=None):
    return subprocess.run([FAULTLINE, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.fixture(scope="session", autouse=True)
def built():
    if not os.access(FAULTLINE, os.X_OK):
        pytest.skip(f"{FAULTLINE} is not built (set FAULTLINE_BUILD)")


def test_two_host_syslog_keeps_outage_lengths_and_states_the_alignment(tmp_path):
    out = tmp_path / "two-host.yaml"
    r = faultline("import", os.path.join(DATA, "two-host-syslog.log"),
                  "--map", "gpu-node-17:ens1f0np0=host0/rail0",
                  "--map", "gpu-node-18:ens1f1np1=host1/rail1", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    # 200 ms and 3.5 s by the kernel clocks (the one-second wall stamps say 0 s and 4 s).
    assert re.search(r"target: \{host: 0, rail: 0, side: host\}, for: 200ms\}", text), text
    assert re.search(r"target: \{host: 1, rail: 1, side: host\}, for: 3500ms\}", text), text
    assert "gpu-node-17: its kernel clock, booted at" in text
    assert "+-225.0 ms" in text and "+-100.0 ms" in text, text
    assert "aligned within +-450.0 ms" in text, text
    assert faultline("validate", str(out)).returncode == 0


def test_import_directory_names_hosts_and_keeps_symptoms(tmp_path):
    out = tmp_path / "replay.yaml"
    r = faultline("import", os.path.join(DATA, "nccl-port-down"), *MAPS, "--bytes", "4MiB",
                  "--name", "nccl-port-down", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "1 fault(s) (1 permanent) from 1 link event(s), 3 symptom(s)" in r.stderr
    text = out.read_text()
    assert "also seen by the switch: " in text  # the switch's view cited, not a second fault
    assert text.count("type: link_down") == 1, text
    assert "matrix: {ccl: [ftccl, gloo]}" in text
    assert re.search(r"reproduce:\n  ccl: gloo\n  outcome: aborted_clean\n  ranks: \[1, 3\]\n"
                     r"  within: 3[0-9]s\n", text), text
    # Without the rank mapping the symptoms are named as ignored, and there is no verdict.
    r = faultline("import", os.path.join(DATA, "nccl-port-down"), *MAPS[:4])
    assert r.returncode == 0, r.stderr
    assert "ignored the events of process gpu-node-17:1" in r.stderr
    assert "reproduce:" not in r.stdout


def test_bad_import_input_is_refused_with_its_place(tmp_path):
    log = tmp_path / "job.out"
    log.write_text("[2026-11-28 03:14:29] gpu-node-17:51235:51301 [1] NCCL WARN\n"
                   "gpu-node-17:51235:51301 [1] NCCL WARN NET/IB : Got completion from peer "
                   "10.0.0.18<46213> with\n")
    kern = tmp_path / "k.log"
    kern.write_text("[  10.000000] mlx5_core 0000:08:00.0 eth2: Link down\n")
    r = faultline("import", str(kern), str(log), "--map", "eth2=host0/rail0")
    assert r.returncode == 0, r.stderr
    assert re.search(r"warning: .*job\.out:1: .*\(line skipped\)", r.stderr), r.stderr
    assert re.search(r"warning: .*job\.out:2: .*\(line skipped\)", r.stderr), r.stderr
    for bad, why in [(["--map-rank", "gpu-node-17=host0/rank0"], "expected NODE:LOCAL"),
                     (["--map-switch", "Ethernet1=host0/rail0"], "expected SWITCH:PORT"),
                     (["--reproduce-ccl", "ftccl"], "gloo or nccl"),
                     (["--within", "soon"], "--within")]:
        r = faultline("import", str(kern), "--map", "eth2=host0/rail0", *bad)
        assert r.returncode == 2 and why in r.stderr, (bad, r.stderr)
    empty = tmp_path / "empty"
    empty.mkdir()
    r = faultline("import", str(empty), "--map", "eth2=host0/rail0")
    assert r.returncode == 2 and "holds no log file" in r.stderr


def test_year_less_stamps_roll_over_new_year(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("Dec 31 23:59:58 gpu1 kernel: [ 900.000000] mlx5_core 0000:08:00.0 eth2: Link down\n"
                   "Jan  1 00:00:03 gpu1 kernel: [ 905.000000] mlx5_core 0000:08:00.0 eth2: Link up\n")
    r = faultline("import", str(log), "--map", "gpu1:eth2=host0/rail0", "--year", "2025")
    assert r.returncode == 0, r.stderr
    assert "for: 5000ms}" in r.stdout, r.stdout
    assert "duration: 10s" in r.stdout, r.stdout
    # Without the kernel stamps the wall clock alone must roll over too.
    log.write_text("Dec 31 23:59:58 gpu1 kernel: mlx5_core 0000:08:00.0 eth2: Link down\n"
                   "Jan  1 00:00:03 gpu1 kernel: mlx5_core 0000:08:00.0 eth2: Link up\n")
    r = faultline("import", str(log), "--map", "gpu1:eth2=host0/rail0", "--year", "2025")
    assert r.returncode == 0, r.stderr
    assert "for: 5000ms}" in r.stdout, r.stdout


def leftovers(run_ids):
    """The namespaces of these runs (fl-<run id>-: other tests' runs make and remove theirs
    meanwhile) and the project's nft tables in the root namespace (which no test changes on
    purpose: every fault acts in namespaces of its own)."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    return ([l for l in netns.splitlines() if any(l.startswith(f"fl-{i}-") for i in run_ids)],
            [l for l in tables.splitlines() if "faultline" in l])


@pytest.mark.skipif(os.geteuid() != 0, reason="faultline run needs root")
@pytest.mark.slow  # a replay on two libraries: make check
def test_replay_reproduces_on_gloo_and_ftccl_survives(tmp_path):
    scenario = tmp_path / "replay.yaml"
    r = faultline("import", os.path.join(DATA, "nccl-port-down"), *MAPS, "--bytes", "4MiB",
                  "--name", "nccl-port-down", "-o", str(scenario))
    assert r.returncode == 0, r.stderr
    tables_before = leftovers([])[1]
    env = dict(os.environ, FAULTLINE_JOURNAL_DIR=str(tmp_path / "journal"))
    out = tmp_path / "out"
    run = faultline("run", str(scenario), "--out", str(out), timeout=300, env=env)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log
    assert re.search(r"REPRODUCED\s+nccl-port-down\[ccl=gloo\]", log), log
    assert re.search(r"PASS\s+nccl-port-down\[ccl=ftccl\]", log), log

    ft = json.loads((out / "ccl=ftccl" / "report.json").read_text())
    assert ft["judged_by"] == "expect"
    assert ft["outcome"] == "survived"
    assert ft["reproduce"]["judged"] is False and ft["reproduce"]["reproduced"] is None
    assert ft["correctness"]["wrong"] == 0

    gl = json.loads((out / "ccl=gloo" / "report.json").read_text())
    assert gl["judged_by"] == "reproduce"
    assert gl["outcome"] == "aborted_clean"
    assert gl["reproduce"]["reproduced"] is True
    checks = {c["name"]: c for c in gl["expectations"]}
    assert set(checks) == {"reproduce.outcome", "reproduce.ranks"}
    # The ranks that printed NCCL errors in production fail in the replay, after the fault.
    for rank in ("1", "3"):
        assert 0 < checks["reproduce.ranks"]["value"][rank] <= checks["reproduce.ranks"]["limit"]["within_ms"]
    assert "the incident was reproduced" in (out / "ccl=gloo" / "summary.md").read_text()
    run_ids = [rep["environment"]["run_id"] for rep in (ft, gl)]
    assert all(run_ids), run_ids
    assert leftovers(run_ids) == ([], tables_before)
    # Namespaces of any name: the run's journal records each before it is made, drops it once
    # it is gone.
    assert not glob.glob(str(tmp_path / "journal" / "*.json"))


@pytest.mark.skipif(os.geteuid() != 0, reason="faultline run needs root")
def test_a_replay_that_does_not_reproduce_says_so(tmp_path):
    # The same incident with a short outage: Gloo rides out 300 ms over TCP, so it does not
    # reproduce the production job's abort; the run fails and says why.
    scenario = tmp_path / "short.yaml"
    scenario.write_text("""name: short-outage
topology: {hosts: 2, ranks_per_host: 2, rails: 2, rail_gbps: 1}
ccl: gloo
workload: {op: allreduce, dtype: f32, bytes: 1MiB, duration: 4s, warmup: 1s, check: true}
faults:
  - {id: blip, at: 2s, type: link_down, target: {host: 0, rail: 0}, for: 300ms}
expect: {outcome: survive}
reproduce: {ccl: gloo, outcome: aborted_clean, ranks: [1, 3], within: 30s}
""")
    env = dict(os.environ, FAULTLINE_JOURNAL_DIR=str(tmp_path / "journal"))
    run = faultline("run", str(scenario), "--out", str(tmp_path / "out"), timeout=300, env=env)
    log = run.stdout + run.stderr
    assert run.returncode == 1, log
    assert "incident replay on gloo: NOT REPRODUCED" in log, log
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["judged_by"] == "reproduce" and rep["reproduce"]["reproduced"] is False
    assert rep["outcome"] == "survived"
