"""launchprof's own NVTX client: push and pop ranges in one NVTX domain, with no package.

A profiler that records NVTX (nsys with ``--trace=nvtx``) starts the program with the
environment variable ``NVTX_INJECTION64_PATH`` naming its injection library. The NVTX
v3 C API (``nvToolsExt.h``, header-only, Apache-2.0 with LLVM exception:
https://github.com/NVIDIA/NVTX) loads that library on a program's first NVTX call,
calls its ``InitializeInjectionNvtx2(getExportTable)`` and lets it fill the program's
tables of function pointers (one table per callback module: CORE, CUDA, OPENCL,
CUDART, CORE2, SYNC; ``nvtxDetail/nvtxImpl.h``, ``nvtxDetail/nvtxTypes.h``). This
module does the same from Python with :mod:`ctypes`, for the three calls a step needs
(``nvtxDomainCreateA``, ``nvtxDomainRangePushEx``, ``nvtxDomainRangePop`` of module
CORE2), so launchprof needs no NVTX package: the PyPI ``nvtx`` package from 0.2.12 on
is not recorded by nsys 2022.4 (docs/reference.md, "NVTX"), and pinning it downgraded
the user's own.

Without the variable (no profiler attached) nothing is loaded and :func:`client`
returns None: a step then costs one attribute test. An injection that cannot be loaded
or refuses to initialise also gives None (the program runs as without a profiler).

Ranges are per thread, as NVTX's: push and pop on the same thread.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

INJECTION_ENV = "NVTX_INJECTION64_PATH"
# nvtxTypes.h: the export tables a client hands the injection, and the NVTX version.
_ETID_CALLBACKS = 1
_ETID_VERSIONINFO = 3
_NVTX_VERSION = 3
# nvtxTypes.h: callback modules (NvtxCallbackModule) and the size of each one's table
# (NVTX_CBID_<MODULE>_SIZE: the highest callback id + 1; id 0 is unused).
_MODULE_SIZES = {1: 16, 2: 9, 3: 15, 4: 7, 5: 16, 6: 7}  # CORE, CUDA, OPENCL, CUDART, CORE2, SYNC
_CORE2 = 5
# NvtxCallbackIdCore2: the CORE2 calls used here.
_CBID_DOMAIN_RANGE_PUSH_EX = 4
_CBID_DOMAIN_RANGE_POP = 5
_CBID_DOMAIN_CREATE_A = 12
# nvToolsExt.h: nvtxColorType_t / nvtxMessageType_t.
MAX_TEXT = 4096  # characters of a range's text
_COLOR_ARGB = 1
_MESSAGE_ASCII = 1


class EventAttributes(ctypes.Structure):
    """``nvtxEventAttributes_t`` (v2 layout, 48 bytes on 64-bit): version, size,
    category, color type and colour, payload type and payload, message type and the
    message (an ASCII string here)."""

    _fields_ = [
        ("version", ctypes.c_uint16),
        ("size", ctypes.c_uint16),
        ("category", ctypes.c_uint32),
        ("color_type", ctypes.c_int32),
        ("color", ctypes.c_uint32),
        ("payload_type", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        ("payload", ctypes.c_uint64),
        ("message_type", ctypes.c_int32),
        ("message", ctypes.c_char_p),
    ]


class _Callbacks(ctypes.Structure):  # NvtxExportTableCallbacks
    _fields_ = [("struct_size", ctypes.c_size_t), ("get_module_function_table", ctypes.c_void_p)]


class _VersionInfo(ctypes.Structure):  # NvtxExportTableVersionInfo
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("reserved0", ctypes.c_uint32),
        ("set_injection_nvtx_version", ctypes.c_void_p),
    ]


_GetModuleFunctionTable = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint)
)
_GetExportTable = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32)
_SetVersion = ctypes.CFUNCTYPE(None, ctypes.c_uint32)
_DomainCreateA = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)
_DomainRangePushEx = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(EventAttributes))
_DomainRangePop = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class Client:
    """One process's NVTX client, initialised by an injection library (:func:`client`).

    ``domain(name)`` creates (once) and returns a domain handle; ``push(domain, text)``
    and ``pop(domain)`` open and close a range on the calling thread. Calls the injection
    left empty do nothing."""

    def __init__(self, library: ctypes.CDLL) -> None:
        # Storage the injection writes its function pointers into: per module, one slot
        # per callback id, and the table of the slots' addresses it is given (id 0 and
        # the one past the end stay NULL, as in nvtxImpl.h).
        self._slots = {m: (ctypes.c_void_p * (n + 1))() for m, n in _MODULE_SIZES.items()}
        self._tables = {}
        for module, size in _MODULE_SIZES.items():
            table = (ctypes.c_void_p * (size + 1))()
            for cbid in range(1, size):
                table[cbid] = ctypes.addressof(self._slots[module]) + cbid * ctypes.sizeof(ctypes.c_void_p)
            self._tables[module] = table
        self._get_table = _GetModuleFunctionTable(self._module_table)
        self._set_version = _SetVersion(lambda version: None)
        self._callbacks = _Callbacks(ctypes.sizeof(_Callbacks), ctypes.cast(self._get_table, ctypes.c_void_p))
        self._version = _VersionInfo(
            ctypes.sizeof(_VersionInfo), _NVTX_VERSION, 0, ctypes.cast(self._set_version, ctypes.c_void_p)
        )
        self._export = _GetExportTable(self._export_table)
        initialize = library.InitializeInjectionNvtx2
        initialize.restype = ctypes.c_int
        initialize.argtypes = [_GetExportTable]
        self.ok = bool(initialize(self._export))
        core2 = self._slots[_CORE2]
        ids = (_CBID_DOMAIN_CREATE_A, _CBID_DOMAIN_RANGE_PUSH_EX, _CBID_DOMAIN_RANGE_POP)
        create, push, pop = (core2[i] for i in ids)
        self._create = _DomainCreateA(create) if create else None
        self._push = _DomainRangePushEx(push) if push else None
        self._pop = _DomainRangePop(pop) if pop else None
        self.complete = None not in (self._create, self._push, self._pop)
        self._domains: dict[str, int | None] = {}
        self._attributes: dict[str, tuple[EventAttributes, bytes]] = {}
        self._library = library  # kept loaded for the process' life

    def _module_table(self, module: int, out_table: Any, out_size: Any) -> int:
        table = self._tables.get(module)
        if table is None:
            return 0
        if out_size:
            out_size[0] = _MODULE_SIZES[module]
        if out_table:
            out_table[0] = ctypes.addressof(table)
        return 1

    def _export_table(self, table_id: int) -> int | None:
        if table_id == _ETID_CALLBACKS:
            return ctypes.addressof(self._callbacks)
        if table_id == _ETID_VERSIONINFO:
            return ctypes.addressof(self._version)
        return None

    def domain(self, name: str) -> int | None:
        """The handle of domain ``name`` (created on first use); None when the injection
        does not implement domains."""
        if name not in self._domains:
            self._domains[name] = self._create(name.encode()) if self._create else None
        return self._domains[name]

    def push(self, domain: int | None, text: str) -> None:
        """Open a range ``text`` in ``domain`` on this thread."""
        if self._push is None:
            return
        attributes = self._attributes.get(text)
        if attributes is None:
            # nsys drops a range whose text is very long (100,000 characters: lost), and a
            # NUL would end the C string: cut to MAX_TEXT characters, NUL written as \0
            message = text[:MAX_TEXT].replace("\0", "\\0").encode()
            attr = EventAttributes(
                version=_NVTX_VERSION,
                size=ctypes.sizeof(EventAttributes),
                color_type=_COLOR_ARGB,
                color=0xFF76B900,
                message_type=_MESSAGE_ASCII,
                message=message,
            )
            attributes = self._attributes[text] = (attr, message)  # the bytes kept alive
        self._push(domain, ctypes.byref(attributes[0]))

    def pop(self, domain: int | None) -> None:
        """Close this thread's innermost range of ``domain``."""
        if self._pop is not None:
            self._pop(domain)


_lock = threading.Lock()
_client: Client | None = None
_tried = False
# Every client made, the refused one too: the injection was handed pointers into it (its
# callbacks and tables), which must outlive the process' NVTX use, as the C headers'
# static globals do.
_made: list[Client] = []


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # a fork while another thread held it would leave it held


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def client() -> Client | None:
    """This process's NVTX client, initialised on first call from the injection library
    that ``NVTX_INJECTION64_PATH`` names; None without the variable, or when the library
    cannot be loaded, does not initialise (no ``InitializeInjectionNvtx2``, or it returned
    0) or leaves any of the three calls a step needs empty (a step then marks nothing,
    rather than ranges in another domain). Thread-safe; the outcome is kept for the
    process' life."""
    global _client, _tried
    if _tried:
        return _client
    with _lock:
        if not _tried:
            path = os.environ.get(INJECTION_ENV)
            if path:
                try:
                    made = Client(ctypes.CDLL(path))
                    _made.append(made)
                    _client = made if made.ok and made.complete else None
                except (OSError, AttributeError):
                    _client = None
            _tried = True
    return _client
