"""Finding nsys and its QdstrmImporter, and the importer's failure messages.

Install layouts are rebuilt as folder trees under tmp_path (the paths are NVIDIA's and
Debian's, as installed on the GPU machine and on Debian); the importer runs are real: Debian's importer, and
a copy of it moved away from its libraries so the dynamic loader really fails.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from launchprof.errors import NsysError
from launchprof.nsys import importer as imp
from launchprof.nsys.locate import (
    find_importer,
    find_nsys,
    importer_candidates,
    install_candidates,
    locate_nsys,
    nsys_info,
    nsys_own_importer,
)

HAVE_NSYS = shutil.which("nsys") is not None


def exe(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_explicit_path_wins_and_must_be_executable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = exe(tmp_path / "my" / "nsys")
    monkeypatch.setenv("LAUNCHPROF_NSYS", str(tmp_path / "missing"))
    assert locate_nsys(mine) == (mine, "--nsys")
    with pytest.raises(NsysError, match=r"nsys not found at .*missing \(given by \$LAUNCHPROF_NSYS\)"):
        find_nsys()
    (tmp_path / "plain").write_text("")
    with pytest.raises(NsysError, match="given by --nsys"):
        find_nsys(tmp_path / "plain")


def test_env_then_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_nsys = exe(tmp_path / "env" / "nsys")
    path_nsys = exe(tmp_path / "onpath" / "nsys")
    monkeypatch.setenv("PATH", str(path_nsys.parent))
    monkeypatch.setenv("LAUNCHPROF_NSYS", str(env_nsys))
    assert locate_nsys() == (env_nsys, "$LAUNCHPROF_NSYS")
    monkeypatch.delenv("LAUNCHPROF_NSYS")
    assert locate_nsys() == (path_nsys, "PATH")


def test_install_folders_newest_version_first(tmp_path: Path) -> None:
    root = tmp_path
    old = exe(root / "opt/nvidia/nsight-systems/2023.1.1/bin/nsys")
    new = exe(root / "opt/nvidia/nsight-systems/2025.3.1/bin/nsys")
    cuda11 = exe(root / "usr/local/cuda-11.8/bin/nsys")
    cuda12 = exe(root / "usr/local/cuda-12.4/bin/nsys")
    ncu = exe(root / "opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys")
    (root / "opt/nvidia/nsight-systems/2024.1/bin").mkdir(parents=True)  # folder without nsys
    patterns = (
        f"{root}/opt/nvidia/nsight-systems/*/bin",
        f"{root}/usr/local/cuda*/bin",
        f"{root}/opt/nvidia/nsight-compute/*/host/target-linux-x64",
    )
    assert install_candidates(patterns) == [new, old, cuda12, cuda11, ncu]


def test_importer_in_nsight_compute_bundle(tmp_path: Path) -> None:
    """nsys 2025.3 inside Nsight Compute: importer in host/linux-desktop-glibc_2_11_3-x64."""
    host = tmp_path / "nsight-compute/2025.3.1/host"
    nsys = exe(host / "target-linux-x64/nsys")
    importer = exe(host / "linux-desktop-glibc_2_11_3-x64/QdstrmImporter")
    assert nsys_own_importer(nsys) == host / "host-linux-x64/QdstrmImporter"  # where nsys looks: absent
    assert find_importer(nsys) == importer


def test_importer_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nsys = exe(tmp_path / "a/bin/nsys")
    mine = exe(tmp_path / "elsewhere/QdstrmImporter")
    monkeypatch.setenv("LAUNCHPROF_QDSTRM_IMPORTER", str(mine))
    assert importer_candidates(nsys)[0] == mine
    assert find_importer(nsys) == mine
    monkeypatch.setenv("LAUNCHPROF_QDSTRM_IMPORTER", str(tmp_path / "nope"))
    with pytest.raises(NsysError, match="LAUNCHPROF_QDSTRM_IMPORTER"):
        find_importer(nsys)


@pytest.mark.nsys
@pytest.mark.skipif(not HAVE_NSYS, reason="nsys is not installed")
def test_real_nsys_version_matches_its_own_output() -> None:
    info = nsys_info()
    text = subprocess.run([str(info.path), "--version"], capture_output=True, text=True).stdout
    assert info.version is not None and info.version in text
    assert info.version_tuple[0] >= 2020


@pytest.mark.skipif(not Path("/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter").exists(), reason="not Debian's")
def test_debian_layout_importer_found_where_nsys_does_not_look() -> None:
    nsys = Path("/usr/bin/nsys")
    assert not nsys_own_importer(nsys).exists()
    assert find_importer(nsys) == Path("/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter")
    check = imp.check_importer(find_importer(nsys))
    assert check.ok and check.version is not None and "Nsight Systems" in check.version


def real_importer() -> Path:
    found = find_importer(find_nsys()) if HAVE_NSYS else None
    if found is None or not any(p.suffix == ".so" for p in found.parent.iterdir()):
        pytest.skip("no QdstrmImporter with its libraries beside it")
    return found


def test_importer_moved_from_its_libraries_names_the_missing_one(tmp_path: Path) -> None:
    copy = tmp_path / "QdstrmImporter"
    shutil.copy2(real_importer(), copy)
    done = subprocess.run([str(copy), "--version"], capture_output=True, text=True)
    expected = done.stderr.split("error while loading shared libraries: ")[1].split(":")[0]
    check = imp.check_importer(copy)
    assert not check.ok
    assert check.missing_library == expected
    assert f"{expected} is missing" in check.message


def test_import_failure_keeps_the_qdstrm(tmp_path: Path) -> None:
    copy = tmp_path / "QdstrmImporter"
    shutil.copy2(real_importer(), copy)
    qdstrm = tmp_path / "t.qdstrm"
    qdstrm.write_bytes(b"not really a stream")
    with pytest.raises(NsysError, match=r"is missing; .*\(the \.qdstrm is kept: .*t\.qdstrm\)"):
        imp.import_qdstrm(qdstrm, find_nsys(), importer=copy)
    assert qdstrm.read_bytes() == b"not really a stream"
    assert not (tmp_path / "t.nsys-rep").exists()


def test_import_of_garbage_fails_with_importer_message_and_keeps_file(tmp_path: Path) -> None:
    qdstrm = tmp_path / "t.qdstrm"
    qdstrm.write_bytes(b"not really a stream")
    with pytest.raises(NsysError, match=r"the \.qdstrm is kept"):
        imp.import_qdstrm(qdstrm, find_nsys(), importer=real_importer())
    assert qdstrm.exists()


@pytest.mark.parametrize(
    ("output", "lib"),
    [
        (
            "QdstrmImporter: error while loading shared libraries: libdw.so.1: cannot open shared object file: "
            "No such file or directory",
            "libdw.so.1",
        ),
        ("x: error while loading shared libraries: libelf.so.1: cannot open shared object file", "libelf.so.1"),
        ("Segmentation fault", None),
    ],
)
def test_missing_library_parsing(output: str, lib: str | None) -> None:
    assert imp.missing_library(output) == lib


def test_library_hints_name_debian_packages() -> None:
    assert imp.library_hint("libdw.so.1") == "install libdw.so.1 (Debian/Ubuntu: apt install libdw1)"
    assert "apt install libelf1" in imp.library_hint("libelf.so.1")
    assert "apt-file search libfoo.so.9" in imp.library_hint("libfoo.so.9")


def test_no_importer_anywhere_is_an_error_that_keeps_the_qdstrm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    qdstrm = tmp_path / "t.qdstrm"
    qdstrm.write_bytes(b"x")
    nsys = exe(tmp_path / "x/bin/nsys")
    if find_importer(nsys) is not None:  # Debian's importer is found from any nsys
        pytest.skip("an importer is installed system-wide")
    with pytest.raises(NsysError, match=r"no QdstrmImporter was found"):
        imp.import_qdstrm(qdstrm, nsys)
    assert qdstrm.exists()


def test_install_dirs_env_replaces_the_usual_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = exe(tmp_path / "tools/nsys-9/bin/nsys")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("LAUNCHPROF_NSYS", raising=False)
    monkeypatch.setenv("LAUNCHPROF_NSYS_INSTALL_DIRS", f"{tmp_path}/nothing{os.pathsep}{tmp_path}/tools/*/bin")
    assert locate_nsys() == (mine, "install folder")
    monkeypatch.setenv("LAUNCHPROF_NSYS_INSTALL_DIRS", "")
    with pytest.raises(NsysError, match=r"nsys \(Nsight Systems\) was not found"):
        find_nsys()
