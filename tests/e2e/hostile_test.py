"""Hostile upstreams and inputs on the miniature chain (issue 31), with the real `./pants`.

Each case is refused with its cause named (the exact text asserted); nothing runs on the host
(the commands hostile URLs smuggle would create a marker file: there is none anywhere under
/tmp, HOME or the checkout), `dist/` is byte for byte as before, and the good build after all
of them is still a cache hit of the same bytes: nothing was poisoned. Unpacking hostile
archives and wheels is covered where it happens (fetch_archive_test.py, archives_test.py).

Also: a build with every kind of credential set (remote cache headers, a bearer token file,
ccache's remote storage password, GITHUB_TOKEN in the environment) puts none of them in its
-ldebug log, its process descriptions, the local store (cache keys and results), the remote
cache's CAS, or `dist/`.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import types
import uuid
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from e2e.reapi_server import serving
from e2e.redis_server import redis_server
from e2e.workspace import Run, Workspace, borrowed, make_fixture_upstreams, require_success
from mini import make_upstreams

PINS_DIR = "tests/mini/pins"
PINS = "tests/mini/pins/mini-vllm.toml"  # the hostile tables are added to a file of the directory
AOT = "tests/mini/aotriton:wheel"
SRC = "hostile:src"
VLLM = "tests/mini/vllm:wheel"  # the mini target with locked build requirements (pip runs for it)
VLLM_LOCK = "3rdparty/build/py3.11/mini-vllm.lock"
ON_PREBUILT = "hostile:on-prebuilt"
EVIL = "third_party/evil"
TOKEN = uuid.uuid4().hex[:12]  # in every marker and secret: a grep for it finds only ours
MARKER = f"pwned-{TOKEN}"
HOSTILE_BUILD = f"""\
upstream_repo(name="src", pin="hostile", pins_file="{PINS_DIR}")
prebuilt_wheel(name="prebuilt", pin="hostile-wheel", pins_file="{PINS_DIR}")
rocm_wheel(name="on-prebuilt", source="tests/mini/aotriton:src", toolchain="tests/mini:llvm",
           gpu_targets=["gfx1151"], kind="aotriton", dependencies=[":prebuilt"])
