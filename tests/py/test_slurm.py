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

# make check only (a Slurm cluster per test: minutes in all).
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    shutil.which("slurmctld", path="/usr/sbin:/usr/bin") is None
    or shutil.which("munged", path="/usr/sbin:/usr/bin") is None,
    reason="Debian's slurm-wlm and munge are not installed (scripts/install-deps installs them)")]


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


CLUSTER_IDS = []  # run ids of the clusters the current test brought up


def cluster_netns(run_id):
    return {n for n in netns_names() if n.startswith(f"fl-{run_id}-")}


def journaled_run_ids(journal_dir):
    ids = set()
    for path in glob.glob(os.path.join(journal_dir, "*.json")):
        try:
            with open(path) as f:
                ns = json.load(f).get("undo", {}).get("netns", "")
        except (OSError, ValueError):
            continue
        if ns.startswith("fl-"):
            ids.add(ns.split("-")[1])
    return ids


@pytest.fixture
def box(tmp_path):
    """Environment for one test's cluster: its own directory and journal."""
    env = dict(os.environ)
    env["FAULTLINE_CLUSTER_DIR"] = str(tmp_path / "cluster")
    env["FAULTLINE_JOURNAL_DIR"] = str(tmp_path / "journal")
    env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/sbin"
    CLUSTER_IDS.clear()
    yield env
    # Whatever the test did, nothing of its clusters may stay.
    subprocess.run([FAULTLINE, "cluster", "down"], env=env, capture_output=True)
    subprocess.run([FAULTLINE, "cleanup"], env=env, capture_output=True)
    for run_id in CLUSTER_IDS:
        assert cluster_netns(run_id) == set()


def assert_nothing_left(env, run_ids):
    """The clusters `run_ids` left nothing: directory, namespaces (by their names), daemons (by
    their command lines, which name the cluster directory) and journal entries."""
    cdir = env["FAULTLINE_CLUSTER_DIR"]
    assert run_ids
    assert not os.path.exists(cdir), os.listdir(cdir)
    for run_id in run_ids:
        assert cluster_netns(run_id) == set()
    # The daemons are gone: none is left running (a zombie waits only for init to reap it).
    deadline = time.time() + 5
    while live_processes_mentioning(cdir) and time.time() < deadline:
        time.sleep(0.1)
    assert live_processes_mentioning(cdir) == []
    jdir = env["FAULTLINE_JOURNAL_DIR"]
    assert glob.glob(os.path.join(jdir, "*.json")) + glob.glob(os.path.join(jdir, "*", "*.json")) == []
    # Nor the agents' own journal directories (agent-<node>).
    assert glob.glob(os.path.join(jdir, "agent-*")) == []


def up(env, *extra):
    r = sh(FAULTLINE, "cluster", "up", "--json", *extra, env=env, check=False)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    CLUSTER_IDS.append(info["run_id"])
    return info


def ctl(env, info, *argv, check=True):
    e = dict(env)
    e["SLURM_CONF"] = info["slurm_conf"]
    return sh("ip", "netns", "exec", info["ctl_netns"], *argv, env=e, check=check)


def test_cluster_up_places_tasks_in_host_namespaces_and_down_leaves_nothing(box):
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
    assert_nothing_left(box, [info["run_id"]])


def test_second_cluster_up_is_refused_and_changes_nothing(box):
    info = up(box, "--hosts", "1", "--ranks-per-host", "1", "--rails", "1")
    ns = netns_names()
    r = sh(FAULTLINE, "cluster", "up", "--hosts", "1", env=box, check=False)
    assert r.returncode == 2
    assert "already up" in r.stderr
    assert cluster_netns(info["run_id"]) == {f"fl-{info['run_id']}-sw", f"fl-{info['run_id']}-h0"}
    assert journaled_run_ids(box["FAULTLINE_JOURNAL_DIR"]) == {info["run_id"]}
    assert ctl(box, info, "sinfo", "-h", "-o", "%T").stdout.strip() == "idle"


