"""MPICH under faultline run, end to end: the world started by MPICH's own Hydra mpiexec (its
hydra_pmi_proxy daemons inside the host namespaces through the launch agent, its control
traffic on the management network), the ranks' data on the rails only (UCX's TCP transport),
every result checked, outcomes classified by the runner's one rule, the library's own error
text in events.jsonl, and nothing left behind: no namespace, no mpiexec, no proxy, no rank, no
private directory. The scenarios are scenarios/peers/mpich_*.yaml and
scenarios/findings/mpich/; their header comments say what was measured.
Skipped where this build has no mpich rank program (scripts/install-deps installs MPICH).
About 80 s in all (the fault-free matrix is 5 runs)."""
import csv
import json
import os
import signal
import subprocess
import time

import pytest

from test_run import BUILD, FAULTLINE, ROOT, assert_correct, fl, namespaces_possible  # noqa: F401
from test_run import wait_until
from mpi_peer_util import (USED_GBPS, assert_nothing_of_the_run_left,
                            assert_only_the_deadline_spoke, assert_port_drop_goes_unreported,
                            gbit_sent, processes)

PEERS = os.path.join(ROOT, "scenarios", "peers")
FINDINGS = os.path.join(ROOT, "scenarios", "findings", "mpich")
WORKER_MPICH = os.path.join(BUILD, "bin", "faultline-worker-mpich")
OPS = ["allreduce", "allgather", "reducescatter", "broadcast", "alltoall"]


def mpich_built():
    return os.path.exists(FAULTLINE) and os.path.exists(WORKER_MPICH)


# Serial: each run keeps both cores busy (ranks polling MPI_Test, mpiexec and the proxies);
# the fault tests' timings read the library's own behaviour only on a quiet machine.
pytestmark = [pytest.mark.slow, pytest.mark.serial,
              pytest.mark.skipif(not mpich_built(),
                                 reason="this build has no mpich rank program "
                                        "(faultline-worker-mpich): apt install mpich "
                                        "libmpich-dev, then configure again")]


HYDRA = ("mpiexec.hydra", "hydra_pmi_proxy")


def hydra_processes():
    """mpiexec.hydra and hydra_pmi_proxy processes on the machine (pgrep), as lines."""
    return processes(HYDRA)


def assert_no_mpich_left(e, run_id, before):
    assert_nothing_of_the_run_left(e, run_id, before, HYDRA, "Hydra")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def rank_ends(out):
    """Each rank's end line (its log's last record of type end)."""
    ends = []
    for name in sorted(os.listdir(os.path.join(out, "ranks"))):
        if name.startswith("rank") and name.endswith(".jsonl"):
            with open(os.path.join(out, "ranks", name)) as f:
                recs = [json.loads(l) for l in f if l.strip()]
            ends += [x for x in recs if x.get("type") == "end"][-1:]
    return ends


def finalize_hung(out):
    """Whether the run met findings/mpich/finalize_hang.yaml: every rank completed every
    collective (its end line says ok) and a rank's MPI_Finalize outlived the teardown bound."""
    errs = [open(os.path.join(out, "ranks", n)).read()
            for n in os.listdir(os.path.join(out, "ranks")) if n.endswith(".err")]
    ends = rank_ends(out)
    return bool(ends) and all(e["status"] == "ok" for e in ends) and \
        any("the library's teardown did not end in time" in e for e in errs)


def assert_survived(r, out):
    """survived, or crashed by the pinned MPI_Finalize hang alone (after every collective
    completed): the race hit 1 of 10 fault-free runs of one rank per host here."""
    assert r["outcome"] == "survived" or (r["outcome"] == "crashed" and finalize_hung(out)), \
        (r["outcome"], rank_ends(out))


