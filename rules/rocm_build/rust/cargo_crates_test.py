"""rust/cargo_crates.py: a Cargo.lock made into the vendor directory a Rust build reads. A crates.io
crate is one UnpackRequest (the lock's checksum, `<name>-<version>` stripped, its download URL)
laid out under `<name>-<version>/` with the lock's checksum in `.cargo-checksum.json`; a git crate
is its commit's package cut out of the tree, its workspace manifest replaced by a standalone one,
with no checksum; the lock's crates are asked for one each and merged. Each failure's exact text.

tests/e2e/rust_test.py does this end to end: test_a_crate_whose_bytes_differ_from_the_lock_stops_the_build_naming_it
asserts the mismatch message, proven here at the rule (test_a_registry_crate_that_cannot_be_had_is_named);
test_a_rust_extension_builds_offline_from_the_crates_its_lock_pins asserts `cargo_crates` = 1 registry and
1 git crate (test_a_lock_is_vendored_one_request_per_crate_and_counted) and that the crate is fetched once by
the lock's name and version (the URL asked in the first test). That the vendor directory builds offline
(cargo reading these checksums and the standalone manifest) stays the e2e's to prove.

The engine's intrinsics (digests made, merged, prefixed, cut) run for real on a RuleRunner; the
plugin's own Gets (the download, the git fetch and checkout) are answered with stand-ins."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Tuple

import pytest
import toml
from pants.engine.fs import (
    EMPTY_DIGEST,
    AddPrefix,
    CreateDigest,
    Digest,
    DigestContents,
    DigestSubset,
    FileContent,
    MergeDigests,
    RemovePrefix,
)
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.errors import RocmBuildError
from rocm_build.rust.cargo_crates import (
    GitCrateRequest,
    RegistryCrateRequest,
    VendoredCrate,
    VendoredCrates,
    VendoredCratesRequest,
    fetch_git_crate,
    fetch_registry_crate,
    vendor_crates,
)
from rocm_build.rust.cargo_lock import GitCrate, RegistryCrate
from rocm_build.testutil.engine import Asked, drive
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.upstream.archives import FETCH_ARCHIVE, Unpacked, UnpackRequest
from rocm_build.upstream.fetch import TREE_DIR, FetchedTree, FetchRequest
from rocm_build.upstream.source_tree import CheckedOut, CheckoutRequest, SourceTree

OWNER = "tests/mini/rust:wheel"
LOCK = "Cargo.lock"
URL = "https://static.crates.io/crates/itoa/1.0.1/download"  # crates.io's download API, by name and version
ITOA = RegistryCrate("itoa", "1.0.1", "1aab8fc367588b89dcee83ab0fd66b72b50b72fa1904d7095045ace2b0c81c35")
COMMIT = "76e849426cc092f84509e31a17027755f67d662a"
GREETING = GitCrate("greeting", "1.0.0", f"git+https://example.invalid/greeting.git?tag=v1.0.0#{COMMIT}",
                    "https://example.invalid/greeting.git", COMMIT)  # fmt: skip
PACK = Digest("1" * 64, 1)  # a stand-in the rules only pass on: the fetched commit's pack
# The git crate's repository, as tests/e2e/rust_upstream.py's: a workspace whose member inherits
# its version and edition, beside a member and a file that are not the crate.
WORKSPACE = '[workspace]\nmembers = ["greeting", "words"]\n\n[workspace.package]\nversion = "1.0.0"\nedition = "2021"\n'
MEMBER = (
    '[package]\nname = "greeting"\nversion.workspace = true\nedition.workspace = true\n\n'
    '[dependencies]\nwords = { path = "../words", version = "0.2" }\n'
)
LIB = b'pub const WORD: &str = "offline";\n'
REPO = {"Cargo.toml": WORKSPACE, "README.md": "# greeting\n", "greeting/Cargo.toml": MEMBER, "greeting/src/lib.rs": LIB.decode(),
        "words/Cargo.toml": '[package]\nname = "words"\nversion = "0.2.0"\n', "words/src/lib.rs": ""}  # fmt: skip


@pytest.fixture(scope="module")
def engine() -> RuleRunner:
    # Only the intrinsics: one engine for the module, nothing in it depends on a test's files.
    return isolated_rule_runner(
        rules=[
            *(QueryRule(Digest, [t]) for t in (CreateDigest, AddPrefix, MergeDigests, RemovePrefix, DigestSubset)),
            QueryRule(DigestContents, [Digest]),
            QueryRule(DigestContents, [DigestSubset]),
        ],
    )


def digest(engine: RuleRunner, files: Dict[str, bytes]) -> Digest:
    return engine.request(Digest, [CreateDigest([FileContent(p, c) for p, c in files.items()])])


def files_of(engine: RuleRunner, d: Digest) -> Dict[str, bytes]:
    return {fc.path: fc.content for fc in engine.request(DigestContents, [d])}


def run(engine: RuleRunner, coroutine: Any, stand_ins: Dict[type, Any]) -> Tuple[Any, Asked]:
    """The rule's result and what it asked: its own Gets answered by `stand_ins` (by output type,
    a function of the request where it depends on it), the engine's by the engine."""

    def answer(output_type: type, request: Any) -> Any:
        if output_type in stand_ins:
            given = stand_ins[output_type]
            return given(request) if callable(given) else given
        return engine.request(output_type, [request])

    return drive(coroutine, answer)


