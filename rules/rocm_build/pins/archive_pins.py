"""The archive pins file (components/archives/, one file per archive): URL, sha256 and strip prefix of archives.

An `upstream_archive(pin=...)` reads its table here instead of spelling `url` and `sha256`
in BUILD, so that `update-pins` can keep it derived from a file in another pin's tree:
Triton's LLVM build is named by `cmake/llvm-hash.txt` at the triton pin.

    [triton-llvm]
    url = "https://.../llvm-3c709802-ubuntu-x64.tar.gz"
    sha256 = "..."                      # "" = unresolved: builds stop before any work
    strip_prefix = "llvm-3c709802-ubuntu-x64"
    derived_from = "triton:cmake/llvm-hash.txt"
    url_template = "https://.../llvm-{hash8}-ubuntu-x64.tar.gz"   # {hash}, {hash8}
    strip_prefix_template = "llvm-{hash8}-ubuntu-x64"

    [vllm-sdist]
    ...
    version = "0.31.0"  # the release an sdist is: a rocm_wheel built from it sets it (`version_env`)
"""

from __future__ import annotations

from typing import Dict, Optional

from rocm_build.pins.pin_model import PinModel, checks
from rocm_build.pins.tables import PinsError, checked_download_url, checked_sha256, parse_tables


class ArchivePin(PinModel):
    url: str
    sha256: str = ""
    strip_prefix: str = ""
    derived_from: Optional[str] = None
    url_template: Optional[str] = None
    strip_prefix_template: Optional[str] = None
    version: Optional[str] = None

    @checks("url", "url_template")
    def _url(cls, url: Optional[str]) -> Optional[str]:
        # "" until update-pins derives it; a template is checked with its fields filled in.
        if url:
            try:
                filled = url.format(hash="0" * 40, hash8="0" * 8)
            except (KeyError, IndexError, ValueError) as e:
                raise ValueError(f"{url!r} is not a template of {{hash}} and {{hash8}} ({e!r})") from None
            checked_download_url(filled, "an archive URL: https://host/file.tar.gz or file:///path")
        return url

    _sha256 = checks("sha256")(lambda cls, sha256: checked_sha256(sha256))

    def derive(self, commit: str) -> Dict[str, str]:
        """url and strip_prefix for the commit the `derived_from` file names."""
        values = {"hash": commit, "hash8": commit[:8]}
        return {
            "url": (self.url_template or self.url).format(**values),
            "strip_prefix": (self.strip_prefix_template or self.strip_prefix).format(**values),
        }


def parse_archive_pins(path: str, text: str) -> Dict[str, ArchivePin]:
    return parse_tables(path, text, ArchivePin, "url and sha256", lambda problem: problem.message)

