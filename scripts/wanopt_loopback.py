"""A core and an edge on loopback, for the scripts that time flows through them.

Used by `reduce-trickle` and `reduce-rpc`: keys made once per work
directory, fresh byte caches per start, one forward from the edge to a
local server, and the core's control port for `wanopt status`.
"""
import json, os, shutil, socket, subprocess, time


def listener():
    """A TCP listener on a free loopback port."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    return s


def free_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Nodes:
    """`with Nodes(binary, reduce, work, server_port) as nodes:` starts a core and
    an edge (`--no-reduce` unless `reduce`); `nodes.connect()` opens a client
    connection through the edge's forward, `nodes.status()` reads the core's."""

    def __init__(self, binary, reduce, work, server_port):
        self.binary, self.reduce = binary, reduce
        keys = {}
        for name in ("core", "edge"):
            path = os.path.join(work, name + ".key")
            if not os.path.exists(path):
                subprocess.run([binary, "keygen", "--out", path], check=True, capture_output=True)
            keys[name] = (path, subprocess.check_output([binary, "pubkey", path], text=True).strip())
        for d in ("core-cache", "edge-cache"):
            shutil.rmtree(os.path.join(work, d), ignore_errors=True)
        udp = free_port(socket.SOCK_DGRAM)
        self.forward, self.control = free_port(socket.SOCK_STREAM), free_port(socket.SOCK_STREAM)
        extra = [] if reduce else ["--no-reduce"]
        self.core = subprocess.Popen(
            [binary, "core", "--listen", f"127.0.0.1:{udp}", "--key", keys["core"][0],
             "--peer-key", keys["edge"][1], "--allow", "127.0.0.1/32",
             "--control", f"127.0.0.1:{self.control}",
             "--cache-dir", os.path.join(work, "core-cache")] + extra,
            stderr=subprocess.DEVNULL)
        self.edge = subprocess.Popen(
            [binary, "edge", "--core", f"127.0.0.1:{udp}", "--key", keys["edge"][0],
             "--peer-key", keys["core"][1],
             "--forward", f"127.0.0.1:{self.forward}=127.0.0.1:{server_port}",
             "--cache-dir", os.path.join(work, "edge-cache")] + extra,
            stderr=subprocess.DEVNULL)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        for node in (self.edge, self.core):
            node.terminate()
        for node in (self.edge, self.core):
            node.wait()

    def connect(self, wait=10.0):
        """A client connection through the edge (waiting up to `wait` s for it to listen)."""
        deadline = time.time() + wait
        while True:
            try:
                return socket.create_connection(("127.0.0.1", self.forward), timeout=1)
            except OSError:
                if time.time() > deadline:
                    raise SystemExit(f"the edge did not listen in {wait:.0f} s")
                time.sleep(0.2)

    def status(self, key):
        """A counter from the core's `wanopt status --json`, as text ("-" without reduce)."""
        if not self.reduce:
            return "-"
        status = subprocess.run([self.binary, "status", "--control", f"127.0.0.1:{self.control}",
                                 "--json"], capture_output=True, text=True)
        if status.returncode != 0:
            return "?"
        return str(json.loads(status.stdout).get(key, "?"))