def test_a_registry_crate_is_its_unpacked_files_and_the_locks_checksum_under_name_version(engine: RuleRunner) -> None:
    unpacked = Unpacked(0, "", digest(engine, {"Cargo.toml": b'[package]\nname = "itoa"\n', "src/lib.rs": b"// itoa\n"}))
    made, asked = run(engine, fetch_registry_crate(RegistryCrateRequest(ITOA, LOCK, OWNER)), {Unpacked: unpacked})
    # One download, by the lock's name and version, checked against its checksum, the .crate's
    # top directory stripped (the layout `cargo package` writes).
    assert asked[0] == (
        Unpacked,
        UnpackRequest(ITOA.checksum, "itoa-1.0.1", (URL,), f"Fetching crate itoa 1.0.1 for {OWNER}"),
    )
    assert files_of(engine, made.digest) == {
        "itoa-1.0.1/.cargo-checksum.json": b'{"files": {}, "package": "%s"}' % ITOA.checksum.encode(),
        "itoa-1.0.1/Cargo.toml": b'[package]\nname = "itoa"\n',
        "itoa-1.0.1/src/lib.rs": b"// itoa\n",
    }


WHERE = f"{OWNER}: crate itoa 1.0.1 (Cargo.lock)"
MIRRORED = "https://mirror.example.invalid/crates/itoa/1.0.1/download"
TRIED = "".join(f"{MIRRORED}: HTTP Error 50{i}: try {i}\n" for i in range(9))  # nine lines, of which the message keeps eight


@pytest.mark.parametrize(
    "exit_code, said, message",
    [
        (
            FETCH_ARCHIVE.EXIT_MISMATCH,
            f"got sha256:{'f' * 64} from {MIRRORED}\n",
            # The URL that served the bytes (a mirror here), not the one the lock implies.
            f"{WHERE}: the file at {MIRRORED} has sha256 {'f' * 64}, but the lock's checksum is {ITOA.checksum}. Nothing "
            "of it was used. A crates.io crate never changes: the server or a mirror ([rocm-build] mirrors) serves other "
            "bytes under its name.",
        ),
        (
            FETCH_ARCHIVE.EXIT_DOWNLOAD,
            TRIED,
            f"{WHERE}: {URL} could not be downloaded.\n"
            + "\n".join(f"    {MIRRORED}: HTTP Error 50{i}: try {i}" for i in range(1, 9)),
        ),
        (
            FETCH_ARCHIVE.EXIT_UNPACK,
            "no member starts with strip_prefix 'itoa-1.0.1'\n",
            f"{WHERE}: {URL} could not be unpacked.\n    no member starts with strip_prefix 'itoa-1.0.1'",
        ),
    ],
)
def test_a_registry_crate_that_cannot_be_had_is_named(engine: RuleRunner, exit_code: int, said: str, message: str) -> None:
    failed = Unpacked(exit_code, said, EMPTY_DIGEST)
    with pytest.raises(RocmBuildError) as e:
        run(engine, fetch_registry_crate(RegistryCrateRequest(ITOA, LOCK, OWNER)), {Unpacked: failed})
    assert str(e.value) == message


