"""A copy of this repository at a fresh path, driven with the real `./pants` launcher.

End-to-end tests build the miniature chain in such copies: each has its own build root
(and pantsd), while the local store, named caches and fixture upstreams can be shared or
not, which is how tests stand in for "another checkout" or "another machine".
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import zipfile
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

from mini import make_upstreams

# What the nested Pants copies from this sandbox, as far as the test has it: tests/e2e/BUILD gives
# a test of the miniature chain its part of these as dependencies (MINI_CHAIN there: no real
# component's recipe, patch or lock but components/BUILD), one of the real components all of them.
WORKSPACE_FILES = ("pants", "pants.toml", "pants.remote-cache.toml", "pants.offline.toml", "BUILD", "3rdparty", "rules", "tests/mini", "tests/kernels", "components", "patches")
# What every nested Pants needs: missing from the sandbox, the test lacks its dependencies.
NEEDED = ("pants", "pants.toml", "pants.offline.toml", "BUILD", "3rdparty/python", "rules", "tests/mini", "components/BUILD")
# The whole repository (//:repository): a test that asks Pants about every target of it.
REPOSITORY_FILES = (*(f for f in WORKSPACE_FILES if not f.startswith("tests/")), "pants.remote-execution.toml", "README.md", "setup", "docs", "bench", "tests")
USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
CACHE_ROOT = Path(os.environ.get("ROCM_PANTS_CACHE") or USER_CACHE / "rocm-pants")
FIXTURE_WHEELS = CACHE_ROOT / "fixture-wheels"
# The real recipe's locked wheels (./setup: components/flash_attention:wheel-from-sdist's locks),
# apart from the fixture wheels so the miniature chain's resolves never see them.
RECIPE_WHEELS = CACHE_ROOT / "recipe-wheels"
# PEX's own cache (Pants' named cache `pex_root`), shared by every test workspace as Pants
# shares it between a user's checkouts: content-addressed and safe for concurrent use. A
# workspace's first build of a tool venv (auditwheel's) took ~60 s with it cold, in every
# workspace of the suite and the bench; nothing a test checks lives there.
SHARED_PEX_ROOT = CACHE_ROOT / "e2e-pex-root"
# Where a Pants given no named caches folder keeps them (Pants' default): the user's, and the
# outer `pants test ::`'s, which no copy's Pants may write (see `_argv_env`).
USER_NAMED_CACHES = USER_CACHE / "pants" / "named_caches"
# The build's named caches whose entries are named by what they hold (the build venvs and the
# checked-out source trees: build_process.py's VENV_CACHE and SOURCE_TREES_CACHE), shared by the
# suite's workspaces as pex_root is. An entry is made aside and renamed into place, and pruned only
# under a lock no running build's allows (scripts/machine_caches.sh), so a shared entry is what
# each "machine" would have made, byte for byte; making the venvs was 18 s of the 48 s of CPU of a
# cold miniature chain, in every workspace. What tests count stays per workspace, per "machine":
# Pants' store, the compiler caches, the build logs, the kept build directories.
SHARED_MACHINE_CACHES = {"rocm_build_venvs": CACHE_ROOT / "e2e-build-venvs", "rocm_source_trees": CACHE_ROOT / "e2e-source-trees"}
# A run touches each entry it uses (machine_caches.sh's use_cache): older ones are a past run's,
# ~26 MB a venv and a hundred or more a run, so they go when the next run starts.
SHARED_ENTRIES_KEPT_FOR = 3600.0
_PRUNED: Set[Path] = set()  # the shared caches this process has pruned
PINS_DIR = "tests/mini/pins"  # the miniature chain's pins directory, one file per pin
PANTS_OWN = (".pids", ".pants.d")  # what Pants keeps in a build root (its daemon's pid and socket, its logs)
BUILD_LINE = re.compile(r"Completed: Building rocm_wheel (\S+)")


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def built(self) -> List[str]:
        """Addresses of the rocm_wheel builds that ran to the end (cache hits log nothing, and
        a local build raced against a remote cache hit logs "Canceled").
        """
        return BUILD_LINE.findall(self.stderr)


@dataclass
class Upstreams:
    root: Path
    commits: Dict[str, str]

    def pin_files(self) -> Dict[str, str]:
        """The miniature chain's pins directory, pinning these repositories."""
        return make_upstreams.pin_files(self.root, self.commits)

    def new_commit(self, name: str, files: Dict[str, str], message: str) -> str:
        self.commits[name] = make_upstreams.commit(self.root / name, files, message)
        return self.commits[name]


