"""What `package` leaves as it is in dist/ and what it says, on real files."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import zipfile
from contextlib import contextmanager
from pathlib import Path

from pants.engine.fs import FileDigest, FileEntry

from rocm_build.goals.package_summary import (
    BUILT,
    CACHED,
    PINNED,
    UNCHANGED,
    WheelOutcome,
    DistHashes,
    DistWheel,
    changed_folders,
    holds_file,
    holds_files,
    pinned_reason,
    status_of,
    summary_lines,
    unwritable,
    unwritable_message,
    wheel_outcomes,
)
from rocm_build.wheel.rebuild import first_reason, inputs_of

WHEEL = "mini_vllm-1.0.0+llvm19gfx1151.k1a2b3c4d-cp311-cp311-linux_x86_64.whl"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dist_wheel(name: str, data: bytes, folder: str = "tests.mini.vllm", **kw) -> DistWheel:
    fields = dict(target="tests/mini/vllm:wheel", prebuilt=False, ran_here=False, build_info={})
    fields.update(kw)
    return DistWheel(folder=folder, name=name, sha256=sha(data), size=len(data), **fields)


def test_a_wheel_is_unchanged_only_byte_for_byte(tmp_path: Path) -> None:
    data = b"wheel bytes"
    wheel = dist_wheel(WHEEL, data)
    assert [o.status for o in wheel_outcomes(tmp_path, [wheel])] == [CACHED]
    (tmp_path / "tests.mini.vllm").mkdir()
    (tmp_path / "tests.mini.vllm" / WHEEL).write_bytes(b"wheel BYTES")  # same size, other bytes
    assert [o.status for o in wheel_outcomes(tmp_path, [wheel])] == [CACHED]
    (tmp_path / "tests.mini.vllm" / WHEEL).write_bytes(data)
    assert wheel_outcomes(tmp_path, [wheel]) == [WheelOutcome("tests/mini/vllm:wheel", WHEEL, UNCHANGED)]
    # Built in this run into the same bytes: the wheel is the same, its log is new.
    log = (f"{WHEEL}.build.log", sha(b"this build"), len(b"this build"))
    rebuilt = dist_wheel(WHEEL, data, ran_here=True, log=log)
    (tmp_path / "tests.mini.vllm" / log[0]).write_bytes(b"that build")
    assert [(o.status, o.reason) for o in wheel_outcomes(tmp_path, [rebuilt])] == [
        (BUILT, "the same bytes as the wheel in dist/ (its build log is new)")
    ]
    (tmp_path / "tests.mini.vllm" / log[0]).write_bytes(b"this build")
    assert [o.status for o in wheel_outcomes(tmp_path, [rebuilt])] == [UNCHANGED]


def test_a_generators_prebuilt_wheels_share_a_folder_and_each_is_judged_alone(tmp_path: Path) -> None:
    # components/kernels:build-venv's wheels: one folder, each wheel unchanged on a no-op, a
    # moved pin named once with its own project's old file alone, the folder written once.
    folder = "components.kernels.build-venv"
    names = {"einops": b"einops", "filelock": b"filelock", "triton": b"triton"}
    wheels = [
        dist_wheel(f"{n}-1.0-py3-none-any.whl", data, folder, target=f"components/kernels:build-venv#kernels-{n}", prebuilt=True)
        for n, data in names.items()
    ]
    files = {w.name: (w.sha256, w.size) for w in wheels}
    assert [o.reason for o in wheel_outcomes(tmp_path, wheels)] == ["not in dist/ before"] * 3
    assert changed_folders(tmp_path, {folder: files}) == [folder]
    (tmp_path / folder).mkdir()
    for w, data in zip(wheels, names.values()):
        (tmp_path / folder / w.name).write_bytes(data)
    assert [o.status for o in wheel_outcomes(tmp_path, wheels)] == [UNCHANGED] * 3
    assert changed_folders(tmp_path, {folder: files}) == []
    # A folder changed_folders found held exactly is taken as said: its files are not read again.
    (tmp_path / folder / wheels[0].name).write_bytes(b"EINOPS")
    assert [o.status for o in wheel_outcomes(tmp_path, wheels, held=[folder])] == [UNCHANGED] * 3
    (tmp_path / folder / wheels[0].name).write_bytes(names["einops"])
    # triton's pin moves: it alone is new, and its reason names its own old file.
    moved = [*wheels[:2], dist_wheel("triton-2.0-py3-none-any.whl", b"triton 2", folder, target=wheels[2].target, prebuilt=True)]
    outcomes = wheel_outcomes(tmp_path, moved)
    assert [(o.status, o.reason) for o in outcomes] == [
        (UNCHANGED, ""),
        (UNCHANGED, ""),
        (PINNED, "its pin moved: triton-1.0-py3-none-any.whl -> triton-2.0-py3-none-any.whl"),
    ]
    assert changed_folders(tmp_path, {folder: {w.name: (w.sha256, w.size) for w in moved}}) == [folder]


def test_a_file_holds_a_digest_entry(tmp_path: Path) -> None:
    log = tmp_path / f"{WHEEL}.build.log"
    entry = FileEntry(log.name, FileDigest(sha(b"log of this build\n"), len(b"log of this build\n")))
    assert not holds_file(log, entry)
    log.write_bytes(b"log of that build\n")  # the same size, another build
    assert not holds_file(log, entry)
    log.write_bytes(b"log of this build\n")
    assert holds_file(log, entry)


def test_an_install_set_is_the_same_when_it_holds_exactly_its_files(tmp_path: Path) -> None:
    files = {"requirements.txt": b"x==1\n", f"wheels/{WHEEL}": b"wheel"}
    expected = {rel: (sha(data), len(data)) for rel, data in files.items()}
    assert not holds_files(tmp_path / "set", expected)
    for rel, data in files.items():
        (tmp_path / "set" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "set" / rel).write_bytes(data)
    assert holds_files(tmp_path / "set", expected)
    # Hashed once while the file is unchanged; a rewrite (new time) is read again.
    (tmp_path / "set/requirements.txt").write_bytes(b"x==2\n")
    assert not holds_files(tmp_path / "set", expected)
    (tmp_path / "set/requirements.txt").write_bytes(b"x==1\n")
    os.utime(tmp_path / "set/requirements.txt", ns=(1, 1))
    assert holds_files(tmp_path / "set", expected)
    (tmp_path / "set/wheels/stale.whl").write_bytes(b"old")  # a file the set no longer has
    assert not holds_files(tmp_path / "set", expected)


def test_statuses_and_the_summary() -> None:
    assert [status_of(True, False, True), status_of(False, True, False), status_of(False, False, True), status_of(False, False, False)] == [
        UNCHANGED, PINNED, BUILT, CACHED,
    ]  # fmt: skip
    assert pinned_reason([], "sdk-1.whl") == "not in dist/ before"
    assert pinned_reason(["sdk-0.whl", "sdk_gfx1151-0.whl"], "sdk-1.whl") == "its pin moved: sdk-0.whl -> sdk-1.whl"
    outcomes = [
        WheelOutcome("tests/mini/torch:wheel", "mini_torch-1.whl", UNCHANGED),
        WheelOutcome("tests/mini/vllm:wheel", WHEEL, BUILT, "patch p/0001.patch changed (aaa -> bbb)"),
    ]
    assert summary_lines("tests/mini/vllm:wheel", outcomes, "dist/tests.mini.vllm.install", True, "7 compiled file(s)") == (
        "tests/mini/vllm:wheel: 2 wheel(s) in its chain: 1 built, 1 unchanged in dist/",
        "  unchanged  mini_torch-1.whl (tests/mini/torch:wheel)",
        f"  built      {WHEEL} (tests/mini/vllm:wheel): patch p/0001.patch changed (aaa -> bbb)",
        "  install set dist/tests.mini.vllm.install/: written (its files changed)",
        "tests/mini/vllm:wheel: the install set loads: 7 compiled file(s)",
    )


def test_the_first_reason_is_rocm_plans() -> None:
    info = {
        "source": {"pin": "mini-vllm", "commit": "a" * 40, "patches": [{"path": "p/0001.patch", "sha256": "1" * 64}]},
        "toolchain": {"address": "tests/mini:llvm", "identity": "clang 19.1.7"},
        "python": "CPython 3.11.7",
        "gpu_targets": ["gfx1151"],
        "dependencies": [
            {"target": "tests/mini/torch:wheel", "payload_sha256": "2" * 64, "source": {"pin": "mini-torch"}},
            {"target": "tests/mini/sdk:core", "payload_sha256": "3" * 64, "source": {"prebuilt": "mini-sdk"}},
        ],
    }
    assert inputs_of(info).prebuilt == {"tests/mini/sdk:core": "3" * 64}
    assert first_reason(None, info, []) == "no wheel of it in dist/ before"
    patched = {**info, "source": {**info["source"], "patches": [{"path": "p/0001.patch", "sha256": "4" * 64}]}}
    assert first_reason(info, patched, []) == f"patch p/0001.patch changed ({'1' * 12} -> {'4' * 12})"
    assert first_reason(info, info, ["tests/mini/torch:wheel"]) == "its dependency tests/mini/torch:wheel changed"
    other_clang = {**info, "toolchain": {**info["toolchain"], "identity": "clang 19.1.8"}}
    assert first_reason(info, other_clang, []) == "toolchain identity 'clang 19.1.7' -> 'clang 19.1.8'"
    # What is read from the wheel after the build is no reason.
    assert first_reason(info, {**info, "platform": {"tag": "x"}}, []) == (
        "the same inputs, other bytes than the wheel in dist/ (edited by hand there, or a build that is not "
        "reproducible: `pants verify-reproducible` tells)"
    )


def test_a_file_package_is_about_to_write_is_known_without_reading_it(tmp_path: Path) -> None:
    # `package` decided to write it with this digest; Pants writes it after. The next run's
    # comparison takes the digest as said (here a made-up one: the file is not read).
    path = tmp_path / "set" / "requirements.txt"
    known = DistHashes()
    known.expect_written(path, "f" * 64, 5)
    path.parent.mkdir()
    path.write_bytes(b"x==1\n")
    assert not holds_files(tmp_path / "set", {"requirements.txt": ("f" * 64, 5)})  # another run's knowledge
    assert holds_files(tmp_path / "set", {"requirements.txt": ("f" * 64, 5)}, known)
    # Only once, and only for the file written after the decision: a rewrite is read.
    path.write_bytes(b"x==2\n")
    assert not holds_files(tmp_path / "set", {"requirements.txt": ("f" * 64, 5)}, known)


def test_a_file_younger_than_a_timestamp_tick_is_hashed_not_remembered(tmp_path: Path) -> None:
    # A rewrite within the filesystem's timestamp tick keeps size, times and inode: a hash
    # remembered for a fresh file could outlive its bytes. An old file's hash is remembered.
    path = tmp_path / WHEEL
    path.write_bytes(b"fresh")
    known = DistHashes()
    assert known.file_sha256(path) == sha(b"fresh")
    assert [k for k in known.hashes if k[0] == str(path)] == []
    os.utime(path, ns=(1, 1))
    assert known.file_sha256(path) == sha(b"fresh")
    assert [k[0] for k in known.hashes if k[0] == str(path)] == [str(path)]


@contextmanager
def immutable(path: Path):
    """`chattr +i`: what a `wheels/` left by sudo is to this user, also to root (who runs CI)."""
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_folder_that_cannot_be_cleared_or_written_is_found_before_anything_is_cleared(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    (dist / "tests.mini.vllm.install/wheels").mkdir(parents=True)
    (dist / "tests.mini.vllm.install/wheels/old.whl").write_bytes(b"old")
    (dist / "tests.mini.vllm.install/requirements.txt").write_text("x==1\n")
    (dist / "tests.mini.torch").mkdir()
    (dist / "tests.mini.torch/torch.whl").write_bytes(b"torch")
    assert unwritable(dist, ["tests.mini.vllm.install", "tests.mini.new"], ["tests.mini.torch"]) == []
    with immutable(dist / "tests.mini.vllm.install/wheels"):
        found = unwritable(dist, ["tests.mini.vllm.install"], ["tests.mini.torch"])
        assert found == [dist / "tests.mini.vllm.install/wheels"]
        assert unwritable_message(dist, found) == (
            "Cannot write the package into dist/: dist/tests.mini.vllm.install/wheels is not writable by this user "
            "(left by `sudo`, or immutable); nothing in dist/ was changed. Fix: `sudo chown -R \"$USER\" dist/` "
            "(or remove dist/tests.mini.vllm.install/wheels), then package again."
        )
    # A file written over in place (a folder that did not change); a folder not there yet.
    with immutable(dist / "tests.mini.torch/torch.whl"):
        assert unwritable(dist, [], ["tests.mini.torch"]) == [dist / "tests.mini.torch/torch.whl"]
    with immutable(dist):
        assert unwritable(dist, ["tests.mini.new"], []) == [dist]
    # Nothing was removed by looking.
    assert (dist / "tests.mini.vllm.install/wheels/old.whl").read_bytes() == b"old"


def test_a_wheel_in_dist_that_is_a_link_a_directory_or_corrupt_is_no_build_info_never_a_traceback(tmp_path: Path) -> None:
    # dist/ is the user's: what a hand or a failed copy leaves there is read as "no wheel of it".
    name = "mini_vllm-1.0.0+llvm19gfx1151.k1-cp311-cp311-linux_x86_64.whl"
    info = {"source": {"pin": "mini-vllm", "commit": "a" * 40}}
    folder = tmp_path / "tests.mini.vllm"
    folder.mkdir()
    (folder / name).symlink_to(tmp_path / "gone.whl")  # dangling
    assert [o.reason for o in wheel_outcomes(tmp_path, [dist_wheel(WHEEL, b"w", build_info=info)])] == ["no wheel of it in dist/ before"]
    (folder / name).unlink()
    (folder / name).mkdir()  # a directory where a wheel should be
    assert [o.reason for o in wheel_outcomes(tmp_path, [dist_wheel(WHEEL, b"w", build_info=info)])] == ["no wheel of it in dist/ before"]
    (folder / name).rmdir()
    member = "mini_vllm-1.0.0+llvm19gfx1151.k1.dist-info/rocm_build_info.json"
    with zipfile.ZipFile(folder / name, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, json.dumps(info) * 50)
    data = bytearray((folder / name).read_bytes())
    start = data.index(b"rocm_build_info.json") + len("rocm_build_info.json")
    data[start + 10 : start + 30] = b"\xff" * 20  # the member's compressed bytes, corrupt
    (folder / name).write_bytes(bytes(data))
    assert [o.reason for o in wheel_outcomes(tmp_path, [dist_wheel(WHEEL, b"w", build_info=info)])] == ["no wheel of it in dist/ before"]
