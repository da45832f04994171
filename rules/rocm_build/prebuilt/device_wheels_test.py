"""TheRock's split wheels: update-pins resolves device pins from the host's metadata and
refuses sets that disagree; the graph (device -> host, family) is checked before any build."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading
import zipfile
from pathlib import Path
from typing import Dict, Iterator

import pytest
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.pins.update.prebuilt_index import requires_rocm
from rocm_build.prebuilt.wheel_rules import PrebuiltRequest, PrebuiltSpec, missing_device_wheels
from rocm_build.programs.update_pins import main
from rocm_build.testutil.git_fixtures import commit_files, git, init_repo, pins_toml
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.toolchain.target_types import RocmToolchainTarget
from rocm_build.upstream.target_types import PrebuiltWheelTarget, UpstreamRepoTarget
from rocm_build.wheel import build_spec
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.wheel.target_types import RocmWheelTarget

TORCH = "2.13.0+rocm10.0.0"
VISION = "0.28.0+rocm10.0.0"


def host_metadata(name: str, version: str, rocm: str, devices: Dict[str, list]) -> str:
    """A host wheel's METADATA as TheRock's splitter leaves it (wheel_splitter.py,
    _rewrite_host_metadata): extras per target, then device-all."""
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", "Requires-Dist: filelock",
             f"Requires-Dist: rocm[libraries]=={rocm}", 'Requires-Dist: opt-einsum>=3.3; extra == "opt-einsum"',
             "Provides-Extra: opt-einsum", "Requires-Dist: rocm-bootstrap"]  # fmt: skip
    for gfx, dists in devices.items():
        lines.append(f"Provides-Extra: device-{gfx}")
        lines += [f'Requires-Dist: {d} == {version}; extra == "device-{gfx}"' for d in dists]
    lines.append("Provides-Extra: device-all")
    lines += [f'Requires-Dist: {d} == {version}; extra == "device-all"' for d in sorted({d for ds in devices.values() for d in ds})]
    return "\n".join(lines) + "\n\n"


def device_metadata(name: str, version: str, host: str, host_version: str, *requires: str) -> str:
    """generate_device_metadata's shape: the exact host, the SDK's device wheel, the family."""
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}",
             f"Summary: AMD device kernels for {host}", f"Requires-Dist: {host} == {host_version}"]  # fmt: skip
    return "\n".join([*lines, *(f"Requires-Dist: {r}" for r in requires)]) + "\n\n"


def therock_wheels(torch_gfx1151_requires_torch: str = TORCH, sdk: str = "10.0.0") -> Dict[str, Dict[str, str]]:
    """project -> {file name: METADATA}: a whl-next slice (torch and torchvision, split)."""
    tag = "cp312-cp312-linux_x86_64"
    torch_devices = {"gfx1151": ["amd-torch-device-gfx1151", "amd-torch-device-gfx115x"], "gfx1100": ["amd-torch-device-gfx1100"]}
    return {
        "torch": {
            f"torch-{TORCH}-{tag}.whl": host_metadata("torch", TORCH, "10.0.0", torch_devices),
            f"torch-{TORCH}-cp313-cp313-linux_x86_64.whl": host_metadata("torch", TORCH, "10.0.0", torch_devices),
            f"torch-2.13.0+rocm10.0.1-{tag}.whl": host_metadata("torch", "2.13.0+rocm10.0.1", "10.0.1", torch_devices),
        },
        "amd-torch-device-gfx1151": {
            f"amd_torch_device_gfx1151-{TORCH}-{tag}.whl": device_metadata(
                "amd-torch-device-gfx1151", TORCH, "torch", torch_gfx1151_requires_torch,
                f"rocm-sdk-device-gfx1151 == {sdk}", f"amd-torch-device-gfx115x == {TORCH}",
            ),
        },  # fmt: skip
        "amd-torch-device-gfx115x": {
            f"amd_torch_device_gfx115x-{TORCH}-{tag}.whl": device_metadata("amd-torch-device-gfx115x", TORCH, "torch", TORCH),
        },
        "torchvision": {
            f"torchvision-{VISION}-{tag}.whl": host_metadata("torchvision", VISION, "10.0.0", {"gfx1151": ["amd-torchvision-device-gfx1151"]}),
        },
        "amd-torchvision-device-gfx1151": {
            f"amd_torchvision_device_gfx1151-{VISION}-{tag}.whl": device_metadata(
                "amd-torchvision-device-gfx1151", VISION, "torchvision", VISION, f"rocm-sdk-device-gfx1151 == {sdk}"
            ),
        },
    }


def serve_index(root: Path, wheels: Dict[str, Dict[str, str]]) -> Dict[str, str]:
    """PEP 503 pages as whl-next lays them out (<index>/<project>/ beside its files); file -> sha256."""
    shas = {}
    for project, files in wheels.items():
        (root / project).mkdir(parents=True)
        for name, metadata in files.items():
            with zipfile.ZipFile(root / project / name, "w") as zf:
                zf.writestr(f"{'-'.join(name.split('-')[:2])}.dist-info/METADATA", metadata)
            shas[name] = hashlib.sha256((root / project / name).read_bytes()).hexdigest()
        links = "".join(f'<a href="{n.replace("+", "%2B")}#sha256={shas[n]}">{n}</a><br/>\n' for n in files)
        (root / project / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return shas


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "whl-next"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root.mkdir()
    (tmp_path / "url").write_text(f"http://127.0.0.1:{server.server_address[1]}/")
    yield root
    server.shutdown()


def unresolved_pins(url: str) -> str:
    """The set before update-pins: hosts tracking the stable versions, device pins naming only
    their host and project; update-pins must keep the comment on torch's `track`."""

    def device(host: str, project: str) -> Dict[str, str]:
        return {"device_of": host, "project": project, "version": ""}

    text = pins_toml(
        prebuilt={"index_url": url, "python": "3.12"},
        **{
            "prebuilt.therock-torch": {"project": "torch", "track": f"=={TORCH}", "version": "", "file": "", "sha256": "", "requires_rocm": ""},
            "prebuilt.therock-torch-gfx1151": device("therock-torch", "amd-torch-device-gfx1151"),
            "prebuilt.therock-torch-gfx115x": device("therock-torch", "amd-torch-device-gfx115x"),
            "prebuilt.therock-vision": {"project": "torchvision", "track": f"=={VISION}", "version": ""},
            "prebuilt.therock-vision-gfx1151": device("therock-vision", "amd-torchvision-device-gfx1151"),
        },
    )  # fmt: skip
    return text.replace(f'track = "=={TORCH}"', f'track = "=={TORCH}"  # the stable set', 1)