def git_crate(engine: RuleRunner, repo: Dict[str, str], crate: GitCrate = GREETING) -> Tuple[VendoredCrate, Asked]:
    """fetch_git_crate on a commit whose checked-out tree is `repo`."""
    tree = digest(engine, {f"{TREE_DIR}/{p}": c.encode() for p, c in repo.items()})
    stand_ins = {FetchedTree: FetchedTree(PACK, 0), CheckedOut: CheckedOut(tree)}
    return run(engine, fetch_git_crate(GitCrateRequest(crate, LOCK, OWNER)), stand_ins)


def test_a_git_crate_is_its_package_cut_out_of_the_commit_with_a_standalone_manifest(engine: RuleRunner) -> None:
    made, asked = git_crate(engine, REPO)
    # The commit, fetched as a pin is (no submodules), and its whole tree checked out.
    assert asked[:2] == [
        (FetchedTree, FetchRequest(GREETING.url, COMMIT, False, "crate greeting", LOCK, OWNER)),
        (CheckedOut, CheckoutRequest(PACK, OWNER)),
    ]
    files = files_of(engine, made.digest)
    # Only the package's directory, the workspace's manifest, README and other member left out;
    # no checksum of the package (a git source has none in the lock).
    assert sorted(files) == ["greeting-1.0.0/.cargo-checksum.json", "greeting-1.0.0/Cargo.toml", "greeting-1.0.0/src/lib.rs"]
    assert files["greeting-1.0.0/src/lib.rs"] == LIB
    assert json.loads(files["greeting-1.0.0/.cargo-checksum.json"]) == {"files": {}, "package": None}
    # The workspace member's manifest replaced: what it inherited written in, its path dependency
    # a version requirement (the crate it names comes from the same lock).
    assert toml.loads(files["greeting-1.0.0/Cargo.toml"].decode()) == {
        "package": {"name": "greeting", "version": "1.0.0", "edition": "2021"},
        "dependencies": {"words": {"version": "0.2"}},
    }


def test_a_git_crate_at_its_repositorys_root_that_stands_alone_is_kept_byte_for_byte(engine: RuleRunner) -> None:
    manifest = '# kept as written\n[package]\nname = "greeting"\nversion = "1.0.0"\n'
    made, _ = git_crate(engine, {"Cargo.toml": manifest, "src/lib.rs": LIB.decode(), "tests/t.rs": ""})
    assert files_of(engine, made.digest) == {
        "greeting-1.0.0/.cargo-checksum.json": b'{"files": {}, "package": null}',
        "greeting-1.0.0/Cargo.toml": manifest.encode(),
        "greeting-1.0.0/src/lib.rs": LIB,
        "greeting-1.0.0/tests/t.rs": b"",
    }


GIT_WHERE = f"{OWNER}: git crate greeting 1.0.0 (Cargo.lock, https://example.invalid/greeting.git at {COMMIT[:12]})"