def test_down_without_cluster_is_a_clear_error(box):
    r = sh(FAULTLINE, "cluster", "down", env=box, check=False)
    assert r.returncode == 2
    assert "no cluster is up" in r.stderr


# Serial: its kill delays (0.15/0.4/0.6 s) are to land while daemons start at an idle box's pace.
@pytest.mark.serial
def test_cluster_up_killed_midway_is_undone_by_cleanup(box):
    """SIGKILL at any point of `cluster up`: the journal has every namespace, daemon and the
    directory, so `faultline cleanup` removes them."""
    caught = []
    for delay in (0.15, 0.4, 0.6):
        p = subprocess.Popen([FAULTLINE, "cluster", "up", "--hosts", "2"], env=box,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        ids = journaled_run_ids(box["FAULTLINE_JOURNAL_DIR"])
        CLUSTER_IDS.extend(ids)
        caught.append((delay, bool(ids), bool(live_processes_mentioning(box["FAULTLINE_CLUSTER_DIR"]))))
        r = sh(FAULTLINE, "cleanup", env=box, check=False)
        assert r.returncode == 0, r.stderr
        if ids:  # killed after its namespaces were journaled
            assert_nothing_left(box, ids)
        assert not os.path.exists(box["FAULTLINE_CLUSTER_DIR"])
    # At least one kill caught the cluster half built, with daemons running.
    assert any(ns and daemons for _, ns, daemons in caught), caught


# Serial: both launchers' verdicts rest on "recovery within 4 s" and the clock offsets on
# round trips, which another test's ranks on these cores move (it failed once under -n 2).
@pytest.mark.serial
def test_demo_under_slurm_gives_the_local_verdict(box, tmp_path):
    info = up(box, "--hosts", "2", "--ranks-per-host", "2", "--rails", "2", "--rail-gbps", "1")
    # The same scenario through both launchers; the verdicts must agree. On a shared box a
    # borderline expectation (recovery within 4 s) can flip with the load for either launcher:
    # a difference is run again once, and only one that repeats is the launcher's.
    for attempt in range(2):
        out_s = str(tmp_path / f"slurm{attempt}")
        out_l = str(tmp_path / f"local{attempt}")
        rs = sh(FAULTLINE, "run", DEMO, "--launcher", "slurm", "--out", out_s, env=box,
                check=False, timeout=180)
        rl = sh(FAULTLINE, "run", DEMO, "--out", out_l, env=box, check=False, timeout=180)
        if rs.returncode == rl.returncode:
            break
    assert rs.returncode == rl.returncode, rs.stdout + rl.stdout
    assert rs.returncode in (0, 1), rs.stdout + rs.stderr  # a verdict, not a harness error
    with open(os.path.join(out_s, "report.json")) as f:
        rep = json.load(f)
    env = rep["environment"]
    assert env["launcher"] == "slurm"
    assert env["slurm"]["job_id"] and env["slurm"]["step_id"] == "0"
    with open(os.path.join(out_l, "report.json")) as f:
        assert json.load(f)["environment"]["launcher"] == "local"
    # Every fault (each flap cycle too) was applied by the agent of its target host.
    by_id = {f["id"]: f["target"]["host"] for f in rep["faults"]}
    applied = env["agents"]["faults"]
    assert {a["fault"] for a in applied} == set(by_id)
    assert all(a["host"] == by_id[a["fault"]] and a["node"] == f"h{a['host']}" for a in applied)
    # One clock: every host's offset was measured, before and after. On one machine the true
    # offset is 0, so a correct 4-timestamp estimate lies within its stated uncertainty.
    offsets = env["clock_offsets"]
    assert [o["host"] for o in offsets] == [0, 1]
    for o in offsets:
        assert o["rounds"] >= 4
        assert abs(o["offset_us"]) <= o["uncertainty_us"] + 1e-3, o
        assert abs(o["offset_after_us"]) <= o["uncertainty_after_us"] + 1e-3, o
    # Every rank ran under Slurm on the host its placement names.
    for g in range(4):
        with open(os.path.join(out_s, "ranks", "tasks", f"task{g}.started")) as f:
            started = json.load(f)
        assert started["node"] == f"h{g // 2}"
        with open(os.path.join(out_s, "ranks", "tasks", f"task{g}.status")) as f:
            assert json.load(f) == {"state": "exited", "code": 0}
    # The rail counters came from each host's agent (on a real cluster the runner cannot read
    # another host's ports), mapped to the runner's clock: the per-fault windows read the same
    # story as the local run's, where the runner samples every namespace itself.
    with open(os.path.join(out_l, "report.json")) as f:
        local = json.load(f)
    rails = rep["rails"]
    assert "agent" in rails["source"] and "agent" not in local["rails"]["source"]
    assert rails["sampled"] and not rails.get("errors"), rails
    assert rails["samples"] >= 0.9 * local["rails"]["samples"], (rails, local["rails"])
    assert rails["unmatched_samples"] <= 2, rails
    for r in (rep, local):
        # "down": host 0's rail 0 down for 2 s; during it that port carries nothing while its
        # rail-1 port carries the traffic.
        [down] = [pf for pf in r["per_fault"] if pf["id"] == "down"]
        by = {(w["host"], w["rail"]): w for w in down["rails"]}
        assert by[(0, 0)]["during_gbps"] < 0.02, by
        assert by[(0, 1)]["during_gbps"] > 0.05, by
        assert by[(0, 0)]["before_gbps"] > 0.05, by
    with open(os.path.join(out_s, "rails.csv")) as f:
        header = f.readline().strip().split(",")
    assert header[0] == "t_s" and {"h0_r0_tx_gbps", "h1_r1_rx_gbps"} <= set(header), header
    r = sh(FAULTLINE, "compare", os.path.join(out_l, "report.json"),
           os.path.join(out_s, "report.json"), "--tolerance", "50%", env=box, check=False)
    assert "REGRESSION" not in r.stdout, r.stdout
    sh(FAULTLINE, "cluster", "down", env=box)
    assert_nothing_left(box, [info["run_id"]])
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
    info = up(box, "--hosts", "2", "--ranks-per-host", "1", "--rails", "2")
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
    assert_nothing_left(box, [info["run_id"]])


LONG_DOWN = """name: long-down
seed: 3
topology: {hosts: 2, ranks_per_host: 1, rails: 2, rail_gbps: 1}
ccl: ftccl
workload: {op: allreduce, bytes: 256KiB, duration: 12s, warmup: 500ms, check: true}
faults:
  - {id: down, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 9s}
"""


def link_up(netns, dev):
    out = json.loads(sh("ip", "-n", netns, "-j", "link", "show", dev).stdout)[0]
    return "UP" in out["flags"]


def agent_pids(cdir_marker):
    return [p for p, c in live_processes_mentioning(" agent ") if cdir_marker in c]


def cluster_agents(info):
    """`faultline agent` processes (and the srun that started them) of runs on this cluster:
    their --allow names its hosts' namespaces (fl-<cluster run id>-h<i>)."""
    return [(p, c) for p, c in live_processes_mentioning("faultline agent")
            if f"fl-{info['run_id']}-" in c]


def wait_for(pred, timeout, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def test_agent_killed_mid_fault_is_replaced_and_heals(box, tmp_path):
    """SIGKILL of a host's agent while its fault is in force: the runner notices, starts a fresh
    agent on that node, which undoes the lost one's journal on start (the link comes back up
    long before the scenario would have reverted it); the run still ends cleanly."""
    info = up(box, "--hosts", "2", "--ranks-per-host", "1", "--rails", "2")
    sc = tmp_path / "long.yaml"
    sc.write_text(LONG_DOWN)
    out = str(tmp_path / "out")
    run = subprocess.Popen([FAULTLINE, "run", str(sc), "--launcher", "slurm", "--out", out],
                           env=box, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    h0 = info["host_netns"][0]
    try:
        assert wait_for(lambda: not link_up(h0, "r0"), 30), "the fault was never applied"
        # This cluster's agents only (other tests' come and go meanwhile: one that ended
        # before `identify` is none of this cluster's h0).
        victims = [p for p, c in cluster_agents(info)
                   if os.path.realpath(f"/proc/{p}/ns/net") and
                   sh("ip", "netns", "identify", str(p), check=False).stdout.strip() == h0]
        assert len(victims) == 1, victims
        os.kill(victims[0], signal.SIGKILL)
        killed_at = time.time()
        # Healed by the replacement, well before the fault's own end (9 s after it began).
        assert wait_for(lambda: link_up(h0, "r0"), 6), "the lost agent's fault stayed in force"
        assert time.time() - killed_at < 6
    finally:
        stdout, _ = run.communicate(timeout=120)
    with open(os.path.join(out, "report.json")) as f:
        rep = json.load(f)
    events = " | ".join(rep["environment"]["agents"]["events"])
    assert "agent of h0 lost" in events and "agent of h0 replaced" in events, events
    assert "undid 1 journal entry on start" in events, events
    # Only that host's agent was lost: the other's lease was renewed while it was replaced.
    assert "agent of h1" not in events, events
    # h0's rail samples went with its agent; h1's agent kept sampling to the end.
    rails = rep["rails"]
    assert len(rails["errors"]) == 1 and rails["errors"][0].startswith("host 0: no samples"), rails
    with open(os.path.join(out, "rails.csv")) as f:
        rows = [line.rstrip("\n").split(",") for line in f]
    col = rows[0].index("h1_r1_tx_gbps")
    assert sum(1 for r in rows[1:] if r[col] != "") > 0.8 * (len(rows) - 1), rows[:3]
    col0 = rows[0].index("h0_r1_tx_gbps")
    assert all(r[col0] == "" for r in rows[1:])
    sh(FAULTLINE, "cluster", "down", env=box)
    assert_nothing_left(box, [info["run_id"]])
    assert agent_pids(out) == []


def test_runner_killed_agents_heal_when_their_lease_lapses(box, tmp_path):
    """SIGKILL of `faultline run` while a fault is in force: nobody renews the agents' leases,
    so each heals what it applied and exits on its own; cluster down then removes the rest."""
    info = up(box, "--hosts", "2", "--ranks-per-host", "1", "--rails", "2")
    sc = tmp_path / "long.yaml"
    sc.write_text(LONG_DOWN)
    out = str(tmp_path / "out")
    run = subprocess.Popen([FAULTLINE, "run", str(sc), "--launcher", "slurm", "--out", out],
                           env=box, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    h0 = info["host_netns"][0]
    assert wait_for(lambda: not link_up(h0, "r0"), 30), "the fault was never applied"
    run.send_signal(signal.SIGKILL)
    run.wait()
    killed_at = time.time()
    # The lease is 3 s: the link is back and the agents are gone within a few seconds, long
    # before the fault's scheduled end.
    assert wait_for(lambda: link_up(h0, "r0"), 8), "the agent did not heal after its lease"
    # This cluster's agents (and their srun): their --allow names its hosts' namespaces. Other
    # tests' agents may run meanwhile.
    assert wait_for(lambda: not cluster_agents(info), 8), cluster_agents(info)
    assert time.time() - killed_at < 8
    sh(FAULTLINE, "cluster", "down", env=box)
    subprocess.run([FAULTLINE, "cleanup"], env=box, capture_output=True)
    assert_nothing_left(box, [info["run_id"]])
    assert live_processes_mentioning(out) == []


def test_rank_killed_through_its_hosts_agent(box, tmp_path):
    """rank_kill under Slurm: the agent of the rank's host finds the process of that Slurm task
    (SLURM_PROCID of the run's step) and kills it; the outcome is the local launcher's."""
    info = up(box, "--hosts", "2", "--ranks-per-host", "1", "--rails", "2")
    sc = os.path.join(ROOT, "tests", "py", "scenarios", "rank_kill.yaml")
    out = str(tmp_path / "out")
    r = sh(FAULTLINE, "run", sc, "--launcher", "slurm", "--out", out, env=box, check=False,
           timeout=180)
    with open(os.path.join(out, "report.json")) as f:
        rep = json.load(f)
    [fault] = rep["faults"]
    assert fault["applied_s"] is not None and not fault.get("error"), fault
    assert rep["outcome"] == "aborted_clean", r.stdout + r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    [applied] = rep["environment"]["agents"]["faults"]
    assert applied["fault"] == "kill" and applied["node"] == "h1"
    # The rank itself was killed, under its task: the task recorded the signal.
    with open(os.path.join(out, "ranks", "tasks", "task1.status")) as f:
        assert json.load(f) == {"state": "signaled", "signal": 9}
    with open(os.path.join(out, "ranks", "tasks", "task0.status")) as f:
        assert json.load(f)["state"] == "exited"
    sh(FAULTLINE, "cluster", "down", env=box)
    assert_nothing_left(box, [info["run_id"]])


NODE_FAIL = """name: node-fail
seed: 3
topology: {hosts: 2, ranks_per_host: 1, rails: 2, rail_gbps: 1}
ccl: ftccl
workload: {op: allreduce, bytes: 256KiB, duration: 10s, warmup: 500ms, check: true}
faults:
  - {id: down, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 5s}
"""


def run_and_kill(argv, env, fault_applied, kill):
    """Starts `faultline run`, calls `kill` once `fault_applied()` holds, returns (seconds the
    run took after the kill, its exit code, its output)."""
    run = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    try:
        assert wait_for(fault_applied, 30), "the fault was never applied"
        kill()
        killed_at = time.time()
        stdout, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    return time.time() - killed_at, run.returncode, stdout


# Serial: twice under -n 2 (never alone) rank 1 of the local run was not among the live
# processes when its fault was in force, so the kill found nothing; the cause is not
# understood yet, and until it is the test runs alone.
@pytest.mark.serial
def test_node_failure_ends_as_a_crashed_host_and_spares_the_other_hosts(box, tmp_path):
    """A failed node, emulated by SIGKILL of everything in its namespace (slurmd, step daemons,
    its agent, its ranks) mid-run. Slurm marks it down; the step goes on (--no-kill) and the
    CCL decides about the survivors, so the outcome is the local launcher's when that host's
    rank is killed from outside. The other host's agent is untouched: it heals its fault and
    keeps sampling; the lost agent is given up after one failed replacement, not retried."""
    info = up(box, "--hosts", "2", "--ranks-per-host", "1", "--rails", "2")
    sc = tmp_path / "node-fail.yaml"
    sc.write_text(NODE_FAIL)
    h0, h1 = info["host_netns"]

    def kill_node():
        pids = sh("ip", "netns", "pids", h1).stdout.split()
        assert pids
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except ProcessLookupError:
                pass

    out = str(tmp_path / "slurm")
    took, code, stdout = run_and_kill(
        [FAULTLINE, "run", str(sc), "--launcher", "slurm", "--out", out], box,
        lambda: not link_up(h0, "r0"), kill_node)
    assert took < 40, (took, stdout)
    with open(os.path.join(out, "report.json")) as f:
        rep = json.load(f)
    # The scenario has no expectations, and a crash is not a pass without one: exit 1, a
    # verdict (not a harness error).
    assert code == 1 and rep["outcome"] == "crashed", stdout
    events = rep["environment"]["agents"]["events"]
    assert not any("agent of h0" in e for e in events), events
    assert sum("agent of h1 could not be replaced" in e for e in events) == 1, events
    assert not rep.get("harness_errors"), rep.get("harness_errors")
    [fault] = rep["faults"]
    assert fault["reverted_s"] is not None and not fault.get("error"), fault
    assert link_up(h0, "r0")
    rails = rep["rails"]
    assert [e.split(":")[0] for e in rails["errors"]] == ["host 1"], rails
    with open(os.path.join(out, "ranks", "srun.err")) as f:
        assert "Node failure on h1" in f.read()
    # The same event under the local launcher: host 1's rank killed from outside.
    out_l = str(tmp_path / "local")
    lrep_path = os.path.join(out_l, "report.json")

    def local_fault_applied():
        # The local run's own host 0 (not the cluster's, nor another test's run's) has its
        # rail 0 down: the run journals its namespaces into this test's journal.
        for run_id in journaled_run_ids(box["FAULTLINE_JOURNAL_DIR"]) - {info["run_id"]}:
            n = f"fl-{run_id}-h0"
            try:
                if not link_up(n, "r0"):
                    return True
            except (subprocess.CalledProcessError, ValueError, IndexError):
                pass  # the run is still building it
        return False

    def kill_rank1():
        [(pid, _)] = [(p, c) for p, c in live_processes_mentioning(out_l)
                      if "faultline-worker" in c and "--rank 1 " in c]
        os.kill(pid, signal.SIGKILL)

    _, code_l, stdout_l = run_and_kill([FAULTLINE, "run", str(sc), "--out", out_l], box,
                                       local_fault_applied, kill_rank1)
    with open(lrep_path) as f:
        lrep = json.load(f)
    assert (code_l, lrep["outcome"]) == (code, rep["outcome"]), stdout_l
    assert "rank 1" in stdout and "rank 1" in stdout_l
    sh(FAULTLINE, "cluster", "down", env=box)
    assert_nothing_left(box, [info["run_id"]])
    # No srun of this test's runs is left: each names its --out (in --error) and its run's id
    # (in --job-name). Other tests' sruns may run meanwhile.
    rid = rep["environment"]["run_id"]
    assert rid and live_processes_mentioning(out) == []
    assert [c for _, c in live_processes_mentioning("srun ")
            if out in c or out_l in c or f"--job-name=faultline-{rid}" in c
            or f"--job-name=faultline-agents-{rid}" in c] == []


# An inventory of the one-box cluster's hosts, as a user writes one for real hosts: the Slurm
# node names, their management addresses and their rail netdevs. Host h0's rails give only
# their netdevs (the ranks and the agent look the address up on the host); host h1's rail 1
# gives its address too.
INVENTORY_HOSTS = """hosts:
  - name: h0
    addr: 198.19.0.1
    rails: [{netdev: r0}, {netdev: r1}]
  - name: h1
    addr: 198.19.0.2
    rails: [{netdev: r0}, {netdev: r1, addr: 198.18.1.2}]
"""

INVENTORY_SCENARIO = """name: inventory-on-the-box
seed: 5
topology: {kind: inventory, ranks_per_host: 1, file: hosts.yaml}
ccl: ftccl
workload: {op: allreduce, bytes: 1MiB, duration: 9s, warmup: 1s, check: true}
faults:
  - {id: down, at: 3s, type: link_down, target: {host: h1, rail: 0}, for: 2s}
  - {id: reset, at: 6500ms, type: conn_reset, target: {host: h0, rail: 1}}
expect:
  outcome: survive
  wrong_results: 0
"""


def write_inventory(tmp_path, scenario=INVENTORY_SCENARIO, hosts=INVENTORY_HOSTS):
    (tmp_path / "hosts.yaml").write_text(hosts)
    sc = tmp_path / "inv.yaml"
    sc.write_text(scenario)
    return str(sc)


def check_inventory_report(out, info):
    with open(os.path.join(out, "report.json")) as f:
        rep = json.load(f)
    env = rep["environment"]
    assert env["launcher"] == "slurm"
    topo = env["topology"]
    assert topo["kind"] == "inventory" and topo["file"].endswith("hosts.yaml")
    assert [h["name"] for h in topo["hosts"]] == ["h0", "h1"]
    assert [h["mgmt_addr"] for h in topo["hosts"]] == ["198.19.0.1", "198.19.0.2"]
    # Each rail's capacity is what its host's kernel says (a veth reports 10 Gb/s), read by
    # that host's agent; not the shaping the fixture put on it.
    for h in topo["hosts"]:
        assert [r["netdev"] for r in h["rails"]] == ["r0", "r1"]
        for r in h["rails"]:
            assert r["capacity_bps"] == 10e9 and r["capacity_source"] == "netdev_speed", r
    assert env["slurm"]["job_id"] and env["slurm"]["nodes"] == ["h0", "h1"]
    assert env["knobs"]["rail_gbps"] is None  # nothing is shaped
    assert topo["rail_gbps_for_metrics"] == 10.0  # the slowest rail the kernels reported
    assert rep["rails"]["sampled"] and not rep["rails"].get("errors"), rep["rails"]
    # The ranks bound the addresses of the netdevs the inventory names, on their own hosts.
    with open(os.path.join(out, "ranks", "rank0.jsonl")) as f:
        header = json.loads(f.readline())
    assert header["rails"] == ["198.18.0.1", "198.18.1.1"], header
    for g in range(2):
        with open(os.path.join(out, "ranks", "tasks", f"task{g}.started")) as f:
            assert json.load(f)["node"] == f"h{g}"
    # Both faults were applied by their host's agent and read back there.
    faults = {f["id"]: f for f in rep["faults"]}
    assert faults["down"]["applied_s"] is not None and not faults["down"].get("error"), faults
    assert faults["down"]["reverted_s"] is not None
    assert faults["reset"]["applied_s"] is not None and not faults["reset"].get("error"), faults
    # conn_reset named rail 1 of h0 by its netdev: the agent found its address there and
    # destroyed that rail's connections (it carried some). ftccl may dial the rail again
    # before the read-back, so what remains is not asserted.
    observed = faults["reset"]["observed"]
    assert observed["matched"] >= 1 and observed["destroyed"] == observed["matched"], observed
    applied = env["agents"]["faults"]
    assert {(a["fault"], a["node"]) for a in applied} == {("down", "h1"), ("reset", "h0")}
    # The rail counters came from the agents: h1's rail 0 carried nothing while it was down.
    [down] = [pf for pf in rep["per_fault"] if pf["id"] == "down"]
    by = {(w["host"], w["rail"]): w for w in down["rails"]}
    assert by[(1, 0)]["during_gbps"] < 0.02 and by[(1, 0)]["before_gbps"] > 0.05, by
    assert by[(1, 1)]["during_gbps"] > 0.05, by
    return rep


# Serial: it reads each rail's throughput during a 2 s link_down (the surviving rail must carry
# the collectives); beside other tests' ranks on two cores that window once carried almost
# nothing.
@pytest.mark.serial
def test_inventory_scenario_runs_on_its_hosts_through_slurm(box, tmp_path):
    """An inventory scenario, run as on a real cluster: from a machine with Slurm's client
    commands (the controller's namespace), outside an allocation, so srun asks for one on the
    inventory's hosts. Ranks and agents go to the nodes the inventory names, the ranks use the
    netdevs it names, every fault is applied by its host's agent there."""
    info = up(box, "--hosts", "2", "--ranks-per-host", "1", "--rails", "2")
    sc = write_inventory(tmp_path)
    out = str(tmp_path / "out")
    r = ctl(box, info, FAULTLINE, "run", sc, "--launcher", "slurm", "--partition", "fl",
            "--out", out, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = check_inventory_report(out, info)
    assert rep["environment"]["slurm"]["allocation"] is None
    assert rep["outcome"] == "survived" and rep["correctness"] == {"checked": True, "wrong": 0}
    # Every fault is gone from the hosts' kernels.
    for ns in info["host_netns"]:
        assert link_up(ns, "r0") and link_up(ns, "r1")
    sh(FAULTLINE, "cluster", "down", env=box)
    assert_nothing_left(box, [info["run_id"]])
    assert live_processes_mentioning(out) == []


# Serial: it reads each rail's throughput during a 2 s link_down (the surviving rail must carry
# the collectives); beside other tests' ranks on two cores that window once carried almost
# nothing.
@pytest.mark.serial
def test_inventory_scenario_runs_inside_an_sbatch_allocation(box, tmp_path):
    """The README's sbatch example on the fixture: the batch script (on the allocation's first
    node, h0) runs `faultline run`; the ranks' and the agents' steps run in that allocation."""
    info = up(box, "--hosts", "2", "--ranks-per-host", "1", "--rails", "2")
    sc = write_inventory(tmp_path)
    out = str(tmp_path / "out")
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\nexec {FAULTLINE} run {sc} --launcher slurm --out {out}\n")
    script.chmod(0o755)
    log = str(tmp_path / "job.out")
    r = ctl(box, info, "sbatch", "--wait", "--nodes=2", "--nodelist=h0,h1", "--partition=fl",
            f"--output={log}", str(script), check=False)
    with open(log) as f:
        job_out = f.read()
    assert r.returncode == 0, r.stdout + r.stderr + job_out
    assert "allocation" in job_out, job_out
    rep = check_inventory_report(out, info)
    slurm = rep["environment"]["slurm"]
    # The ranks' step is a step of the batch job, not a job of its own.
    assert slurm["allocation"] == slurm["job_id"], slurm
    # A scenario naming a host outside the allocation is refused before anything starts.
    one = tmp_path / "one"
    one.mkdir()
    sc1 = write_inventory(one)
    script.write_text(f"#!/bin/sh\nexec {FAULTLINE} run {sc1} --launcher slurm --out {out}-1\n")
    r = ctl(box, info, "sbatch", "--wait", "--nodes=1", "--nodelist=h0", "--partition=fl",
            f"--output={log}", str(script), check=False)
    with open(log) as f:
        job_out = f.read()
    assert r.returncode != 0
    assert "inventory host 'h1' is not a node of allocation" in job_out, job_out
    sh(FAULTLINE, "cluster", "down", env=box)
    assert_nothing_left(box, [info["run_id"]])


def test_inventory_scenario_with_the_local_launcher_is_refused(box, tmp_path):
    sc = write_inventory(tmp_path)
    r = sh(FAULTLINE, "run", sc, "--out", str(tmp_path / "o"), env=box, check=False)
    assert r.returncode == 2
    assert "--launcher slurm" in r.stderr
    assert not os.path.exists(tmp_path / "o" / "report.json")


def test_inventory_rank_killed_through_its_hosts_agent(box, tmp_path):
    """rank_kill on an inventory host: the agent finds the rank by its Slurm task id in the
    host's own namespace ('.', which it names as the host's) and kills it there."""
    info = up(box, "--hosts", "2", "--ranks-per-host", "1", "--rails", "2")
    sc = write_inventory(tmp_path, scenario="""name: inventory-rank-kill
seed: 3
topology: {kind: inventory, ranks_per_host: 1, file: hosts.yaml}
ccl: ftccl
workload: {op: allreduce, bytes: 1MiB, duration: 4s, warmup: 500ms, check: true}
faults:
  - {id: kill, at: 1s, type: rank_kill, target: {host: h1, rank: 0}}
expect: {outcome: abort_clean, wrong_results: 0}
""")
    out = str(tmp_path / "out")
    r = ctl(box, info, FAULTLINE, "run", sc, "--launcher", "slurm", "--partition", "fl",
            "--out", out, check=False)
    with open(os.path.join(out, "report.json")) as f:
        rep = json.load(f)
    [fault] = rep["faults"]
    assert fault["applied_s"] is not None and not fault.get("error"), fault
    assert rep["outcome"] == "aborted_clean" and r.returncode == 0, r.stdout + r.stderr
    [applied] = rep["environment"]["agents"]["faults"]
    assert applied["node"] == "h1"
    with open(os.path.join(out, "ranks", "tasks", "task1.status")) as f:
        assert json.load(f) == {"state": "signaled", "signal": 9}
    sh(FAULTLINE, "cluster", "down", env=box)
    assert_nothing_left(box, [info["run_id"]])
