"""Hermetic builds on the miniature chain: locked build requirements, pinned archives, no network.

mini vllm's upstream tree names its build requirements in requirements/build.txt (six and
tomli, unpinned); 3rdparty/build/py3.11/mini-vllm.lock pins them by sha256, and the wheels come
from the fixture wheels ./setup fetched (no index). Servers run on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Dict

import pytest

from e2e.http_server import serving
from e2e.workspace import FIXTURE_WHEELS, Workspace, file_copy, mirror_table_state, require_success

VLLM = "tests/mini/vllm:wheel"
AOT = "tests/mini/aotriton:wheel"
CHAIN = ["tests/mini/aotriton:wheel", "tests/mini/torch:wheel", "tests/mini/flash_attention:wheel", VLLM]
LOCK = "3rdparty/build/py3.11/mini-vllm.lock"
AOT_BUILD = "tests/mini/aotriton/BUILD"
SIX_SHA = "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    with file_copy(tmp_path_factory, "hermetic") as copy:
        yield copy


@pytest.fixture
def server(tmp_path: Path):
    """A plain HTTP server on 127.0.0.1 that counts the requests it gets."""
    with serving(tmp_path) as (url, seen):
        yield url, tmp_path, seen


def dist_files(ws: Workspace) -> Dict[str, bytes]:
    return {str(p.relative_to(ws.root)): p.read_bytes() for p in (ws.root / "dist").rglob("*") if p.is_file()}


def build_info(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/rocm_build_info.json")]
        return json.loads(zf.read(name))


def edited(ws: Workspace, rel: str, old: str, new: str):
    """Context: `rel` with `old` replaced by `new`, restored afterwards."""

    class Edit:
        def __enter__(self):
            self.text = ws.read(rel)
            assert old in self.text, f"fixture drifted: {old!r} not in {rel}"
            ws.write(rel, self.text.replace(old, new, 1))

        def __exit__(self, *exc):
            ws.write(rel, self.text)

    return Edit()


def test_chain_builds_with_the_network_cut(ws) -> None:
    # The first wheel with the network, so the store holds Pants' own bootstrap downloads.
    require_success(ws.package(AOT), "the first wheel")
    # Then the rest of the chain with no network for Pants itself: every input, the locked
    # build requirements included, comes from the store or the local fixtures. A Pants of its
    # own in the namespace, beside the copy's pantsd (which the other cases go on using).
    cut = require_success(
        ws.pants("--no-pantsd", "package", VLLM, prefix=("unshare", "--net")), "the chain with the network cut"
    )
    assert cut.built == CHAIN[1:]
    wheel = ws.dist_wheels()["tests.mini.vllm"]
    info = build_info(wheel)
    assert info["build_requirements"]["lock"] == LOCK
    assert info["build_requirements"]["distributions"] == ["six==1.16.0", "tomli==2.0.1"]
    assert info["network"] == "none (own network namespace)"
    log = (wheel.parent / f"{wheel.name}.build.log").read_text()
    assert "== build requirements: 2 locked distribution(s) from the wheelhouse" in log
    assert "build requirements: 1.16.0 tomli" in log  # the build step imported them


def test_lock_change_rebuilds_that_component_only(ws) -> None:
    require_success(ws.package(VLLM), "the chain")
    assert require_success(ws.package(VLLM), "a no-op").built == []
    text = ws.read(LOCK)
    try:
        ws.write(LOCK, text.replace("# from six", "# reviewed 2026-11-23\n# from six"))
        assert require_success(ws.package(VLLM), "after a lock change").built == [VLLM]
    finally:
        ws.write(LOCK, text)


def test_lock_hash_mismatch_names_lock_distribution_and_both_digests(ws) -> None:
    require_success(ws.package(VLLM), "the chain")
    before = dist_files(ws)
    with edited(ws, LOCK, SIX_SHA, "0" * 64):
        run = ws.package(VLLM)
    assert run.returncode != 0
    assert (
        f"rocm_wheel tests/mini/vllm:wheel: lock {LOCK}: the file downloaded for six==1.16.0 does not match "
        f"the lock: the lock says sha256:{'0' * 64}, the file from file://{FIXTURE_WHEELS}/six-1.16.0-py2.py3-none-any.whl "
        f"has sha256:{SIX_SHA}. Nothing was installed."
    ) in run.stderr, run.stderr[-3000:]
    assert dist_files(ws) == before


VLLM_PIN = "tests/mini/pins/mini-vllm.toml"


def update_pins(ws: Workspace, *args: str):
    return ws.pants(
        "run", "rules:update-pins", "--", "--pins-file", "tests/mini/pins", "--patches-dir",
        "tests/mini/patches", "--only", "mini-vllm", *args,
    )  # fmt: skip


def test_moved_pin_makes_the_lock_stale_until_it_is_regenerated(ws) -> None:
    # The programs below start Pants of their own (the lock refreshes): they use the copy's caches
    # as its own Pants does, and leave the user's named caches (the outer run's mirror table) alone.
    user_table = mirror_table_state()
    require_success(ws.package(VLLM), "the chain")
    before, lock_text, pins_text = dist_files(ws), ws.read(LOCK), ws.read(VLLM_PIN)
    old = ws.upstreams.commits["vllm"]
    try:
        new = ws.upstreams.new_commit("vllm", {"requirements/build.txt": "six>=1.16\ntomli>=2\n"}, "pin six")
        require_success(update_pins(ws, "--no-lock-refresh"), "update-pins without refreshing locks")
        assert f'commit = "{new}"' in ws.read(VLLM_PIN)
        run = ws.package(VLLM)
        assert run.returncode != 0
        # Checked against the fetched tree before the first build of the chain.
        assert (
            f"rocm_wheel tests/mini/vllm:wheel: the lock {LOCK} no longer matches its inputs: it was made for "
            f"pin `mini-vllm` at {old}, the build uses `mini-vllm` at {new}; requirements/build.txt changed in "
            "the tree since the lock was made. Regenerate it: pants lock-build-requirements tests/mini/vllm:wheel"
        ) in run.stderr, run.stderr[-3000:]
        assert "Building rocm_wheel" not in run.stderr
        assert dist_files(ws) == before
        check = update_pins(ws, "--check")
        assert check.returncode == 1
        assert f"{LOCK}: made at mini-vllm {old[:12]}, stale; regenerate: pants lock-build-requirements {VLLM}" in check.stdout

        # The program form of the `lock-build-requirements` goal; a nested Pants writes the lock
        # by its resolve of `generate-lockfiles`, as Pants writes every lock.
        lock = require_success(
            ws.pants("run", "rules:lock-build-requirements", "--", "--only", "mini-vllm"), "regenerating the lock"
        )
        assert f"refreshing 1 lock(s): ./pants generate-lockfiles --resolve=build:py3.11/mini-vllm" in lock.stdout
        assert f"Wrote lockfile for the resolve `build:py3.11/mini-vllm` to {LOCK}" in lock.stderr
        assert f"# pin: mini-vllm {new}\n" in ws.read(LOCK)
        assert f"six==1.16.0 --hash=sha256:{SIX_SHA}\n" in ws.read(LOCK)
        assert require_success(ws.package(VLLM), "with the new lock").built == [VLLM]

        # update-pins itself refreshes the locks of the pins it moves.
        newer = ws.upstreams.new_commit("vllm", {"README.md": "# mini_vllm, again\n"}, "readme")
        moved = require_success(update_pins(ws), "update-pins refreshing the lock")
        assert "refreshing 1 lock(s): ./pants generate-lockfiles --resolve=build:py3.11/mini-vllm" in moved.stdout
        assert f"# pin: mini-vllm {newer}\n" in ws.read(LOCK)
        assert require_success(ws.package(VLLM), "after update-pins").built == [VLLM]
        assert mirror_table_state() == user_table
    finally:
        ws.upstreams.commits["vllm"] = old
        ws.write(VLLM_PIN, pins_text)
        ws.write(LOCK, lock_text)


RUN_LOCK = "3rdparty/run/py3.11/mini-flash_attention.lock"


def test_generate_lockfiles_writes_the_mini_locks_byte_for_byte_as_the_old_goals_do(ws) -> None:
    committed = {LOCK: ws.path(LOCK).read_bytes(), RUN_LOCK: ws.path(RUN_LOCK).read_bytes()}
    try:
        for path in committed:
            ws.path(path).unlink()
        run = require_success(
            ws.pants("generate-lockfiles", "--resolve=build:py3.11/mini-vllm", "--resolve=run:py3.11/mini-flash_attention"),
            "generate-lockfiles",
        )
        assert "Wrote lockfile for the resolve `build:py3.11/mini-vllm` to 3rdparty/build/py3.11/mini-vllm.lock" in run.stderr
        assert f"Wrote lockfile for the resolve `run:py3.11/mini-flash_attention` to {RUN_LOCK}" in run.stderr
        generated = {path: ws.path(path).read_bytes() for path in committed}
        # The old goals, aliases by target, on the same inputs.
        for path in committed:
            ws.path(path).unlink()
        alias = require_success(ws.pants("lock-build-requirements", VLLM), "lock-build-requirements")
        assert f"Wrote {LOCK}: 2 distribution(s) for tests/mini/vllm:wheel" in alias.stdout
        require_success(ws.pants("lock-runtime-requirements", "tests/mini/flash_attention:wheel"), "lock-runtime-requirements")
        old = {path: ws.path(path).read_bytes() for path in committed}
    finally:
        for path, data in committed.items():
            ws.path(path).write_bytes(data)
    assert generated == old == committed
    # Beside Pants' own Python resolves: the names are unique, each picks its own lock.
    names = ws.pants("generate-lockfiles", "--resolve=nope")
    assert names.returncode != 0
    listed = re.search(r"All valid resolve names: \[([^\]]*)\]", names.stderr)
    assert listed, names.stderr[-3000:]
    valid = [name.strip(" '") for name in listed.group(1).split(",")]
    ours = [name for name in valid if name.startswith(("build:", "run:"))]
    assert ours == [
        "build:py3.11/flash-attention-sdist", "build:py3.11/mini-vllm", "build:py3.12/aiter", "build:py3.12/aotriton",
        "build:py3.12/flash_attention", "build:py3.12/torch", "build:py3.12/triton", "build:py3.12/vllm",
        "run:py3.11/flash-attention-sdist.wheel-from-sdist", "run:py3.11/mini-flash_attention",
        "run:py3.12/flash_attention", "run:py3.12/flash_attention.wheel-on-therock", "run:py3.12/torch",
        "run:py3.12/vision", "run:py3.12/vllm", "run:py3.12/vllm.wheel-on-therock",
    ]  # fmt: skip
    assert {"auditwheel", "pants-plugins", "python-default"} <= set(valid)


def test_a_build_step_cannot_reach_the_network(ws, server) -> None:
    url, _, seen = server
    require_success(ws.package(AOT), "the first wheel")
    before = dist_files(ws)
    step = f'build_command=["python -c \'import urllib.request; urllib.request.urlopen(\\"{url}/probe\\", timeout=5)\'"]'
    with edited(ws, AOT_BUILD, '    kind="aotriton",\n', f'    kind="aotriton",\n    {step},\n'):
        run = ws.package(AOT)
    assert run.returncode != 0
    assert "rocm_wheel tests/mini/aotriton:wheel: the build failed (exit 1).\nIt tried to reach the network. " in run.stderr
    assert (
        "Builds have no network: everything a build reads must be a declared input. Add what it downloads as a "
        "build requirement (`build_requirements` on tests/mini/aotriton:wheel, then `pants lock-build-requirements "
        "tests/mini/aotriton:wheel`) or as an `upstream_archive` named in its `archives` field."
    ) in run.stderr
    assert "Network is unreachable" in run.stderr
    assert seen == []  # the server never heard from the build
    assert dist_files(ws) == before


def tarball(files: Dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_upstream_archive_is_verified_and_unpacked_into_the_build(ws, server) -> None:
    url, served, seen = server
    data = tarball({"data-1/answer.txt": b"42\n"})
    (served / "data-1.tar.gz").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()

    original = ws.read(AOT_BUILD)

    def with_archive(digest: str) -> str:
        return (
            original.replace('    kind="aotriton",\n', '    kind="aotriton",\n'
            '    archives={"MINI_DATA": ":data"},\n'
            '    build_command=["echo \\"archive says $(cat $MINI_DATA/answer.txt)\\""],\n')
            + f'\nupstream_archive(name="data", url="{url}/data-1.tar.gz", sha256="{digest}", strip_prefix="data-1")\n'
        )

    try:
        ws.write(AOT_BUILD, with_archive(sha))
        run = require_success(ws.package(AOT), "a build with an archive")
        assert run.built == [AOT]
        wheel = ws.dist_wheels()["tests.mini.aotriton"]
        assert "archive says 42" in (wheel.parent / f"{wheel.name}.build.log").read_text()
        assert build_info(wheel)["archives"] == {
            "MINI_DATA": {"target": "tests/mini/aotriton:data", "url": f"{url}/data-1.tar.gz", "sha256": sha}
        }
        assert seen == ["/data-1.tar.gz"]

        before = dist_files(ws)
        ws.write(AOT_BUILD, with_archive(""))
        unresolved = ws.package(VLLM)
        assert unresolved.returncode != 0
        assert (
            "upstream_archive tests/mini/aotriton:data is not resolved: it has no sha256 (the `sha256` field "
            "of tests/mini/aotriton:data)."
        ) in unresolved.stderr
        assert "Building rocm_wheel" not in unresolved.stderr and seen == ["/data-1.tar.gz"]

        ws.write(AOT_BUILD, with_archive("1" * 64))
        bad = ws.package(AOT)
        assert bad.returncode != 0
        assert (
            f"upstream_archive tests/mini/aotriton:data: the file at {url}/data-1.tar.gz has sha256 {sha}, "
            f"but the target pins {'1' * 64}. Nothing was unpacked."
        ) in bad.stderr, bad.stderr[-3000:]
        assert dist_files(ws) == before
    finally:
        ws.write(AOT_BUILD, original)


def test_opting_out_of_isolation_is_a_different_key_and_is_recorded(ws) -> None:
    require_success(ws.package(AOT), "the isolated build")
    host = require_success(ws.package(AOT, extra_options=["--no-build-isolation-network-isolation"]), "opted out")
    assert host.built == [AOT]
    assert build_info(ws.dist_wheels()["tests.mini.aotriton"])["network"] == "host (network_isolation = false)"
    assert require_success(ws.package(AOT), "isolated again").built == []
    assert build_info(ws.dist_wheels()["tests.mini.aotriton"])["network"] == "none (own network namespace)"
