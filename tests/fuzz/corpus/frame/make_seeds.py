#!/usr/bin/env python3
"""Writes the seed inputs of the `frame` fuzz target (tests/fuzz/frame_fuzz.cc) here.

Seeds start with mode byte 1 (the harness seals every frame), so no CRC is computed here. The
engine has a receive posted for collective 0, tag 7: allgather of 4096 u8 from rank 1.
"""
import os
import struct

COMM = 0x5EEDF00D
HERE = os.path.dirname(os.path.abspath(__file__))


def header(ftype, coll_seq=0, chunk_seq=0, offset=0, msg_len=0, count=0, tag=0, length=0,
           kind=1, dtype=6, root=0, redop=0):
    # FrameHeader (ccl/src/wire.h), little-endian, 80 bytes; the CRCs are left to the harness.
    return struct.pack("<IBBBBQQQQQQIIiB3xII", 0x4C435446, 1, ftype, kind, dtype, COMM,
                       coll_seq, chunk_seq, offset, msg_len, count, tag, length, root, redop, 0, 0)


def data(seq, off, n, msg_len=4096, tag=7, **kw):
    return header(2, chunk_seq=seq, offset=off, msg_len=msg_len, count=4096, tag=tag, length=n,
                  **kw) + bytes((off + i) & 0xFF for i in range(n))


seeds = {
    "message": b"".join(data(i, i * 1024, 1024) for i in range(4)),
    "message_out_of_order": data(1, 1024, 3072) + data(0, 0, 1024),
    "early_message": data(0, 0, 512, msg_len=512, tag=8),
    "control": header(7, chunk_seq=5) + header(8, chunk_seq=1) + header(3) + header(9, tag=1)
               + header(10, tag=0),
    "sack": header(3, length=16) + struct.pack("<QQ", 0, 1),
    "abort": header(5, tag=7, length=5) + b"boom!",
    "bye": header(6),
    "wrapping_offset": data(0, (1 << 64) - 8, 16),
}
for name, body in seeds.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(b"\x01" + body)
with open(os.path.join(HERE, "raw_garbage"), "wb") as f:
    f.write(b"\x00" + bytes(range(256)))
