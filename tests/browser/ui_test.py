#!/usr/bin/env python3
"""The dashboard (GET /ui) in a real browser.

Starts a real core and edge on loopback with the release binary, the edge
configured (a config file of [[peer]] sections) with two peers: the core,
and a second one whose endpoint nobody listens on, so it stays down. Opens
the edge's http://127.0.0.1:CONTROL/ui in headless Chromium through
Selenium and checks that:

  1. the page logs no console error (browser log, level SEVERE), from its
     first load to the end of the test: no script or style refused by the
     Content-Security-Policy, no request refused by the control API's guard;
  2. every configured peer, the down one included, is shown (by name or
     key, or by its endpoint when the node does not list its configured
     peers) with its state: the core's `up`, the other's not;
  3. a transfer started during the test (a socket client pulling a stream
     through the edge's --forward from a local TCP server) is in the flow
     table within 2 s of its connection;
  4. the charts draw the tunnel's last hour (from GET /history);
  5. /ui is served with a Content-Security-Policy and X-Frame-Options DENY,
     and a read from a foreign Origin is still refused.

    tests/browser/ui_test.py --bin target/release/wanopt

Prints one line per check; exits 1 with the reason on failure.
"""

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

# How long the transfer lasts, and its rate (bytes per second).
TRANSFER_SECS = 8
TRANSFER_RATE = 4_000_000
# What the dashboard promises: a new flow shows within this.
FLOW_VISIBLE_WITHIN = 2.0


class Failure(Exception):
    """A check that did not hold: its message is the test's last line."""


def free_port():
    """A loopback port free for both TCP and UDP now, from below the
    kernel's ephemeral range (a port handed out for :0 and released can be
    taken by any outgoing connection before the node binds it)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    span = max(1000, min(10_000, low - 1024))
    start = max(1024, low - span)
    for _ in range(200):
        port = random.randrange(start, start + span)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                tcp.bind(("127.0.0.1", port))
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                udp.bind(("127.0.0.1", port))
        except OSError:
            continue
        if port not in _taken:
            _taken.add(port)
            return port
    raise Failure("no free loopback port")


_taken = set()


def keygen(binary, path):
    out = subprocess.run([binary, "keygen", "--out", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise Failure(f"wanopt keygen failed: {out.stderr.strip()}")
    return out.stdout.strip()


class Node:
    """A wanopt process, its stderr in a log file, killed on close."""

    def __init__(self, name, args, workdir):
        self.name = name
        self.log = os.path.join(workdir, f"{name}.log")
        env = dict(os.environ, WANOPT_LOG="info")
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, env=env)

    def log_tail(self, lines=15):
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def alive(self):
        return self.process.poll() is None

    def close(self):
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def http_get(port, path, headers=None):
    """(status, headers, body) of GET http://127.0.0.1:PORT/PATH."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def status_of(port):
    try:
        code, _, body = http_get(port, "/status")
    except OSError:
        return None
    return json.loads(body) if code == 200 else None


def wait_for(what, within, predicate, interval=0.1):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise Failure(f"{what} (waited {within:g} s)")


def stream_server():
    """A TCP server on loopback that streams TRANSFER_RATE bytes a second
    to each client for TRANSFER_SECS, then closes; returns its port."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve(conn):
        block = os.urandom(64 * 1024)
        start = time.monotonic()
        sent = 0
        try:
            while time.monotonic() - start < TRANSFER_SECS:
                due = (time.monotonic() - start) * TRANSFER_RATE
                if sent < due:
                    conn.sendall(block)
                    sent += len(block)
                else:
                    time.sleep(0.005)
        except OSError:
            pass
        finally:
            conn.close()

    def accept():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


class Transfer:
    """A client pulling the stream through the edge's forward."""

    def __init__(self, port):
        self.received = 0
        self.error = None
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.connected_at = time.monotonic()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            while True:
                data = self.socket.recv(256 * 1024)
                if not data:
                    return
                self.received += len(data)
        except OSError as e:
            self.error = e
        finally:
            self.socket.close()

    def finish(self, within):
        self.thread.join(within)
        return not self.thread.is_alive()