def update_pins(tmp_path: Path, text: str, *only: str) -> int:
    pins = tmp_path / "pins.toml"
    pins.write_text(text)
    (tmp_path / "locks").mkdir(exist_ok=True)
    return main(["--pins-file", str(pins), "--locks-dir", str(tmp_path / "locks"), "--archives-file", str(tmp_path / "none.toml"),
                 "--no-patch-check", *(["--only", *only] if only else [])])  # fmt: skip


def pins_text(tmp_path: Path) -> str:
    return unresolved_pins((tmp_path / "url").read_text())


def table(text: str, name: str) -> str:
    return text.split(f"[prebuilt.{name}]\n")[1].split("\n\n")[0]


def test_update_pins_resolves_the_device_wheels_from_the_host(tmp_path, index, capsys) -> None:
    shas = serve_index(index, therock_wheels())
    assert update_pins(tmp_path, pins_text(tmp_path), "therock-torch-gfx1151", "therock-vision") == 0
    after = (tmp_path / "pins.toml").read_text()
    torch = f"torch-{TORCH}-cp312-cp312-linux_x86_64.whl"
    gfx1151 = f"amd_torch_device_gfx1151-{TORCH}-cp312-cp312-linux_x86_64.whl"
    family = f"amd_torch_device_gfx115x-{TORCH}-cp312-cp312-linux_x86_64.whl"
    assert table(after, "therock-torch") == (
        f'project = "torch"\ntrack = "=={TORCH}"  # the stable set\nversion = "{TORCH}"\nfile = "{torch}"\n'
        f'sha256 = "{shas[torch]}"\nrequires_rocm = "10.0.0"'
    )
    assert table(after, "therock-torch-gfx1151") == (
        f'device_of = "therock-torch"\nproject = "amd-torch-device-gfx1151"\nversion = "{TORCH}"\nfile = "{gfx1151}"\n'
        f'sha256 = "{shas[gfx1151]}"\nrequires_rocm = "10.0.0"\nextra = "device-gfx1151"\nrequires_devices = "amd-torch-device-gfx115x"'
    )
    assert table(after, "therock-torch-gfx115x") == (
        f'device_of = "therock-torch"\nproject = "amd-torch-device-gfx115x"\nversion = "{TORCH}"\nfile = "{family}"\n'
        f'sha256 = "{shas[family]}"\nrequires_rocm = ""\nextra = ""\nrequires_devices = ""'
    )
    assert 'extra = "device-gfx1151"' in table(after, "therock-vision-gfx1151")
    out = capsys.readouterr().out
    assert f"therock-torch-gfx1151: (not resolved) -> {TORCH} {gfx1151} (amd-torch-device-gfx1151 for torch {TORCH} (device_of therock-torch))" in out
    # Resolved and unchanged: nothing moves.
    assert update_pins(tmp_path, after) == 0 and (tmp_path / "pins.toml").read_text() == after
    assert "all pins are up to date" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wheels, message",
    [
        (therock_wheels(torch_gfx1151_requires_torch="2.13.0+rocm10.0.1"),
         f"amd-torch-device-gfx1151 {TORCH} ([prebuilt.therock-torch-gfx1151]) requires torch==2.13.0+rocm10.0.1, but "
         f"the host pin [prebuilt.therock-torch] is {TORCH}; the set disagrees"),
        (therock_wheels(sdk="10.1.0"),
         f"amd-torch-device-gfx1151 {TORCH} ([prebuilt.therock-torch-gfx1151]) requires rocm-sdk-device-gfx1151==10.1.0 "
         f"while the host pin [prebuilt.therock-torch] requires rocm[libraries]==10.0.0 (torch {TORCH}); the device code "
         "and the host were built for different ROCm releases"),
    ],
)  # fmt: skip
def test_a_device_wheel_that_disagrees_with_its_host_is_refused(tmp_path, index, capsys, wheels, message) -> None:
    serve_index(index, wheels)
    before = pins_text(tmp_path)
    assert update_pins(tmp_path, before, "therock-torch") == 1
    assert (tmp_path / "pins.toml").read_text() == before
    assert f"update-pins: {message}" in capsys.readouterr().err