def test_fault_free_five_collectives_exact_on_the_rails(fl):
    before = hydra_processes()
    # A 2 s op deadline (every collective takes milliseconds): it also bounds the teardown,
    # so a cell that meets the MPI_Finalize hang costs ~2.5 s, not ~11 s.
    p = fl.run(os.path.join(PEERS, "mpich_clean.yaml"), "--op-timeout-ms", "2000", timeout=240)
    assert p.returncode in (0, 1), p.stdout[-3000:] + p.stderr[-3000:]
    run_ids = []
    for op in OPS:
        cell = os.path.join(fl.out, f"op={op}")
        r = read_json(os.path.join(cell, "report.json"))
        assert r["ccl"] == "mpich", r["ccl"]
        assert_survived(r, cell)
        assert_correct(r, cell)
        env = r["environment"]
        run_ids.append(env["run_id"])
        # The report names the library, its version and its transport.
        assert env["versions"]["mpich"].startswith("4."), env["versions"]
        assert env["launcher"] == "mpiexec.hydra"
        assert env["mpi"]["library"] == "mpich" and env["mpi"]["device"] == "ch4:ucx", env["mpi"]
        assert "tcp" in env["mpi"]["transport"], env["mpi"]
        knobs = env["knobs"]["ccl"]
        assert knobs["UCX_NET_DEVICES"] == "r0,r1" and knobs["UCX_TLS"] == "tcp,self", knobs
        assert knobs["errors"] == "MPI_ERRORS_RETURN" and knobs["device"] == "ch4:ucx", knobs
        cmd = env["mpi"]["command"]
        assert cmd[cmd.index("-launcher-exec") - 1] == "rsh", cmd
        assert cmd[cmd.index("-iface") + 1] == "mgmt", cmd
        # The data went over the rails, not the management network: host 0's rail ports sent
        # at least 80 % of what its rank put into the collectives (measured: 100 %; the
        # rest would fall outside the sampled span's edges). Per op, the bytes a rank of two
        # sends: allreduce and broadcast's root 1 x B, the others B / 2.
        with open(os.path.join(cell, "timeseries.csv")) as f:
            moved = sum(int(x["bytes"]) for x in csv.DictReader(f))
        sent = moved if op in ("allreduce", "broadcast") else moved / 2
        with open(os.path.join(cell, "rails.csv")) as f:
            rows = list(csv.DictReader(f))
        on_rails = sum(gbit_sent(rows, f"h0_r{rail}_tx_gbps") for rail in (0, 1)) * 1e9 / 8
        assert on_rails >= 0.8 * sent, (op, on_rails, sent)
        # UCX uses both rails, or one of them (which one differs from run to run: README).
        busy = [x for x in rows if 0.3 <= float(x["t_s"]) <= 1.3]
        means = [sum(float(x[f"h0_r{rail}_tx_gbps"] or 0) for x in busy) / max(1, len(busy))
                 for rail in (0, 1)]
        assert max(means) > USED_GBPS, (op, means)
    for run_id in run_ids:
        assert_no_mpich_left(fl, run_id, before)


def test_blackhole_is_classified_and_nothing_is_left(fl):
    before = hydra_processes()
    # A 6 s op deadline (the measured stall is 3.2 s): a run that meets the MPI_Finalize hang
    # after the fault then costs ~6.5 s more, not ~11 s.
    p = fl.run(os.path.join(PEERS, "mpich_blackhole.yaml"), "--op-timeout-ms", "6000",
               timeout=120)
    r = fl.report()
    # What was measured (the scenario's header): survived, the stall about twice the outage.
    assert p.returncode in (0, 1), (r["outcome"], p.stdout[-3000:], p.stderr[-3000:])
    assert_survived(r, fl.out)
    assert r["correctness"]["wrong"] == 0
    f = r["faults"][0]
    assert f["applied_s"] is not None and f["reverted_s"] is not None, f
    # UCX picks its rails per run: where the blackholed rail (host 1's rail 1) carried data
    # before the fault, the collective waits for TCP's retransmission on it (measured 3.2 s
    # for the 1.5 s hole); where UCX used rail 0 alone, the fault does not touch it.
    with open(os.path.join(fl.out, "rails.csv")) as fh:
        rows = [x for x in csv.DictReader(fh) if 0.6 <= float(x["t_s"]) <= 1.4]
    used = sum(float(x["h1_r1_tx_gbps"] or 0) for x in rows) / max(1, len(rows)) > USED_GBPS
    if used:
        assert r["metrics"]["stall_ms"] > 1000, r["metrics"]["stall_ms"]
    else:
        assert r["metrics"]["stall_ms"] < 1000, r["metrics"]["stall_ms"]
    assert_no_mpich_left(fl, r["environment"]["run_id"], before)


def test_rank_kill_goes_unreported_and_nothing_is_left(fl):
    """The survivor of a SIGKILLed peer hears nothing from MPICH; the adapter's deadline
    ends its collective (its error in events.jsonl), the run reads crashed, as pinned."""
    before = hydra_processes()
    p = fl.run(os.path.join(PEERS, "mpich_rank_kill.yaml"), timeout=120)
    r = fl.report()
    assert p.returncode == 0, (r["outcome"], p.stdout[-3000:], p.stderr[-3000:])
    assert r["outcome"] == "crashed" and r["reproduce"]["reproduced"] is True, r["reproduce"]
    f = r["faults"][0]
    assert f["type"] == "rank_kill" and f["applied_s"] is not None, f
    # The survivor's failure in events.jsonl, from a measured collective or from the ranks'
    # stop agreement (also an MPI_Iallreduce), whichever the kill hit.
    assert_only_the_deadline_spoke(fl.out, f, [0], "mpich", 10000, 5)
    assert_no_mpich_left(fl, r["environment"]["run_id"], before)


