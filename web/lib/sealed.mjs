// The device side of a sealed session in the stream form (docs/protocol.md 4.2, 4.4, 4.6), over
// WebCrypto: the Noise NK handshake (X25519, AES-256-GCM, SHA-256 and HKDF) that carries the
// join, then one AES-256-GCM transport message per session message, with key updates. The
// caller frames messages (a WebSocket: one binary message each) and keeps them in order.
//
// Every WebCrypto call is asynchronous, and nonces count messages, so a `SealedStream` runs its
// operations one at a time in call order: the promises of `start`, `handle` and `seal` resolve
// in the order they were called, and what they return must be sent in that order.
//
// WebCrypto exists only in a secure context (https, or localhost): `sealingUnavailableReason`
// says why a page cannot seal.

export const PROTOCOL_VERSION = 2;
export const KEY_BYTES = 32;
export const TAG_BYTES = 16;
/// Message types (byte 0 = version << 4 | type, protocol.md 4.1).
export const TYPE = { transport0: 0x20, transport1: 0x21, initiation: 0x22, response: 0x23, keyRequest: 0x25, keyReply: 0x26, notice: 0x27 };
export const NOTICE = { 1: 'keyMismatch', 2: 'busy' };
/// A key phase is updated after this many messages sent in it, or this age (protocol.md 4.4).
export const REKEY_AFTER_MESSAGES = 2 ** 20;
export const REKEY_AFTER_MS = 120_000;

const PROTOCOL_NAME = 'Noise_NK_25519_AESGCM_SHA256';
const TRANSPORT_STREAM = 1;
const EMPTY = new Uint8Array(0);

export class SealedStreamError extends Error {
  /// code: unauthenticated | unexpected | keyMismatch | busy | badKey; presented: the key a
  /// notice named (keyMismatch), if any.
  constructor(code, text, presented = null) {
    super(text);
    this.code = code;
    this.presented = presented;
  }
}

/// Why this scope cannot seal, or null when it can (a secure context with WebCrypto).
export function sealingUnavailableReason(scope = globalThis) {
  if (scope.isSecureContext === false) return 'this page is not a secure context (open it over https, or on localhost)';
  if (!scope.crypto || !scope.crypto.subtle) return 'this browser has no WebCrypto (crypto.subtle)';
  return null;
}

// ---- public keys as text (protocol.md 8.4): 43 characters of base64url, or 64 hex digits ----

export function encodePublicKey(key) {
  let binary = '';
  for (const b of key) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/// The 32 bytes of a public key written either way, or null when the text is neither.
export function decodePublicKey(text) {
  const t = String(text).trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return Uint8Array.from(t.match(/../g), (h) => parseInt(h, 16));
  if (!/^[A-Za-z0-9_-]{43}$/.test(t)) return null;
  const binary = atob(t.replace(/-/g, '+').replace(/_/g, '/') + '=');
  const key = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  // The 43rd character holds 2 bits of padding, which must be zero (one text per key).
  return encodePublicKey(key) === t ? key : null;
}

// ---- primitives (Noise section 12 with 25519, AESGCM and SHA256) ----

const concat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};

/// The 96-bit nonce: 4 zero bytes || n as u64 big-endian (n a Number or a BigInt).
function nonce(n) {
  const iv = new Uint8Array(12);
  new DataView(iv.buffer).setBigUint64(4, BigInt(n));
  return iv;
}

const MAX_NONCE = 2n ** 64n - 1n;

class Primitives {
  constructor(subtle) { this.subtle = subtle; }

  async hash(bytes) { return new Uint8Array(await this.subtle.digest('SHA-256', bytes)); }

  /// Noise's HKDF(ck, ikm, 2): HKDF-SHA256 with salt ck, empty info, two 32-byte halves.
  async hkdf2(ck, ikm) {
    const key = await this.subtle.importKey('raw', ikm, 'HKDF', false, ['deriveBits']);
    const out = new Uint8Array(await this.subtle.deriveBits({ name: 'HKDF', hash: 'SHA-256', salt: ck, info: EMPTY }, key, 512));
    return [out.slice(0, 32), out.slice(32)];
  }

  aeadKey(raw) { return this.subtle.importKey('raw', raw, 'AES-GCM', false, ['encrypt', 'decrypt']); }