def test_a_device_wheel_the_host_names_without_a_pin_says_which_table_to_add(tmp_path, index, capsys) -> None:
    serve_index(index, therock_wheels())
    no_family = pins_text(tmp_path).replace(
        '[prebuilt.therock-torch-gfx115x]\ndevice_of = "therock-torch"\nproject = "amd-torch-device-gfx115x"\nversion = ""\n', ""
    )
    assert update_pins(tmp_path, no_family, "therock-torch") == 1
    assert (
        f"update-pins: torch {TORCH} ([prebuilt.therock-torch]): its extra device-gfx1151 requires "
        f"amd-torch-device-gfx115x=={TORCH}, which has no pin: add [prebuilt.therock-torch-gfx115x] with "
        'device_of = "therock-torch" and project = "amd-torch-device-gfx115x"'
    ) in capsys.readouterr().err
    host_only = no_family.split("[prebuilt.therock-torch-gfx1151]")[0]
    assert update_pins(tmp_path, host_only, "therock-torch") == 1
    assert (
        f"update-pins: torch {TORCH} ([prebuilt.therock-torch]) is split: its GPU code is in device wheels (extras "
        "device-gfx1151, device-gfx1100). Add a device pin for each gpu target the chain builds for, e.g. add "
        '[prebuilt.therock-torch-gfx1151] with device_of = "therock-torch" and project = "amd-torch-device-gfx1151"'
    ) in capsys.readouterr().err


