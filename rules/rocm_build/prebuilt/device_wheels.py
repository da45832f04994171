"""TheRock's split wheels, read from their metadata: a host wheel and its device wheels.

TheRock's splitter (rocm-systems shared/kpack/python/rocm_kpack/wheel_splitter.py) moves a
torch wheel's GPU code into `amd-torch-device-<bundle>` wheels and writes into the host's
METADATA, per target, `Provides-Extra: device-gfx1151` and
`Requires-Dist: amd-torch-device-gfx1151 == <torch version>; extra == "device-gfx1151"` (the
family wheel, amd-torch-device-gfx115x, too). Each device wheel requires `torch == <version>`,
a target one also `rocm-sdk-device-<gfx> == <ROCm version>` and its family wheel. These
functions read those lines with `packaging` (markers evaluated, never a regex on the text)
and refuse a set whose versions disagree, naming both versions and both pins. Standard
library and packaging only: update-pins imports it.
"""

from __future__ import annotations

from email.parser import HeaderParser
from typing import Dict, List, Mapping, Optional

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rocm_build.pins.tables import PREBUILT, PrebuiltPin

DEVICE_EXTRA = "device-"
ALL_DEVICES = "device-all"  # every device wheel of the host: not one a gpu target needs
SDK_DEVICE = "rocm-sdk-device-"


class DeviceSetError(Exception):
    """A host and device wheels that do not belong together; the message names both pins."""


def _headers(metadata: str, field: str) -> List[str]:
    return [str(v) for v in HeaderParser().parsestr(metadata).get_all(field) or []]


def _environment(python: str, extra: str) -> Dict[str, str]:
    """Where the wheels install: CPython `python` on linux x86_64."""
    return {
        **default_environment(),
        "python_version": python, "python_full_version": f"{python}.0", "implementation_name": "cpython",
        "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
        "os_name": "posix", "platform_machine": "x86_64", "extra": extra,
    }  # fmt: skip


def _requirements(metadata: str) -> List[Requirement]:
    found = []
    for line in _headers(metadata, "Requires-Dist"):
        try:
            found.append(Requirement(line))
        except ValueError:  # InvalidRequirement, or a NUL byte packaging's marker parser chokes on
            continue  # not ours to judge; pip reports it at install time
    return found


def base_requirements(metadata: str, python: str) -> List[Requirement]:
    """What the wheel requires without extras, on CPython `python`, linux x86_64."""
    return [r for r in _requirements(metadata) if r.marker is None or r.marker.evaluate(_environment(python, ""))]


def extra_requirements(metadata: str, extra: str, python: str) -> List[Requirement]:
    """What `extra` adds: requirements true with it and false without it."""
    on, off = _environment(python, extra), _environment(python, "")
    return [r for r in _requirements(metadata) if r.marker is not None and r.marker.evaluate(on) and not r.marker.evaluate(off)]


def device_extras(metadata: str) -> List[str]:
    """The host's per-target extras ("device-gfx1151"), without `device-all`."""
    return [e for e in _headers(metadata, "Provides-Extra") if e.startswith(DEVICE_EXTRA) and e != ALL_DEVICES]


