"""The one exception type our rules raise: a message meant for a person, no traceback."""


class RocmBuildError(Exception):
    """Raised with a message that names the target, the file or pin, and the fix."""


def tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def process_failed(what: str, exit_code: int, stderr: bytes, lines: int = 8) -> RocmBuildError:
    """`what` failed: the error to raise, with the process's exit code and its last lines."""
    return RocmBuildError(f"{what} (exit {exit_code}):\n{indent(tail(stderr.decode(errors='replace'), lines))}")