@pytest.mark.parametrize(
    "repo, message",
    [
        (
            {"Cargo.toml": WORKSPACE, "words/Cargo.toml": '[package]\nname = "words"\n'},
            f"{GIT_WHERE}: no Cargo.toml in that commit has [package] name = 'greeting'",
        ),
        (
            {**REPO, "Cargo.toml": '[workspace]\nmembers = ["greeting"]\n\n[workspace.package]\nversion = "1.0.0"\n'},
            f"{GIT_WHERE}: greeting/Cargo.toml cannot be vendored: it inherits `edition` from its workspace's "
            "[workspace.package], which does not set it",
        ),
    ],
)
def test_a_git_crate_that_cannot_be_vendored_is_named(engine: RuleRunner, repo: Dict[str, str], message: str) -> None:
    with pytest.raises(RocmBuildError) as e:
        git_crate(engine, repo)
    assert str(e.value) == message


LOCK_TEXT = f"""\
version = 4

[[package]]
name = "greeting"
version = "1.0.0"
source = "{GREETING.source}"

[[package]]
name = "itoa"
version = "1.0.1"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "{ITOA.checksum}"

[[package]]
name = "mini-rust"
version = "0.1.0"
"""


def vendor(engine: RuleRunner, lock: Optional[str], touched: bool = False) -> Tuple[VendoredCrates, Asked]:
    """vendor_crates on a tree whose `rust/Cargo.lock` is `lock` (None: no such file), in the
    fetched commit or (`touched`) written by a patch; each crate a stand-in directory of its own."""
    path = "rust/Cargo.lock"
    in_tree = {f"{TREE_DIR}/{path}": lock.encode()} if lock is not None else {}
    changes = digest(engine, in_tree) if touched else EMPTY_DIGEST
    source = SourceTree(PACK, changes, (path,) if touched else ())
    checkout = CheckedOut(digest(engine, in_tree), ((path, path),) if lock is not None else ())

    def crate(request: Any) -> VendoredCrate:
        c = request.crate
        return VendoredCrate(digest(engine, {f"{c.name}-{c.version}/{type(c).__name__}": b""}))

    return run(engine, vendor_crates(VendoredCratesRequest(source, path, OWNER)), {CheckedOut: checkout, VendoredCrate: crate})


def test_a_lock_is_vendored_one_request_per_crate_and_counted(engine: RuleRunner) -> None:
    made, asked = vendor(engine, LOCK_TEXT)
    # Only the lock is read out of the commit; each crate it pins is asked for once, the tree's
    # own package (no source) not at all.
    assert asked[0] == (CheckedOut, CheckoutRequest(PACK, OWNER, "read", ("rust/Cargo.lock",)))
    assert [r for t, r in asked if t is VendoredCrate] == [
        RegistryCrateRequest(ITOA, "rust/Cargo.lock", OWNER),
        GitCrateRequest(GREETING, "rust/Cargo.lock", OWNER),
    ]
    assert (made.lock, made.registry, made.git) == ("rust/Cargo.lock", 1, 1)
    assert files_of(engine, made.digest) == {"greeting-1.0.0/GitCrate": b"", "itoa-1.0.1/RegistryCrate": b""}


def test_a_lock_that_is_not_in_the_tree_or_pins_what_cannot_be_fetched_stops_before_any_crate(engine: RuleRunner) -> None:
    with pytest.raises(RocmBuildError) as e:
        vendor(engine, None)
    assert str(e.value) == f"{OWNER}: its `cargo_lock` 'rust/Cargo.lock' is not a file of the patched tree"

    # A patch's lock is the one read; each of its problems is one line of the error.
    bad = LOCK_TEXT.replace(f'checksum = "{ITOA.checksum}"\n', "").replace(f"#{COMMIT}", "")
    with pytest.raises(RocmBuildError) as e:
        vendor(engine, bad, touched=True)
    assert str(e.value) == (
        f"{OWNER}: crate greeting 1.0.0 in rust/Cargo.lock comes from 'git+https://example.invalid/greeting.git?tag=v1.0.0', "
        "which names no full commit after `#`; fix the lock\n"
        f"{OWNER}: crate itoa 1.0.1 in rust/Cargo.lock has no sha256 `checksum` (''), so it cannot be fetched by content. "
        "Fix: regenerate the lock with a cargo that writes checksums (`cargo update -p NAME`) in a patch"
    )
