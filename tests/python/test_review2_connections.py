"""Second adversarial review of issue 15 (items 1 and 2), against the real binary: failing tests
that demonstrate defects (tests only; expected to fail until fixed)."""

import socket
import threading
import time

from test_connections import binary_event, close_times, connect, sentinel_with

DECLARED = 4 * 1024 * 1024


def stalling_sender(port: int, sent: list):
    """Declares 4 MiB, sends all of it but the last byte at once, then stalls. The pace rule
    (bodyReadTimeout plus a second per bodyMinBytesPerSecond received) credits the 4 MiB - 1 with
    64 s, more than server.requestTimeout (30 s), so the stalled body keeps its 4 MiB of the
    in-flight budget until the request times out."""
    sock = connect(port)
    headers, _ = binary_event(f"stall-{threading.get_ident()}")
    head = "POST / HTTP/1.1\r\nHost: sentinel\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head += f"content-length: {DECLARED}\r\n\r\n"
    sock.sendall(head.encode() + b" " * (DECLARED - 1))
    sent.append(sock)


def test_bodies_that_stall_after_a_fast_start_do_not_lock_valid_senders_out(workdir):
    # Defaults: 4 MiB bodies, 64 MiB in flight (16 bodies), bodyReadTimeout 10 s at 64 KiB/s,
    # requestTimeout 30 s.
    sentinel = sentinel_with(workdir, "")
    try:
        sent = []
        threads = [threading.Thread(target=stalling_sender, args=(sentinel.port, sent)) for _ in range(17)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        time.sleep(1.0)
        # Well after bodyReadTimeout (10 s) without a byte, valid senders should be served.
        time.sleep(12.0)
        statuses = []
        for index in range(5):
            headers, body = binary_event(f"valid-stall-{index}")
            status, _, data = sentinel.post(headers, body)
            statuses.append((status, data[:80]))
        for sock in sent:
            sock.close()
        assert all(status == 202 for status, _ in statuses), statuses
    finally:
        sentinel.stop()


def test_a_partial_next_head_sent_with_a_request_gets_header_read_timeout_not_idle_timeout(workdir):
    # README: "on a kept-alive connection [the head must be complete] from its first byte" within
    # server.headerReadTimeout. When the first bytes of the next head arrive in the same read as
    # the previous request, HeadTimer never sees a new read and the partial head gets idleTimeout.
    sentinel = sentinel_with(workdir, "  headerReadTimeout: 2s\n  idleTimeout: 12s\n")
    try:
        sock = connect(sentinel.port)
        start = time.monotonic()
        sock.sendall(
            b"GET /healthz HTTP/1.1\r\nHost: sentinel\r\n\r\n"
            b"POST / HTTP/1.1\r\nHost: sentinel\r\nce-specversion: 1.0\r\nce-id: slow"
        )
        took = close_times({"pipelined": (sock, start)}, 20.0)["pipelined"]
        assert took is not None and took < 6.0, f"partial head held {took} s (headerReadTimeout 2 s)"
    finally:
        sentinel.stop()
