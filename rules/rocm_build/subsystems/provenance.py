"""`[rocm-provenance]`: how `package` signs the provenance it writes beside each wheel it built."""

from __future__ import annotations

from pants.option.option_types import StrOption
from pants.option.subsystem import Subsystem
from pants.util.strutil import softwrap


class ProvenanceSubsystem(Subsystem):
    options_scope = "rocm-provenance"
    help = "How `package` signs the in-toto provenance (`<wheel>.intoto.jsonl`) it writes beside each wheel it built."

    signing_key = StrOption(
        default="",
        help=softwrap(
            """
            An Ed25519 private key (PEM, as `openssl genpkey -algorithm ed25519` writes it) that
            signs each wheel's provenance (a DSSE envelope; `keyid`: the sha256 of the public key,
            DER). A path on this machine (`~` and paths relative to the build root work); openssl
            reads it there, so its bytes never enter a process's inputs, Pants' store or a
            cache. Empty: the provenance is written unsigned (an envelope with no signature).
            """
        ),
    )
