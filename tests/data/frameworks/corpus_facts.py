"""Independent facts of the real-framework corpus traces, from plain sqlite3 (no launchprof).

Usage:  python tests/data/frameworks/corpus_facts.py [TRACE.sqlite.xz ...] > facts.json

With no arguments it reads every ``*.sqlite.xz`` beside this file. Per trace:

- ``kernels``: kernel rows; ``graph_kernels``: those with a graphNodeId (run by a graph);
- ``api``: calls per CUDA API name (``_vNNNN`` suffix removed) for launches, graph
  launches and instantiations, synchronizations and copies;
- ``api_rows``: all runtime (+ driver) API rows; ``memcpy``: memcpy rows;
- ``copies_between_graph_launches_p50`` (traces that launch graphs): the median count of
  ``cudaMemcpyAsync`` calls between one ``cudaGraphLaunch`` call and the next;
- ``nvtx``: outermost-agnostic count of push/pop + start/end ranges per ``domain:text``
  (domain from the NvtxDomainCreate event of the same domainId; default domain: text);
- ``busy_ns`` and ``span_ns``: union of kernel/memcpy/memset intervals on the busiest
  device, and first start to last end there.
"""

from __future__ import annotations

import json
import lzma
import re
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path

NAMES = re.compile(
    r"^(cudaLaunchKernel|cuLaunchKernel|cuLaunchKernelEx|cudaLaunchKernelExC|cudaGraphLaunch"
    r"|cudaGraphInstantiate\w*|cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize"
    r"|cudaMemcpyAsync|cudaMemcpy|cudaStreamIsCapturing)$"
)


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("select name from sqlite_master where type='table'")}


def facts(path: Path) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "t.sqlite"
        with lzma.open(path) as src, open(db, "wb") as dst:
            shutil.copyfileobj(src, dst)
        con = sqlite3.connect(db)
        tables = _tables(con)
        strings = dict(con.execute("select id, value from StringIds"))
        out: dict[str, object] = {}
        out["kernels"] = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        out["graph_kernels"] = con.execute(
            "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL where graphNodeId is not null"
        ).fetchone()[0]
        api: Counter[str] = Counter()
        rows = 0
        for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
            if table in tables:
                for name_id, n in con.execute(f"select nameId, count(*) from {table} group by nameId"):
                    rows += n
                    name = re.sub(r"_v\d+$", "", strings.get(name_id, "?"))
                    if NAMES.match(name):
                        api[name] += n
        out["api"] = dict(sorted(api.items()))
        if api.get("cudaGraphLaunch", 0) > 1:
            calls = []
            for (name_id,) in con.execute("select nameId from CUPTI_ACTIVITY_KIND_RUNTIME order by start"):
                name = re.sub(r"_v\d+$", "", strings.get(name_id, "?"))
                if name in ("cudaGraphLaunch", "cudaMemcpyAsync"):
                    calls.append(name)
            counts, current = [], None
            for name in calls:
                if name == "cudaGraphLaunch":
                    if current is not None:
                        counts.append(current)
                    current = 0
                elif current is not None:
                    current += 1
            counts.sort()
            out["copies_between_graph_launches_p50"] = counts[len(counts) // 2]
        out["api_rows"] = rows
        out["memcpy"] = (
            con.execute("select count(*) from CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()[0]
            if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables
            else 0
        )
        nvtx: Counter[str] = Counter()
        if "NVTX_EVENTS" in tables:
            domains = {d: t for d, t in con.execute("select domainId, text from NVTX_EVENTS where eventType = 75")}
            for text, text_id, domain in con.execute(
                "select text, textId, domainId from NVTX_EVENTS where eventType in (59, 60) and end is not null"
            ):
                label = text if text is not None else strings.get(text_id, "?")
                d = domains.get(domain)
                nvtx[f"{d}:{label}" if d else str(label)] += 1
        out["nvtx"] = (
            dict(sorted(nvtx.items())) if len(nvtx) <= 20 else {"distinct": len(nvtx), "total": sum(nvtx.values())}
        )
        parts = ["select deviceId, start, end from CUPTI_ACTIVITY_KIND_KERNEL"]
        for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            if table in tables:
                parts.append(f"select deviceId, start, end from {table}")
        by_dev: dict[int, list[tuple[int, int]]] = {}
        for dev, s, e in con.execute(" union all ".join(parts)):
            by_dev.setdefault(dev, []).append((s, e))
        iv = sorted(max(by_dev.values(), key=len)) if by_dev else []
        busy, cur_s, cur_e = 0, None, None
        for s, e in iv:
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    busy += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None:
            busy += cur_e - cur_s
        out["busy_ns"] = busy
        out["span_ns"] = (max(e for _, e in iv) - iv[0][0]) if iv else 0
        con.close()
        return out


def main() -> None:
    here = Path(__file__).parent
    paths = [Path(p) for p in sys.argv[1:]] or sorted(here.glob("*.sqlite.xz"))
    print(json.dumps({p.name.removesuffix(".sqlite.xz"): facts(p) for p in paths}, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
