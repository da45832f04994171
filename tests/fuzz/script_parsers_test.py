"""Short fuzz runs of the parsers in our sandbox scripts (the patch reader, apply_patches.py;
the device-code readers, kpack.py and gpu_code.py's offload-bundle scanner; the box check,
check_box.py), and the inputs earlier runs found, as regression tests."""

from __future__ import annotations

import pytest

from fuzz import fuzz_box, fuzz_bundles, fuzz_kpack, fuzz_patches
from fuzz.harness import fuzz_for



@pytest.mark.parametrize("target", [fuzz_patches, fuzz_kpack, fuzz_bundles, fuzz_box], ids=lambda t: t.__name__.rsplit(".", 1)[-1])
def test_fuzz_script_parsers(target, tmp_path) -> None:
    outcome = fuzz_for(target, tmp_path)
    assert outcome.exit_code == 0 and not outcome.crashes, outcome.output[-6000:]
    assert "Done" in outcome.output, outcome.output[-2000:]


# Found by fuzz_patches: read_edits let a non-UTF-8 file or a field of the wrong type through
# as a traceback, where a refusal naming the patch file is meant (exit 2).
@pytest.mark.parametrize(
    "content",
    [
        b'[[edit]]\npath = "CMakeLi\xe1sts.txt"\npattern = "x"\nreplace = "y"\n',
        b"edit = 1\n",
        b'edit = [1]\n',
        b'[[edit]]\npath = 1\npattern = "x"\nreplace = "y"\n',
    ],
    ids=["not utf-8", "edit not a list", "edit not a table", "path not a string"],
)
def test_a_malformed_edit_file_is_refused_naming_it(tmp_path, capsys, content) -> None:
    patch = tmp_path / "0001-fix.edit.toml"
    patch.write_bytes(content)
    with pytest.raises(SystemExit) as e:
        fuzz_patches.APPLY.list_touched([str(patch)])
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith(f"{patch}: ")
