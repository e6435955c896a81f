#!/usr/bin/env python3
"""KCP's latency experiment (KCP's test.cpp), run with the real C KCP.

KCP itself comes from PyPI's `siokcp` (a sans-IO binding of skywind3000's ikcp.c, pinned in
.ci/pip-test-packages.txt); nothing of KCP is in this repository. The link and the workload
are written here from the experiment's specification (docs/notes/kcp-experiment.md,
and Sources/InkSim/KCPLatencySimulator.swift and KCPExperiment.swift, which
run the same experiment with Inkwire's ARQ):

- link: two FIFO directions, a loss "bag" per direction (the values 0..99 drawn without
  replacement, a datagram lost when its value is below the loss percent), one-way delay
  30 + rand() % 32 ms, at most 1000 datagrams queued per direction, and one glibc rand()
  stream seeded with srand(seed) shared by both directions, loss and delay. rand() is the C
  library's own (ctypes), the generator test.cpp uses; `--link-trace` prints every decision so
  a test can hold it against the Swift link.
- workload: a virtual clock in 1 ms steps from 1000 ms; each step both peers get the time
  (ikcp_update), A queues its due 8-byte messages [u32 index][u32 time] (every 20 ms, the first
  at t0 + 20), the due datagrams A->B go into B and B->A into A (ikcp_input), B echoes what it
  received, A measures rtt = now - time; it stops after 1001 echoes (or 120 s of grace after
  the last message was due), and an echo out of order ends the run.
- modes, as test.cpp sets them on both peers (window 128/128): default nodelay(0,10,0,0),
  normal nodelay(0,10,0,1), fast nodelay(2,10,2,1) with rx_minrto 10 and fastresend 1.

Output: one JSON object per seed on stdout (rtts in arrival order, counters per direction).
"""

import argparse
import collections
import ctypes
import ctypes.util
import json
import struct
import sys

CONV = 0x11223344
START_MS = 1000
INTERVAL_MS = 20
ECHOES_WANTED = 1001
GRACE_MS = 120_000
MIN_DELAY_MS = 30
DELAY_SPREAD_MS = 32
QUEUE_CAPACITY = 1000
BAG_SIZE = 100

MODES = {
    "default": dict(nodelay=(0, 10, 0, 0)),
    "normal": dict(nodelay=(0, 10, 0, 1)),
    "fast": dict(nodelay=(2, 10, 2, 1), rx_minrto=10, fastresend=1),
}


class LossBag:
    """test.h's Random(100): exactly loss_percent of every aligned 100 sends are lost."""

    def __init__(self):
        self.slots = list(range(BAG_SIZE))
        self.live = 0

    def draw(self, rand):
        if self.live == 0:
            self.slots = list(range(BAG_SIZE))
            self.live = BAG_SIZE
        i = rand() % self.live
        value = self.slots[i]
        self.live -= 1
        self.slots[i] = self.slots[self.live]
        return value


class Link:
    """test.h's LatencySimulator: peer 0 is A, peer 1 is B."""

    def __init__(self, libc, seed, loss_percent, trace=None):
        libc.srand(ctypes.c_uint(seed))
        self.rand = libc.rand
        self.loss_percent = loss_percent
        self.bags = [LossBag(), LossBag()]
        self.queues = [collections.deque(), collections.deque()]
        self.stats = [dict(datagrams=0, bytes=0, lost=0, queue_dropped=0) for _ in range(2)]
        self.trace = trace

    def send(self, peer, datagram, now):
        stats = self.stats[peer]
        stats["datagrams"] += 1
        stats["bytes"] += len(datagram)
        if self.bags[peer].draw(self.rand) < self.loss_percent:
            stats["lost"] += 1
            outcome = "D"
        elif len(self.queues[peer]) >= QUEUE_CAPACITY:
            stats["queue_dropped"] += 1
            outcome = "F"
        else:
            delay = MIN_DELAY_MS + self.rand() % DELAY_SPREAD_MS
            self.queues[peer].append((now + delay, datagram))
            outcome = str(delay)
        if self.trace is not None:
            self.trace.append("%d,%d,%d,%s" % (now, peer, len(datagram), outcome))

    def receive(self, peer, now):
        """The head of the queue towards `peer` when it is due (never a later datagram)."""
        queue = self.queues[1 - peer]
        if queue and queue[0][0] <= now:
            return queue.popleft()[1]
        return None