  async seal(key, n, ad, plaintext) {
    return new Uint8Array(await this.subtle.encrypt({ name: 'AES-GCM', iv: nonce(n), additionalData: ad, tagLength: 128 }, key, plaintext));
  }

  /// The plaintext, or null when the tag does not match.
  async open(key, n, ad, sealed) {
    if (sealed.length < TAG_BYTES) return null;
    try {
      return new Uint8Array(await this.subtle.decrypt({ name: 'AES-GCM', iv: nonce(n), additionalData: ad, tagLength: 128 }, key, sealed));
    } catch {
      return null;
    }
  }

  /// Noise's default REKEY: the first 32 bytes of ENCRYPT(k, 2^64 - 1, empty, 32 zeros).
  async rekey(key) { return (await this.seal(key, MAX_NONCE, EMPTY, new Uint8Array(32))).slice(0, 32); }

  async generateEphemeral() {
    const pair = await this.subtle.generateKey({ name: 'X25519' }, true, ['deriveBits']);
    return { privateKey: pair.privateKey, publicKey: new Uint8Array(await this.subtle.exportKey('raw', pair.publicKey)) };
  }

  /// DH(priv, pub), or null for an all-zero result (a low-order public key) or a key WebCrypto refuses.
  async dh(privateKey, publicKey) {
    try {
      const pub = await this.subtle.importKey('raw', publicKey, { name: 'X25519' }, false, []);
      const out = new Uint8Array(await this.subtle.deriveBits({ name: 'X25519', public: pub }, privateKey, 256));
      return out.some((b) => b !== 0) ? out : null;
    } catch {
      return null;
    }
  }
}

/// An X25519 key pair from its raw private key and public key (fixed keys for tests and vectors).
export async function importEphemeral(privateKey, publicKey, subtle = globalThis.crypto.subtle) {
  const jwk = { kty: 'OKP', crv: 'X25519', d: encodePublicKey(privateKey), x: encodePublicKey(publicKey), ext: true };
  return { privateKey: await subtle.importKey('jwk', jwk, { name: 'X25519' }, false, ['deriveBits']), publicKey: Uint8Array.from(publicKey) };
}

// ---- the handshake (protocol.md 4.2): Noise NK, the device as initiator ----

class SymmetricState {
  constructor(primitives, h) {
    this.p = primitives;
    this.h = h;
    this.ck = h;
    this.k = null;
    this.n = 0;
  }

  static async start(primitives) {
    const h = new Uint8Array(32);
    h.set(new TextEncoder().encode(PROTOCOL_NAME));
    return new SymmetricState(primitives, h);
  }

  async mixHash(data) { this.h = await this.p.hash(concat(this.h, data)); }

  async mixKey(ikm) {
    const [ck, k] = await this.p.hkdf2(this.ck, ikm);
    this.ck = ck;
    this.k = await this.p.aeadKey(k);
    this.n = 0;
  }

  async encryptAndHash(plaintext) {
    const c = await this.p.seal(this.k, this.n, this.h, plaintext);
    this.n += 1;
    await this.mixHash(c);
    return c;
  }

  async decryptAndHash(c) {
    const p = await this.p.open(this.k, this.n, this.h, c);
    if (p === null) return null;
    this.n += 1;
    await this.mixHash(c);
    return p;
  }

  /// k1 seals device -> daemon, k2 daemon -> device.
  split() { return this.p.hkdf2(this.ck, EMPTY); }
}

/// "inkwire" || 02 || transport || cid:u64 (streams: transport 01, cid 0).
function prologue() {
  return concat(new TextEncoder().encode('inkwire'), Uint8Array.of(PROTOCOL_VERSION, TRANSPORT_STREAM), new Uint8Array(8));
}

// ---- one direction's keys across key phases (protocol.md 4.4) ----

class DirectionKeys {
  constructor(primitives, raw, key) {
    this.p = primitives;
    this.raw = raw;
    this.key = key;
    this.phase = 0;
  }

  static async make(primitives, raw) { return new DirectionKeys(primitives, raw, await primitives.aeadKey(raw)); }

  /// The keys of the next phase: REKEY of this phase's key.
  async next() {
    const raw = await this.p.rekey(this.key);
    const d = await DirectionKeys.make(this.p, raw);
    d.phase = this.phase + 1;
    return d;
  }
}

// ---- the stream ----

