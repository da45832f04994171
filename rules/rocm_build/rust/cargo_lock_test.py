import pytest
import toml

from rocm_build.rust.cargo_lock import GitCrate, RegistryCrate, read_lock
from rocm_build.rust.crate_manifest import ManifestError, find_package, standalone_manifest, workspace_root

HARMONY = "git+https://github.com/oss-harmony/harmony?tag=v0.0.11#76e849426cc092f84509e31a17027755f67d662a"
ITOA = "1aab8fc367588b89dcee83ab0fd66b72b50b72fa1904d7095045ace2b0c81c35"
LOCK = f"""\
version = 4

[[package]]
name = "itoa"
version = "1.0.1"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "{ITOA}"

[[package]]
name = "openai-harmony"
version = "0.0.11"
source = "{HARMONY}"

[[package]]
name = "vllm-rs"
version = "0.1.0"
"""


def test_a_lock_is_a_pin_list() -> None:
    locked = read_lock("rust/Cargo.lock", LOCK, "c:up")
    assert locked.problems == ()
    assert locked.registry == (RegistryCrate("itoa", "1.0.1", ITOA),)
    assert locked.registry[0].url == "https://static.crates.io/crates/itoa/1.0.1/download"
    assert locked.git == (
        GitCrate("openai-harmony", "0.0.11", HARMONY, "https://github.com/oss-harmony/harmony", "76e849426cc092f84509e31a17027755f67d662a"),
    )


@pytest.mark.parametrize(
    "edit, problem",
    [
        (
            (f'checksum = "{ITOA}"\n', ""),
            "c:up: crate itoa 1.0.1 in rust/Cargo.lock has no sha256 `checksum` (''), so it cannot be fetched by content. "
            "Fix: regenerate the lock with a cargo that writes checksums (`cargo update -p NAME`) in a patch",
        ),
        (
            ("#76e849426cc092f84509e31a17027755f67d662a", ""),
            "c:up: crate openai-harmony 0.0.11 in rust/Cargo.lock comes from "
            "'git+https://github.com/oss-harmony/harmony?tag=v0.0.11', which names no full commit after `#`; fix the lock",
        ),
        (
            ("registry+https://github.com/rust-lang/crates.io-index", "sparse+https://crates.example.org/"),
            "c:up: crate itoa 1.0.1 in rust/Cargo.lock comes from 'sparse+https://crates.example.org/': only crates.io "
            "crates and git sources are fetched from a lock. Fix: vendor that registry's crates into the tree with a "
            "patch, or ask for its support",
        ),
    ],
)
def test_what_cannot_be_fetched_by_content_is_named(edit, problem: str) -> None:
    assert read_lock("rust/Cargo.lock", LOCK.replace(*edit), "c:up").problems == (problem,)


WORKSPACE = """\
[workspace]
members = ["crates/greeting", "crates/words"]

[workspace.package]
version = "1.0.0"
edition = "2021"

[workspace.dependencies]
itoa = { version = "1", default-features = false }
words = { path = "crates/words", version = "1.0.0" }
"""
MEMBER = """\
[package]
name = "greeting"
version.workspace = true
edition.workspace = true

[dependencies]
itoa = { workspace = true, features = ["std"] }
words = { workspace = true }

[dev-dependencies]
tester = { path = "../tester" }

[target.'cfg(unix)'.dev-dependencies]
unix-tester = { path = "../unix-tester" }

[lints]
workspace = true
"""


def test_a_workspace_member_is_made_standalone_as_cargo_vendor_does() -> None:
    manifests = {"Cargo.toml": WORKSPACE, "crates/greeting/Cargo.toml": MEMBER, "crates/words/Cargo.toml": '[package]\nname = "words"\n'}
    path = find_package(manifests, "greeting")
    assert path == "crates/greeting/Cargo.toml"
    made = standalone_manifest(manifests[path], workspace_root(manifests, path))
    assert made is not None and toml.loads(made) == {
        "package": {"name": "greeting", "version": "1.0.0", "edition": "2021"},
        "dependencies": {
            "itoa": {"version": "1", "default-features": False, "features": ["std"]},
            "words": {"version": "1.0.0"},  # the path goes: the lock's crate of the same source is vendored beside it
        },
        "target": {"cfg(unix)": {}},  # dev-dependencies go, per target too
    }


def test_a_manifest_that_stands_alone_is_kept_byte_for_byte() -> None:
    text = '[package]\nname = "greeting"\nversion = "1.0.0"\n\n[dependencies]\nitoa = "1"\n'
    assert standalone_manifest(text, None) is None


def test_what_cannot_be_made_standalone_is_said() -> None:
    with pytest.raises(ManifestError, match="its Cargo.toml is not TOML this program reads"):
        standalone_manifest('[package\nname = "g"\n', None)
    with pytest.raises(ManifestError, match=r"it inherits `edition` from its workspace's \[workspace.package\], which does not set it"):
        standalone_manifest('[package]\nname = "g"\nedition.workspace = true\n', {"package": {}})
    with pytest.raises(ManifestError, match="its path dependency `words` has no version, so it cannot be vendored"):
        standalone_manifest('[package]\nname = "g"\n[dependencies]\nwords = { path = "../words" }\n', None)