def make_peer(siokcp, mode, outbox):
    def output(data):
        outbox.append(bytes(data))
        return 0

    peer = siokcp.KCPConnection(CONV, output, lambda text: None)
    peer.wndsize(128, 128)
    settings = MODES[mode]
    peer.nodelay(*settings["nodelay"])
    if "rx_minrto" in settings:
        peer.rx_minrto = settings["rx_minrto"]
    if "fastresend" in settings:
        peer.fastresend = settings["fastresend"]
    return peer


def run(siokcp, libc, seed, mode, loss_percent, trace=None):
    link = Link(libc, seed, loss_percent, trace)
    outboxes = ([], [])
    peers = (make_peer(siokcp, mode, outboxes[0]), make_peer(siokcp, mode, outboxes[1]))
    a, b = peers
    now = START_MS
    next_send = START_MS + INTERVAL_MS
    index = 0
    expected = 0
    rtts = []
    in_order = True
    last_ms = START_MS + ECHOES_WANTED * INTERVAL_MS + GRACE_MS

    def hand_over(side):
        # ikcp_update calls the output callback at once; the datagrams go to the link in order.
        for datagram in outboxes[side]:
            link.send(side, datagram, now)
        outboxes[side].clear()

    while now < last_ms:
        now += 1
        a.update(now)
        hand_over(0)
        b.update(now)
        hand_over(1)
        while now >= next_send:
            a.send(struct.pack("<II", index & 0xFFFFFFFF, now & 0xFFFFFFFF))
            index += 1
            next_send += INTERVAL_MS
        hand_over(0)  # ikcp_send sends nothing itself; kept for symmetry with a flushing peer
        while (datagram := link.receive(1, now)) is not None:
            b.receive_data(datagram)
        while (datagram := link.receive(0, now)) is not None:
            a.receive_data(datagram)
        while (message := b.next_event()) is not None:
            b.send(message)
        hand_over(1)
        while (message := a.next_event()) is not None:
            sn, sent = struct.unpack("<II", message[:8])
            if len(message) != 8 or sn != expected:
                in_order = False
                break
            expected += 1
            rtts.append((now - sent) & 0xFFFFFFFF)
        hand_over(0)
        if not in_order or len(rtts) >= ECHOES_WANTED:
            break
    return dict(seed=seed, mode=mode, loss_percent=loss_percent, rtts=rtts, in_order=in_order,
                complete=in_order and len(rtts) >= ECHOES_WANTED, a=link.stats[0], b=link.stats[1],
                duration_ms=now - START_MS)


def seed_list(text):
    seeds = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds.extend(range(int(low), int(high or low) + 1))
    return seeds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seed_list, default=seed_list("1-50"))
    parser.add_argument("--mode", choices=sorted(MODES), default="fast")
    parser.add_argument("--loss-percent", type=int, default=5, help="loss per direction (KCP's lostrate / 2)")
    parser.add_argument("--link-trace", action="store_true",
                        help="add every link decision (time,peer,size,delay or D/F) to each seed's line")
    args = parser.parse_args()
    if not 0 <= args.loss_percent <= 100:
        parser.error("--loss-percent must be from 0 to 100")
    try:
        import siokcp
    except ImportError:
        print("kcp_experiment.py: the KCP binding is missing: python3 -m pip install siokcp==0.0.5", file=sys.stderr)
        return 3
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.rand.restype = ctypes.c_int
    for seed in args.seeds:
        trace = [] if args.link_trace else None
        result = run(siokcp, libc, seed, args.mode, args.loss_percent, trace)
        if trace is not None:
            result["link_trace"] = trace
        result["kcp"] = "siokcp %s" % getattr(siokcp, "__version__", "?")
        print(json.dumps(result, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
