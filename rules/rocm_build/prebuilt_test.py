from pants.engine.addresses import Address

from rocm_build.pins import PrebuiltPin
from rocm_build.prebuilt import PrebuiltSpec
from rocm_build.prebuilt_update import IndexFile, fits, newest, requires_rocm

INDEX = "https://rocm.nightlies.amd.com/v2/gfx1151/"


def pin(**fields: str) -> PrebuiltPin:
    return PrebuiltPin(index_url=INDEX, project="torch", track=">=2.13.0a0,<2.14", python="3.12", **fields)


def test_an_unresolved_pin_and_a_rocm_mismatch_are_named() -> None:
    spec = PrebuiltSpec(Address("components/therock", target_name="torch"), "therock-torch", pin(), "components/pins.toml")
    assert spec.unresolved() == (
        "prebuilt_wheel components/therock:torch: pin `therock-torch` ([prebuilt.therock-torch] in components/pins.toml) "
        "is not resolved: it has no version, file and sha256 yet. Run `pants run rules:update-pins -- --only "
        f"therock-torch` where the index ({INDEX}) is reachable; never write a sha256 you have not checked."
    )
    resolved = PrebuiltSpec(
        spec.address, spec.pin_name,
        pin(version="2.13.0a0+rocm7.13.0", file="torch-2.13.0a0+rocm7.13.0-cp312-cp312-linux_x86_64.whl",
            sha256="a" * 64, requires_rocm="7.13.0"),
        spec.pins_file,
    )  # fmt: skip
    assert resolved.unresolved() is None
    assert resolved.rocm_mismatch("components/vllm:wheel-on-therock", "components:rocm", "7.13.0") is None
    assert resolved.rocm_mismatch("components/vllm:wheel-on-therock", "components:rocm", "7.14.0") == (
        "components/vllm:wheel-on-therock builds against prebuilt_wheel components/therock:torch (torch "
        "2.13.0a0+rocm7.13.0), which requires rocm==7.13.0, but its rocm_toolchain components:rocm is version "
        "7.14.0. Set components:rocm's `version` to 7.13.0, or move the pin `therock-torch` ([prebuilt.therock-torch] "
        "in components/pins.toml) to a wheel built for that ROCm."
    )


def test_update_pins_takes_the_newest_file_for_the_python_and_track() -> None:
    files = [
        IndexFile(f"torch-{v}-{t}.whl", f"https://x/torch-{v}-{t}.whl", None, None)
        for v, t in [
            ("2.13.0a0+rocm7.14.0a20261120", "cp312-cp312-linux_x86_64"),
            ("2.13.0a0+rocm7.14.0a20261122", "cp312-cp312-manylinux_2_28_x86_64"),
            ("2.13.0a0+rocm7.14.0a20261123", "cp311-cp311-linux_x86_64"),  # another Python
            ("2.14.0a0+rocm7.14.0a20261123", "cp312-cp312-linux_x86_64"),  # outside track
            ("2.13.0a0+rocm7.14.0a20261124", "cp312-cp312-win_amd64"),  # another platform
        ]
    ]
    version, chosen = newest(pin(), files)
    assert str(version) == "2.13.0a0+rocm7.14.0a20261122"
    assert chosen.name == "torch-2.13.0a0+rocm7.14.0a20261122-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert fits("not-a-wheel.tar.gz", "3.12") is None
    assert requires_rocm("Name: torch\nRequires-Dist: filelock\nRequires-Dist: rocm[libraries]==7.14.0a20261122\n") == "7.14.0a20261122"
    assert requires_rocm("Name: mini-torch\nRequires-Dist: mini_aotriton==1.0.0\n") == ""