def make_fixture_upstreams(root: Path) -> Upstreams:
    return Upstreams(root, make_upstreams.make_all(root))


@contextmanager
def file_copy(tmp_path_factory: Any, name: str) -> Iterator["Workspace"]:
    """The copy a test file's cases share (for a module fixture; conftest.py's `ws` puts it back
    after each case): in a directory of its own, with its own fixture upstreams, store and named
    caches; its pantsd stopped after the file."""
    root = tmp_path_factory.mktemp(name)
    workspace = Workspace(root / "checkout", make_fixture_upstreams(root / "upstreams"), root / "store", root / "named")
    try:
        yield workspace
    finally:
        workspace.stop()


@contextmanager
def borrowed(copy: "Workspace", upstreams_root: Path) -> Iterator["Workspace"]:
    """`copy` for one test file of a batch (conftest.py's `batch_copy`): pinning fixture upstreams
    of the file's own, made at `upstreams_root` (the commits its cases add stay its own), and put
    back as it was made afterwards (`Workspace.restore`). The files of a batch share its pantsd
    (~12 s of CPU to start) besides the store, as one user's tasks in a checkout do."""
    made = copy.upstreams
    copy.upstreams = make_fixture_upstreams(upstreams_root)
    copy.write_pins()
    try:
        yield copy
    finally:
        copy.restore()
        copy.upstreams = made


# The lines of Pants' traceback when its client gave up waiting for a new pantsd to write its
# pid or open its socket (pants/pantsd/pants_daemon_client.py: 60 s each, a constant).
PANTSD_LAUNCH_TIMEOUTS = ("pantsd_pid = self.await_pid(60)", "listening_port = self.await_socket(60)")
# How long a pantsd the client gave up on gets to finish starting before the run is tried again:
# it goes on starting after its client left (it is a daemon), and it opens its socket last.
PANTSD_START_GRACE = 600.0


