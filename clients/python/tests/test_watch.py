"""watch: the events of GET /v1/events, through a dropped connection."""

from __future__ import annotations

import queue
import socket
import threading
from typing import Any, List, Tuple
from urllib.parse import urlsplit

import interlock
from support import URL, WAIT, APITest, http_call, unique


class Proxy:
    """A TCP relay in front of the API whose connections can be cut, and
    whose new connections can be held until it is let go again."""

    def __init__(self, upstream: Tuple[str, int]):
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.open = threading.Event()
        self.open.set()
        self.relayed = threading.Event()  # the API sent something back
        self.requests: List[bytes] = []  # the start of each request relayed
        self.lock = threading.Lock()
        self.socks: List[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            self.open.wait()
            if self.closed:
                down.close()
                return
            up = socket.create_connection(self.upstream)
            with self.lock:
                self.socks += [down, up]
            threading.Thread(target=self._pump, args=(down, up, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, request: bool) -> None:
        first = True
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if request and first:
                    with self.lock:
                        self.requests.append(b)
                elif not request:
                    self.relayed.set()
                first = False
                dst.sendall(b)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        """Drop every connection, and hold new ones until let_go."""
        self.open.clear()
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def let_go(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.cut()
        self.open.set()


class WatchTest(APITest):
    def test_watch_resumes_after_a_dropped_connection_without_missing_or_repeating(self) -> None:
        u = urlsplit(URL)
        proxy = Proxy((u.hostname or "127.0.0.1", u.port or 80))
        self.addCleanup(proxy.close)
        direct = interlock.Client()
        watched = interlock.Client(url=proxy.url)
        got: "queue.Queue[Any]" = queue.Queue()

        def consume() -> None:
            try:
                for ev in watched.watch(flow="ask", kinds=["interrupted"], reconnect_delay=0.05, give_up_after=1):
                    got.put(ev)
            except Exception as e:  # noqa: BLE001 - handed to the test
                got.put(e)

        threading.Thread(target=consume, daemon=True).start()
        self.assertTrue(proxy.relayed.wait(WAIT), "the event stream did not open")

        asks = [unique("ask") for _ in range(4)]
        ours: List[Any] = []

        def ask(ask_id: str) -> None:
            direct.send_ask({"kind": "question", "questions": [{"field": "n", "question": "N?"}]}, ask_id=ask_id)

        def next_ours() -> Any:
            while True:
                ev = got.get(timeout=WAIT)
                if isinstance(ev, Exception):
                    raise ev
                if ev["event"].get("subject") in asks:
                    ours.append(ev)
                    return ev

        ask(asks[0])
        first = next_ours()
        proxy.cut()
        # Announced while the watch is cut off.
        ask(asks[1])
        ask(asks[2])
        proxy.let_go()
        next_ours()
        next_ours()
        ask(asks[3])
        next_ours()

        self.assertEqual([ev["event"]["subject"] for ev in ours], asks)
        self.assertEqual([ev["kind"] for ev in ours], ["interrupted"] * 4)
        self.assertEqual([ev["event"]["data"]["run"] for ev in ours], asks)
        ids = [ev["id"] for ev in ours]
        self.assertEqual(ids, sorted(set(ids)), "the ids do not grow")
        self.assertGreaterEqual(len(proxy.requests), 2)
        self.assertIn(f"Last-Event-ID: {first['id']}\r\n".encode(), proxy.requests[1])

    def test_watch_from_an_event_id_replays_what_followed(self) -> None:
        client = interlock.Client()
        first, second = unique("ask"), unique("ask")
        question: Any = {"kind": "question", "questions": [{"field": "n", "question": "N?"}]}
        client.send_ask(question, ask_id=first)
        status, run = http_call("GET", f"/v1/runs/ask/{first}")
        self.assertEqual(status, 200, run)
        seq = next(ev["seq"] for ev in run["events"] if ev["kind"] == "interrupted")
        client.send_ask(question, ask_id=second)
        found: "queue.Queue[Any]" = queue.Queue()

        def consume() -> None:
            for ev in client.watch(flow="ask", kinds="interrupted", last_event_id=seq):
                if ev["event"]["subject"] in (first, second):
                    found.put(ev)
                    return

        threading.Thread(target=consume, daemon=True).start()
        try:
            ev = found.get(timeout=WAIT)
        except queue.Empty:
            self.fail(f"the watch from event {seq} on did not replay the interrupt of {second}")
        self.assertEqual((ev["kind"], ev["event"]["subject"]), ("interrupted", second))
        self.assertGreater(ev["id"], seq)