def edge_config(path, *, edge_key, control, token, forward, peers, names):
    lines = [
        f'key = "{edge_key}"',
        f'control = "{control}"',
        f'control-token = "{token}"',
        "no-reduce = true",
        'transport = "quic"',
        f'forward = ["{forward}"]',
    ]
    for peer in peers:
        lines += ["", "[[peer]]"]
        if names:
            lines.append(f'name = "{peer["name"]}"')
        lines += [
            f'public-key = "{peer["key"]}"',
            f'endpoint = "{peer["endpoint"]}"',
            f'routes = ["{peer["routes"]}"]',
        ]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def start_nodes(binary, workdir, server_port, nodes):
    """A core, and an edge with two peers (the core, and one down), each
    added to `nodes` as it starts; returns (edge control port, forward
    port, peers)."""
    keys = {name: keygen(binary, os.path.join(workdir, f"{name}.key")) for name in ("core", "edge", "ghost")}
    core_udp, core_control, edge_control, forward = (free_port() for _ in range(4))
    # Nobody listens here: the second peer never comes up.
    nowhere = free_port()
    core = Node("core", [
        binary, "core",
        "--listen", f"127.0.0.1:{core_udp}",
        "--key", os.path.join(workdir, "core.key"),
        "--peer-key", keys["edge"],
        "--allow", "127.0.0.1/32",
        "--listen-tcp", "off",
        "--no-reduce",
        "--control", f"127.0.0.1:{core_control}",
        "--control-token", os.path.join(workdir, "core.token"),
    ], workdir)
    nodes.append(core)
    peers = [
        {"name": "hq", "key": keys["core"], "endpoint": f"127.0.0.1:{core_udp}", "routes": "127.0.0.1/32"},
        {"name": "branch-gone", "key": keys["ghost"], "endpoint": f"127.0.0.1:{nowhere}", "routes": "10.99.0.0/16"},
    ]
    config = os.path.join(workdir, "edge.toml")
    edge = None
    # Peer names (`name = ...`) are newer than [[peer]]: a binary that
    # refuses them gets its peers unnamed.
    for names in (True, False):
        edge_config(
            config,
            edge_key=os.path.join(workdir, "edge.key"),
            control=f"127.0.0.1:{edge_control}",
            token=os.path.join(workdir, "edge.token"),
            forward=f"127.0.0.1:{forward}=127.0.0.1:{server_port}",
            peers=peers,
            names=names,
        )
        edge = Node("edge", [binary, "edge", "--config", config], workdir)
        nodes.append(edge)
        time.sleep(0.5)
        if edge.alive() or "name" not in edge.log_tail():
            break
    if not names:
        for peer in peers:
            peer["name"] = None
    for node in (core, edge):
        if not node.alive():
            raise Failure(f"the {node.name} exited at start: {node.log_tail(3).strip()}")
    wait_for(
        f"the edge's tunnel to the core did not come up; edge log:\n{edge.log_tail()}",
        20,
        lambda: (status_of(edge_control) or {}).get("tunnel") == "up",
    )
    return edge_control, forward, peers


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    try:
        return webdriver.Chrome(service=service, options=options)
    except WebDriverException as e:
        raise Failure(f"headless chromium did not start: {e.msg or e}".splitlines()[0])


class Console:
    """The page's console, read as it goes (the driver hands each entry
    once)."""

    def __init__(self, driver):
        self.driver = driver
        self.entries = []

    def read(self):
        self.entries += self.driver.get_log("browser")
        return self.entries

    def errors(self):
        return [e for e in self.read() if e.get("level") == "SEVERE"]


# The rows of a table, read in one go (the page redraws its tables every
# second, so elements found earlier may be gone).
ROWS = """
return Array.from(document.querySelectorAll(arguments[0])).map((row) => ({
  text: row.innerText,
  state: (row.querySelector(".badge") || {}).textContent || "",
  shown: row.getClientRects().length > 0 && getComputedStyle(row).visibility !== "hidden",
}));
"""


def rows(driver, selector):
    return driver.execute_script(ROWS, selector)


def find_peer(table, peer):
    """The row of `peer` in the peers table (by name or key, or its
    endpoint when the node does not know the key yet), or None."""
    for row in table:
        text = row["text"]
        if (peer["name"] and peer["name"] in text) or peer["key"] in text or peer["endpoint"] in text:
            return row
    return None


PASSED = []


def check(label, detail=""):
    PASSED.append(label)
    print(f"ok: {label}" + (f" ({detail})" if detail else ""), flush=True)


