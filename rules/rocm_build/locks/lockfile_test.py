import pytest

from rocm_build.locks import lockfile
from rocm_build.locks.lockfile import BuildLock, LockedDist, LockError

SIX = LockedDist("six", "1.16.0", "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254", "six-1.16.0-py2.py3-none-any.whl")
LOCK = BuildLock(
    pin="vllm",
    commit="b" * 40,
    python="3.11",
    requirements=("-r requirements/build.txt", "setuptools-scm>=8,<9"),
    files=(("requirements/build.txt", "a" * 64), ("requirements/common.txt", "c" * 64)),
    dists=(SIX,),
    left_out=("cmake==3.31.6 (builds use the toolchain's system cmake; seed 000)",),
    regenerate="pants lock-build-requirements components/vllm:wheel",
)


def test_render_then_parse_gives_the_same_lock() -> None:
    text = lockfile.render(LOCK)
    assert text.startswith(lockfile.TITLE + "\n# regenerate: pants lock-build-requirements components/vllm:wheel\n")
    assert "six==1.16.0 --hash=sha256:8abb2f1d" in text
    assert lockfile.parse(text, "3rdparty/build/vllm.lock") == LOCK


def test_parse_names_file_and_line_of_a_bad_entry() -> None:
    text = lockfile.render(LOCK) + "requests>=2\n"
    with pytest.raises(LockError) as e:
        lockfile.parse(text, "3rdparty/build/vllm.lock")
    assert str(e.value).startswith("3rdparty/build/vllm.lock:12: not a locked distribution")


def test_parse_refuses_a_plain_requirements_file() -> None:
    with pytest.raises(LockError, match="is not a rocm-pants build-requirements lock"):
        lockfile.parse("six==1.16.0 --hash=sha256:" + "a" * 64 + "\n", "x.lock")


def test_requirement_lines_join_option_and_file() -> None:
    assert lockfile.requirement_lines(["-r", "requirements-build.txt", "ninja==1.11.1.4"]) == (
        "-r requirements-build.txt",
        "ninja==1.11.1.4",
    )
    assert lockfile.requirement_lines(["-r requirements/build.txt", "setuptools-scm>=8,<9"]) == (
        "-r requirements/build.txt",
        "setuptools-scm>=8,<9",
    )
    with pytest.raises(LockError):
        lockfile.requirement_lines(["-r"])


def test_included_files_follow_nested_requirements_relative_to_their_file() -> None:
    tree = {"requirements/build.txt": "-r common.txt\nninja\n", "requirements/common.txt": "six  # comment\n"}
    assert lockfile.included_files(["-r requirements/build.txt"], tree.get) == (
        "requirements/build.txt",
        "requirements/common.txt",
    )
    with pytest.raises(LockError, match="names requirements/missing.txt, which is not in the source tree"):
        lockfile.included_files(["-r requirements/missing.txt"], tree.get)
    with pytest.raises(LockError, match="points outside the source tree"):
        lockfile.included_files(["-r ../etc/passwd"], tree.get)


def test_pip_report_leaves_cmake_out_and_needs_hashes() -> None:
    def item(name, version, sha="d" * 64):
        return {
            "metadata": {"name": name, "version": version},
            "download_info": {"url": f"https://files/{name}-{version}-py3-none-any.whl", "archive_info": {"hashes": {"sha256": sha}}},
        }

    dists, left = lockfile.from_pip_report({"install": [item("ninja", "1.11.1.4"), item("CMake", "3.31.6")]})
    assert [(d.name, d.version, d.filename) for d in dists] == [("ninja", "1.11.1.4", "ninja-1.11.1.4-py3-none-any.whl")]
    assert left == ("CMake==3.31.6 (builds use the toolchain's system cmake; seed 000)",)
    bad = item("six", "1.16.0")
    del bad["download_info"]["archive_info"]
    with pytest.raises(LockError, match="pip gave no sha256 for six==1.16.0"):
        lockfile.from_pip_report({"install": [bad]})


def test_stale_reasons_name_every_input_that_moved() -> None:
    tree = {"requirements/build.txt": "a" * 64, "requirements/common.txt": "c" * 64}
    assert lockfile.stale_reasons(LOCK, "vllm", "b" * 40, "3.11", LOCK.requirements, tree) == []
    why = lockfile.stale_reasons(
        LOCK, "vllm", "e" * 40, "3.12", LOCK.requirements[:1], {"requirements/build.txt": "f" * 64}
    )
    assert why == [
        f"it was made for pin `vllm` at {'b' * 40}, the build uses `vllm` at {'e' * 40}",
        "it was resolved for Python 3.11, the build uses Python 3.12",
        "it was made from `build_requirements` ['-r requirements/build.txt', 'setuptools-scm>=8,<9'], "
        "the target now says ['-r requirements/build.txt']",
        "requirements/build.txt changed in the tree since the lock was made",
        "requirements/common.txt is gone from the tree since the lock was made",
    ]
