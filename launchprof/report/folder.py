"""Write a report folder whole or not at all.

Every file of a run (``summary.json``, ``report.html``, the step files, ``plotly.min.js``)
is first written into a staging folder of its own beside the target
(``.<name>.staging-XXXX``; inside the target when its parent cannot be written or is
another file system: ``.launchprof.staging-XXXX``), then
moved into the target with ``os.replace``, one file after another, while the run holds an
exclusive ``flock`` on the lock file ``.<name>.lock`` beside the target (:func:`folder_lock`) and with SIGINT,
SIGTERM and SIGHUP held back. So:

- two runs into one folder never interleave their files: without ``--force`` the second
  one fails with one line (the folder is busy, or holds the first one's report once it
  has the lock); with ``--force`` it waits for the lock and replaces the report whole;
- an interrupted run (Ctrl-C, SIGTERM before the swap) removes its staging folder and
  leaves the old report as it was; a signal during the swap is handled after it (the
  new report is then whole);
- a folder that could not take the files (not writable, a folder where a file goes) is
  refused before the first file moves (:func:`~launchprof.report.checks.unreplaceable`), so it is never left with
  only part of them;
- a staging folder left by a killed run (SIGKILL, a crash) is removed by a later run
  (once a minute old): each run holds a ``flock`` on its own staging folder, which the
  kernel drops with the process.

Files of the folder that no run writes (``profile``'s trace, anything of the user's) are
left where they are. What a power loss or SIGKILL during the swap could still leave mixed
is caught by ``compare``: ``summary.json`` lists the SHA-256 of every step file and its
``run_id`` is in ``report.html`` (:func:`launchprof.report.write.commit_report`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from launchprof.errors import OutputError
from launchprof.report.checks import refuse_not_folder, refuse_other_kind, refuse_unreplaceable
from launchprof.report.outputs import REPORT_DOCUMENTS, VENDORED_JS, Output
from launchprof.report.signals import signals_held


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _oserror(what: str, path: Path, exc: OSError) -> OutputError:
    if exc.errno == errno.ENOSPC:
        return OutputError(f"cannot {what} {path}: no space left on that disk")
    return OutputError(f"cannot {what} {path}: {exc.strerror or exc}")


_BUSY = (
    "another launchprof run is writing a report into {folder}; "
    "wait for it, use --force to replace its report, or --output to choose another folder"
)


def _another_run_committing(folder: Path) -> bool:
    """Whether another run holds the lock of ``folder`` now, i.e. is moving its files in
    (:meth:`FolderWriter.commit`): the lock beside the folder, or inside it when its parent
    cannot be written (:func:`folder_lock`; by the name given too, as older runs kept it).
    Files seen there without a summary may be that run's, half moved."""
    for lock in dict.fromkeys(
        (folder_lock(folder), folder.parent / f".{folder.name}.lock", folder / ".launchprof.lock")
    ):
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            continue
        finally:
            os.close(fd)
    return False


def _stages_beside(folder: Path) -> bool:
    """Whether a run stages ``folder``'s files beside it (its parent can be written and is
    on its file system), else inside it (:class:`FolderWriter`); its lock goes where
    :func:`folder_lock` says."""
    parent = folder.parent
    return _writable_dir(parent) and not (folder.is_dir() and folder.stat().st_dev != parent.stat().st_dev)


def folder_lock(folder: Path) -> Path:
    """The lock file of ``folder``, of the folder it names once links are resolved (so
    runs given two names of one folder take one lock): ``.<name>.lock`` beside it, or
    ``.launchprof.lock`` inside it where its parent cannot be written or is another file
    system."""
    real = Path(os.path.realpath(folder))
    return real.parent / f".{real.name}.lock" if _stages_beside(real) else real / ".launchprof.lock"