/// A device's sealed stream. `start()` gives the first message (the initiation carrying `join`,
/// or a key request when no daemon key is pinned); every received stream message goes to
/// `handle`, every session message to `seal`. A thrown `SealedStreamError` ends the stream.
///
/// options: serverKey (32 bytes, the pinned daemon key, or null to learn it), join (the encoded
/// join session message), subtle (WebCrypto; the global one by default), now() in ms,
/// rekeyAfterMessages / rekeyAfterMs (tests shorten them), ephemeral (a fixed key pair from
/// `importEphemeral`, tests only).
export class SealedStream {
  constructor(options) {
    const subtle = options.subtle ?? globalThis.crypto?.subtle;
    if (!subtle) throw new SealedStreamError('noWebCrypto', sealingUnavailableReason() ?? 'no WebCrypto');
    this.p = new Primitives(subtle);
    this.options = options;
    this.now = options.now ?? (() => Date.now());
    this.rekeyAfterMessages = options.rekeyAfterMessages ?? REKEY_AFTER_MESSAGES;
    this.rekeyAfterMs = options.rekeyAfterMs ?? REKEY_AFTER_MS;
    this.serverKey = options.serverKey ? Uint8Array.from(options.serverKey) : null;
    this.state = 'new'; // new -> awaitingKey -> handshaking -> established
    this.handshake = null;
    this.pending = [];
    this.queue = Promise.resolve();
    this.handshakeHash = null;
    this.keyUpdates = 0;
  }

  get established() { return this.state === 'established'; }

  /// Runs `op` after every operation called before it (nonces and phases follow call order).
  serially(op) {
    const result = this.queue.then(op);
    this.queue = result.catch(() => {});
    return result;
  }

  /// Resolves once every operation called so far has finished (whatever its outcome).
  settled() { return this.queue; }

  /// The stream's first message: [initiation] with a pinned key, else [key request].
  start() {
    return this.serially(async () => {
      if (this.state !== 'new') throw new SealedStreamError('unexpected', 'the stream has started');
      if (this.serverKey) return [await this.initiation()];
      this.state = 'awaitingKey';
      return [Uint8Array.of(TYPE.keyRequest)];
    });
  }

  async initiation() {
    const e = this.options.ephemeral ?? (await this.p.generateEphemeral());
    const s = await SymmetricState.start(this.p);
    await s.mixHash(prologue());
    await s.mixHash(this.serverKey);
    await s.mixHash(e.publicKey);
    const es = await this.p.dh(e.privateKey, this.serverKey);
    if (es === null) throw new SealedStreamError('badKey', 'the daemon key is not a usable X25519 key');
    await s.mixKey(es);
    const payload = await s.encryptAndHash(this.options.join);
    this.handshake = { s, e };
    this.state = 'handshaking';
    return concat(Uint8Array.of(TYPE.initiation), e.publicKey, payload);
  }

  /// One received stream message: { send: messages to write now, delivered: session messages,
  /// events: [{type: 'established'} | {type: 'learnedKey', key}] }.
  handle(message) {
    return this.serially(() => this.handleNow(Uint8Array.from(message)));
  }

  async handleNow(m) {
    const out = { send: [], delivered: [], events: [] };
    const type = m[0];
    if (this.state === 'established' && (type === TYPE.transport0 || type === TYPE.transport1)) {
      const plain = await this.openTransport(m);
      if (plain === null) throw new SealedStreamError('unauthenticated', 'a sealed message did not open');
      if (plain.length > 0) out.delivered.push(plain);
      return out;
    }
    if (this.state === 'handshaking' && type === TYPE.response && m.length === 1 + KEY_BYTES + TAG_BYTES) {
      await this.readResponse(m);
      out.events.push({ type: 'established' });
      // Confirm at once (protocol.md 4.2): an empty keepalive when nothing else waits.
      const waiting = this.pending;
      this.pending = [];
      if (waiting.length === 0) out.send.push(await this.sealTransport(EMPTY));
      for (const p of waiting) out.send.push(await this.sealTransport(p));
      return out;
    }
    if (this.state === 'awaitingKey' && type === TYPE.keyReply && m.length === 1 + KEY_BYTES) {
      this.serverKey = m.slice(1);
      out.events.push({ type: 'learnedKey', key: this.serverKey });
      out.send.push(await this.initiation());
      return out;
    }
    if ((this.state === 'handshaking' || this.state === 'awaitingKey') && type === TYPE.notice && m.length === 2 + KEY_BYTES) {
      const code = NOTICE[m[1]] ?? 'other';
      const presented = m.slice(2);
      // On a stream the daemon closes after a notice: it ends this attempt.
      if (code === 'busy') throw new SealedStreamError('busy', 'the daemon is busy', presented);
      throw new SealedStreamError('keyMismatch', this.mismatchText(presented), presented);
    }
    throw new SealedStreamError('unexpected', `unexpected message type 0x${(type ?? 0).toString(16)} (${m.length} bytes)`);
  }

