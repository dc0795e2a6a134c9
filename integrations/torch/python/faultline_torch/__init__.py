"""The rank side of Faultline's torch_ddp workload.

The runner starts a training script once per rank, in the rank's host namespace, as

    python3 SCRIPT --ccl C --rank R --size N --bootstrap IP:PORT --rails A,B --store-dir D
                   --steps S --warmup W --timeout MS --log FILE --seed X --start-at NS
                   [--fault-hook PATH] [--<arg> <value> ...]   (the scenario's workload.args)

and reads back the rank's log, which this module writes in the worker log format
(runner/core/worker_log.h): a header, one "op" line per training step (its start and end on
CLOCK_MONOTONIC), the CCL's events, a "result" line (the SHA-256 of the parameters and the final
loss) and the end line. Every line is one write(2), so a killed rank leaves a valid prefix.

A script uses it as:

    rank = faultline_torch.Rank.from_argv()     # parses the runner's arguments
    rank.init_process_group()                   # ftccl or gloo, rails and knobs set
    model = DDP(...)
    rank.header(model)                          # after the model exists (gradient size)
    rank.wait_start()
    for step in rank.steps():                   # times each step, logs it, drains events
        ...
    rank.finish(model, loss)                    # result + end line; exits

A step that raises (a collective failed) is logged as a failed op with the message, the end
line says error, and the process exits with 10, as faultline-worker does. A collective that
outlives its deadline plus a grace period (the library did not honour it) is ended by a
watchdog: the end line says so and the process exits with 10. With ftccl the watchdog times
the collective now running (ftccl_torch.busy_since_ns); with another library, which says
nothing of its collectives, the step, allowing `collectives_per_step` deadlines (header()).
At the end every rank passes a barrier (no rank leaves while a peer still waits for its
acknowledgements) and, on ftccl, closes the group in order before the process exits.

The script's own options must not reuse the runner's names (RESERVED); abbreviations are not
accepted, so a script option is never taken for a runner option.
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import subprocess
import sys
import threading
import time

SCHEMA = "faultline.worker/v1"
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_CCL_ERROR = 10

# The runner's options: a script (workload.args) must not define them.
RESERVED = ("ccl", "rank", "size", "bootstrap", "rails", "store-dir", "steps", "warmup",
            "timeout", "log", "seed", "start-at", "fault-hook")


def _now():
    return time.monotonic_ns()  # CLOCK_MONOTONIC, the runner's clock


def param_sha256(model):
    """SHA-256 over every parameter in registration order: name, dtype, shape, raw bytes."""
    import torch

    h = hashlib.sha256()
    for name, p in model.named_parameters():
        t = p.detach().contiguous().cpu()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())  # any dtype, bf16 too
    return h.hexdigest()


def _interface_of(addr):
    """The interface holding IPv4 `addr` in this namespace (gloo binds by interface name)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[3].split("/")[0] == addr:
            return f[1]
    raise RuntimeError(f"no interface holds {addr} in this network namespace")


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else repr(error)


