"""Inside the build: the other end of dist_relay.py, for sccache's server alone.

Usage:
  dist_proxy.py proxy SOCKET_DIR WATCH_PID CONFIG TOOLCHAIN_JSON
      Inside the build: listens on 127.0.0.1 (the build's loopback), passing each connection
      to SOCKET_DIR/proxy.sock; writes sccache's client configuration to CONFIG (0600: it
      holds the token) with the toolchain archive TOOLCHAIN_JSON describes; prints the
      settings for sccache's server, one NAME=VALUE a line.
  dist_proxy.py status SOCKET_DIR PROXY_PORT
      Inside the build, through the proxy: one line saying how many servers the farm has, or
      why it cannot be used.
"""

import json
import os
import socket
import sys
from urllib.parse import urlsplit

from dist_relay import CONF, SOCKET, ask_status, read_all, sockets, status_request, write_private


def client_config(conf, toolchain, archive):
    """sccache's client configuration: the scheduler as the build reaches it, the token, and
    our toolchain archive for each compiler it holds (compiler path in the build -> its path
    in the archive), so that no server compiles with a toolchain sccache packed by itself."""
    def quoted(s):
        return json.dumps(s)  # a TOML basic string is a JSON string for these characters

    # rewrite_includes_only: the farm gets the source with its includes inlined (clang's
    # -frewrite-includes), not macro-expanded output: a HIP kernel compiled from clang's
    # preprocessed output lost its kernel symbol here (clang 19).
    lines = ["[dist]", f"scheduler_url = {quoted(conf['scheduler'])}", "rewrite_includes_only = true", "",
             "[dist.auth]", 'type = "token"',
             f"token = {quoted(conf['token'])}"]
    for local, in_archive in sorted(toolchain["compilers"].items()):
        lines += ["", "[[dist.toolchains]]", 'type = "path_override"', f"compiler_executable = {quoted(local)}",
                  f"archive = {quoted(archive)}", f"archive_compiler_executable = {quoted(in_archive)}"]
    return "\n".join(lines) + "\n"


def proxy(socket_dir, watch_pid, config_path, toolchain_json):
    with open(os.path.join(socket_dir, CONF)) as f:
        conf = json.load(f)
    with open(toolchain_json) as f:
        toolchain = json.load(f)
    archive = os.path.join(os.path.dirname(os.path.abspath(toolchain_json)), toolchain["archive"])
    config_path = os.path.abspath(config_path)
    write_private(config_path, client_config(conf, toolchain, archive))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    print(f"SCCACHE_CONF={config_path}\nHTTP_PROXY={url}\nHTTPS_PROXY={url}\nNO_PROXY=", flush=True)
    return sockets().serve_in_background(listener, ["unix", os.path.abspath(os.path.join(socket_dir, SOCKET))], watch_pid)


def status(socket_dir, port):
    with open(os.path.join(socket_dir, CONF)) as f:
        conf = json.load(f)
    scheduler = urlsplit(conf["scheduler"])

    def send():
        with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as conn:
            conn.sendall(status_request(scheduler.hostname, scheduler.port, conf["token"], absolute=True))
            return read_all(conn)

    found, problem = ask_status(send)
    if problem:
        print(f"the scheduler {conf['shown']} cannot be used ({problem}): every unit compiles here")
    else:
        print(f"scheduler {conf['shown']}, {found['servers']} build server(s), {found['cpus']} cpu(s)")
    return 0


def main(argv):
    if argv[1:2] == ["proxy"] and len(argv) == 6:
        return proxy(argv[2], int(argv[3]), argv[4], argv[5])
    if argv[1:2] == ["status"] and len(argv) == 4:
        return status(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
