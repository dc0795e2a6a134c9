"""bench/torch-ddp's tables on hand-made run directories (--table DIR: no runs, no root, no
torch): fault-free steps/s per pair with the ratio, and under faults full convergence with what
it was measured from beside the library-neutral progress_ms for both libraries."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "torch-ddp")


def write(root, name, ccl, outcome="survived", steps_per_s=None, sha="aa", per_fault=None):
    d = os.path.join(root, name, f"ccl={ccl}")
    os.makedirs(d)
    r = {"schema": "faultline.report/v2", "ccl": ccl, "outcome": outcome,
         "metrics": {"steps_per_s": steps_per_s, "steps_completed": 400, "param_sha256": sha},
         "per_fault": per_fault or []}
    with open(os.path.join(d, "report.json"), "w") as f:
        json.dump(r, f)


def test_tables_from_an_earlier_out_dir(tmp_path):
    write(tmp_path, "pair0-ftccl", "ftccl", steps_per_s=30.0, sha="f0")
    write(tmp_path, "pair0-gloo", "gloo", steps_per_s=20.0, sha="g0")
    write(tmp_path, "link_flap-ftccl", "ftccl", sha="f0", per_fault=[
        {"id": "f1", "stall_ms": 12.0, "failover_latency_ms": 4.0, "progress_ms": 35.0,
         "convergence": "path_events"}])
    write(tmp_path, "link_flap-gloo", "gloo", sha="gX", per_fault=[
        {"id": "f1", "stall_ms": 900.0, "failover_latency_ms": 950.0, "progress_ms": 950.0,
         "convergence": "collective_progress"}])
    p = subprocess.run([sys.executable, SCRIPT, "--table", str(tmp_path)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    pair = next(l.split() for l in lines if l.split()[:1] == ["0"])
    assert pair == ["0", "30.0", "20.0", "1.500"], lines
    head = next(l.split() for l in lines if l.strip().startswith("scenario"))
    assert head == ["scenario", "ccl", "outcome", "steps", "stall_ms", "full_ms", "from",
                    "progress_ms", "hash"], head
    rows = {l.split()[1]: l.split() for l in lines if l.strip().startswith("link_flap")}
    assert rows["ftccl"] == ["link_flap", "ftccl", "survived", "400", "12.0", "4.0", "events",
                             "35.0", "yes"], rows["ftccl"]
    # Gloo's parameters differ from its fault-free run's: said, not hidden.
    assert rows["gloo"] == ["link_flap", "gloo", "survived", "400", "900.0", "950.0",
                            "progress", "950.0", "NO"], rows["gloo"]


def test_an_ftccl_run_that_lost_its_parameters_exits_1(tmp_path):
    write(tmp_path, "pair0-ftccl", "ftccl", steps_per_s=30.0, sha="f0")
    write(tmp_path, "pair0-gloo", "gloo", steps_per_s=20.0, sha="g0")
    write(tmp_path, "blackhole-ftccl", "ftccl", sha="other", per_fault=[
        {"id": "f1", "stall_ms": 10.0, "failover_latency_ms": 5.0, "progress_ms": 20.0,
         "convergence": "path_events"}])
    p = subprocess.run([sys.executable, SCRIPT, "--table", str(tmp_path)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "NO" in p.stdout