"""


def git_pin(url: str, commit: str, **extra: str) -> str:
    fields = {"url": f'"{url}"', "track": '"main"', "commit": f'"{commit}"', "submodules": "true", **extra}
    return "\n[hostile]\n" + "".join(f"{k} = {v}\n" for k, v in fields.items())


def submodule_at(repo: Path, url: str) -> str:
    """A commit whose .gitmodules names a submodule at `url`, which `git submodule add` would
    refuse: a hostile upstream as a fetch sees it."""
    # Quoted, as git config needs for `;` (a comment otherwise) in a value.
    (repo / ".gitmodules").write_text(f'[submodule "{EVIL}"]\n\tpath = {EVIL}\n\turl = "{url}"\n')
    make_upstreams.git(repo, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},{EVIL}")
    make_upstreams.git(repo, "add", ".gitmodules")  # not `add -A`: it would drop the gitlink
    make_upstreams.git(repo, "commit", "-q", "-m", f"a submodule at {url}")
    return make_upstreams.git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def ws(tmp_path_factory, batch_copy):
    with borrowed(batch_copy, tmp_path_factory.mktemp("hostile") / "upstreams") as workspace:
        workspace.write("hostile/BUILD", HOSTILE_BUILD)
        require_success(workspace.package(AOT), "the good build every case starts from")
        yield workspace


def dist(ws: Workspace) -> Dict[str, bytes]:
    return {str(p.relative_to(ws.root)): p.read_bytes() for p in ws.path("dist").rglob("*") if p.is_file()}


def refused(ws: Workspace, *args: str, pins_extra: str = "", env: Optional[Dict[str, str]] = None) -> Run:
    """Runs Pants with extra pins tables or host variables; restores both, and checks that it
    failed, without a traceback, with dist/ and the build lock unchanged."""
    before, pins, lock = dist(ws), ws.read(PINS), ws.read(VLLM_LOCK)
    ws.write(PINS, pins + pins_extra)
    ws.pants_env_extra = dict(env or {})
    try:
        run = ws.pants(*args)
    finally:
        ws.write(PINS, pins)
        ws.pants_env_extra = {}
    assert run.returncode != 0, f"{args}: expected a refusal\n{run.stderr[-3000:]}"
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert dist(ws) == before and ws.read(VLLM_LOCK) == lock
    return run


def markers() -> List[str]:
    # The fetch's directory is in a nested sandbox, under this process's temporary folder (on the
    # RAM disk when there is one: e2e/scratch.py).
    roots = sorted({"/tmp", tempfile.gettempdir(), str(Path.home())})
    found = subprocess.run(["find", *roots, "-xdev", "-name", f"*{MARKER}*"],
                           capture_output=True, text=True).stdout  # fmt: skip
    return found.split()


def test_hostile_submodule_urls_run_nothing(ws: Workspace) -> None:
    repo = ws.upstreams.root / "hostile"
    repo.mkdir()
    make_upstreams.git(repo, "init", "-q", "-b", "main")
    make_upstreams.commit(repo, {"setup.py": "\n"}, "a harmless start")
    # Each would create the marker (in the fetch's directory, and in /tmp) if git ran it.
    cases = [
        (f"--upload-pack=touch {MARKER} /tmp/{MARKER};", "starts with `-`, which git would read as an option"),
        (f"ext::sh -c touch% {MARKER}% /tmp/{MARKER}", "names the remote helper `ext::`, which runs a program instead of fetching"),
    ]  # fmt: skip
    for url, why in cases:
        run = refused(ws, "package", SRC, pins_extra=git_pin(f"file://{repo}", submodule_at(repo, url)))
        assert (
            f"{SRC}: pin `hostile` in {PINS_DIR}: the submodule `{EVIL}` has the URL {url}, which {why}. It was "
            "refused before any git process saw it; nothing was fetched from it."
        ) in run.stderr, run.stderr[-3000:]
    assert markers() == []


def test_a_file_submodule_of_an_https_pin_is_refused(ws: Workspace) -> None:
    # No https server here that git could fetch a pin from, so this case is shown on the
    # module every fetch uses (the copy the nested Pants runs), not through a build.
    git_urls = types.ModuleType("git_urls")
    exec(ws.path("rules/rocm_build/scripts/git_urls.py").read_text(), git_urls.__dict__)
    file_refused = (
        "uses the scheme `file://`, which is not allowed here (file:// is allowed only where the pin's own URL "
        "is file://); allowed: https://, ssh://"
    )
    for pin, host in (("https://example.invalid/org/top.git", "https://example.invalid/"), ("git@example.invalid:org/top.git", "git@example.invalid:")):
        schemes = git_urls.schemes_for(pin)
        assert git_urls.refusal(git_urls.resolve(pin, "file:///etc/shadow"), schemes) == file_refused
        # A relative URL, however many `..`, stays on the pin's scheme and host.
        climbed = git_urls.resolve(pin, "../../../../../../etc")
        assert climbed.startswith(host) and git_urls.refusal(climbed, schemes) is None, climbed


def test_bad_pins_are_refused_naming_file_table_key_and_form(ws: Workspace) -> None:
    typos = refused(ws, "package", SRC, pins_extra=git_pin("https://example.invalid/my repo.git", "d94cbf4", comit='"d94cbf4"'))
    assert f"{SRC}: {PINS}: [hostile] " in typos.stderr
    for problem in (
        "field `url`: 'https://example.invalid/my repo.git' contains a space; use https://host/owner/repo.git",
        "field `commit`: 'd94cbf4' is a short SHA (7 hex digits); pins need the full 40-digit commit",
        "field `comit`: unknown field (allowed: url, track, commit, submodules, derived_from). Did you mean `commit`?",
    ):
        assert problem in typos.stderr, typos.stderr[-3000:]

    secret = f"hunter2-{TOKEN}"
    credential = refused(ws, "package", SRC, pins_extra=git_pin(f"https://user:{secret}@example.invalid/repo.git", "1" * 40))
    assert (
        f"{PINS}: [hostile] field `url`: 'https://user:***@example.invalid/repo.git' carries a password or token, "
        "which would reach logs and cache keys"
    ) in credential.stderr, credential.stderr[-3000:]
    assert secret not in credential.stderr + credential.stdout

    prebuilt = refused(ws, "package", ON_PREBUILT, pins_extra=(
        '\n[prebuilt.hostile-wheel]\nproject = "mini-torch"\ntrack = ">=1"\npython = "3.11"\n'
        f'index_url = "https://user:{secret}@127.0.0.1/simple/"\nversion = "1.0.0"\n'
        'file = "mini_torch-1.0.0-cp311-cp311-linux_x86_64.whl"\nsha256 = "abc123"\n'
    ))  # fmt: skip
    for problem in (
        f"{PINS}: [prebuilt.hostile-wheel] field `index_url`: 'https://user:***@127.0.0.1/simple/' carries a password or token",
        "field `sha256`: 'abc123' is not a sha256 (64 lowercase hex digits, 6 given)",
    ):
        assert problem in prebuilt.stderr, prebuilt.stderr[-3000:]
    assert secret not in prebuilt.stderr + prebuilt.stdout

    # The index options reach only pip's processes: resolving vllm's build requirements runs one.
    index = refused(ws, "lock-build-requirements", VLLM, env={"PANTS_ROCM_BUILD_INDEX_URLS": f"['https://user:{secret}@127.0.0.1/simple']"})
    assert (
        "[rocm-build] index_urls: the URL for 127.0.0.1/simple carries credentials (`USER[:PASSWORD]@`), which would "
        "reach cache keys, logs and error messages."
    ) in index.stderr, index.stderr[-3000:]
    assert secret not in index.stderr + index.stdout


def test_the_good_build_still_works_after_them(ws: Workspace) -> None:
    # Runs after the cases above (file order): the same bytes, from the cache, nothing rebuilt.
    before = dist(ws)
    run = require_success(ws.package(AOT), "the good build after the hostile cases")
    assert run.built == []
    assert dist(ws) == before
    assert markers() == []


@pytest.fixture
def remote_cache(tmp_path):
    with serving(tmp_path) as served:
        yield served


def files_holding(secrets: Dict[str, str], *roots: Path) -> List[str]:
    """`<secret name> in <file>` for every file under the roots that holds one (read one by one:
    the store holds hundreds of MB)."""
    found = []
    for root in roots:
        for path in (p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            data = path.read_bytes()
            found += [f"{name} in {path}" for name, secret in secrets.items() if secret.encode() in data]
    return found


def test_no_credential_reaches_a_log_a_key_or_dist(tmp_path: Path, remote_cache) -> None:
    address, cas = remote_cache
    secrets = {name: f"{name}-{TOKEN}" for name in ("header", "execheader", "bearer", "redispass", "ghtoken")}
    # A bearer token as Pants 2.17 through 2.32 all read it: the headers option from a file
    # (Pants' `@file` form; the bearer token path option is gone since 2.23).
    headers_file = tmp_path / "store-headers"
    headers_file.write_text(f"{{'x-cache-key': '{secrets['header']}', 'authorization': 'Bearer {secrets['bearer']}'}}")
    ws = Workspace(tmp_path / "checkout", make_fixture_upstreams(tmp_path / "upstreams"), tmp_path / "store", tmp_path / "named")
    try:
        with redis_server(tmp_path / "redis", secrets["redispass"]) as port:
            # From the environment, as pants.remote-cache.toml says: Pants itself logs its whole
            # command line at -ldebug when it starts pantsd ("pantsd command is: ..."), so a
            # secret given as a flag is in the log (and in `ps`) whatever the plugin does.
            ws.pants_env_extra = {
                "PANTS_REMOTE_STORE_HEADERS": f"@{headers_file}",
                "PANTS_REMOTE_EXECUTION_HEADERS": f"{{'x-exec-key': '{secrets['execheader']}'}}",
                "PANTS_COMPILER_CACHE_CCACHE_REMOTE_STORAGE": f"redis://:{secrets['redispass']}@127.0.0.1:{port}",
                "GITHUB_TOKEN": secrets["ghtoken"],
            }
            run = require_success(ws.pants("-ldebug", "package", AOT, extra_options=[
                "--pants-config-files=pants.remote-cache.toml", f"--remote-store-address={address}",
            ]), "a -ldebug build with credentials set")  # fmt: skip
    finally:
        ws.stop()
    assert run.built == [AOT]  # the build ran here: its processes, descriptions and keys are in the log
    assert "Building rocm_wheel tests/mini/aotriton:wheel" in run.stderr and "[DEBUG]" in run.stderr
    for name, secret in secrets.items():
        leaks = [line for line in (run.stdout + run.stderr).splitlines() if secret in line]
        assert leaks == [], f"the {name} secret is in the -ldebug output"
    # The ccache address is, by design, in one private file of the named caches (mode 0600);
    # everything else Pants and the build wrote is searched: dist/, Pants' logs under
    # .pants.d/, the local store (process keys and results), the remote cache's CAS.
    named = [p for p in (tmp_path / "named").iterdir() if p.name != "rocm_build_ccache_remote"]
    assert files_holding(secrets, ws.root / "dist", ws.root / ".pants.d", tmp_path / "store", cas, *named) == []
