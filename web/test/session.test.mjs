import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeClient, encodeServer } from '../lib/messages.mjs';
import { KEEPALIVE_MS, RoomSession } from '../lib/session.mjs';

/// A WebSocket stand-in: records what the page sends; the test opens it and delivers messages.
class FakeSocket {
  static last = null;
  constructor() {
    this.readyState = 0;
    this.sent = [];
    FakeSocket.last = this;
  }
  send(bytes) { this.sent.push(decodeClient(new Uint8Array(bytes))); }
  close() {}
  open() {
    this.readyState = 1;
    this.onopen();
  }
  deliver(message) { this.onmessage({ data: encodeServer(message).buffer }); }
}

/// Timers the test fires by hand.
function manualTimers() {
  const pending = new Map();
  let next = 1;
  return {
    pending,
    setTimeout: (f, ms) => { pending.set(next, { f, ms }); return next++; },
    clearTimeout: (id) => pending.delete(id),
  };
}

test('a page that only watches sends a ping after KEEPALIVE_MS of silence, and only then', () => {
  const timers = manualTimers();
  const session = new RoomSession({ url: 'ws://x', room: 'r', user: 'pupil', role: 'viewer', origin: 5, sealed: false,
                                    WebSocket: FakeSocket, setTimeout: timers.setTimeout, clearTimeout: timers.clearTimeout });
  const socket = FakeSocket.last;
  socket.open();
  assert.deepEqual(socket.sent.map((m) => m.type), ['join']);
  // Not joined yet: no keepalive is waiting.
  assert.equal([...timers.pending.values()].filter((t) => t.ms === KEEPALIVE_MS).length, 0);
  socket.deliver({ type: 'joinAccepted', member: 2, role: 'viewer', roomHead: 0, syncFollows: false });
  assert.ok(session.joined);
  const waiting = [...timers.pending.entries()].filter(([, t]) => t.ms === KEEPALIVE_MS);
  assert.equal(waiting.length, 1);
  // Sending something else puts the ping off (one timer, restarted).
  session.grantDraw('bo');
  const after = [...timers.pending.entries()].filter(([, t]) => t.ms === KEEPALIVE_MS);
  assert.equal(after.length, 1);
  assert.notEqual(after[0][0], waiting[0][0]);
  timers.pending.delete(after[0][0]);
  after[0][1].f();
  assert.deepEqual(socket.sent.map((m) => m.type), ['join', 'grantDraw', 'ping']);
  // And again 20 s after the ping; a session that ended stops.
  assert.equal([...timers.pending.values()].filter((t) => t.ms === KEEPALIVE_MS).length, 1);
  session.end();
  assert.equal([...timers.pending.values()].filter((t) => t.ms === KEEPALIVE_MS).length, 0);
});
