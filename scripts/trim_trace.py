"""Trim an nsys SQLite export to the tables launchprof reads (rows untouched).

Usage: python scripts/trim_trace.py SRC.sqlite DST.sqlite
"""

import sqlite3
import sys

KEEP = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_DRIVER",
    "NVTX_EVENTS",
    "StringIds",
    "TARGET_INFO_GPU",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "PROCESSES",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUDA_GRAPH_NODE_EVENTS",
]
src, dst = sys.argv[1], sys.argv[2]
con = sqlite3.connect(dst)
con.execute(f"ATTACH '{src}' AS s")
for name, sql in con.execute("select name, sql from s.sqlite_master where type='table'").fetchall():
    if name in KEEP:
        con.execute(sql)
        con.execute(f'INSERT INTO main."{name}" SELECT * FROM s."{name}"')
con.commit()
con.execute("DETACH s")
con.execute("VACUUM")
con.close()
