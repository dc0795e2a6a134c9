"""ftccl as a torch.distributed backend.

Importing this package registers the backend "ftccl"::

    import ftccl_torch  # noqa: F401
    torch.distributed.init_process_group("ftccl", rank=r, world_size=n, store=store,
                                         timeout=datetime.timedelta(seconds=30))

Each rank needs FTCCL_RAILS (its rail addresses or interface names, comma-separated) and either
FTCCL_BOOTSTRAP (rank 0's ip:port on the management network) or MASTER_ADDR (rank 0 then
listens on an ephemeral port there and hands it over through the store). ftccl's knobs come
from their FTCCL_* variables as for any ftccl rank (FTCCL_FAULT_HOOK, FTCCL_CHUNK_BYTES, ...).
The process group's timeout is every collective's deadline. A failed collective raises
RuntimeError with ftccl's message; the group's error is sticky from then on.
"""
import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C

__all__ = ["version", "drain_events", "stats", "knobs", "num_rails", "shutdown", "busy_since_ns"]

version = _C.version
drain_events = _C.drain_events
stats = _C.stats
knobs = _C.knobs
num_rails = _C.num_rails
shutdown = _C.shutdown
busy_since_ns = _C.busy_since_ns

if not hasattr(dist.Backend, "FTCCL"):
    dist.Backend.register_backend("ftccl", _C.create_process_group)