def test_requires_rocm_reads_requirements_and_markers_as_packaging_does() -> None:
    nightly = "Name: torch\nRequires-Dist: rocm[libraries] ==7.14.0a20261122\n\n"
    assert requires_rocm(nightly) == "7.14.0a20261122"
    marked = 'Name: x\nRequires-Dist: rocm==9.0; sys_platform == "win32"\nRequires-Dist: rocm[libraries]==10.0.0; sys_platform == "linux"\n\n'
    assert requires_rocm(marked) == "10.0.0"
    assert requires_rocm("Name: x\nRequires-Dist: rocm-sdk-core==10.0.0\nSummary: rocm==1.0\n\n") == ""


# ---------------------------------------------------------------- the graph, with Pants


@pytest.fixture
def rule_runner() -> RuleRunner:
    runner = isolated_rule_runner(
        rules=[*build_spec.rules(), QueryRule(WheelBuildSpec, [WheelRequest]), QueryRule(PrebuiltSpec, [PrebuiltRequest])],
        target_types=[RocmWheelTarget, UpstreamRepoTarget, PrebuiltWheelTarget, RocmToolchainTarget],
    )
    tables = {
        "therock-torch": {"project": "torch", "track": f"=={TORCH}"},
        "therock-torch-gfx1151": {"device_of": "therock-torch", "project": "amd-torch-device-gfx1151", "requires_devices": "amd-torch-device-gfx115x"},
        "therock-torch-gfx115x": {"device_of": "therock-torch", "project": "amd-torch-device-gfx115x"},
        "therock-torch-gfx1100": {"device_of": "therock-torch", "project": "amd-torch-device-gfx1100"},
    }  # fmt: skip
    unresolved = pins_toml(**{f"prebuilt.{name}": fields for name, fields in tables.items()})
    runner.write_files(
        {
            "components/pins/all.toml": pins_toml(mini={"url": "file:///nowhere", "track": "main", "commit": "a" * 40})
            + '\n[prebuilt]\nindex_url = "https://stable.repo.amd.com/rocm/whl-next/"\npython = "3.12"\n' + unresolved,
            "components/BUILD": "rocm_toolchain(name='llvm', provider='llvm', path='/usr/lib/llvm-19')\n",
            "components/therock/BUILD": "prebuilt_wheel(name='torch', pin='therock-torch')\n"
            "prebuilt_wheel(name='torch-gfx115x', pin='therock-torch-gfx115x', dependencies=[':torch'])\n"
            "prebuilt_wheel(name='torch-gfx1151', pin='therock-torch-gfx1151', dependencies=[':torch', ':torch-gfx115x'])\n"
            "prebuilt_wheel(name='torch-gfx1100', pin='therock-torch-gfx1100')\n",
        }
    )
    return runner


def consumer(rule_runner: RuleRunner, *deps: str) -> WheelBuildSpec:
    rule_runner.write_files(
        {
            "components/mini/BUILD": "upstream_repo(name='src', pin='mini')\n"
            "rocm_wheel(name='wheel', source=':src', toolchain='components:llvm', gpu_targets=['gfx1151', 'gfx1100'], "
            f"python='3.12', dependencies={list(deps)!r})\n"
        }
    )
    return rule_runner.request(WheelBuildSpec, [WheelRequest(Address("components/mini", target_name="wheel"))])


def specs(rule_runner: RuleRunner, spec: WheelBuildSpec):
    return [rule_runner.request(PrebuiltSpec, [PrebuiltRequest(a, "test")]) for a in spec.prebuilt]


