"""``launchprof doctor``: can this machine profile, and what is missing?

Each check is really tried: nsys is found and asked its version and ``profile`` options,
the QdstrmImporter is started (``--version``: its shared libraries must load), the GPU
and driver are queried through cuda-python, the ``nvtx`` package's version is read and,
with ``--check-nvtx``, a one-range script is profiled to see whether this nsys records it.
A check is ``ok``, ``warn`` (profiling works, with less) or ``fail`` (profiling cannot
work); any ``fail`` makes the command exit 1.
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from launchprof.defaults import STEP_DOMAIN
from launchprof.errors import LaunchprofError
from launchprof.nsys import importer as imp
from launchprof.nsys.locate import NsysInfo, find_importer, nsys_info, nsys_own_importer
from launchprof.nsys.profile import PROFILE_FLAGS, profile_options, record_quietly

PROBE_TEXT = "launchprof-doctor-probe"


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table: ``status`` is ``ok``, ``warn`` or ``fail``; ``fix``
    says what to install or do (empty when nothing)."""

    name: str
    status: str
    detail: str
    fix: str = ""


def _version_tuple(text: str | None) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text or "")[:4])


def check_nsys(explicit: str | None) -> tuple[Check, NsysInfo | None]:
    """Where nsys is, how it was found, and its version."""
    try:
        info = nsys_info(explicit)
    except LaunchprofError as exc:
        return Check("nsys", "fail", str(exc), "install Nsight Systems (Debian: apt install nsight-systems)"), None
    if info.version is None:
        return Check("nsys", "fail", f"{info.path} ({info.source}) does not answer --version"), info
    return Check("nsys", "ok", f"{info.path} ({info.source}), version {info.version}"), info


def check_flags(info: NsysInfo) -> Check:
    """Whether this nsys knows every ``nsys profile`` flag launchprof passes."""
    known = profile_options(str(info.path))
    if not known:
        return Check("nsys profile flags", "warn", "could not read `nsys profile --help`")
    missing = [f for f in PROFILE_FLAGS if f.split("=", 1)[0] not in known]
    if missing:
        return Check("nsys profile flags", "warn", f"not supported, dropped: {' '.join(missing)}", "a newer nsys")
    return Check("nsys profile flags", "ok", " ".join(PROFILE_FLAGS))


def check_importer(info: NsysInfo) -> Check:
    """Whether a QdstrmImporter exists and starts, and whether nsys finds it by itself."""
    own = nsys_own_importer(info.path)
    try:
        path = own if own.is_file() else find_importer(info.path)
    except LaunchprofError as exc:
        return Check("QdstrmImporter", "fail", str(exc))
    result = imp.check_importer(path)
    if not result.ok:
        fix = imp.library_hint(result.missing_library) if result.missing_library else "reinstall Nsight Systems"
        return Check("QdstrmImporter", "fail", result.message + "; nsys would leave only .qdstrm files", fix)
    where = (
        "where nsys looks" if path == own else f"not where nsys looks ({own}); launchprof imports .qdstrm files with it"
    )
    return Check("QdstrmImporter", "ok", f"{path} runs ({result.version or 'version unknown'}), {where}")


def _cuda_driver():  # type: ignore[no-untyped-def]
    try:
        from cuda.bindings import driver

        return driver
    except ImportError:
        from cuda import cuda  # cuda-python < 12.6

        return cuda


def check_gpu() -> Check:
    """GPUs and driver version through cuda-python; "no GPU" is an answer, not an error."""
    try:
        drv = _cuda_driver()
    except ImportError:
        return Check("GPU", "warn", "cuda-python is not installed: GPU not checked", "pip install 'launchprof[gpu]'")
    try:
        (err,) = drv.cuInit(0)
        if err != drv.CUresult.CUDA_SUCCESS:
            return Check("GPU", "warn", f"no GPU: cuInit returned {err.name}; only CPU-side traces can be recorded")
        err, count = drv.cuDeviceGetCount()
        err2, driver_version = drv.cuDriverGetVersion()
        names = []
        cc_major = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        cc_minor = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
        for i in range(count):
            _, dev = drv.cuDeviceGet(i)
            _, raw = drv.cuDeviceGetName(256, dev)
            _, major = drv.cuDeviceGetAttribute(cc_major, dev)
            _, minor = drv.cuDeviceGetAttribute(cc_minor, dev)
            name = raw.split(b"\0", 1)[0].decode(errors="replace")
            names.append(f"{i}: {name} (compute capability {major}.{minor})")
    except Exception as exc:  # noqa: BLE001 - any driver/binding failure means "no usable GPU"
        return Check("GPU", "warn", f"no GPU: the CUDA driver cannot be used ({str(exc).splitlines()[0][:200]})")
    if count == 0:
        return Check("GPU", "warn", "no GPU: the driver sees no device")
    drv_text = f"{driver_version // 1000}.{driver_version % 1000 // 10}" if err2 == drv.CUresult.CUDA_SUCCESS else "?"
    return Check("GPU", "ok", f"{'; '.join(names)}; driver supports CUDA {drv_text}")


