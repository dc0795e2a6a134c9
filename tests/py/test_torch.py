"""ftccl as a PyTorch distributed backend (integrations/torch) and the torch_ddp workload.

The backend's collectives are checked against values computed by hand, over real ftccl
communicators on loopback; DDP training runs through `faultline run` on the scenarios of
scenarios/torch, with real ranks in real namespaces and a real fault: two fault-free ftccl
runs end with the same parameters, Gloo's final loss agrees within floating-point tolerance,
a link flap changes nothing of the parameters, and a killed rank makes every survivor raise.
"""
import glob
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from test_run import fl, journal_entries, namespaces_possible, netns_of_run  # noqa: F401 (fixtures)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(ROOT, "build"))
PYDIR = os.path.join(BUILD, "python")
TORCH_SCENARIOS = os.path.join(ROOT, "scenarios", "torch")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
# make check only (every run starts torch in each rank: about 40 s a run here).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def torch_built():
    probe = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("PyTorch is not installed (scripts/install-deps installs python3-torch)")
    # With PyTorch present the backend must have been built: a missing one is a build bug.
    assert glob.glob(os.path.join(PYDIR, "ftccl_torch", "_C*.so")), \
        f"PyTorch is installed but {PYDIR}/ftccl_torch/_C*.so was not built"