def test_a_consumer_gets_the_device_wheels_hosts_and_families_dependencies_first(rule_runner) -> None:
    spec = consumer(rule_runner, "components/therock:torch-gfx1151")
    assert [a.spec for a in spec.prebuilt] == ["components/therock:torch", "components/therock:torch-gfx115x", "components/therock:torch-gfx1151"]
    # It builds for gfx1100 too, and the host is split: stopped before any build, naming the fix.
    assert missing_device_wheels(spec.owner, spec.gpu_targets, specs(rule_runner, spec)) == [
        "components/mini:wheel builds for gfx1100 (gpu_targets) on prebuilt_wheel components/therock:torch (torch, pin "
        "`therock-torch`), whose GPU code is in device wheels, but depends on none for gfx1100: add the prebuilt_wheel "
        "of pin `therock-torch-gfx1100` to its `dependencies`"
    ]
    host_only = consumer(rule_runner, "components/therock:torch")
    problems = missing_device_wheels(host_only.owner, ("gfx1151", "gfx1201"), specs(rule_runner, host_only))
    assert problems[1] == (
        "components/mini:wheel builds for gfx1201 (gpu_targets) on prebuilt_wheel components/therock:torch (torch, pin "
        "`therock-torch`), whose GPU code is in device wheels, but depends on none for gfx1201: there is no pin for "
        "amd-torch-device-gfx1201 either: add [prebuilt.therock-torch-gfx1201] with device_of = \"therock-torch\" and "
        "project = \"amd-torch-device-gfx1201\" to components/pins, a prebuilt_wheel for it, and depend on that"
    )


def test_a_device_wheel_target_must_depend_on_its_host(rule_runner) -> None:
    with pytest.raises(ExecutionError) as e:
        consumer(rule_runner, "components/therock:torch-gfx1100")
    assert (
        "prebuilt_wheel components/therock:torch-gfx1100: its pin `therock-torch-gfx1100` ([prebuilt.therock-torch-gfx1100] "
        "in components/pins) is a device wheel of `therock-torch`, so it must depend on that host's prebuilt_wheel: "
        "add it to `dependencies`"
    ) in str(e.value)


def test_a_device_wheel_target_must_depend_on_the_family_it_requires(rule_runner) -> None:
    rule_runner.write_files(
        {"components/therock/BUILD": "prebuilt_wheel(name='torch', pin='therock-torch')\n"
         "prebuilt_wheel(name='torch-gfx1151', pin='therock-torch-gfx1151', dependencies=[':torch'])\n"}
    )  # fmt: skip
    with pytest.raises(ExecutionError) as e:
        consumer(rule_runner, "components/therock:torch-gfx1151")
    assert (
        "prebuilt_wheel components/therock:torch-gfx1151: amd-torch-device-gfx1151 requires amd-torch-device-gfx115x "
        "(`requires_devices` in [prebuilt.therock-torch-gfx1151] in components/pins): add the prebuilt_wheel of "
        "that pin to `dependencies`"
    ) in str(e.value)


def test_an_unreachable_index_names_the_pin_and_changes_nothing(tmp_path, capsys) -> None:
    text = unresolved_pins("http://127.0.0.1:9/whl-next/")
    assert update_pins(tmp_path, text, "therock-torch") == 1
    assert (tmp_path / "pins.toml").read_text() == text
    err = capsys.readouterr().err
    assert err.startswith("update-pins: [prebuilt.therock-torch]: cannot read http://127.0.0.1:9/whl-next/torch/ (")
    assert err.rstrip().endswith("or point `index_url` at a mirror. The pins file was not changed.")