def probe_nvtx(info: NsysInfo, attempts: int = 2) -> tuple[int, int]:
    """Profile a script that opens one ``launchprof.step()`` (an NVTX range in domain
    ``launchprof``, from launchprof's own NVTX client) in this Python; return
    ``(ranges, domain_events)`` found in the export: ``(1, 1)`` when this nsys records the
    steps, ``(0, 1)`` when it saw the domain but lost the range. A run with
    no NVTX event at all says nothing (nsys did not hook the process; seen once under load
    with nsys 2022.4) and is tried again, up to ``attempts`` runs.

    Raises:
        NsysError: nsys wrote no trace, or the import/export failed.
    """
    from launchprof.trace import load_trace

    found = (0, 0)
    for attempt in range(attempts):
        with tempfile.TemporaryDirectory(prefix="launchprof-doctor-") as tmp:
            script = Path(tmp) / "probe.py"
            script.write_text(f"import launchprof\nwith launchprof.step({PROBE_TEXT!r}):\n    pass\n")
            stem = Path(tmp) / f"probe{attempt}"
            flags = ["--trace=nvtx", "--sample=none", "--cpuctxsw=none"]
            files = record_quietly(info.path, stem, [sys.executable, str(script)], flags, timeout_s=90)
            trace = load_trace(files.sqlite)
            nvtx = trace.nvtx
            ranges = int(((nvtx["text"] == PROBE_TEXT) & (nvtx["domain"] == STEP_DOMAIN)).sum())
            found = (ranges, trace.nvtx_domain_events)
        if ranges or trace.nvtx_domain_events:
            break
    return found


def check_nvtx(info: NsysInfo | None, probe: bool) -> Check:
    """Whether this nsys records ``launchprof.step()``: the steps go through launchprof's
    own NVTX client (:mod:`launchprof.nvtx_api`), whatever NVTX package is installed; with
    ``probe``, a one-step script is profiled to see it."""
    if info is None or info.version is None:
        return Check("NVTX", "warn", "nsys unknown: step markers not checked")
    if not probe:
        detail = f"steps marked through launchprof's own NVTX client; --check-nvtx probes nsys {info.version}"
        return Check("NVTX", "ok", detail)
    try:
        n, domains = probe_nvtx(info)
    except LaunchprofError as exc:
        return Check("NVTX", "warn", f"the probe could not run: {exc}")
    if n == 0 and domains == 0:
        return Check("NVTX", "warn", "the probe recorded no NVTX event at all (inconclusive)")
    if n == 0:
        return Check(
            "NVTX",
            "warn",
            f"nsys {info.version} recorded no step range (probed): steps will be inferred from the kernels",
            "report it with `nsys --version`",
        )
    return Check("NVTX", "ok", f"nsys {info.version} records launchprof.step() (probed)")


def run_checks(nsys: str | None = None, probe_nvtx_ranges: bool = False) -> list[Check]:
    """All checks, in the order shown."""
    first, info = check_nsys(nsys)
    checks = [first]
    if info is not None:
        checks += [check_flags(info), check_importer(info)]
    checks.append(check_gpu())
    checks.append(check_nvtx(info, probe_nvtx_ranges and info is not None))
    return checks


STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def run_doctor(console: Console, nsys: str | None = None, probe_nvtx_ranges: bool = False) -> int:
    """Print the checks as a table and what to install; return 1 if any check failed."""
    with console.status("checking"):
        checks = run_checks(nsys, probe_nvtx_ranges)
    table = Table(title="launchprof doctor", show_lines=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for c in checks:
        table.add_row(c.name, f"[{STYLE[c.status]}]{c.status}[/]", escape(c.detail))
    console.print(table)
    for c in checks:
        if c.fix:
            console.print(f"{c.name}: {c.fix}", markup=False)
    failed = [c.name for c in checks if c.status == "fail"]
    if failed:
        console.print(f"profiling cannot work here: fix {', '.join(failed)}", markup=False)
        return 1
    console.print("profiling can work here", markup=False)
    return 0
