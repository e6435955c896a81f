// A browser's membership of one room over a WebSocket (docs/protocol.md 8.5): each binary
// WebSocket message is one stream message, exactly as a native TCP frame's body. It joins,
// follows the room (RoomFollower), sends the page's batches, and when the socket drops (a
// classroom Wi-Fi) joins again with what it has and sends again every batch not yet
// acknowledged, with the same numbers, so the room gets each once.
//
// Sealing (protocol.md 4.6): with `sealed`, each socket is a sealed stream (`SealedStream`,
// pinning `serverKey`, or learning the key when it is null): the join rides in the handshake,
// every later session message is one AES-256-GCM transport message. A socket whose stream fails
// (a message that does not open) is closed and joined again; a daemon that cannot prove the
// pinned key ends the session, visibly. Without `sealed` the socket carries session messages as
// they are (a protocol 1 daemon). `sealing` says which, so the page can show it.
import { checkBlob } from './blobs.mjs';
import { RoomFollower } from './follower.mjs';
import { decodeServer, encodeClient } from './messages.mjs';
import { SealedStream, SealedStreamError } from './sealed.mjs';

export { sealingUnavailableReason } from './sealed.mjs';

/// The WebSocket subprotocol: one stream message per binary WebSocket message (the protocol's
/// version is in each message's first byte).
export const SUBPROTOCOL = 'inkwire.v1';
/// Reconnect delays (ms): doubled from the first to the last, with up to 25 % jitter.
export const RECONNECT_FIRST_MS = 250;
export const RECONNECT_MAX_MS = 4000;
/// Batches drawn while (re)joining, kept to send after the resend.
export const MAX_DEFERRED_BATCHES = 4096;
/// A joined page that sent nothing for this long sends a ping (protocol.md 5a), so the daemon
/// does not close a page that only watches (SessionKeepalive.interval).
export const KEEPALIVE_MS = 20000;

export class RoomSession {
  /// options: url (ws:// or wss://), room, user, role, token (string), origin (a random
  /// integer below 2^53 kept for the page's life), sealed (true: sealed streams), serverKey
  /// (32 bytes: the daemon's key to pin; null: learn it from the daemon), subtle (WebCrypto),
  /// start (false: never connect), WebSocket (the constructor; the browser's by default), onEvent(event),
  /// setTimeout/clearTimeout (injectable for tests).
  constructor(options) {
    this.options = options;
    this.follower = new RoomFollower(options.origin);
    this.WebSocket = options.WebSocket ?? globalThis.WebSocket;
    this.timers = { set: options.setTimeout ?? globalThis.setTimeout.bind(globalThis), clear: options.clearTimeout ?? globalThis.clearTimeout.bind(globalThis) };
    this.sealed = Boolean(options.sealed);
    this.serverKey = options.serverKey ?? null;
    /// The current socket's sealed stream (sealed sessions only).
    this.stream = null;
    this.socket = null;
    this.joined = false;
    this.ended = false;
    this.resendOnJoin = false;
    this.deferred = [];
    this.attempts = 0;
    this.reconnectTimer = null;
    this.keepaliveTimer = null;
    this.connects = 0;
    // start: false makes a session that never connects (a page that cannot seal says why).
    if (options.start === false) this.ended = true;
    else this.connect();
  }

  get board() { return this.follower.board; }
  get member() { return this.follower.member; }
  get role() { return this.follower.role; }
  get sealing() { return this.sealed ? 'sealed' : 'plain'; }
  get unacknowledgedCount() { return this.follower.pendingCount + this.deferred.length; }

  emit(event) { this.options.onEvent?.(event); }

  connect() {
    this.connects += 1;
    let socket;
    try {
      socket = new this.WebSocket(this.options.url, SUBPROTOCOL);
    } catch (e) {
      this.emit({ type: 'disconnected', reason: String(e) });
      this.scheduleReconnect();
      return;
    }
    socket.binaryType = 'arraybuffer';
    this.socket = socket;
    socket.onopen = () => {
      if (socket !== this.socket) return;
      this.emit({ type: 'connected', sealing: this.sealing });
      const token = this.options.token ? new TextEncoder().encode(this.options.token) : new Uint8Array(0);
      const join = this.follower.join({ room: this.options.room, user: this.options.user, role: this.options.role, token });
      if (!this.sealed) {
        this.transmit(join);
        return;
      }
      // The join is the handshake's payload: it reaches only the holder of the daemon's key.
      this.stream = new SealedStream({ serverKey: this.serverKey, join: encodeClient(join), subtle: this.options.subtle });
      this.sealedStep(socket, this.stream.start(), (first) => this.write(socket, first));
    };
    socket.onmessage = (e) => {
      if (socket !== this.socket) return;
      const bytes = new Uint8Array(e.data);
      if (!this.sealed) {
        this.received(bytes);
        return;
      }
      this.sealedStep(socket, this.stream.handle(bytes), (out) => {
        for (const ev of out.events) {
          if (ev.type === 'learnedKey') {
            this.serverKey = ev.key;
            this.emit(ev);
          }
        }
        this.write(socket, out.send);
        for (const m of out.delivered) this.received(m);
      });
    };
    socket.onclose = (e) => {
      if (socket !== this.socket) return;
      // What the socket delivered before it closed is opened first: a daemon's notice (a
      // rogue daemon, a busy one) says why it closed, and decides whether to come back.
      const settled = this.stream ? this.stream.settled() : Promise.resolve();
      settled.then(() => {
        if (socket !== this.socket) return;
        this.socket = null;
        this.stream = null;
        this.joined = false;
        this.stopKeepalive();
        this.resendOnJoin = true;
        this.emit({ type: 'disconnected', reason: e.reason || `closed (${e.code})`, code: e.code });
        if (!this.ended) this.scheduleReconnect();
      });
    };
    socket.onerror = () => {};
  }