def spawn_ranks(tmp_path, body, size, env_extra=None, timeout=60):
    """Runs `body` (Python source using r, n, dist, torch) in `size` processes that form an
    ftccl process group over loopback; returns [(returncode, stdout, stderr)] in rank order."""
    src = textwrap.dedent("""
        import datetime, os, sys, time
        import torch, torch.distributed as dist
        import ftccl_torch
        r, n = int(sys.argv[1]), int(sys.argv[2])
        store = dist.FileStore(sys.argv[3], n)
        dist.init_process_group("ftccl", store=store, rank=r, world_size=n,
                                timeout=datetime.timedelta(seconds=20))
    """) + textwrap.dedent(body)
    script = tmp_path / "rank.py"
    script.write_text(src)
    store = str(tmp_path / "store")
    env = dict(os.environ, PYTHONPATH=PYDIR, FTCCL_RAILS="127.0.0.1,127.0.0.1",
               MASTER_ADDR="127.0.0.1", **(env_extra or {}))
    env.pop("FTCCL_BOOTSTRAP", None)  # rank 0's port goes through the store
    procs = [subprocess.Popen([PYTHON, str(script), str(r), str(size), store], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(size)]
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        out.append((p.returncode, o, e))
    return out


COLLECTIVES = """
    def check(name, got, want):
        assert torch.equal(got, want), f"{name}: rank {r}: {got} != {want}"

    base = torch.arange(12, dtype=torch.float32)
    t = base * (r + 1); dist.all_reduce(t)
    check("allreduce sum", t, base * sum(range(1, n + 1)))
    t = base + r; dist.all_reduce(t, op=dist.ReduceOp.MAX); check("max", t, base + n - 1)
    t = base + r; dist.all_reduce(t, op=dist.ReduceOp.MIN); check("min", t, base)
    t = torch.full((5,), float(r + 1), dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
    check("product f64", t, torch.full((5,), float(torch.arange(1, n + 1).prod()), dtype=torch.float64))
    t = torch.full((7,), 3 * (r + 1), dtype=torch.int64); dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check("avg i64", t, torch.full((7,), 3 * sum(range(1, n + 1)) // n, dtype=torch.int64))
    t = torch.arange(12.).view(4, 3) * (r + 1); tt = t.t()  # not contiguous
    dist.all_reduce(tt)
    check("non-contiguous", t, torch.arange(12.).view(4, 3) * sum(range(1, n + 1)))
    t = torch.full((3,), r, dtype=torch.int32); dist.broadcast(t, src=n - 1)
    check("broadcast", t, torch.full((3,), n - 1, dtype=torch.int32))
    outs = [torch.zeros(2, dtype=torch.bfloat16) for _ in range(n)]
    dist.all_gather(outs, torch.full((2,), float(r), dtype=torch.bfloat16))
    for i, o in enumerate(outs): check("allgather bf16", o, torch.full((2,), float(i), dtype=torch.bfloat16))
    flat = torch.zeros(3 * n, dtype=torch.uint8)
    dist.all_gather_into_tensor(flat, torch.full((3,), r, dtype=torch.uint8))
    check("allgather base u8", flat, torch.arange(n, dtype=torch.uint8).repeat_interleave(3))
    ins = [torch.full((4,), float(r * 10 + j)) for j in range(n)]
    out = torch.zeros(4); dist.reduce_scatter(out, ins)
    check("reduce_scatter", out, torch.full((4,), float(sum(q * 10 + r for q in range(n)))))
    t = torch.full((6,), float(r + 1), dtype=torch.float16); dist.reduce(t, dst=0)
    if r == 0: check("reduce f16", t, torch.full((6,), float(sum(range(1, n + 1))), dtype=torch.float16))
    src = torch.arange(n * 2, dtype=torch.int64) + 100 * r
    dst = torch.zeros(n * 2, dtype=torch.int64); dist.all_to_all_single(dst, src)
    want = torch.cat([torch.arange(2 * r, 2 * r + 2) + 100 * q for q in range(n)])
    check("alltoall", dst, want)
    b = torch.tensor([r % 2 == 0]); dist.broadcast(b, src=1); check("broadcast bool", b, torch.tensor([False]))
    w = dist.all_reduce(torch.ones(3), async_op=True); w.wait()
    check("future value right after wait()", w.get_future().value()[0], torch.full((3,), float(n)))
    # A Future callback that issues another collective of the group and waits for it (as
    # DDP's PowerSGD hook does) must not deadlock the group.
    def nested(fut):
        t2 = fut.value()[0] * 2
        dist.all_reduce(t2, async_op=True).get_future().wait()
        return t2
    chained = dist.all_reduce(torch.ones(3), async_op=True).get_future().then(nested)
    check("nested collective in a callback", chained.wait(), torch.full((3,), float(2 * n * n)))
    dist.barrier()
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int16))
        raise AssertionError("an int16 allreduce was accepted")
    except RuntimeError as e:
        assert "ftccl: unsupported tensor type" in str(e), e
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.bool))
        raise AssertionError("a bool sum was accepted")
    except RuntimeError as e:
        assert "no reduction over" in str(e), e
    assert ftccl_torch.num_rails(dist.group.WORLD) == 2
    assert sum(ftccl_torch.stats(dist.group.WORLD)["payload_bytes_sent_per_rail"]) > 0
    ftccl_torch.shutdown(dist.group.WORLD)  # orderly: waits for what was issued
    try:
        dist.all_reduce(torch.ones(1))
        raise AssertionError("a collective after shutdown was accepted")
    except RuntimeError as e:
        assert "shut down" in str(e), e
    dist.destroy_process_group()
    print("ok", r)
"""


@pytest.mark.parametrize("size", [2, 3])
def test_backend_collectives_give_the_exact_values(tmp_path, torch_built, size):
    for rc, out, err in spawn_ranks(tmp_path, COLLECTIVES, size):
        assert rc == 0 and out.startswith("ok"), out + err


def test_a_dead_peer_raises_ftccl_s_error_within_the_abort_bound(tmp_path, torch_built):
    body = """
        dist.all_reduce(torch.ones(4))  # the group works
        if r == 1:
            os._exit(0)  # dies without a word
        t0 = time.monotonic()
        try:
            dist.all_reduce(torch.ones(1 << 16))
            print("no error")
        except RuntimeError as e:
            print(f"raised after {time.monotonic() - t0:.2f}s: {e}")
        os._exit(0)
    """
    res = spawn_ranks(tmp_path, body, 2, env_extra={"FTCCL_ABORT_TIMEOUT_MS": "1000"})
    rc, out, err = res[0]
    assert out.startswith("raised after"), out + err
    assert "ftccl: " in out and ("PEER_LOST" in out or "ABORTED" in out or "NETWORK" in out), out
    assert float(out.split()[2].rstrip("s:")) < 10, out  # not the 20 s deadline


def test_joining_without_rails_is_a_clear_error(tmp_path, torch_built):
    script = tmp_path / "norails.py"
    script.write_text(textwrap.dedent("""
        import datetime, torch.distributed as dist, ftccl_torch
        store = dist.FileStore(__file__ + ".store", 1)
        try:
            dist.init_process_group("ftccl", store=store, rank=0, world_size=1)
        except RuntimeError as e:
            print(e)
    """))
    env = dict(os.environ, PYTHONPATH=PYDIR)
    env.pop("FTCCL_RAILS", None)
    r = subprocess.run([PYTHON, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert "FTCCL_RAILS is not set" in r.stdout, r.stdout + r.stderr


# ---------------------------------------------------------------------------------------------
# DDP training under the runner.

def python_ranks_of(out_dir):
    pids = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(os.path.join(d, "cmdline"), "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if "faultline_torch" in cmd and out_dir in cmd:
            pids.append(int(os.path.basename(d)))
    return pids


def run_torch(fl, name, ccl, *extra):
    r = fl.run(os.path.join(TORCH_SCENARIOS, name), "--only", f"ccl={ccl}", *extra, timeout=240)
    [path] = glob.glob(os.path.join(fl.out, "**", "report.json"), recursive=True)
    with open(path) as f:
        rep = json.load(f)
    # Nothing of the run is left: namespaces, rank processes. Its namespaces by their names
    # (fl-<run id>-), and by its own journal, which records every namespace before it is made
    # and drops it once it is gone: other tests' runs make and remove namespaces meanwhile.
    run_id = rep["environment"]["run_id"]
    assert run_id and netns_of_run(run_id) == [], netns_of_run(run_id)
    assert journal_entries(fl.journal) == [], journal_entries(fl.journal)
    deadline = time.monotonic() + 5
    while python_ranks_of(fl.out) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not python_ranks_of(fl.out), "torch ranks of the run survive"
    return r, rep, os.path.dirname(path)


def fault_free_run(tmp_path_factory, label, ccl):
    from test_run import Env
    e = Env(tmp_path_factory.mktemp(label))
    try:
        r, rep, _ = run_torch(e, "fault_free.yaml", ccl)
        assert r.returncode == 0, r.stdout + r.stderr
        return rep
    finally:
        e.safety_cleanup()


# One fault-free ftccl run: all that the fault tests compare with. Its own fixture, so that the
# serial pass (another process, which cannot share the parallel pass's fixtures) pays for one
# run, not for the three of `fault_free`.
@pytest.fixture(scope="module")
def fault_free_ftccl(tmp_path_factory, namespaces_possible, torch_built):  # noqa: F811
    return fault_free_run(tmp_path_factory, "ftccl-a", "ftccl")


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory, fault_free_ftccl):
    """Two fault-free ftccl runs and one Gloo run of scenarios/torch/fault_free.yaml."""
    return {"ftccl-a": fault_free_ftccl,
            "ftccl-b": fault_free_run(tmp_path_factory, "ftccl-b", "ftccl"),
            "gloo": fault_free_run(tmp_path_factory, "gloo", "gloo")}


def test_ddp_fault_free_is_deterministic_and_agrees_with_gloo(fault_free):
    a, b, g = fault_free["ftccl-a"], fault_free["ftccl-b"], fault_free["gloo"]
    for rep in (a, b, g):
        m = rep["metrics"]
        assert rep["outcome"] == "survived"
        assert rep["workload"]["kind"] == "torch_ddp"
        assert m["steps_completed"] == rep["workload"]["steps"]
        assert m["ranks_reported"] == 4 and m["param_sha256_agree"] is True
        assert m["steps_per_s"] > 0
        assert len(m["param_sha256"]) == 64
    assert a["ccl"] == "ftccl" and g["ccl"] == "gloo"
    # Bit for bit from one ftccl run to the next.
    assert a["metrics"]["param_sha256"] == b["metrics"]["param_sha256"]
    # Gloo sums in another order: the same training within floating-point tolerance.
    la, lg = a["metrics"]["final_loss"], g["metrics"]["final_loss"]
    assert abs(la - lg) <= 1e-4 * abs(la), (la, lg)


# Serial: the t0 lead counts every core as this run's: slower torch imports miss the 2 s flap.
@pytest.mark.serial
def test_ddp_through_a_link_flap_ends_with_the_fault_free_parameters(fl, fault_free_ftccl):
    r, rep, out = run_torch(fl, "link_flap.yaml", "ftccl")
    assert r.returncode == 0, r.stdout + r.stderr
    m = rep["metrics"]
    assert rep["outcome"] == "survived"
    assert m["steps_completed"] == rep["workload"]["steps"]
    assert m["param_sha256"] == fault_free_ftccl["metrics"]["param_sha256"]
    [f] = rep["faults"]
    assert f["applied_s"] is not None
    # ftccl saw the flap and moved the gradients' traffic: its path events are in the run.
    kinds = set()
    with open(os.path.join(out, "events.jsonl")) as ev:
        for line in ev:
            e = json.loads(line)
            kinds.add(e.get("kind"))
    assert "path_down" in kinds, kinds
    [pf] = rep["per_fault"]
    assert pf["stall_ms"] is not None


# Serial: the t0 lead counts every core as this run's: slower torch imports miss the 2 s kill.
@pytest.mark.serial
def test_ddp_rank_kill_makes_every_survivor_raise_within_the_abort_bound(fl, torch_built):
    r, rep, out = run_torch(fl, "rank_kill.yaml", "ftccl")
    assert r.returncode == 0, r.stdout + r.stderr  # the scenario expects abort_clean
    assert rep["outcome"] == "aborted_clean"
    [f] = rep["faults"]
    killed_at = f["applied_s"]
    for rank in (0, 1, 3):  # host 1's rank 0 (global 2) was killed
        with open(os.path.join(out, "ranks", f"rank{rank}.jsonl")) as lf:
            lines = [json.loads(x) for x in lf]
        end = lines[-1]
        assert end["type"] == "end" and end["status"] == "error", end
        assert "ftccl: " in end["message"], end
        failed = [x for x in lines if x["type"] == "op" and not x["ok"]]
        assert failed, f"rank {rank} logged no failed step"
        with open(os.path.join(out, "ranks", f"rank{rank}.err")) as ef:
            assert "failed: ftccl: " in ef.read()
    assert rep["metrics"]["param_sha256"] is None  # nobody finished training
    assert killed_at is not None


def test_a_python_without_torch_skips_the_run_with_the_reason(fl, tmp_path):
    # An interpreter that cannot import torch (-S: no site packages): the run is skipped, the
    # reason says so, and nothing is started.
    fake = tmp_path / "python-without-torch"
    fake.write_text(f"#!/bin/sh\nexec {PYTHON} -S \"$@\"\n")
    fake.chmod(0o755)
    fl.env["FAULTLINE_PYTHON"] = str(fake)
    r, left = fl.run_refused(os.path.join(TORCH_SCENARIOS, "fault_free.yaml"), "--only",
                             "ccl=ftccl")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "SKIP" in out.upper() and "PyTorch is not installed" in out, out
    assert left == [], left
    [path] = glob.glob(os.path.join(fl.out, "**", "report.json"), recursive=True)
    with open(path) as f:
        rep = json.load(f)
    assert rep["outcome"] == "skipped" and "PyTorch is not installed" in rep["skipped"], rep
    assert not os.path.exists(os.path.join(os.path.dirname(path), "ranks"))  # nothing started


def test_ccl_override_of_a_matrix_over_ccl_is_refused(fl):
    # --ccl would run one library under both combinations' labels: bad input, nothing started.
    r, left = fl.run_refused(os.path.join(TORCH_SCENARIOS, "fault_free.yaml"), "--ccl", "gloo")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--ccl gloo conflicts with the file's matrix.ccl" in r.stderr, r.stderr
    assert "--only ccl=gloo" in r.stderr
    assert not os.path.exists(os.path.join(fl.out, "ccl=ftccl"))
    assert left == [], left