def test_interrupted_run_leaves_no_daemon(fl):
    """SIGINT to faultline in the middle of a Hydra world: the run heals and reports a harness
    error (exit 3), and no mpiexec, proxy, rank or namespace outlives it."""
    before = hydra_processes()
    p = subprocess.Popen([FAULTLINE, "run", os.path.join(PEERS, "mpich_link_down.yaml"),
                          "--out", fl.out],
                         env=fl.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    # Wait until the proxy of host 1 (started through the launch agent) runs, then interrupt.
    def remote_proxy():
        return [l for l in set(hydra_processes()) - set(before)
                if "hydra_pmi_proxy" in l and "--proxy-id 1" in l]
    assert wait_until(remote_proxy, 60), "no hydra_pmi_proxy started in host 1"
    time.sleep(1)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 3, out
    r = fl.report()
    assert_no_mpich_left(fl, r["environment"]["run_id"], before)


def test_bad_option_is_refused(fl, tmp_path):
    with open(os.path.join(PEERS, "mpich_blackhole.yaml")) as f:
        text = f.read()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("errors: return", "errors: abort"))
    p = subprocess.run([FAULTLINE, "validate", str(bad)], capture_output=True, text=True)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "ccl_options.errors" in p.stdout + p.stderr and "fatal" in p.stdout + p.stderr
    # Open MPI's PML is not MPICH's option.
    bad.write_text(text.replace("errors: return", "pml: ob1"))
    p = subprocess.run([FAULTLINE, "validate", str(bad)], capture_output=True, text=True)
    assert p.returncode == 2 and "has no option 'pml'" in p.stdout + p.stderr, p.stdout + p.stderr


def test_finding_finalize_hang(fl):
    """scenarios/findings/mpich/finalize_hang.yaml: a fault-free world whose MPI_Finalize
    hangs (the run reads crashed), pinned as today's behaviour. The hang is a race that hit 3
    of 4 runs of the file: up to three runs, the first that hangs ends the test (all three
    missing it, about 2 % by that rate, fails it: MPICH may have been fixed). Every run
    checks its results and leaves nothing behind."""
    outcomes = []
    for attempt in range(3):
        before = hydra_processes()
        # The teardown bound is the op deadline plus grace: 2 s keeps a hung run short.
        p = fl.run(os.path.join(FINDINGS, "finalize_hang.yaml"), "--op-timeout-ms", "2000",
                   timeout=120)
        r = fl.report()
        assert r["correctness"]["wrong"] == 0 and r["correctness"]["checked"], r["correctness"]
        assert_no_mpich_left(fl, r["environment"]["run_id"], before)
        outcomes.append(r["outcome"])
        if p.returncode == 0:
            assert r["outcome"] == "crashed" and r["reproduce"]["reproduced"] is True
            teardown = [n for n in os.listdir(os.path.join(fl.out, "ranks"))
                        if n.endswith(".err") and "teardown did not end in time" in
                        open(os.path.join(fl.out, "ranks", n)).read()]
            assert teardown, "crashed, but no rank's teardown hung"
            return
        assert r["outcome"] == "survived", (r["outcome"], p.stdout[-3000:])
    pytest.fail(f"MPI_Finalize did not hang in {len(outcomes)} runs ({outcomes}): the "
                "finding no longer reproduces; update scenarios/findings/mpich/")


def test_finding_port_drop_unreported(fl):
    """scenarios/findings/mpich/port_drop_unreported.yaml: host 1's rail 0 port goes for good
    while rail 1 stays up; MPICH neither goes on over rail 1 nor reports an error, the
    adapter's deadline ends both ranks' collective, the run reads hung, as pinned (bench/peers
    found it), and nothing is left. In a run whose lanes put no traffic through that port
    (UCX picks them per run) the fault misses UCX: such a run is run again, with
    the fault on the rail that carried its traffic."""
    assert_port_drop_goes_unreported(fl, os.path.join(FINDINGS, "port_drop_unreported.yaml"),
                                     hydra_processes(), HYDRA, "MPICH", "mpich")