@contextlib.contextmanager
def _holding(lock: Path, folder: Path, wait: bool) -> Iterator[None]:
    """An exclusive ``flock`` on ``lock`` (made when missing) for the block: waited for
    when ``wait`` (Ctrl-C ends the wait), else refused at once when another run holds it.

    Raises:
        OutputError: the lock cannot be made, or another run holds it and not ``wait``.
    """
    try:
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o666)
    except OSError as exc:
        raise _oserror("lock", lock, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise OutputError(_BUSY.format(folder=folder)) from None
        yield
    finally:
        os.close(fd)  # releases the lock


class FolderWriter:
    """The files of one run for ``folder``, staged, then committed under the folder's lock.

    Use as a context manager: leaving it without :meth:`commit` (an error, an
    interruption) removes the staging folder and leaves ``folder`` untouched.

    Args:
        folder: the report folder (made, with its parents, when missing).
        force: replace an earlier report; else a folder holding any of ``produced``
            (checked now and again under the lock) is refused, and so is one holding any of
            ``owned`` without a report (files of those names that launchprof did not write).
        produced: the names whose presence means "this folder holds a report".
        owned: every name a run of this kind may write; those not staged are removed from
            ``folder`` on commit (a step file of an earlier report must not stay beside
            this one's summary).
        same_input: given the folder, None when the report it holds is of this run's input
            (the same trace analysed again: it is replaced without ``force``), else what it
            is of (a short text for the refusal, e.g. the other trace's path).

    Raises:
        OutputError: ``folder`` is a file, holds a report and ``force`` is False, or
            neither it nor its parent can be written.
    """

    def __init__(
        self,
        folder: Path,
        force: bool,
        produced: Iterable[str],
        owned: Iterable[str],
        same_input: Callable[[Path], str | None] | None = None,
    ) -> None:
        self.folder = folder
        self.force = force
        self.same_input = same_input
        self.produced = tuple(produced)
        self.owned = tuple(owned)
        self._committed = False
        self._own_fd = -1
        self._check_existing()
        parent = folder.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _oserror("create", parent, exc) from None
        if _stages_beside(folder):
            self._beside, prefix = parent, f".{folder.name}."
        else:  # a writable folder under a read-only one, a mount point: stage inside it
            self._make_folder()
            refuse_unreplaceable(folder, ())
            self._beside, prefix = folder, ".launchprof."
        # Ctrl-C or SIGTERM between making the staging folder and holding its lock must not
        # leave it behind: the signals wait until the writer can clean up after them.
        try:
            with signals_held():  # a held signal's handler runs as the block ends
                self._stage(folder, prefix)
        except BaseException:
            self.close()
            raise

    def _stage(self, folder: Path, prefix: str) -> None:
        """Make the staging folder and hold its lock (``__init__``, signals held)."""
        try:
            self.staging = Path(tempfile.mkdtemp(prefix=f"{prefix}staging-", dir=self._beside))
        except OSError as exc:
            if self._beside == folder:
                raise _oserror("write into", folder, exc) from None
            self._make_folder()  # the parent refuses (e.g. /proc): the folder's own error, or stage inside it
            self._beside, prefix = folder, ".launchprof."
            try:
                self.staging = Path(tempfile.mkdtemp(prefix=f"{prefix}staging-", dir=folder))
            except OSError as exc2:
                raise _oserror("write into", folder, exc2) from None
        self._lock_path = folder_lock(folder) if self._beside != folder else folder / ".launchprof.lock"
        self._drop_leftovers(prefix)
        try:
            self._own_fd = os.open(self.staging / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(self._own_fd, fcntl.LOCK_EX)
        except OSError as exc:
            self.close()
            raise _oserror("write into", self._beside, exc) from None

    def _check_existing(self, locked: bool = False) -> None:
        """Refuse the folder as the class says; ``locked``: this run holds the folder's lock
        (no other run can be committing)."""
        folder = self.folder
        refuse_not_folder(folder)
        if not self.force and folder.is_dir() and any((folder / n).exists() for n in self.produced):
            other = self.same_input(folder) if self.same_input is not None else ""
            if other is not None:
                of = f" of {other}" if other else ""
                raise OutputError(
                    f"{folder} already holds a report{of}; use --force to overwrite or --output to choose another "
                    "folder"
                )
        refuse_other_kind(folder, self.produced)
        ours = any((folder / n).exists() for n in REPORT_DOCUMENTS)
        names = [n for n in self.owned if n != VENDORED_JS]  # every kind of report writes that one
        foreign = [n for n in names if (folder / n).exists()] if not (self.force or ours) and folder.is_dir() else []
        if foreign and not locked and _another_run_committing(folder):  # its files, half moved in
            raise OutputError(_BUSY.format(folder=folder))
        if foreign and any((folder / n).exists() for n in REPORT_DOCUMENTS):
            self._check_existing(locked)  # that run's report is whole now: refused (or replaced) as one
            return
        if foreign:  # files of these names, but no report of launchprof's beside them: the user's
            raise OutputError(
                f"{folder} holds {', '.join(foreign)} but no report: they are not launchprof's to replace; "
                "use --force to replace them or --output to choose another folder"
            )
        refuse_unreplaceable(folder, self.owned)

    def _make_folder(self) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _oserror("create", self.folder, exc) from None

    def _drop_leftovers(self, prefix: str) -> None:
        """Remove staging folders of runs that no longer exist: their flock is free, or
        they have no lock file (a run makes it at once). One made in the last minute is
        left alone: its run may not have locked it yet."""
        now = time.time()
        for old in self._beside.glob(f"{prefix}staging-*"):
            try:
                if now - old.stat().st_mtime < 60:
                    continue
                fd = os.open(old / ".lock", os.O_RDWR)
            except FileNotFoundError:  # no run holds it: its run died before locking it, or
                shutil.rmtree(old, ignore_errors=True)  # a Dask worker made it again after its run was stopped
                continue
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue  # a live run's
            shutil.rmtree(old, ignore_errors=True)
            os.close(fd)

    def stage(self, name: str, text: str) -> None:
        """Write ``text`` as ``name`` into the staging folder.

        Raises:
            OutputError: it cannot be written (disk full, ...).
        """
        path = self.staging / name
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise _oserror("write", self.folder / name, exc) from None

    def staged(self) -> list[str]:
        """Names staged so far (sorted); names starting with a dot are the writer's own
        (its lock, :meth:`side_folder`) and are not moved in."""
        return sorted(p.name for p in self.staging.iterdir() if not p.name.startswith("."))

    def side_folder(self, name: str) -> Path:
        """A folder ``.<name>`` inside the staging folder, made now: files written there
        go with the staging folder (removed with it, never moved in by :meth:`commit`),
        e.g. the rank reports of a multi-trace run until they move in with it
        (:meth:`adopt`, :func:`commit_together`)."""
        path = self.staging / f".{name}"
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            raise _oserror("write into", self.staging, exc) from None
        return path

    def adopt(self, source: Path) -> None:
        """Stage every file of the folder ``source`` (written whole, e.g. by another writer
        into a :meth:`side_folder`): moved (``os.replace``), or copied where ``source`` is
        on another file system.

        Raises:
            OutputError: a file cannot be moved or copied.
        """
        try:
            for path in sorted(source.iterdir()):
                if path.name.startswith(".") or not path.is_file():
                    continue  # a writer's own lock, a staging folder
                try:
                    os.replace(path, self.staging / path.name)
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    shutil.copyfile(path, self.staging / path.name)
        except OSError as exc:
            raise _oserror("write", self.folder, exc) from None

    def commit(self, order: Iterable[str] = (), before_move: Callable[[], None] | None = None) -> None:
        """Move the staged files into the folder (those not in ``order`` first, then
        ``order``'s in that order: the document that says what the folder holds, such as
        ``summary.json``, goes last in it) and remove the staging folder: one writer's
        :func:`commit_together`. ``before_move``: called first, under the folder's lock
        with Ctrl-C and SIGTERM held (e.g. removing what the replaced report held besides
        its files); what it raises stops the commit.

        Raises:
            OutputError: the folder is busy (no ``force``), now holds a report (no
                ``force``) or cannot take the files (:func:`~launchprof.report.checks.unreplaceable`), or a file
                cannot be moved; what ``before_move`` raises.
        """
        commit_together((self, tuple(order)), (), before_move)

    def _move(self, order: Iterable[str]) -> None:
        """Remove the owned names not staged from the folder, then move the staged files in
        (``order``'s last, in that order); the folder's lock held, signals held."""
        names = self.staged()
        order = tuple(order)
        ordered = [n for n in names if n not in order] + [n for n in order if n in names]
        for name in self.owned:
            for leftover in self.folder.glob(f".{name}.*"):  # staged in place by an older launchprof
                _unlink(leftover)
            if name not in names:
                try:
                    (self.folder / name).unlink(missing_ok=True)
                except OSError as exc:
                    raise _oserror("remove the old", self.folder / name, exc) from None
        for name in ordered:
            try:
                os.replace(self.staging / name, self.folder / name)
            except OSError as exc:
                raise _oserror("write", self.folder / name, exc) from None
        self._committed = True

    def close(self) -> None:
        """Remove the staging folder (what was not committed is dropped); never raises
        itself (Ctrl-C or SIGTERM wait until the folder is gone, then their handlers run)."""
        with signals_held():
            staging = getattr(self, "staging", None)
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            if self._own_fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._own_fd)
                self._own_fd = -1

    def __enter__(self) -> FolderWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Commit = tuple[FolderWriter, tuple[str, ...]]  # a writer and the order of its last files (FolderWriter.commit)


def commit_together(
    top: Commit,
    inner: Iterable[Commit] = (),
    before_move: Callable[[], None] | None = None,
    also_locked: Callable[[], Iterable[Path]] | None = None,
) -> None:
    """Commit the writers of ``inner`` (folders inside ``top``'s, e.g. the rank reports of
    a multi-trace folder) and then ``top`` as one, each as :meth:`FolderWriter.commit`:

    1. ``top``'s lock; then ``also_locked()`` (called under it: other folders the commit
       changes, e.g. the earlier rank folders ``before_move`` removes) and the locks of
       those and of ``inner``'s folders (:func:`folder_lock`), in the order of their
       resolved paths, so two runs reaching one folder by different names take them in
       the same order; a lock file already held (the folder's and a rank folder named
       ``launchprof`` are one file when the folder is a mount point) is taken once.
       Ctrl-C ends a wait for another run's lock.
    2. every folder checked again under its lock (it may now hold another run's report,
       or cannot take the files: :func:`~launchprof.report.checks.unreplaceable`) and made when missing;
    3. with Ctrl-C and SIGTERM held: ``before_move``, then ``inner``'s files, then
       ``top``'s (its document last).

    The writers are closed after, committed or not.

    Raises:
        OutputError: as :meth:`FolderWriter.commit`. One raised by the checks or by
            ``before_move`` before it changed anything leaves every folder as it was
            (folders made for the run removed again); a rename that fails after the
            checks for another reason (an immutable file) can leave a folder with only
            part of this run's files.
    """
    top_writer = top[0]
    writers = [*inner, top]
    made: list[Path] = []
    try:
        with contextlib.ExitStack() as locks:
            locks.enter_context(_holding(top_writer._lock_path, top_writer.folder, top_writer.force))
            wanted = {os.path.realpath(w._lock_path): w.folder for w, _ in inner}
            for folder in also_locked() if also_locked is not None else ():
                wanted.setdefault(os.path.realpath(folder_lock(folder)), folder)
            wanted.pop(os.path.realpath(top_writer._lock_path), None)
            for lock in sorted(wanted):
                locks.enter_context(_holding(Path(lock), wanted[lock], top_writer.force))
            for writer, _ in writers:
                writer._check_existing(locked=True)
                if not writer.folder.is_dir():
                    made.append(writer.folder)
                writer._make_folder()
            with signals_held():
                if before_move is not None:
                    before_move()
                for writer, order in writers:
                    writer._move(order)
    except BaseException:
        for folder in reversed(made):  # an empty folder this run made; one a file moved into stays
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    finally:
        for writer, _ in writers:
            writer.close()


def stage_plotlyjs(writer: FolderWriter) -> None:
    """Stage ``plotly.min.js`` (the installed plotly's): a hard link to the package's file
    where the file system allows it, else a copy.

    Raises:
        OutputError: it cannot be written.
    """
    from launchprof.report.plainfig import plotly_package_file

    source = plotly_package_file("package_data", "plotly.min.js")
    target = writer.staging / VENDORED_JS
    try:
        os.link(source, target)
        return
    except OSError:  # another file system, protected hard links: copy instead
        _unlink(target)
    try:
        shutil.copyfile(source, target)
    except OSError as exc:
        raise _oserror("write", writer.folder / VENDORED_JS, exc) from None


def stage_rendered(writer: FolderWriter, outputs: Iterable[Output], result: Any) -> tuple[str, ...]:
    """Stage each of ``outputs`` rendered from ``result`` (one that renders None is left
    out) and ``plotly.min.js`` in ``writer``; returns the order they move in after
    ``plotly.min.js`` (the outputs' own: the document last).

    Raises:
        OutputError: a file cannot be written.
    """
    staged = []
    for output in outputs:
        text = output.render(result)
        if text is not None:
            writer.stage(output.name, text)
            staged.append(output.name)
    stage_plotlyjs(writer)
    return tuple(staged)


def write_outputs(writer: FolderWriter, outputs: Iterable[Output], result: Any) -> None:
    """Stage ``outputs`` (:func:`stage_rendered`) and move them into the folder: the way
    a comparison folder is written.

    Raises:
        OutputError: a file cannot be written, or the folder is busy or holds a report
            (see :meth:`FolderWriter.commit`).
    """
    writer.commit(order=stage_rendered(writer, outputs, result))
