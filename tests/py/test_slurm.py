"""Fleet mode on one box: `faultline cluster up|down` with a real Slurm (munged, slurmctld, one
slurmd per host namespace) and `faultline run --launcher slurm`. Every test has its own cluster
directory and journal, and checks afterwards with iproute2 and /proc, not with faultline's own
output, that no namespace, daemon, rank or directory is left."""
import glob
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(ROOT, "build"))
FAULTLINE = os.path.join(BUILD, "bin", "faultline")
DEMO = os.path.join(ROOT, "scenarios", "demo.yaml")

pytestmark = pytest.mark.skipif(
    shutil.which("slurmctld", path="/usr/sbin:/usr/bin") is None
    or shutil.which("munged", path="/usr/sbin:/usr/bin") is None,
    reason="Debian's slurm-wlm and munge are not installed (scripts/install-deps installs them)")


def sh(*args, check=True, env=None, timeout=120):
    return subprocess.run(args, check=check, capture_output=True, text=True, env=env,
                          timeout=timeout)


def netns_names():
    return {l.split()[0] for l in sh("ip", "netns", "list").stdout.splitlines() if l}


def live_processes_mentioning(text):
    """Processes (not zombies) whose command line contains `text`."""
    found = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(d + "/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z" and int(d[6:]) != os.getpid():
            found.append((int(d[6:]), cmd.strip()))
    return found


@pytest.fixture
def box(tmp_path):
    """Environment for one test's cluster: its own directory and journal."""
    env = dict(os.environ)
    env["FAULTLINE_CLUSTER_DIR"] = str(tmp_path / "cluster")
    env["FAULTLINE_JOURNAL_DIR"] = str(tmp_path / "journal")
    env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/sbin"
    before = netns_names()
    yield env
    # Whatever the test did, nothing of its cluster may stay.
    subprocess.run([FAULTLINE, "cluster", "down"], env=env, capture_output=True)
    subprocess.run([FAULTLINE, "cleanup"], env=env, capture_output=True)
    assert netns_names() - before == set()


def assert_nothing_left(env, before_netns):
    cdir = env["FAULTLINE_CLUSTER_DIR"]
    assert not os.path.exists(cdir), os.listdir(cdir)
    assert netns_names() - before_netns == set()
    # The daemons are gone: none is left running (a zombie waits only for init to reap it).
    deadline = time.time() + 5
    while live_processes_mentioning(cdir) and time.time() < deadline:
        time.sleep(0.1)
    assert live_processes_mentioning(cdir) == []
    assert glob.glob(os.path.join(env["FAULTLINE_JOURNAL_DIR"], "*.json")) == []


def up(env, *extra):
    r = sh(FAULTLINE, "cluster", "up", "--json", *extra, env=env, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def ctl(env, info, *argv, check=True):
    e = dict(env)
    e["SLURM_CONF"] = info["slurm_conf"]
    return sh("ip", "netns", "exec", info["ctl_netns"], *argv, env=e, check=check)


def test_cluster_up_places_tasks_in_host_namespaces_and_down_leaves_nothing(box):
    before = netns_names()
    info = up(box, "--hosts", "2", "--ranks-per-host", "2", "--rails", "2")
    assert info["nodes"] == ["h0", "h1"]
    # Real daemons: one munged, one slurmctld, a slurmd per node, each in its namespace; a
    # node's CPUs are its ranks and its fault agent.
    nodes = ctl(box, info, "sinfo", "-h", "-N", "-o", "%N %T %c").stdout.split("\n")
    assert sorted(n.split() for n in nodes if n) == [["h0", "idle", "3"], ["h1", "idle", "3"]]
    # srun places tasks 0,1 on h0 and 2,3 on h1: in those hosts' namespaces.
    r = ctl(box, info, "srun", "-N2", "-n4", "--ntasks-per-node=2", "sh", "-c",
            'echo $SLURM_PROCID $SLURM_NODEID $(ip netns identify $$)')
    placed = sorted(tuple(l.split()) for l in r.stdout.splitlines())
    h0, h1 = info["host_netns"]
    assert placed == [("0", "0", h0), ("1", "0", h0), ("2", "1", h1), ("3", "1", h1)]
    # Nothing of /etc/slurm or /etc/munge is used: the daemons name the cluster's own files.
    daemons = live_processes_mentioning(info["dir"])
    assert any("munged" in c and info["munge_socket"] in c for _, c in daemons)
    r = sh(FAULTLINE, "cluster", "down", env=box)
    assert "down" in r.stdout
    assert_nothing_left(box, before)


def test_second_cluster_up_is_refused_and_changes_nothing(box):
    info = up(box, "--hosts", "1", "--ranks-per-host", "1", "--rails", "1")
    ns = netns_names()
    r = sh(FAULTLINE, "cluster", "up", "--hosts", "1", env=box, check=False)
    assert r.returncode == 2
    assert "already up" in r.stderr
    assert netns_names() == ns
    assert ctl(box, info, "sinfo", "-h", "-o", "%T").stdout.strip() == "idle"


def test_down_without_cluster_is_a_clear_error(box):
    r = sh(FAULTLINE, "cluster", "down", env=box, check=False)
    assert r.returncode == 2
    assert "no cluster is up" in r.stderr


def test_cluster_up_killed_midway_is_undone_by_cleanup(box):
    """SIGKILL at any point of `cluster up`: the journal has every namespace, daemon and the
    directory, so `faultline cleanup` removes them."""
    before = netns_names()
    for delay in (0.15, 0.4):
        p = subprocess.Popen([FAULTLINE, "cluster", "up", "--hosts", "2"], env=box,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        r = sh(FAULTLINE, "cleanup", env=box, check=False)
        assert r.returncode == 0, r.stderr
        assert_nothing_left(box, before)


def test_demo_under_slurm_gives_the_local_verdict(box, tmp_path):
    before = netns_names()
    up(box, "--hosts", "2", "--ranks-per-host", "2", "--rails", "2", "--rail-gbps", "1")
    out_s, out_l = str(tmp_path / "slurm"), str(tmp_path / "local")
    rs = sh(FAULTLINE, "run", DEMO, "--launcher", "slurm", "--out", out_s, env=box, check=False,
            timeout=180)
    rl = sh(FAULTLINE, "run", DEMO, "--out", out_l, env=box, check=False, timeout=180)
    assert rs.returncode == rl.returncode == 0, rs.stdout + rs.stderr
    with open(os.path.join(out_s, "report.json")) as f:
        rep = json.load(f)
    env = rep["environment"]
    assert env["launcher"] == "slurm"
    assert env["slurm"]["job_id"] and env["slurm"]["step_id"] == "0"
    assert env["clock_offsets"] is None  # not measured: no agents yet, never made up
    with open(os.path.join(out_l, "report.json")) as f:
        assert json.load(f)["environment"]["launcher"] == "local"
    # Every rank ran under Slurm on the host its placement names.
    for g in range(4):
        with open(os.path.join(out_s, "ranks", "tasks", f"task{g}.started")) as f:
            started = json.load(f)
        assert started["node"] == f"h{g // 2}"
        with open(os.path.join(out_s, "ranks", "tasks", f"task{g}.status")) as f:
            assert json.load(f) == {"state": "exited", "code": 0}
    r = sh(FAULTLINE, "compare", os.path.join(out_l, "report.json"),
           os.path.join(out_s, "report.json"), "--tolerance", "50%", env=box, check=False)
    assert "REGRESSION" not in r.stdout, r.stdout
    sh(FAULTLINE, "cluster", "down", env=box)
    assert_nothing_left(box, before)
    assert live_processes_mentioning(out_s) == []


def test_scenario_that_does_not_fit_the_cluster_is_refused(box, tmp_path):
    up(box, "--hosts", "2", "--ranks-per-host", "1", "--rails", "2")
    r = sh(FAULTLINE, "run", DEMO, "--launcher", "slurm", "--out", str(tmp_path / "o"), env=box,
           check=False)
    assert r.returncode == 2
    assert "does not fit the cluster" in r.stderr and "2 ranks per host" in r.stderr


def test_hung_ranks_are_cancelled_through_scancel(box, tmp_path):
    """Ranks that never end: the watchdog's kill is `scancel` of the job step, and nothing of
    the step is left running."""
    before = netns_names()
    up(box, "--hosts", "2", "--ranks-per-host", "1", "--rails", "2")
    hang = tmp_path / "hang-worker"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    sc = tmp_path / "hang.yaml"
    sc.write_text("name: hang\nseed: 1\ntopology: {hosts: 2, ranks_per_host: 1, rails: 2, "
                  "rail_gbps: 1}\nccl: ftccl\nworkload: {op: allreduce, bytes: 1KiB, "
                  "duration: 500ms}\n")
    out = str(tmp_path / "out")
    t = time.time()
    r = sh(FAULTLINE, "run", str(sc), "--launcher", "slurm", "--worker", str(hang),
           "--op-timeout-ms", "100", "--out", out, env=box, check=False, timeout=120)
    assert time.time() - t < 60
    with open(os.path.join(out, "report.json")) as f:
        rep = json.load(f)
    assert rep["outcome"] == "hung", rep["outcome"]
    with open(os.path.join(out, "ranks", "srun.err")) as f:
        assert "Killed" in f.read()  # srun saw its tasks killed by the step's cancel
    assert live_processes_mentioning(str(hang)) == []
    sh(FAULTLINE, "cluster", "down", env=box)
    assert_nothing_left(box, before)
