"""Sharing wheels between machines through a real REAPI cache server (BuildGrid)."""

from __future__ import annotations

import hashlib
import io
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import pytest

import run as bench  # bench/run.py: its counting proxy and disk measure
from e2e.local_server import free_port
from e2e.reapi_server import serving
from e2e.workspace import Run, Upstreams, Workspace, make_fixture_upstreams, require_success

VLLM = "tests/mini/vllm:wheel"
AOT = "tests/mini/aotriton:wheel"


def remote_options(address: str):
    return ["--pants-config-files=pants.remote-cache.toml", f"--remote-store-address={address}"]


def machine(tmp_path: Path, upstreams, name: str) -> Workspace:
    # Its own checkout path, local store and named caches: a second machine.
    return Workspace(tmp_path / name / "checkout", upstreams, tmp_path / name / "store", tmp_path / name / "named")


@dataclass
class Machines:
    """Machines A and B after the first case's runs: A built the chain and pushed it to the
    cache server, B (another user too) pulled it through a proxy counting its bytes. The
    later cases share them, their pantsd, stores and server: what each builds is new to both (a
    patch of its own), and B has already brought what any package needs (a fresh pair, ~30 s of
    CPU each, proves nothing more)."""

    a: Workspace
    b: Workspace
    b_env: Dict[str, str]
    upstreams: Upstreams
    address: str  # the server's; A's runs use it
    storage: Path  # where the server keeps its blobs
    proxy: "bench.CountingProxy"  # to the server, counting what B pulls; B's runs use it
    first: Run  # A's package of the chain
    second: Run  # B's
    wheels_a: Dict[str, bytes]
    wheels_b: Dict[str, bytes]

    def options_b(self) -> List[str]:
        return through(self.proxy)


def through(proxy: "bench.CountingProxy") -> List[str]:
    return remote_options(f"grpc://127.0.0.1:{proxy.port}")


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    root = tmp_path_factory.mktemp("remote")
    with serving(root / "server") as (address, storage):
        upstreams = make_fixture_upstreams(root / "upstreams")
        a = machine(root, upstreams, "machine-a")
        b = machine(root, upstreams, "machine-b")
        # B is another user too: its own HOME, and so its own Pants bootstrap venv at another
        # path (a known trap for cache keys), bootstrapped from scratch by ./pants.
        home = root / "machine-b" / "home"
        b_env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "ROCM_PANTS_CACHE": str(home / ".cache" / "rocm-pants")}
        b.pants_env_extra = dict(b_env)
        proxy = bench.CountingProxy(int(address.rsplit(":", 1)[1]))
        try:
            first = a.package(VLLM, extra_options=remote_options(address))
            second = b.package(VLLM, extra_options=through(proxy))
            wheels_a, wheels_b = ({k: p.read_bytes() for k, p in ws.dist_wheels().items()} for ws in (a, b))
            yield Machines(a, b, b_env, upstreams, address, storage, proxy, first, second, wheels_a, wheels_b)
        finally:
            proxy.close()
            a.stop()
            b.stop()


@pytest.fixture
def pair(machines):
    yield machines
    machines.a.reset()
    machines.b.reset()
    machines.b.pants_env_extra = dict(machines.b_env)


def test_second_machine_reuses_wheels(machines) -> None:
    assert len(require_success(machines.first, "machine A").built) == 4
    second = require_success(machines.second, "machine B")
    assert second.built == [], second.stderr[-3000:]
    assert Path(machines.b_env["ROCM_PANTS_CACHE"]).is_dir()  # B really ran its own bootstrap
    assert len(machines.wheels_a) == 4
    assert machines.wheels_a == machines.wheels_b


def stored(ws: Workspace, needles: List[bytes]) -> List[bool]:
    """Whether each of `needles` is anywhere in the local store (blobs are kept uncompressed):
    one read of the store for all of them."""
    found = [False] * len(needles)
    for p in ws.store.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            found = [f or n in data for f, n in zip(found, needles)]
    return found


def same_pack(where: Path, repo: Path, sha: str) -> bytes:
    """The pack a fetch of `sha` makes (rules/rocm_build/scripts/source_pack.py)."""
    where.mkdir()
    script = Path.cwd() / "rules/rocm_build/scripts/source_pack.py"
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["python3", str(script), "fetch", f"file://{repo}", sha, "0", "source"], cwd=where, env=env, check=True)
    return (where / "source/objects.pack").read_bytes()


def patch_aotriton(ws: Workspace, path: str, pattern: str, replace: str) -> None:
    """Gives tests/mini/aotriton:src a patch of one edit: a build no store or server has seen,
    on machines that have built the chain."""
    ws.write("tests/mini/aotriton/notes.edit.toml", f'[[edit]]\npath = "{path}"\npattern = "{pattern}"\nreplace = "{replace}"\n')
    ws.write("tests/mini/aotriton/BUILD", 'patch_set(name="notes", sources=["*.edit.toml"])\n' + ws.read("tests/mini/aotriton/BUILD").replace(
        'pins_file="tests/mini/pins")', 'pins_file="tests/mini/pins", patches=[":notes"])'))  # fmt: skip


