"""What the MPI peer tests (test_peer_openmpi.py, test_peer_mpich.py) share: the launcher
processes on the machine, the check that a run left none of them (nor its namespaces and
directory), and readers of a run's events and rail samples."""
import json
import os
import subprocess

from test_run import wait_until


def processes(names):
    """The processes named exactly `names` on the machine (pgrep -a -x), as lines."""
    out = []
    for name in names:
        p = subprocess.run(["pgrep", "-a", "-x", name], capture_output=True, text=True)
        out += [l for l in p.stdout.splitlines() if l.strip()]
    return out


def assert_nothing_of_the_run_left(e, run_id, before, names, what):
    """No namespace or journal entry of the run (e.assert_nothing_left), no process named
    `names` beyond `before` within 5 s, and no /tmp/fl-mpi-<run id> directory."""
    e.assert_nothing_left(run_id)
    assert wait_until(lambda: set(processes(names)) <= set(before), 5), \
        f"{what} processes of the run survive: {set(processes(names)) - set(before)}"
    assert not os.path.exists(f"/tmp/fl-mpi-{run_id}"), "the launcher's directory remains"


def events(out):
    """The run's events.jsonl records."""
    with open(os.path.join(out, "events.jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]


def assert_only_the_deadline_spoke(out, fault, ranks, library, deadline_ms, after_s):
    """The ranks' errors in events.jsonl are exactly `ranks`' (a list), each the adapter's own
    op deadline ("<library>: MPI_Iallreduce did not complete within <deadline_ms> ms") more
    than `after_s` seconds after the fault: the library itself reported nothing before."""
    errs = [x for x in events(out) if x.get("type") == "rank_error"]
    assert sorted(x["rank"] for x in errs) == ranks, errs
    for e in errs:
        want = f"{library}: MPI_Iallreduce did not complete within {deadline_ms} ms"
        assert want in e["error"], errs
        assert e["t_s"] - fault["applied_s"] > after_s, (errs, fault)


def gbit_sent(rows, col):
    """Gbit a rail port sent over the run (rails.csv rows: rate x interval, summed)."""
    out, prev = 0.0, None
    for x in rows:
        t = float(x["t_s"])
        if prev is not None and x[col] != "":
            out += float(x[col]) * (t - prev)
        prev = t
    return out
