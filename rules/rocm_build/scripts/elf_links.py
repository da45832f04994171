"""What each host ELF of a wheel needs and provides at load time, read with pyelftools.

Usage: elf_links.py WHEEL   prints JSON {"elves": {installed path: facts}, "executables": [paths],
                                         "requires": [projects], "requires_dist": [lines],
                                         "unreadable": {member: why},
                                         "kpack_refs": {installed path: reference},
                                         "kpacks": {installed path: archive},
                                         "device_requires": {gfx: [projects]}}
       elf_links.py --policy  prints the libraries of every manylinux policy, as auditwheel lists them

An installed path is where the member lands relative to site-packages (`<name>.data/platlib/x`
and `.data/purelib/x` land at `x`; members of the other `.data` schemes are not libraries of
the set and are left out). The facts of one ELF, all read from its dynamic section and its
dynamic symbol table (never its text):

  soname, needed (DT_NEEDED, in order), runpath, rpath (":"-separated as written, `$ORIGIN`
  kept), defined: {symbol: [versions]} ("" for a symbol without a version),
  undefined: [[symbol, version, library the version is needed from]] (weak ones left out:
  the loader leaves them null when nothing defines them), versioned: whether it defines
  versions (a library without any satisfies a versioned reference, as glibc's loader does).

AMDGPU code objects are device code, read by gpu_code.py; they are not loaded by the host.
TheRock's split device code is read by kpack.py: a host library's `.rocm_kpack_ref` marker
and HIPK wrappers (`kpack_refs`: kernel_name, search_paths, indexes: the code object index of
each wrapper), each `.kpack` archive (`kpacks`: its arches, compression, kernels, each with the
arch its code object's ELF header names; or `error`, why it cannot be read), and the device
wheels the wheel's metadata names per arch (`Requires-Dist: X; extra == "device-<gfx>"`,
TheRock's split host). Runs in auditwheel's venv, which holds pyelftools, msgpack and
zstandard at the versions its lock pins. A wheel is untrusted input: kpack.py reads an archive
with bounds and refuses it in one line (`error`); a member that cannot be read is `unreadable`,
and the rest of the wheel's facts are kept.
"""

import array
import io
import json
import re
import struct
import sys
import zipfile
import zlib
from email.parser import HeaderParser

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection, GNUVerSymSection

import kpack

EM_AMDGPU = 224
SHN_UNDEF = "SHN_UNDEF"
SYM64 = struct.Struct("<IBBHQQ")  # Elf64_Sym: name, info, other, shndx, value, size
STB_LOCAL, STB_WEAK = 0, 2
STT_SECTION, STT_FILE = 3, 4
BINDINGS = {"STB_LOCAL": 0, "STB_GLOBAL": 1, "STB_WEAK": 2, "STB_GNU_UNIQUE": 10}
TYPES = {"STT_NOTYPE": 0, "STT_OBJECT": 1, "STT_FUNC": 2, "STT_SECTION": 3, "STT_FILE": 4}
OTHER_SCHEMES = ("scripts", "headers", "data")


def installed_path(member):
    """Where a wheel member lands relative to site-packages, or None (not a library location)."""
    head, _, rest = member.partition("/")
    if head.endswith(".data") and rest:
        scheme, _, path = rest.partition("/")
        return None if scheme in OTHER_SCHEMES or not path else path
    return member


def version_names(elf):
    """versym index -> (version name, the file it is needed from or "" for a definition)."""
    names = {}
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for need, auxiliaries in section.iter_versions():
                for aux in auxiliaries:
                    names[aux.entry["vna_other"]] = (aux.name, need.name)
        elif isinstance(section, GNUVerDefSection):
            for definition, auxiliaries in section.iter_versions():
                if not definition.entry["vd_flags"] & 1:  # VER_FLG_BASE names the file itself
                    names[definition.entry["vd_ndx"]] = (next(iter(auxiliaries)).name, "")
    return names


def dynamic_tags(elf, facts):
    dynamic = next((s for s in elf.iter_sections() if isinstance(s, DynamicSection)), None)
    for tag in dynamic.iter_tags() if dynamic is not None else ():
        kind = tag.entry.d_tag
        if kind == "DT_NEEDED":
            facts["needed"].append(tag.needed)
        elif kind == "DT_SONAME":
            facts["soname"] = tag.soname
        elif kind == "DT_RUNPATH":
            facts["runpath"] = tag.runpath
        elif kind == "DT_RPATH":
            facts["rpath"] = tag.rpath


def symbol_rows(elf, symbols):
    """(name, binding, type, section index) of each dynamic symbol, in table order. pyelftools
    locates the tables; on x86-64 (ELF64, little-endian) the fixed-size records are decoded in
    one pass, since decoding them one by one through pyelftools took 24 s for torch's 136 ELFs."""
    strings = elf.get_section(symbols["sh_link"]).data()
    if not (elf.elfclass == 64 and elf.little_endian and symbols["sh_entsize"] == SYM64.size):
        for symbol in symbols.iter_symbols():
            info = symbol["st_info"]
            yield symbol.name, BINDINGS.get(info["bind"], -1), TYPES.get(info["type"], -1), symbol["st_shndx"] == SHN_UNDEF
        return
    for name_at, info, _, shndx, _, _ in SYM64.iter_unpack(symbols.data()):
        yield strings[name_at:strings.index(b"\0", name_at)].decode("utf-8", "replace"), info >> 4, info & 0xF, shndx == 0