def test_checks_on_a_cached_machine_pull_no_source(tmp_path, pair) -> None:
    """Everything `package` runs before and around the build (fetch, patch, the preflight's
    file reads, tree scan and metadata hook, the build) is a cache hit on B: B's store grows by
    a few small files, not by the pinned tree's pack; and the tree is in no store, not even A's."""
    import torch_sized  # pants: no-infer-dep

    a, b, upstreams = pair.a, pair.b, pair.upstreams
    # B's package of the chain (the fixture's) brought what any package needs (Pants' tools, the
    # build venv's bootstrap wheels): what the big tree costs is measured apart from it.
    # Then the upstream grows to 20,000 files (~15 MB) the wheel does not ship, and both
    # machines patch it.
    small_tree = upstreams.commits["aotriton"]
    tree = {f"third_party/lib{i % 40}/f{i}.cpp": torch_sized.source_like(i).decode() for i in range(20_000)}
    upstreams.new_commit("aotriton", tree, "a big tree")
    try:
        for ws in (a, b):
            ws.write_pins(upstreams)
            patch_aotriton(ws, "README.md", "for rocm-pants tests.", "for rocm-pants tests (patched).")
        first = require_success(a.package(AOT, extra_options=remote_options(pair.address)), "machine A, big tree")
        assert first.built == [AOT] and "Completed: Applying 1 patch file(s)" in first.stderr
        assert "Completed: Fetching mini-aotriton @" in first.stderr
        before, pair.proxy.pulled = bench.disk_bytes(b.store), 0
        second = require_success(b.package(AOT, extra_options=pair.options_b()), "machine B, big tree")
        grew, pulled = bench.disk_bytes(b.store) - before, pair.proxy.pulled
        # B found the fetch, the patch and the build in the cache: nothing fetched or built (a
        # local run raced against the cache lookup is "Canceled").
        assert second.built == [] and "Completed: Fetching mini-aotriton @" not in second.stderr, second.stderr[-3000:]
        pack = same_pack(tmp_path / "pack", upstreams.root / "aotriton", upstreams.commits["aotriton"])
        assert len(pack) > 8_000_000
        # The pack would be 8+ MB; B took 10s of KB from the server, and its store grew by
        # LMDB pages for them.
        assert pulled < len(pack) // 100, (pulled, len(pack))
        assert grew < len(pack) // 10, (grew, len(pack))
        # The tree is in no store, not even A's: A's fetch keeps it as one git pack (the same
        # bytes wherever it is made: here, by the same script), and A's build checks it out.
        files = [text.encode() for text in list(tree.values())[::1000]]  # 20 of the files
        assert not any(stored(a, files)) and not any(stored(b, files))
        pieces = [pack[i : i + 256] for i in range(4096, len(pack) - 256, len(pack) // 20)]
        assert len(pieces) >= 19 and all(stored(a, pieces))
        assert not any(stored(b, pieces))
        assert {k: p.read_bytes() for k, p in a.dist_wheels().items()} == {k: p.read_bytes() for k, p in b.dist_wheels().items()}
    finally:
        # The machines pin the fixture's aotriton again (write_pins is no `write` for reset).
        upstreams.commits["aotriton"] = small_tree
        for ws in (a, b):
            ws.write_pins()


def test_cache_server_down_builds_locally_with_a_warning(pair) -> None:
    # Machine A with a build new to it (a patch no case makes), its cache server gone.
    a = pair.a
    patch_aotriton(a, "README.md", "for rocm-pants tests.", "for rocm-pants tests (no server).")
    down = f"grpc://127.0.0.1:{free_port()}"  # nothing listens there
    run = require_success(a.package(AOT, extra_options=remote_options(down)), "offline")
    assert run.built == [AOT]
    assert "[WARN]" in run.stderr and "remote cache" in run.stderr.lower(), run.stderr[-3000:]


# The corrupted case's build: a change to a file the wheel ships, so its wheel is bytes no other
# case's is (the server shares a blob between equal wheels).
CORRUPTED_CASE = "import os  # the corrupted-entry case"


def of_the_corrupted_case(blob: bytes) -> bool:
    """Whether a blob is a wheel of this case's aotriton (members are compressed: read them)."""
    if blob[:4] != b"PK\x03\x04":
        return False
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        init = "mini_aotriton/__init__.py"
        return init in z.namelist() and CORRUPTED_CASE.encode() in z.read(init)


def test_corrupted_remote_entry_is_detected_not_installed(pair) -> None:
    # The pair's server; what this case corrupts is only its own build's wheel.
    a, b, storage = pair.a, pair.b, pair.storage
    for ws in (a, b):
        patch_aotriton(ws, "mini_aotriton/__init__.py", "import os", CORRUPTED_CASE)
    require_success(a.package(AOT, extra_options=remote_options(pair.address)), "machine A")
    (wheel,) = a.dist_wheels().values()
    good = wheel.read_bytes()
    digest = hashlib.sha256(good).hexdigest()
    blob = storage / "cas" / "objects" / digest[:2] / digest[2:]
    assert blob.read_bytes() == good, "the server should hold the wheel under its sha256"
    # Every wheel of this build the server holds (the build's output, and the same wheel with its
    # build info): same size, one byte flipped, so only a content check can tell.
    # (The other cases' wheels and those of the auditwheel tool's venv are left alone.)
    wheels = [p for p in (storage / "cas" / "objects").glob("*/*") if of_the_corrupted_case(p.read_bytes())]
    assert len(wheels) == 2, wheels
    for path in wheels:
        data = path.read_bytes()
        path.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])

    # Pants checks every blob against its digest when it reads it. A hit is only checked to
    # exist (cache_content_behavior = "validate": no source trees pulled), so the bad bytes
    # are found when the wheel is read for dist/: the run stops there, and nothing is
    # written or installed.
    run = b.package(AOT, extra_options=pair.options_b())
    assert run.returncode != 0 and "Remote CAS gave wrong digest" in run.stderr, run.stderr[-3000:]
    assert not b.dist_wheels()
    # Building without the cache server (README says so) makes a good wheel: the entries B
    # took from it lack their content locally, so they are misses.
    run = require_success(b.package(AOT), "machine B without the cache server")
    assert run.built == [AOT]
    (got,) = b.dist_wheels().values()
    assert got.read_bytes() != blob.read_bytes()
    assert zipfile.ZipFile(got).testzip() is None