def exact_version(requirement: Requirement) -> Optional[str]:
    """V of `name == V` (one exact specifier), as packaging normalises it; else None."""
    specs = list(requirement.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or specs[0].version.endswith(".*"):
        return None
    try:
        return str(Version(specs[0].version))
    except InvalidVersion:
        return specs[0].version


def pinned_requirement(metadata: str, name: str, python: str) -> Optional[str]:
    """V of the wheel's own `name[...] == V` requirement, or None."""
    for r in base_requirements(metadata, python):
        if canonicalize_name(r.name) == canonicalize_name(name):
            return exact_version(r)
    return None


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _table(name: str) -> str:
    return f"[{PREBUILT}.{name}]"


def _add_table(host_name: str, dist: str) -> str:
    key = dist.partition("-device-")[2] or dist
    return f'add {_table(f"{host_name}-{key}")} with device_of = "{host_name}" and project = "{dist}"'


def host_devices(host_name: str, host: PrebuiltPin, metadata: str, devices: Mapping[str, PrebuiltPin]) -> Mapping[str, PrebuiltPin]:
    """The host's device pins, checked against the host's extras: each pin names a device wheel
    the host names, and every wheel a pinned target's extra pulls has a pin."""
    extras = device_extras(metadata)
    what = f"{host.project} {host.version} ({_table(host_name)})"
    if not devices:
        if extras:
            shown = ", ".join(extras[:4]) + (f" and {len(extras) - 4} more" if len(extras) > 4 else "")
            example = next((r.name for r in extra_requirements(metadata, extras[0], host.python)), f"amd-{host.project}-device-<gfx>")
            raise DeviceSetError(
                f"{what} is split: its GPU code is in device wheels (extras {shown}). Add a device pin for each "
                f"gpu target the chain builds for, e.g. {_add_table(host_name, example)}"
            )
        return devices
    named: Dict[str, str] = {}  # device dist -> the extra that names it
    for extra in [*extras, "device-all"]:
        for r in extra_requirements(metadata, extra, host.python):
            named.setdefault(canonicalize_name(r.name), extra)
    pinned = {canonicalize_name(p.project): n for n, p in devices.items()}
    for name, device in sorted(devices.items()):
        if canonicalize_name(device.project) not in named:
            raise DeviceSetError(
                f"{_table(name)}: {what} names no device wheel {device.project} in its extras (it names "
                f"{', '.join(sorted(named)) or 'none'}); fix `project` or remove the table"
            )
        extra = f"{DEVICE_EXTRA}{device.device_key}"
        for r in extra_requirements(metadata, extra, host.python) if extra in extras else []:
            if canonicalize_name(r.name) not in pinned:
                raise DeviceSetError(
                    f"{what}: its extra {extra} requires {r.name}{r.specifier}, which has no pin: {_add_table(host_name, r.name)}"
                )
    return devices


def device_values(
    name: str, device: PrebuiltPin, host_name: str, host: PrebuiltPin, host_metadata: str, metadata: str,
    pins: Mapping[str, PrebuiltPin],
) -> Dict[str, str]:  # fmt: skip
    """requires_rocm, extra and requires_devices of a device pin, from its wheel's metadata,
    once its requirements agree with the host pin (version for version)."""
    wheel = f"{device.project} {host.version} ({_table(name)})"
    host_pin = f"the host pin {_table(host_name)}"
    # The version the host asks for, in whichever extra names this wheel.
    for extra in [*device_extras(host_metadata), ALL_DEVICES]:
        for r in extra_requirements(host_metadata, extra, host.python):
            wanted = exact_version(r)
            if canonicalize_name(r.name) == canonicalize_name(device.project) and not (wanted and _same(wanted, host.version)):
                raise DeviceSetError(
                    f"{host_pin} ({host.project} {host.version}) requires {r.name}{r.specifier} in its extra {extra}, "
                    f"not its own version {host.version}; TheRock pairs a host only with device wheels of its version"
                )
    siblings = {canonicalize_name(p.project): p.project for p in pins.values() if p.device_of == host_name}
    host_named = {canonicalize_name(r.name) for e in [*device_extras(host_metadata), ALL_DEVICES] for r in extra_requirements(host_metadata, e, host.python)}
    requires_rocm, requires_devices, saw_host = "", [], False
    for r in base_requirements(metadata, device.python):
        dist, version = canonicalize_name(r.name), exact_version(r)
        if dist == canonicalize_name(host.project):
            saw_host = True
            if not (version and _same(version, host.version)):
                raise DeviceSetError(
                    f"{wheel} requires {r.name}{r.specifier}, but {host_pin} is {host.version}; the set disagrees: "
                    f"move both with `pants run rules:update-pins -- --only {host_name}`, or pin the host at that version"
                )
        elif dist.startswith(SDK_DEVICE):
            requires_rocm = version or ""
            if host.requires_rocm and not (version and _same(version, host.requires_rocm)):
                raise DeviceSetError(
                    f"{wheel} requires {r.name}{r.specifier} while {host_pin} requires rocm[libraries]=={host.requires_rocm} "
                    f"({host.project} {host.version}); the device code and the host were built for different ROCm releases"
                )
        elif dist in host_named or dist in siblings:
            if not (version and _same(version, host.version)):
                raise DeviceSetError(
                    f"{wheel} requires {r.name}{r.specifier}, but {host_pin} is {host.version}; a family wheel must be "
                    "the host's version too"
                )
            if dist not in siblings:
                raise DeviceSetError(f"{wheel} requires {r.name}{r.specifier}, which has no pin: {_add_table(host_name, r.name)}")
            requires_devices.append(siblings[dist])
    if not saw_host:
        raise DeviceSetError(
            f"{wheel} does not require {host.project} at all: it is not a device wheel of {host_pin}; fix its `project`"
        )
    extra = f"{DEVICE_EXTRA}{device.device_key}"
    hosts_extra = any(canonicalize_name(r.name) == canonicalize_name(device.project) for r in extra_requirements(host_metadata, extra, host.python))
    return {
        "requires_rocm": requires_rocm,
        "extra": extra if extra in device_extras(host_metadata) and hosts_extra else "",
        "requires_devices": " ".join(sorted(requires_devices)),
    }