def _parse(argv):
    p = argparse.ArgumentParser(description="a rank of Faultline's torch_ddp workload",
                                allow_abbrev=False)
    p.add_argument("--ccl", required=True, choices=["ftccl", "gloo", "nccl"])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--bootstrap", required=True, help="rank 0's ip:port (ftccl)")
    p.add_argument("--rails", required=True, help="this rank's rail addresses, comma-separated")
    p.add_argument("--store-dir", required=True, help="rendezvous directory of the group")
    p.add_argument("--steps", type=int, required=True, help="training steps after the warm-up")
    p.add_argument("--warmup", type=int, default=0, help="warm-up steps (logged as warmup)")
    p.add_argument("--timeout", type=int, default=60000, help="collective deadline, ms")
    p.add_argument("--log", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start-at", type=int, default=None, help="CLOCK_MONOTONIC ns of step 0")
    p.add_argument("--fault-hook", default="")
    return p.parse_known_args(argv)


class Rank:
    """One rank of a torch_ddp run: its arguments, process group and log."""

    def __init__(self, args, extra):
        self.args = args
        self.extra = extra  # the script's own options (workload.args)
        self.pg = None
        self._fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self._index = 0
        self._first_error_ns = None
        self._step_start = None  # watchdog: the running step's start
        self._lock = threading.Lock()  # one writer at a time; nothing after the end line
        self._ended = False
        self._bytes = 0
        self._per_step = 1
        self.rails = [r for r in args.rails.split(",") if r]

    @classmethod
    def from_argv(cls, argv=None):
        args, extra = _parse(sys.argv[1:] if argv is None else argv)
        return cls(args, extra)

    # -- the log -------------------------------------------------------------------------
    def _write(self, obj, end=False):
        """Writes one line; False (and nothing written) once the end line is out."""
        line = (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode()
        with self._lock:
            if self._ended:
                return False
            os.write(self._fd, line)
            self._ended = end
            return True

    def _header(self, count, elem, rails_used, version):
        n = self.args.size
        self._bytes = count * elem
        self._write({
            "type": "header", "schema": SCHEMA, "rank": self.args.rank, "size": n,
            "ccl": self.args.ccl, "op": "allreduce", "dtype": "f32", "redop": "sum", "root": 0,
            # A step's traffic: DDP allreduces every gradient once per step.
            "bytes": count * elem, "count": count,
            "busbw_factor": 2.0 * (n - 1) / n if n > 1 else 0.0,
            "rails": self.rails, "pid": os.getpid(), "check": False,
            "events": self.args.ccl == "ftccl", "warmup": self.args.warmup,
            "iters": self.args.steps, "duration_ns": None, "timeout_ms": self.args.timeout,
            "seed": self.args.seed, "rails_used": rails_used, "ccl_version": version,
            "workload": "torch_ddp"})

    def join_failed(self, error):
        """Joining the group failed: a header without a model and an error end line; exits 10
        (the rank ended with an error, as faultline-worker's that cannot join)."""
        msg = _first_line(error)
        self._first_error_ns = _now()
        self._header(0, 0, None, "")
        self._end(False, "joining the group failed: " + msg)
        print(f"rank {self.args.rank}: joining the group failed: {msg}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(EXIT_CCL_ERROR)

    def header(self, model, collectives_per_step=1):
        """The log's header, once the group is joined and the model built. A step issues
        `collectives_per_step` collectives one after another (DDP: one per gradient bucket);
        without a library's own timing the watchdog allows that many deadlines per step."""
        import torch

        self._per_step = max(1, int(collectives_per_step))
        count = sum(p.numel() for p in model.parameters() if p.requires_grad)
        elem = next(model.parameters()).element_size()
        if self.args.ccl == "ftccl":
            import ftccl_torch

            rails_used = list(range(ftccl_torch.num_rails(self.pg)))
            version = ftccl_torch.version()
        else:
            rails_used = [0] if self.args.ccl == "gloo" else None
            version = f"torch {torch.__version__}"
        self._header(count, elem, rails_used, version)

    def _drain(self):
        if self.args.ccl != "ftccl" or self.pg is None:
            return
        import ftccl_torch

        for e in ftccl_torch.drain_events(self.pg):
            line = {"type": "event", "t_ns": e["t_ns"], "kind": e["kind"], "path": e["rail"],
                    "reason": e["reason"]}
            if e["peer"] >= 0:
                line["peer"] = e["peer"]
            self._write(line)

    def _end(self, ok, message, watchdog=False):
        """Writes the end line; False when it was already written (by the other thread)."""
        try:
            self._drain()
        except Exception:  # a broken group has nothing more to say
            pass
        end = {"type": "end", "status": "ok" if ok else "error", "message": message,
               "t_ns": _now(), "first_error_ns": self._first_error_ns}
        if watchdog:
            end["watchdog"] = True
        return self._write(end, end=True)

    # -- the group -----------------------------------------------------------------------
    def init_process_group(self):
        import torch
        import torch.distributed as dist

        a = self.args
        timeout = datetime.timedelta(milliseconds=a.timeout)
        os.makedirs(a.store_dir, exist_ok=True)
        store = dist.FileStore(os.path.join(a.store_dir, "torch_store"), a.size)
        if a.ccl == "ftccl":
            os.environ["FTCCL_RAILS"] = ",".join(self.rails)
            os.environ["FTCCL_BOOTSTRAP"] = a.bootstrap
            if a.fault_hook:
                os.environ["FTCCL_FAULT_HOOK"] = a.fault_hook
            import ftccl_torch  # noqa: F401  (registers the backend)
        elif a.ccl == "gloo":
            os.environ["GLOO_SOCKET_IFNAME"] = _interface_of(self.rails[0])
        elif not torch.cuda.is_available():
            raise RuntimeError("ccl nccl needs a CUDA build of PyTorch and a GPU")
        dist.init_process_group(a.ccl, store=store, rank=a.rank, world_size=a.size,
                                timeout=timeout)
        self.pg = dist.group.WORLD
        threading.Thread(target=self._watchdog, daemon=True).start()
        return self.pg

    def _watchdog(self):
        grace_ns = (1000 + self.args.timeout // 4) * 1_000_000  # as faultline-worker's
        limit = self.args.timeout * 1_000_000 + grace_ns
        busy_since = None
        if self.args.ccl == "ftccl":
            import ftccl_torch

            busy_since = ftccl_torch.busy_since_ns
        while True:
            time.sleep(0.05)
            if busy_since is not None:
                start, allowed, what = busy_since(self.pg), limit, "a collective"
            else:
                start, allowed, what = self._step_start, limit * self._per_step, \
                    f"step {self._index}"
            if start and _now() - start > allowed:
                if self._end(False, f"{what} outlived its deadline ({self.args.timeout} ms) and "
                             "the grace period", watchdog=True):
                    os._exit(EXIT_CCL_ERROR)

    def wait_start(self):
        if self.args.start_at is not None:
            delay = self.args.start_at - _now()
            if delay > 0:
                time.sleep(delay / 1e9)

    # -- the loop ------------------------------------------------------------------------
    def steps(self):
        """Yields the step numbers (warm-up first); logs each step when the body returns."""
        total = self.args.warmup + self.args.steps
        for i in range(total):
            self._index = i
            start = _now()
            self._step_start = start
            try:
                yield i
            except GeneratorExit:
                self._step_start = None
                raise
            end = _now()
            self._step_start = None
            self._write({"type": "op", "index": i, "start_ns": start, "end_ns": end,
                         "bytes": self._bytes, "ok": True, "wrong": None,
                         "warmup": i < self.args.warmup})
            self._drain()

    def step_failed(self, error):
        """Logs the running step as failed with `error`, ends the log and exits with 10."""
        now = _now()
        start = self._step_start or now
        self._step_start = None
        self._first_error_ns = now
        msg = _first_line(error)
        self._write({"type": "op", "index": self._index, "start_ns": start, "end_ns": now,
                     "bytes": self._bytes, "ok": False, "wrong": None,
                     "warmup": self._index < self.args.warmup, "error": msg})
        self._end(False, msg)
        print(f"rank {self.args.rank}: step {self._index} failed: {msg}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(EXIT_CCL_ERROR)  # a failed group is not torn down (peers may be gone)

    def finish(self, model, loss):
        """A final barrier, the result line (parameter hash, final loss) and the end line, then
        an orderly close of the group; exits 0 (10 when the barrier fails)."""
        import torch.distributed as dist

        self._step_start = _now()
        try:
            dist.barrier()
        except Exception as e:
            self._step_start = None
            self._first_error_ns = _now()
            self._end(False, "final barrier: " + _first_line(e))
            os._exit(EXIT_CCL_ERROR)
        self._step_start = None
        loss = float(loss)
        self._write({"type": "result", "param_sha256": param_sha256(model),
                     "loss": loss if math.isfinite(loss) else None})  # JSON has no NaN, inf
        self._end(True, "")
        if self.args.ccl == "ftccl":
            import ftccl_torch

            ftccl_torch.shutdown(self.pg)  # DDP still holds the group: close it here
        sys.stdout.flush()
        os._exit(EXIT_OK)