def dynamic_facts(elf):
    facts = {"soname": "", "needed": [], "runpath": "", "rpath": "", "defined": {}, "undefined": [], "versioned": False}
    dynamic_tags(elf, facts)
    symbols = elf.get_section_by_name(".dynsym")
    if symbols is None:
        return facts
    versions = version_names(elf)
    facts["versioned"] = any(not needed_from for _, needed_from in versions.values())
    versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
    numbers = array.array("H", versym.data()) if versym is not None else None
    if numbers is not None and not elf.little_endian:
        numbers.byteswap()
    for index, (name, binding, kind, undefined) in enumerate(symbol_rows(elf, symbols)):
        if index == 0 or not name or kind in (STT_SECTION, STT_FILE) or binding == STB_LOCAL:
            continue
        # VER_NDX_LOCAL (0) and VER_NDX_GLOBAL (1) name no version; the top bit hides one.
        version, needed_from = versions.get(numbers[index] & 0x7FFF, ("", "")) if numbers is not None else ("", "")
        if undefined:
            if binding != STB_WEAK:
                facts["undefined"].append([name, version, needed_from])
        else:
            facts["defined"].setdefault(name, []).append(version)
    return facts


def is_executable(elf):
    """A program (it names an interpreter, or is not position-independent): `import` never
    loads it, so what it needs is not the install set's to check (torch/bin/protoc)."""
    return elf["e_type"] == "ET_EXEC" or any(segment["p_type"] == "PT_INTERP" for segment in elf.iter_segments())


def requires_dist(wheel):
    """The Requires-Dist lines of the wheel's METADATA, as written (markers too): the install
    set's check evaluates them for the set's interpreter with `packaging`, which this venv's
    lock does not promise."""
    name = next((n for n in wheel.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
    if name is None:
        return []
    return [str(h) for h in HeaderParser().parsestr(wheel.read(name).decode("utf-8", "replace")).get_all("Requires-Dist") or []]


def requires(wheel):
    """The projects the wheel requires without extras (Requires-Dist lines of its METADATA), and
    gfx -> the projects its `device-<gfx>` extra adds (TheRock's split host names its device
    wheels so)."""
    found, devices = [], {}
    for header in requires_dist(wheel):
        requirement, _, marker = str(header).partition(";")
        project = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if not project:
            continue
        normalized = re.sub(r"[-_.]+", "-", project.group(1)).lower()
        device = re.search(r"""extra\s*==\s*["']device-(gfx[0-9a-z]+)["']""", marker)
        if device:
            devices.setdefault(device.group(1), []).append(normalized)
        elif "extra" not in marker:
            found.append(normalized)
    return sorted(set(found)), {gfx: sorted(set(p)) for gfx, p in devices.items()}


def kpack_reference(elf):
    """The split host library's marker and the index of each HIPK wrapper, or None."""
    marker = elf.get_section_by_name(kpack.MARKER_SECTION)
    if marker is None:
        return None
    kernel_name, search_paths = kpack.read_marker(marker.data())
    segment = elf.get_section_by_name(kpack.WRAPPER_SECTION)
    indexes = kpack.hipk_indexes(segment.data()) if segment is not None else []
    return {"kernel_name": kernel_name, "search_paths": search_paths, "indexes": indexes}


def policy_libraries():
    """auditwheel's `lib_whitelist` of every manylinux policy: what every such system has."""
    from importlib.resources import files

    policies = json.loads(files("auditwheel.policy").joinpath("manylinux-policy.json").read_text())
    return sorted({name for policy in policies for name in policy["lib_whitelist"]})


def main():
    if sys.argv[1] == "--policy":
        json.dump(policy_libraries(), sys.stdout)
        return
    found = {"elves": {}, "executables": [], "unreadable": {}, "kpack_refs": {}, "kpacks": {}}
    with zipfile.ZipFile(sys.argv[1]) as wheel:
        found["requires"], found["device_requires"] = requires(wheel)
        found["requires_dist"] = requires_dist(wheel)
        for info in wheel.infolist():
            path = installed_path(info.filename)
            if path is None or info.is_dir():
                continue
            if path.endswith(kpack.SUFFIX):
                try:
                    with wheel.open(info) as archive:  # read where the archive points, never as a whole
                        found["kpacks"][path] = kpack.read_archive(archive, info.file_size)
                except kpack.KpackError as e:
                    found["kpacks"][path] = {"error": str(e)}
                except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:  # the zip member itself
                    found["kpacks"][path] = {"error": f"it cannot be read: {str(e) or type(e).__name__}"}
                continue
            if info.file_size < 64:
                continue
            with wheel.open(info) as member:
                if member.read(4) != b"\x7fELF":
                    continue
            try:
                elf = ELFFile(io.BytesIO(wheel.read(info)))
                if elf["e_machine"] in ("EM_AMDGPU", EM_AMDGPU):
                    continue
                if is_executable(elf):
                    found["executables"].append(path)
                    continue
                found["elves"][path] = dynamic_facts(elf)
                reference = kpack_reference(elf)
                if reference is not None:
                    found["kpack_refs"][path] = reference
            # A wheel is untrusted input: a malformed ELF is reported by name, never a crash.
            except (ELFError, ValueError, KeyError, IndexError, struct.error, AttributeError, kpack.KpackError) as e:
                found["unreadable"][info.filename] = str(e) or type(e).__name__
    json.dump(found, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
