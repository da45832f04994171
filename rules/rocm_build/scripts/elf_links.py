"""What each host ELF of a wheel needs and provides at load time, read with pyelftools.

Usage: elf_links.py WHEEL   prints JSON {"elves": {installed path: facts}, "unreadable": {member: why}}
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
Runs in auditwheel's venv, which holds pyelftools at the version its lock pins.
"""

import io
import json
import sys
import zipfile

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection, GNUVerSymSection

EM_AMDGPU = 224
SHN_UNDEF = "SHN_UNDEF"
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


def dynamic_facts(elf):
    facts = {"soname": "", "needed": [], "runpath": "", "rpath": "", "defined": {}, "undefined": [], "versioned": False}
    dynamic = next((s for s in elf.iter_sections() if isinstance(s, DynamicSection)), None)
    if dynamic is not None:
        for tag in dynamic.iter_tags():
            kind = tag.entry.d_tag
            if kind == "DT_NEEDED":
                facts["needed"].append(tag.needed)
            elif kind == "DT_SONAME":
                facts["soname"] = tag.soname
            elif kind == "DT_RUNPATH":
                facts["runpath"] = tag.runpath
            elif kind == "DT_RPATH":
                facts["rpath"] = tag.rpath
    symbols = elf.get_section_by_name(".dynsym")
    if symbols is None:
        return facts
    versions = version_names(elf)
    facts["versioned"] = any(not needed_from for _, needed_from in versions.values())
    versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
    for index, symbol in enumerate(symbols.iter_symbols()):
        if index == 0 or not symbol.name or symbol["st_info"]["type"] in ("STT_SECTION", "STT_FILE"):
            continue
        binding = symbol["st_info"]["bind"]
        if binding == "STB_LOCAL":
            continue
        version, needed_from = "", ""
        if versym is not None:
            number = versym.get_symbol(index).entry["ndx"]
            if isinstance(number, int):  # VER_NDX_LOCAL / VER_NDX_GLOBAL come back as names
                version, needed_from = versions.get(number & 0x7FFF, ("", ""))
        if symbol["st_shndx"] == SHN_UNDEF:
            if binding != "STB_WEAK":
                facts["undefined"].append([symbol.name, version, needed_from])
        else:
            facts["defined"].setdefault(symbol.name, []).append(version)
    return facts


def policy_libraries():
    """auditwheel's `lib_whitelist` of every manylinux policy: what every such system has."""
    from importlib.resources import files

    policies = json.loads(files("auditwheel.policy").joinpath("manylinux-policy.json").read_text())
    return sorted({name for policy in policies for name in policy["lib_whitelist"]})


def main():
    if sys.argv[1] == "--policy":
        json.dump(policy_libraries(), sys.stdout)
        return
    found = {"elves": {}, "unreadable": {}}
    with zipfile.ZipFile(sys.argv[1]) as wheel:
        for info in wheel.infolist():
            path = installed_path(info.filename)
            if path is None or info.is_dir() or info.file_size < 64:
                continue
            with wheel.open(info) as member:
                if member.read(4) != b"\x7fELF":
                    continue
            try:
                elf = ELFFile(io.BytesIO(wheel.read(info)))
                if elf["e_machine"] in ("EM_AMDGPU", EM_AMDGPU):
                    continue
                found["elves"][path] = dynamic_facts(elf)
            except (ELFError, ValueError, KeyError, IndexError) as e:
                found["unreadable"][info.filename] = str(e) or type(e).__name__
    json.dump(found, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