  scheduleReconnect() {
    if (this.ended || this.reconnectTimer !== null) return;
    const base = Math.min(RECONNECT_MAX_MS, RECONNECT_FIRST_MS * 2 ** Math.min(this.attempts, 8));
    const delay = base * (1 + Math.random() / 4);
    this.attempts += 1;
    this.emit({ type: 'reconnecting', inMs: Math.round(delay) });
    this.reconnectTimer = this.timers.set(() => {
      this.reconnectTimer = null;
      this.connect();
    }, delay);
  }

  /// Drops the socket now (as a failing Wi-Fi would) and reconnects as after any drop.
  dropConnection() {
    if (this.socket) this.socket.close(4000, 'dropped by the page');
  }

  /// Runs `then` with what a sealed stream's operation gave, if its socket is still the current
  /// one; a failed stream closes its socket (a rogue daemon ends the session).
  sealedStep(socket, promise, then) {
    promise.then((value) => {
      if (socket === this.socket) then(value);
    }, (e) => {
      if (socket !== this.socket) return;
      const code = e instanceof SealedStreamError ? e.code : 'failed';
      // A daemon that cannot prove the pinned key is not this page's daemon: never retry it.
      const fatal = code === 'keyMismatch' || code === 'badKey' || code === 'noWebCrypto';
      if (fatal) this.end();
      this.emit({ type: 'sealError', code, text: e.message, presented: e.presented ?? null, fatal });
      socket.close(4001, 'sealed stream failed');
    });
  }

  write(socket, messages) {
    if (socket.readyState !== 1) return;
    for (const m of messages) socket.send(m);
  }

  transmit(message) {
    const socket = this.socket;
    if (!socket || socket.readyState !== 1) return false;
    if (this.sealed) {
      // Sealed in call order (the stream numbers its messages), so written in call order.
      this.sealedStep(socket, this.stream.seal(encodeClient(message)), (out) => this.write(socket, out));
    } else {
      socket.send(encodeClient(message));
    }
    if (this.joined) this.armKeepalive();
    return true;
  }

  /// (Re)starts the wait for the next ping: KEEPALIVE_MS after the last message sent.
  armKeepalive() {
    this.stopKeepalive();
    if (this.ended) return;
    this.keepaliveTimer = this.timers.set(() => {
      this.keepaliveTimer = null;
      if (this.joined) this.transmit({ type: 'ping' });
    }, KEEPALIVE_MS);
  }

  stopKeepalive() {
    if (this.keepaliveTimer !== null) this.timers.clear(this.keepaliveTimer);
    this.keepaliveTimer = null;
  }

  received(bytes) {
    let message;
    try {
      message = decodeServer(bytes);
    } catch (e) {
      this.emit({ type: 'protocolError', text: `undecodable message: ${e.message}` });
      return;
    }
    for (const event of this.follower.handle(message)) this.apply(event);
  }

  apply(event) {
    switch (event.type) {
      case 'joined':
        this.joined = true;
        this.attempts = 0;
        this.armKeepalive();
        this.emit(event);
        if (this.resendOnJoin) {
          this.resendOnJoin = false;
          for (const m of this.follower.resend()) this.transmit(m);
        }
        while (this.deferred.length > 0) this.transmit(this.follower.submit(this.deferred.shift()));
        return;
      case 'refused':
        this.end();
        this.emit(event);
        return;
      case 'goingAway':
        // replaced: this page joined again on a newer socket; shuttingDown: the daemon comes back.
        if (event.reason !== 'replaced' && event.reason !== 'shuttingDown') this.end();
        this.emit(event);
        return;
      case 'reply':
        this.transmit(event.message);
        return;
      case 'blobArrived': {
        // A whole background image: shown only if its SHA-256 is the name the board gave it.
        const subtle = this.options.subtle ?? globalThis.crypto?.subtle;
        checkBlob(subtle, event.hash, event.bytes).then((ok) => ok, () => false).then((ok) => {
          for (const e of this.follower.blobChecked(event, ok)) this.apply(e);
        });
        return;
      }
      default:
        this.emit(event);
    }
  }

  /// Sends a batch of the page's own commands (times in ms, non-decreasing). Returns false when
  /// too many are waiting. Drawn while the socket is down, it goes after the resend.
  send(commands) {
    if (this.ended) return false;
    if (!this.joined || this.resendOnJoin) {
      if (this.unacknowledgedCount >= MAX_DEFERRED_BATCHES) return false;
      this.deferred.push(commands);
      return true;
    }
    this.transmit(this.follower.submit(commands));
    return true;
  }

  grantDraw(user) { this.transmit({ type: 'grantDraw', user }); }
  revokeDraw(user) { this.transmit({ type: 'revokeDraw', user }); }

  end() {
    this.ended = true;
    if (this.reconnectTimer !== null) this.timers.clear(this.reconnectTimer);
    this.reconnectTimer = null;
    this.stopKeepalive();
  }

  leave() {
    this.transmit({ type: 'leave' });
    this.end();
  }
}