def stream_wheels() -> Dict[str, Dict[str, str]]:
    """torch 2.13.0 over a rocm7.14.x stream: 7.14.2 is out, but not yet for gfx1151."""
    tag = "cp312-cp312-linux_x86_64"
    devices = {"gfx1151": ["amd-torch-device-gfx1151", "amd-torch-device-gfx115x"]}
    versions = [f"2.13.0+rocm7.14.{n}" for n in range(3)]
    wheels: Dict[str, Dict[str, str]] = {"torch": {}, "amd-torch-device-gfx1151": {}, "amd-torch-device-gfx115x": {}}
    for n, version in enumerate(versions):
        wheels["torch"][f"torch-{version}-{tag}.whl"] = host_metadata("torch", version, f"7.14.{n}", devices)
        wheels["amd-torch-device-gfx115x"][f"amd_torch_device_gfx115x-{version}-{tag}.whl"] = device_metadata(
            "amd-torch-device-gfx115x", version, "torch", version
        )
        if n < 2:
            wheels["amd-torch-device-gfx1151"][f"amd_torch_device_gfx1151-{version}-{tag}.whl"] = device_metadata(
                "amd-torch-device-gfx1151", version, "torch", version, f"rocm-sdk-device-gfx1151 == 7.14.{n}", f"amd-torch-device-gfx115x == {version}"
            )
    return wheels


def test_a_stream_track_takes_the_newest_release_with_every_device_wheel(tmp_path, index, capsys) -> None:
    serve_index(index, stream_wheels())
    text = "\n\n".join(pins_text(tmp_path).split("\n\n")[:4]).replace(f"=={TORCH}", "==2.13.0") + "\n"
    assert update_pins(tmp_path, text) == 0
    after = (tmp_path / "pins.toml").read_text()
    assert 'version = "2.13.0+rocm7.14.1"' in table(after, "therock-torch")
    assert 'version = "2.13.0+rocm7.14.1"' in table(after, "therock-torch-gfx1151")
    assert (
        "therock-torch: (not resolved) -> 2.13.0+rocm7.14.1 torch-2.13.0+rocm7.14.1-cp312-cp312-linux_x86_64.whl (newest torch "
        "for '==2.13.0' on " + (tmp_path / "url").read_text() + " with every device wheel pinned; not 2.13.0+rocm7.14.2 "
        "(no amd-torch-device-gfx1151))"
    ) in capsys.readouterr().out


def test_a_host_derived_from_a_requirement_line_follows_the_recipe(tmp_path, index, capsys) -> None:
    # vLLM's requirements/build/rocm.txt in small: the exact torch its ROCm wheels build against.
    serve_index(index, stream_wheels())
    recipe = init_repo(tmp_path / "vllm")
    commit_files(recipe, {"requirements/build/rocm.txt": "torch==2.13.0+rocm7.14.0\n"})
    pins = "\n\n".join(pins_text(tmp_path).split("\n\n")[:4]) + "\n"
    pins = pins.replace('project = "torch"\n', 'project = "torch"\nderived_from = "vllm:requirements/build/rocm.txt#torch"\n')
    pins += f'\n[vllm]\nurl = "file://{recipe}"\ntrack = "main"\ncommit = "{git(recipe, "rev-parse", "HEAD")}"\n'
    assert update_pins(tmp_path, pins) == 0
    after = (tmp_path / "pins.toml").read_text()
    assert 'track = "==2.13.0+rocm7.14.0"' in table(after, "therock-torch")
    assert 'version = "2.13.0+rocm7.14.0"' in table(after, "therock-torch-gfx1151")
    # The recipe moves to 7.14.1: moving vllm moves the torch pin, its track and its device wheels.
    commit_files(recipe, {"requirements/build/rocm.txt": "torch==2.13.0+rocm7.14.1\n"})
    assert update_pins(tmp_path, after, "vllm") == 0
    moved = (tmp_path / "pins.toml").read_text()
    assert 'track = "==2.13.0+rocm7.14.1"' in table(moved, "therock-torch") and 'version = "2.13.0+rocm7.14.1"' in table(moved, "therock-torch")
    assert 'version = "2.13.0+rocm7.14.1"' in table(moved, "therock-torch-gfx1151")