class Workspace:
    def __init__(
        self,
        root: Path,
        upstreams: Upstreams,
        store: Path,
        named_caches: Path,
        files: Sequence[str] = WORKSPACE_FILES,
        shared_caches: Mapping[str, Path] = SHARED_MACHINE_CACHES,
    ) -> None:
        """`shared_caches`: named caches linked to a directory every workspace shares (the bench
        gives none: its machines measure cold builds)."""
        self.root = root
        self.store = store
        self.named_caches = named_caches
        # Where this copy's Pants makes its sandboxes and its immutable inputs. A pantsd stopped by
        # a signal leaves its immutable inputs behind (two folders, the wheels its processes
        # linked: ~5 GB in /tmp a suite run); here `stop` removes them. Short, under /tmp: a build
        # puts a Unix socket in its sandbox, and such paths end at 107 bytes.
        self.execution_root = Path(tempfile.mkdtemp(prefix="rocm-e2e-"))
        source = Path.cwd()
        missing = [rel for rel in NEEDED if not (source / rel).exists()]
        assert not missing, (
            f"{', '.join(missing)} not in this test's sandbox: give the test MINI_CHAIN (or REAL_CHAIN) as its "
            "dependencies in tests/e2e/BUILD"
        )
        for rel in files:
            src, dst = source / rel, root / rel
            if not src.exists():  # not among the test's dependencies: its nested Pants does not read it
                continue
            if src.is_dir():
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        self.upstreams = upstreams
        self.write_pins()
        named_caches.mkdir(parents=True, exist_ok=True)
        for name, shared in {"pex_root": SHARED_PEX_ROOT, **shared_caches}.items():
            if not (named_caches / name).exists():
                shared.mkdir(parents=True, exist_ok=True)
                (named_caches / name).symlink_to(shared)
        for shared in shared_caches.values():
            if shared not in _PRUNED:  # once a process: a run's own entries are all young
                prune_unused_entries(shared, SHARED_ENTRIES_KEPT_FOR)
                _PRUNED.add(shared)
        # Host variables a test adds on purpose (e.g. a canary that must not reach builds).
        self.pants_env_extra: Dict[str, str] = {}
        # What `write` found at each path it changed since the last `reset` (None: no file).
        self._before: Dict[Path, Optional[bytes]] = {}
        # The folders `put_back` watches, and the files each held then.
        self._watched: Dict[Path, Set[Path]] = {}
        # Every file of the copy as made, for `restore`.
        self._made = {path: path.read_bytes() for path in walk_tree(self.root)[1]}

    def write_pins(self, upstreams: Optional[Upstreams] = None) -> None:
        """tests/mini/pins/ pinning the fixture repositories (these, or `upstreams`)."""
        make_upstreams.write_pins(self.path(PINS_DIR), (upstreams or self.upstreams).pin_files())

    def pin_extra(self, name: str, repo: Path, sha: str) -> None:
        """A pin beside the fixture's, for an upstream a test or the bench generates."""
        self.write(f"{PINS_DIR}/{name}.toml", f'[{name}]\nurl = "file://{repo}"\ntrack = "main"\ncommit = "{sha}"\n')

    def path(self, rel: str) -> Path:
        return self.root / rel

    def write(self, rel: str, text: str) -> None:
        path = self.path(rel)
        if path not in self._before:
            self._before[path] = path.read_bytes() if path.is_file() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def put_back(self, *dirs: str) -> None:
        """`reset` puts the files under `dirs` back as they are now, also those Pants writes
        there (a lock goal's locks), not `write`."""
        for rel in dirs:
            files = {p for p in self.path(rel).rglob("*") if p.is_file()}
            self._watched[self.path(rel)] = files
            for path in files:
                self._before.setdefault(path, path.read_bytes())

    def reset(self) -> None:
        """This copy as it was before the last test: each file `write` changed back, each it made
        gone (and the folders they leave empty), the folders `put_back` watches as they were, no
        dist/, no extra host variables. Tests of one file share a copy this way, and its pantsd
        (~10 s of CPU to start, the rule graph alone) and store, where a fresh copy per test
        proves nothing more."""
        for folder, files in self._watched.items():
            for path in folder.rglob("*"):
                if path.is_file() and path not in files:
                    self._before.setdefault(path, None)
        self._watched.clear()
        for path, data in self._before.items():
            if data is not None:
                path.write_bytes(data)
                continue
            path.unlink(missing_ok=True)
            for parent in path.parents:
                if parent == self.root or any(parent.iterdir()):
                    break
                parent.rmdir()
        self._before.clear()
        shutil.rmtree(self.path("dist"), ignore_errors=True)
        self.pants_env_extra = {}

    def restore(self) -> None:
        """This copy as it was made, for the next test file that borrows it (conftest.py's
        `borrowed`): `reset`, then `put_tree_back`. Its pantsd, store and named caches stay, as a
        user's do between two tasks in one checkout."""
        self.reset()
        put_tree_back(self.root, self._made)

    def read(self, rel: str) -> str:
        return self.path(rel).read_text()

    def _argv_env(self, args: Sequence[str], extra_options: Sequence[str], prefix: Sequence[str] = ()):
        passed = ("HOME", "PATH", "PYENV_ROOT", "XDG_CACHE_HOME", "ROCM_PANTS_CACHE", "PANTS_PYTHON")
        env = {k: v for k, v in os.environ.items() if k in passed}
        # Locked build requirements come from the fixture wheels ./setup fetched: no index.
        env["PANTS_ROCM_BUILD_INDEX_URLS"] = "[]"
        env["PANTS_ROCM_BUILD_FIND_LINKS"] = repr([str(FIXTURE_WHEELS)])
        # The copy's store, named caches and sandboxes as variables, not flags: a program the copy
        # runs (update-pins, lock-build-requirements, patch-workspace) starts a Pants of its own,
        # which gets the environment and none of its parent's flags. With flags, those used the
        # user's default named caches and wrote an empty mirror table there, under the outer
        # `pants test ::` that had written its own (its next fetch went to the origin).
        env["PANTS_LOCAL_STORE_DIR"] = str(self.store)
        env["PANTS_NAMED_CACHES_DIR"] = str(self.named_caches)
        env["PANTS_LOCAL_EXECUTION_ROOT_DIR"] = str(self.execution_root)
        env.update(self.pants_env_extra)
        self.execution_root.mkdir(exist_ok=True)  # again after a `stop`
        argv = [*prefix, str(self.root / "pants"), "--no-dynamic-ui", *extra_options, *args]
        return argv, env

    def pants(self, *args: str, extra_options: Sequence[str] = (), timeout: int = 900, prefix: Sequence[str] = ()) -> Run:
        """Runs the nested Pants; `prefix` wraps it (e.g. `unshare --net`)."""
        argv, env = self._argv_env(args, extra_options, prefix)
        proc = subprocess.run(argv, cwd=self.root, env=env, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0 and any(line in proc.stderr for line in PANTSD_LAUNCH_TIMEOUTS):
            # Pants' client gives a starting pantsd 60 s, which a loaded 2-core machine can
            # exceed; nothing of the run started then. The daemon goes on starting: once it has
            # its socket, the same command finds it (a second try at once would spawn another).
            self.await_pantsd()
            proc = subprocess.run(argv, cwd=self.root, env=env, capture_output=True, text=True, timeout=timeout)
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def start(self, *args: str) -> subprocess.Popen:
        """Starts Pants without waiting; its stderr goes to a file `partial_stderr` reads."""
        argv, env = self._argv_env(args, ())
        self._stderr_file = self.root.parent / f"{self.root.name}.stderr"
        with open(self._stderr_file, "w") as err:
            return subprocess.Popen(argv, cwd=self.root, env=env, stdout=subprocess.DEVNULL, stderr=err)

    def partial_stderr(self, proc: subprocess.Popen) -> str:
        return self._stderr_file.read_text()

    def package(self, *addresses: str, extra_options: Sequence[str] = ()) -> Run:
        run = self.pants("package", *addresses, extra_options=extra_options)
        return run

    def await_pantsd(self, grace: float = PANTSD_START_GRACE) -> None:
        """Waits until this copy's pantsd has opened its socket, or no process runs in this copy
        any more (the client has exited: what is left there is the starting daemon, a fork of
        it), or `grace` passed."""
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if any(self.root.glob(".pids/*/pantsd/socket")) or not _processes_in(self.root):
                return
            time.sleep(1.0)

    def stop(self) -> None:
        """Stops this copy's pantsd and waits until it is gone, so tests leave no daemons behind
        (a pantsd busy in a build outlived its SIGTERM, holding memory and the cores of the
        tests after it): 30 s to stop, then SIGKILL. A daemon still starting has written no pid
        file yet: it runs in this copy, as does nothing else of ours once the test is done."""
        written = (p.read_text().strip() for p in self.root.glob(".pids/*/pantsd/pid"))
        pids = {int(text) for text in written if text.isdigit()}
        for pid in sorted(pids | set(_processes_in(self.root))):
            stop_process(pid)
        remove_daemon_leftovers(self.execution_root)

    def dist_wheels(self, prebuilt: bool = False) -> Dict[str, Path]:
        """The wheels the chain built in dist/, by directory; with `prebuilt`, also the prebuilt
        ones written beside them (the mini SDK's), which carry no rocm_build_info.json."""
        found = {p.parent.name: p for p in sorted((self.root / "dist").glob("*/*.whl"))}
        return {d: p for d, p in found.items() if prebuilt or _built_by_us(p)}


def put_tree_back(root: Path, made: Mapping[Path, bytes]) -> None:
    """`root` holding exactly the files `made` (path: bytes): each back to its bytes, every other
    file and folder gone (patch workspaces, recipes a test added, dist/), whoever wrote them;
    Pants' own folders and Python's bytecode untouched (`walk_tree`)."""
    folders, files = walk_tree(root)
    for path in files:
        if path not in made:
            path.unlink()
    for folder in reversed(folders):  # the deepest first
        if not any(folder.iterdir()):
            folder.rmdir()
    for path, data in made.items():
        if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
            continue
        path.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def walk_tree(root: Path) -> Tuple[List[Path], List[Path]]:
    """The folders and the files (links too) of a copy at `root`, but Pants' own folders there and
    Python's bytecode (the plugin's, which pantsd imports from rules/)."""
    folders: List[Path] = []
    files: List[Path] = []
    for folder, dirs, names in os.walk(root):
        kept = []
        for name in dirs:
            path = Path(folder, name)
            if path.is_symlink():
                files.append(path)
            elif name != "__pycache__" and not (path.parent == root and name in PANTS_OWN):
                kept.append(name)
        dirs[:] = kept
        folders.extend(Path(folder, name) for name in kept)
        files.extend(Path(folder, name) for name in names)
    return folders, files


def prune_unused_entries(cache: Path, kept_for: float) -> None:
    """Removes the entries of a machine cache that no build used for `kept_for` seconds, as the
    build's own pruning does (machine_caches.sh): only while holding the cache's lock
    exclusively, which no build using the cache allows (each holds it shared until it ends)."""
    fd = os.open(cache, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a build uses the cache now: the next workspace prunes it
        cutoff = time.time() - kept_for
        for entry in cache.iterdir():
            if entry.lstat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
    finally:
        os.close(fd)  # and the lock with it


def remove_daemon_leftovers(execution_root: Path) -> None:
    """What a pantsd would have removed from its execution root had it ended of itself (its
    immutable inputs), and the root once empty; sandboxes kept on purpose (`--keep-sandboxes`)
    stay, for the failure they show."""
    for left in execution_root.glob("immutable_inputs*"):
        shutil.rmtree(left, ignore_errors=True)
    with suppress(OSError):  # not empty: a kept sandbox
        execution_root.rmdir()


def stop_process(pid: int, grace: float = 30.0) -> None:
    """SIGTERM, then SIGKILL when `pid` still runs after `grace` seconds; returns once it is gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _running(pid):
                return
            time.sleep(0.1)


def _processes_in(directory: Path) -> List[int]:
    """The live processes whose working directory is `directory`."""
    found, wanted = [], str(directory.resolve())
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "cwd") == wanted and _running(int(proc.name)):
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, which only its parent can reap, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False

# Who commits in a patch workspace (work/<pin>/): the user, with an identity of their own.
USER_GIT_ENV = {
    "GIT_AUTHOR_NAME": "a user", "GIT_AUTHOR_EMAIL": "user@example.invalid", "GIT_COMMITTER_NAME": "a user",
    "GIT_COMMITTER_EMAIL": "user@example.invalid", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
}  # fmt: skip


def user_git(repo: Path, *args: str) -> str:
    """git as the user runs it in a patch workspace."""
    env = {**os.environ, **USER_GIT_ENV}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def mirror_table_state() -> Optional[Dict[str, int]]:
    """The user's named mirror table as files and their mtimes (None: no such folder): a Pants
    that wrote there changes it."""
    folder = USER_NAMED_CACHES / "rocm_build_mirrors"
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} if folder.is_dir() else None


def require_success(run: Run, what: str) -> Run:
    assert run.returncode == 0, f"{what} failed ({run.returncode}):\n{run.stderr[-6000:]}"
    return run


def last_error(run: Run) -> Optional[str]:
    return run.stderr[run.stderr.find("Exception") :] if "Exception" in run.stderr else None


def _built_by_us(wheel: Path) -> bool:
    with zipfile.ZipFile(wheel) as z:
        return any(n.endswith(".dist-info/rocm_build_info.json") for n in z.namelist())
