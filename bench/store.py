"""Store benchmark: put/get/ack throughput of ``pycanal.store.MemoryEventStore`` (events/s, MB/s).

There is no peer to compare with in-process (Canal's store is Java), so the run compares the two
batch modes, ITEMSIZE and MEMSIZE, on the same events. The events are raw (serialized Canal
``Entry`` bytes, as the server keeps them) of a sysbench-like workload: transactions of
``--txn-rows`` INSERT row entries (one row each, 6 columns) between TRANSACTIONBEGIN and
TRANSACTIONEND, built once before timing.

Two measurements per mode, each the best of ``--repeat`` runs:

* ``threaded``: a producer thread ``put``s the events in chunks of ``--put-chunk`` (a transaction
  buffer flush), a consumer ``get``s batches with a timeout and ``ack``s each one (end position and
  sequence), as the embedded server does; time until the last event is acknowledged;
* ``serial``: one thread alternates ``try_put`` of a chunk and ``try_get`` + ``ack`` of everything
  there -- the store's own cost without thread hand-offs.

Every run checks that the consumer saw every event exactly once, in order. One JSON object goes to
stdout; progress to stderr. Run from the project root:

    .venv/bin/python bench/store.py [--events 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pycanal.protocol import EntryProtocol_pb2 as pb  # noqa: E402
from pycanal.protocol.position import LogIdentity  # noqa: E402
from pycanal.store import ITEMSIZE, MEMSIZE, Event, MemoryEventStore  # noqa: E402


def build_events(n: int, txn_rows: int) -> list[Event]:
    ident = LogIdentity(("127.0.0.1", 3306), 1234)
    out: list[Event] = []
    offset = 4
    ts = 1_700_000_000_000
    i = 0
    while len(out) < n:
        begin = pb.Entry()
        begin.header.logfileName = "mysql-bin.000001"
        begin.header.logfileOffset = offset
        begin.header.serverId = 1
        begin.header.executeTime = ts
        begin.entryType = pb.TRANSACTIONBEGIN
        begin.storeValue = pb.TransactionBegin(threadId=7).SerializeToString()
        out.append(Event.from_entry(begin, ident))
        offset += 80
        for _ in range(txn_rows):
            e = pb.Entry()
            h = e.header
            h.logfileName = "mysql-bin.000001"
            h.logfileOffset = offset
            h.serverId = 1
            h.executeTime = ts
            h.schemaName = "sbtest"
            h.tableName = "sbtest1"
            h.eventType = pb.INSERT
            h.eventLength = 220
            e.entryType = pb.ROWDATA
            rc = pb.RowChange(eventType=pb.INSERT)
            row = rc.rowDatas.add()
            for idx, (name, value) in enumerate(
                (
                    ("id", str(i)),
                    ("k", str(i * 7 % 100000)),
                    ("c", "-".join(f"{(i * 31 + j) % 10**11:011d}" for j in range(10))),
                    ("pad", "-".join(f"{(i * 17 + j) % 10**11:011d}" for j in range(5))),
                    ("d", f"{i % 100000}.{i % 100:02d}"),
                    ("t", "2024-05-01 12:00:00"),
                )
            ):
                col = row.afterColumns.add(index=idx, name=name, value=value, updated=True)
                col.isKey = idx == 0
            e.storeValue = rc.SerializeToString()
            out.append(Event.from_entry(e, ident))
            offset += 220
            i += 1
        end = pb.Entry()
        end.header.logfileName = "mysql-bin.000001"
        end.header.logfileOffset = offset
        end.header.serverId = 1
        end.header.executeTime = ts
        end.entryType = pb.TRANSACTIONEND
        end.storeValue = pb.TransactionEnd(transactionId="1").SerializeToString()
        out.append(Event.from_entry(end, ident))
        offset += 31
        ts += 1000
    return out


def make_store(mode: str, args: argparse.Namespace) -> MemoryEventStore:
    return MemoryEventStore(args.buffer_size, args.mem_unit, mode)


def batch_size(mode: str, args: argparse.Namespace) -> int:
    return args.item_batch if mode == ITEMSIZE else args.mem_batch


def run_threaded(events: list[Event], mode: str, args: argparse.Namespace) -> dict:
    store = make_store(mode, args)
    bs = batch_size(mode, args)
    chunk = args.put_chunk
    got = 0
    batches = 0
    last_ok = True

    produced = threading.Event()

    def producer() -> None:
        for i in range(0, len(events), chunk):
            store.put(events[i : i + chunk])
        produced.set()

    t0 = time.perf_counter()
    th = threading.Thread(target=producer)
    th.start()
    expect = 0
    while got < len(events):
        # the tail is less than a full batch: once everything is put, take what is there (the
        # server's timed get would otherwise wait its timeout out on the last batch)
        b = store.try_get(None, bs) if produced.is_set() else store.get(None, bs, timeout=0.05)
        evs = b.events
        if not evs:
            continue
        if evs[0] is not events[expect] or evs[-1] is not events[expect + len(evs) - 1]:
            last_ok = False
        expect += len(evs)
        got += len(evs)
        batches += 1
        r = b.position_range
        store.ack(r.end, r.end_seq)
    elapsed = time.perf_counter() - t0
    th.join()
    return {"seconds": elapsed, "batches": batches, "ok": last_ok and got == len(events)}


def run_serial(events: list[Event], mode: str, args: argparse.Namespace) -> dict:
    store = make_store(mode, args)
    bs = batch_size(mode, args)
    chunk = args.put_chunk
    n = len(events)
    i = got = batches = 0
    ok = True
    t0 = time.perf_counter()
    while got < n:
        while i < n and store.try_put(events[i : i + chunk]):
            i += chunk
        while True:
            b = store.try_get(None, bs)
            evs = b.events
            if not evs:
                break
            if evs[0] is not events[got]:
                ok = False
            got += len(evs)
            batches += 1
            r = b.position_range
            store.ack(r.end, r.end_seq)
    elapsed = time.perf_counter() - t0
    return {"seconds": elapsed, "batches": batches, "ok": ok and got == n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--txn-rows", type=int, default=8)
    ap.add_argument("--buffer-size", type=int, default=16384, help="canal.instance.memory.buffer.size")
    ap.add_argument("--mem-unit", type=int, default=1024, help="canal.instance.memory.buffer.memunit")
    ap.add_argument("--put-chunk", type=int, default=64, help="events per put (a transaction flush)")
    ap.add_argument("--item-batch", type=int, default=1000, help="ITEMSIZE batch (events)")
    ap.add_argument("--mem-batch", type=int, default=256, help="MEMSIZE batch (memunits)")
    args = ap.parse_args()

    print(f"building {args.events} events ...", file=sys.stderr)
    events = build_events(args.events, args.txn_rows)
    total_bytes = sum(e.size for e in events)
    n = len(events)
    result: dict = {
        "benchmark": "pycanal.store.MemoryEventStore put/get/ack",
        "events": n,
        "bytes": total_bytes,
        "mean_event_bytes": round(total_bytes / n, 1),
        "buffer_size": args.buffer_size,
        "buffer_mem_unit": args.mem_unit,
        "put_chunk": args.put_chunk,
        "item_batch_events": args.item_batch,
        "mem_batch_units": args.mem_batch,
        "repeat": args.repeat,
        "modes": {},
    }
    for mode in (ITEMSIZE, MEMSIZE):
        res: dict = {}
        for name, fn in (("threaded", run_threaded), ("serial", run_serial)):
            runs = []
            for r in range(args.repeat):
                out = fn(events, mode, args)
                if not out["ok"]:
                    raise SystemExit(f"{mode} {name}: events lost or out of order")
                runs.append(out)
                print(f"{mode} {name} run {r + 1}: {out['seconds']:.3f}s", file=sys.stderr)
            best = min(runs, key=lambda x: x["seconds"])
            res[name] = {
                "events_per_s": round(n / best["seconds"]),
                "mb_per_s": round(total_bytes / best["seconds"] / 1e6, 1),
                "seconds": round(best["seconds"], 4),
                "batches": best["batches"],
                "mean_batch_events": round(n / best["batches"], 1),
                "runs_seconds": [round(x["seconds"], 4) for x in runs],
            }
        result["modes"][mode] = res
    it, ms = result["modes"][ITEMSIZE], result["modes"][MEMSIZE]
    result["memsize_over_itemsize"] = {
        k: round(ms[k]["events_per_s"] / it[k]["events_per_s"], 3) for k in ("threaded", "serial")
    }
    result["python"] = platform.python_version()
    result["cpus"] = os.cpu_count()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
