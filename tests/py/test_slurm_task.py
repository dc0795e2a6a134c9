"""The task side of the Slurm launcher (`faultline task-exec`), run as srun would run it: a task
refuses a rank placed on another node, runs its own rank otherwise, and records how it ended
(an exit code, or the signal that killed it) for the launcher's Wait."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(ROOT, "build"))
FAULTLINE = os.path.join(BUILD, "bin", "faultline")


def task(tmp_path, argv, host=0, local=0, procid=0, nodeid=0, localid=0):
    d = tmp_path / "tasks"
    d.mkdir(exist_ok=True)
    spec = {"argv": argv, "env": ["FL_TASK_TEST=yes"], "host": host, "local_rank": local,
            "global_rank": procid, "stdout": str(tmp_path / "rank.out"),
            "stderr": str(tmp_path / "rank.err")}
    (d / f"task{procid}.json").write_text(json.dumps(spec))
    env = dict(os.environ, SLURM_PROCID=str(procid), SLURM_NODEID=str(nodeid),
               SLURM_LOCALID=str(localid), SLURM_JOB_ID="7", SLURM_STEP_ID="0",
               SLURMD_NODENAME=f"h{nodeid}")
    r = subprocess.run([FAULTLINE, "task-exec", "--dir", str(d)], env=env, capture_output=True,
                       text=True, timeout=30, cwd=tmp_path)
    status = d / f"task{procid}.status"
    return r, (json.loads(status.read_text()) if status.exists() else None), d


def test_runs_its_rank_with_its_environment_and_records_the_exit(tmp_path):
    r, status, d = task(tmp_path, ["sh", "-c", 'echo "$FL_TASK_TEST $SLURM_PROCID"; exit 3'],
                        host=1, local=1, procid=3, nodeid=1, localid=1)
    assert r.returncode == 3
    assert status == {"state": "exited", "code": 3}
    assert (tmp_path / "rank.out").read_text() == "yes 3\n"
    started = json.loads((d / "task3.started").read_text())
    assert started["node"] == "h1" and started["job_id"] == "7" and started["step_id"] == "0"


def test_records_the_signal_that_killed_the_rank(tmp_path):
    r, status, _ = task(tmp_path, ["sh", "-c", "kill -9 $$"])
    assert status == {"state": "signaled", "signal": 9}
    assert r.returncode == -9  # and ends the same way itself


def test_refuses_a_rank_placed_on_another_node(tmp_path):
    r, status, d = task(tmp_path, ["sh", "-c", "touch ran"], host=0, local=1, nodeid=1, localid=0)
    assert r.returncode == 125
    assert not (tmp_path / "ran").exists()
    assert status["code"] == 125 and "belongs to host 0 as local rank 1" in status["error"]
    assert not (d / "task0.started").exists()


def test_outside_slurm_is_a_clear_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    r = subprocess.run([FAULTLINE, "task-exec", "--dir", str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "not a Slurm task" in r.stderr