  mismatchText(presented) {
    const pinned = this.serverKey ? encodePublicKey(this.serverKey) : '?';
    return presented ? `the daemon did not prove key ${pinned} (it presents ${encodePublicKey(presented)})` : `the daemon did not prove key ${pinned}`;
  }

  async readResponse(m) {
    const { s, e } = this.handshake;
    const re = m.slice(1, 1 + KEY_BYTES);
    await s.mixHash(re);
    const ee = await this.p.dh(e.privateKey, re);
    if (ee === null) throw new SealedStreamError('keyMismatch', this.mismatchText(null));
    await s.mixKey(ee);
    if ((await s.decryptAndHash(m.slice(1 + KEY_BYTES))) === null) throw new SealedStreamError('keyMismatch', this.mismatchText(null));
    const [k1, k2] = await s.split();
    this.handshakeHash = s.h;
    this.handshake = null; // the handshake state is erased
    this.send = { keys: await DirectionKeys.make(this.p, k1), n: 0, inPhase: 0, phaseStartedMs: this.now() };
    this.receive = { keys: await DirectionKeys.make(this.p, k2), next: null, n: 0, openedInPhase: false };
    this.state = 'established';
  }

  /// Seals one session message: [] while the handshake is under way (it goes once the
  /// response has opened), else [the transport message].
  seal(sessionMessage) {
    return this.serially(async () => {
      if (this.state !== 'established') {
        this.pending.push(Uint8Array.from(sessionMessage));
        return [];
      }
      return [await this.sealTransport(sessionMessage)];
    });
  }

  /// 20|phase || ENCRYPT(key, n, type byte, message); n counts this direction's messages.
  async sealTransport(plaintext) {
    await this.updateSendPhaseIfDue();
    const s = this.send;
    const typeByte = Uint8Array.of(TYPE.transport0 | (s.keys.phase & 1));
    const sealed = await this.p.seal(s.keys.key, s.n, typeByte, plaintext);
    s.n += 1;
    s.inPhase += 1;
    return concat(typeByte, sealed);
  }

  /// A phase is spent after its messages or its age; an end updates only once it has opened a
  /// message of its peer's current phase (the peer holds it and can derive the next).
  async updateSendPhaseIfDue() {
    const s = this.send;
    const due = s.inPhase >= this.rekeyAfterMessages || this.now() - s.phaseStartedMs >= this.rekeyAfterMs;
    if (!due || this.receive.keys.phase !== s.keys.phase || !this.receive.openedInPhase) return;
    await this.advanceSendPhase();
  }

  async advanceSendPhase() {
    const s = this.send;
    s.keys = await s.keys.next();
    s.inPhase = 0;
    s.phaseStartedMs = this.now();
    this.keyUpdates += 1;
  }

  /// The plaintext of a transport message, or null. A message whose phase bit is not the
  /// receive phase's is the first of the next phase (a stream never reorders); this end's
  /// sending follows if it has not updated itself.
  async openTransport(m) {
    if (m.length < 1 + TAG_BYTES) return null;
    const r = this.receive;
    const isNext = (m[0] & 1) !== (r.keys.phase & 1);
    if (isNext && r.next === null) r.next = await r.keys.next();
    const keys = isNext ? r.next : r.keys;
    const plain = await this.p.open(keys.key, r.n, m.subarray(0, 1), m.subarray(1));
    if (plain === null) return null;
    r.n += 1;
    if (isNext) {
      r.keys = keys;
      r.next = null;
      if (this.send.keys.phase < r.keys.phase) await this.advanceSendPhase();
    }
    r.openedInPhase = true;
    return plain;
  }

  /// The phases in use (statistics and tests).
  get sendPhase() { return this.send?.keys.phase ?? 0; }
  get receivePhase() { return this.receive?.keys.phase ?? 0; }
}