def run(binary):
    workdir = tempfile.mkdtemp(prefix="wanopt-browser-")
    nodes = []
    driver = None
    try:
        server_port = stream_server()
        control, forward, peers = start_nodes(binary, workdir, server_port, nodes)
        url = f"http://127.0.0.1:{control}/ui"

        code, headers, _ = http_get(control, "/ui")
        if code != 200:
            raise Failure(f"GET /ui answered {code}")
        policy = headers.get("Content-Security-Policy", "")
        if "default-src" not in policy or headers.get("X-Frame-Options") != "DENY":
            raise Failure(f"GET /ui lacks its policy or X-Frame-Options: {dict(headers)}")
        code, _, _ = http_get(control, "/status", {"Origin": "http://evil.example"})
        if code != 403:
            raise Failure(f"a read from a foreign Origin answered {code}, not 403")
        check("/ui has a Content-Security-Policy and X-Frame-Options DENY; foreign Origins are refused")

        driver = browser()
        console = Console(driver)
        driver.get(url)
        wait_for(
            "the page never showed the node's role (its script did not run?); console: "
            + repr(console.read()[:3]),
            10,
            lambda: driver.find_element(By.ID, "role").text.strip() != "",
        )

        # 2. Every configured peer, with its state.
        def all_shown():
            found = [find_peer(rows(driver, "#peers tbody tr"), p) for p in peers]
            if any(f is None or not f["shown"] for f in found):
                return None
            states = [f["state"] for f in found]
            if states[0] != "up" or states[1] in ("", "up"):
                return None
            return states

        try:
            states = wait_for("peers", 20, all_shown, interval=0.25)
        except Failure:
            shown = [r["text"].replace("\n", " | ") for r in rows(driver, "#peers tbody tr")]
            raise Failure(
                f"the peers table does not show every configured peer with its state "
                f"(want {[p['name'] or p['key'] for p in peers]}: up, not up; it shows {shown})"
            ) from None
        check(
            "every configured peer is shown with its state",
            ", ".join(f"{p['name'] or p['key'][:8]}: {s}" for p, s in zip(peers, states)),
        )

        # 3. A transfer started now shows in the flow table within 2 s.
        transfer = Transfer(forward)
        target = f"127.0.0.1:{server_port}"

        def flow_row():
            for row in rows(driver, "#flows tbody tr"):
                if target in row["text"] and row["shown"]:
                    return row
            return None

        try:
            row = wait_for("flow", FLOW_VISIBLE_WITHIN, flow_row, interval=0.05)
        except Failure:
            shown = [r["text"].replace("\n", " | ") for r in rows(driver, "#flows tbody tr")]
            raise Failure(
                f"the transfer to {target} was not in the flow table {FLOW_VISIBLE_WITHIN:g} s after it "
                f"connected (the table shows {shown})"
            ) from None
        shown_after = time.monotonic() - transfer.connected_at
        check("the transfer shows in the flow table", f"after {shown_after:.2f} s: {row['text'].splitlines()[0]}")

        # Its rate shows while it runs, and it ends with every byte.
        wait_for(
            "the transfer's row never showed a rate",
            TRANSFER_SECS,
            lambda: "bit/s" in ((flow_row() or {}).get("text") or ""),
            interval=0.25,
        )
        if not transfer.finish(TRANSFER_SECS + 20):
            raise Failure("the transfer did not finish")
        if transfer.error or transfer.received < TRANSFER_RATE:
            raise Failure(f"the transfer through the edge failed: {transfer.received} bytes, {transfer.error}")
        check("the transfer went through", f"{transfer.received} bytes")

        # 4. The charts (a sample every 10 s, fetched every 10 s).
        def charted():
            cards = driver.find_elements(By.CSS_SELECTOR, "#charts .card")
            drawn = driver.find_elements(By.CSS_SELECTOR, "#charts svg.chart polyline, #charts svg.chart circle")
            return cards and drawn
        wait_for("the charts never drew the tunnel (GET /history)", 25, charted, interval=0.5)
        check("the charts draw the tunnel's history")

        # 1. No console error, from the first load to now.
        errors = console.errors()
        if errors:
            raise Failure(f"the page logged {len(errors)} console error(s), the first: {errors[0].get('message')}")
        check("no console error", f"{len(console.entries)} console entries, none SEVERE")
        return 0
    finally:
        if driver is not None:
            try:
                driver.quit()
            except WebDriverException:
                pass
        for node in nodes:
            node.close()
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="target/release/wanopt", help="the wanopt binary")
    args = parser.parse_args()
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        print(f"browser-test: no wanopt binary at {binary}", file=sys.stderr)
        return 1
    try:
        run(binary)
    except Failure as e:
        print(f"browser-test: FAILED: {e}", file=sys.stderr)
        return 1
    print(f"browser-test: {len(PASSED)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
