// Session messages (docs/protocol.md section 5a): what a device and the daemon say to each other.
// The same messages travel over UDP (ARQ), native TCP (length-prefixed) and the browser's
// WebSocket (one binary WebSocket message each, section 8.5).
//
//   message = version:u8 (=1)  kind:varint  bodyLength:varint  body
//
// Messages are plain objects with a `type`. Integers are Numbers, except u64 digests (16 hex
// digits, as Board.digest gives them) and varints past 2^53 (BigInts).

export const VERSION = 1;
export const MAX_MESSAGE_BYTES = 1 << 20;
export const MAX_BATCH_PAYLOAD_BYTES = 256 * 1024;
export const MAX_NAME_BYTES = 64;
export const MAX_TOKEN_BYTES = 1024;
export const MAX_TEXT_BYTES = 512;
export const MAX_SYNC_ITEMS = 4096;
/// Blob sync (protocol.md 6a): data of one blobPut or blobChunk; size of one blob.
export const MAX_BLOB_PART_BYTES = 64 * 1024;
export const MAX_BLOB_BYTES = 64 * 1024 * 1024;
export const BLOB_HASH_BYTES = 32;

export const ROLES = { teacher: 1, presenter: 2, viewer: 3 };
export const roleName = (n) => ({ 1: 'teacher', 2: 'presenter', 3: 'viewer' })[n];

/// Wire numbers (protocol.md 5a); unknown numbers decode as 0 (other).
export const JOIN_REFUSAL = ['other', 'badToken', 'expiredToken', 'tokenMismatch', 'roleNotAllowed', 'roomFull', 'tooManyRooms', 'invalidName', 'alreadyJoined', 'shuttingDown', 'unsupportedVersion', 'quotaExceeded'];
export const ERROR_CODE = ['other', 'permissionDenied', 'notTeacher', 'malformedMessage', 'malformedBatch', 'batchTooLarge', 'notJoined', 'unknownMember', 'invalidOriginSeq', 'historyFull', 'storageUnavailable', 'originSeqGap', 'originSeqReused', 'blobRefused', 'unknownBlob'];
export const GOING_AWAY = ['other', 'shuttingDown', 'left', 'replaced', 'idle', 'tooManyErrors', 'tokenExpired', 'tokenRevoked', 'evicted'];

const CLIENT_KINDS = { join: 1, batch: 2, grantDraw: 3, revokeDraw: 4, syncAck: 5, leave: 6, blobPut: 7, blobRequest: 8, blobAck: 9, ping: 10 };
const SERVER_KINDS = { joinAccepted: 32, joinRefused: 33, roomBatch: 34, batchAck: 35, error: 36, member: 37, syncBegin: 38, syncChunk: 39, syncDone: 40, goingAway: 41, blobChunk: 42, blobStored: 43, blobMissing: 44 };
const LAST_CLIENT_KIND = 10;
const LAST_SERVER_KIND = 44;
const kindName = (table, kind) => Object.keys(table).find((k) => table[k] === kind);

export class MessageError extends Error {
  constructor(code, field) {
    super(field ? `${code}(${field})` : code);
    this.code = code;
  }
}
const fail = (code, field) => { throw new MessageError(code, field); };

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

class Writer {
  constructor() { this.bytes = []; }
  u8(v) { this.bytes.push(v & 255); }
  varint(v) {
    if (typeof v === 'bigint') {
      while (v >= 0x80n) {
        this.bytes.push(Number(v & 0x7fn) | 0x80);
        v >>= 7n;
      }
      this.bytes.push(Number(v));
      return;
    }
    while (v >= 0x80) {
      this.bytes.push((v % 128) | 0x80);
      v = Math.floor(v / 128);
    }
    this.bytes.push(v);
  }
  u64hex(h) {
    const s = h.padStart(16, '0');
    for (let i = 0; i < 16; i += 2) this.bytes.push(parseInt(s.slice(i, i + 2), 16));
  }
  raw(b) { for (const x of b) this.bytes.push(x); }
  lengthPrefixed(b) {
    this.varint(b.length);
    this.raw(b);
  }
  string(s) { this.lengthPrefixed(encoder.encode(s)); }
}

class Reader {
  constructor(bytes, start, end) {
    this.b = bytes;
    this.i = start;
    this.end = end;
  }
  get remaining() { return this.end - this.i; }
  u8() {
    if (this.i >= this.end) fail('truncated');
    return this.b[this.i++];
  }
  bool(field) {
    const v = this.u8();
    if (v > 1) fail('invalidValue', field);
    return v === 1;
  }
  /// Minimal LEB128, at most 10 bytes (64 bits).
  varint() {
    let v = 0;
    let big = null;
    for (let n = 0; n < 10; n++) {
      if (this.i >= this.end) fail('truncated');
      const byte = this.b[this.i++];
      const bits = byte & 0x7f;
      if (n === 9 && byte > 1) fail('varintOverflow');
      if (n > 0 && byte === 0) fail('nonMinimalVarint');
      if (big !== null || n >= 7) {
        big = (big ?? BigInt(v)) | (BigInt(bits) << BigInt(7 * n));
      } else {
        v += bits * 2 ** (7 * n);
      }
      if ((byte & 0x80) === 0) {
        if (big === null) return v;
        return big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
      }
    }
    return fail('varintOverflow');
  }
  varint32(field) {
    const v = this.varint();
    if (v > 0xffffffff) fail('invalidValue', field);
    return v;
  }
  varint16(field) {
    const v = this.varint();
    if (v > 0xffff) fail('invalidValue', field);
    return v;
  }
  u64hex() {
    if (this.end - this.i < 8) fail('truncated');
    let h = '';
    for (let k = 0; k < 8; k++) h += this.b[this.i++].toString(16).padStart(2, '0');
    return h;
  }
  lengthPrefixed(max, field) {
    const n = this.varint();
    if (n > max) fail('tooLarge', field);
    if (this.end - this.i < n) fail('truncated');
    const out = this.b.slice(this.i, this.i + n);
    this.i += n;
    return out;
  }
  hash() {
    if (this.end - this.i < BLOB_HASH_BYTES) fail('truncated');
    const out = this.b.slice(this.i, this.i + BLOB_HASH_BYTES);
    this.i += BLOB_HASH_BYTES;
    return out;
  }
  string(max, field) {
    const raw = this.lengthPrefixed(max, field);
    try {
      return decoder.decode(raw);
    } catch {
      return fail('invalidUTF8', field);
    }
  }
}

function hashBytes(h) {
  if (!(h instanceof Uint8Array) || h.length !== BLOB_HASH_BYTES) throw new TypeError('a blob hash is 32 bytes');
  return h;
}

function frame(kind, body) {
  const w = new Writer();
  w.u8(VERSION);
  w.varint(kind);
  w.varint(body.length);
  w.raw(body);
  return Uint8Array.from(w.bytes);
}

/// Texts are cut to their bound on a character boundary rather than refused.
function bounded(text) {
  if (encoder.encode(text).length <= MAX_TEXT_BYTES) return text;
  let out = '';
  for (const ch of text) {
    if (encoder.encode(out + ch).length > MAX_TEXT_BYTES) break;
    out += ch;
  }
  return out;
}

function open(bytes) {
  if (bytes.length > MAX_MESSAGE_BYTES) fail('tooLarge', 'message');
  const r = new Reader(bytes, 0, bytes.length);
  const v = r.u8();
  if (v !== VERSION) fail('unsupportedVersion', String(v));
  const kind = r.varint();
  const length = r.varint();
  if (length > r.remaining) fail('truncated');
  if (length < r.remaining) fail('trailingBytes');
  return [kind, r];
}

const role = (raw) => roleName(raw) ?? fail('invalidValue', 'role');

// ---- device -> daemon ----

/// Encodes a device's message: {type: 'join', room, user, role, token (Uint8Array), origin, have}
/// with have {type: 'nothing'} | {type: 'upTo', roomSeq, digest} | {type: 'partialSnapshot',
/// snapshotRoomSeq, lastChunk}; {type: 'batch', originSeq, payload}; {type: 'grantDraw' |
/// 'revokeDraw', user}; {type: 'syncAck', syncID, chunk}; {type: 'leave'}; {type: 'blobPut', hash
/// (Uint8Array(32)), size, offset, data}; {type: 'blobRequest', hash, firstChunk}; {type:
/// 'blobAck', hash, chunk}; {type: 'ping'} (the keepalive of a device with nothing else to send).
export function encodeClient(m) {
  const w = new Writer();
  switch (m.type) {
    case 'join': {
      w.string(m.room);
      w.string(m.user);
      w.u8(ROLES[m.role]);
      w.lengthPrefixed(m.token ?? new Uint8Array(0));
      w.varint(m.origin);
      const have = m.have ?? { type: 'nothing' };
      if (have.type === 'nothing') w.u8(0);
      else if (have.type === 'upTo') {
        w.u8(1);
        w.varint(have.roomSeq);
        w.u64hex(have.digest ?? '0');
      } else {
        w.u8(2);
        w.varint(have.snapshotRoomSeq);
        w.varint(have.lastChunk);
      }
      break;
    }
    case 'batch':
      w.varint(m.originSeq);
      w.lengthPrefixed(m.payload);
      break;
    case 'grantDraw':
    case 'revokeDraw':
      w.string(m.user);
      break;
    case 'syncAck':
      w.varint(m.syncID);
      w.varint(m.chunk);
      break;
    case 'leave':
    case 'ping':
      break;
    case 'blobPut':
      w.raw(hashBytes(m.hash));
      w.varint(m.size);
      w.varint(m.offset);
      w.lengthPrefixed(m.data);
      break;
    case 'blobRequest':
      w.raw(hashBytes(m.hash));
      w.varint(m.firstChunk);
      break;
    case 'blobAck':
      w.raw(hashBytes(m.hash));
      w.varint(m.chunk);
      break;
    default:
      throw new TypeError(`not a device message: ${m.type}`);
  }
  return frame(CLIENT_KINDS[m.type], w.bytes);
}

export function decodeClient(bytes) {
  const [kind, r] = open(bytes);
  switch (kind) {
    case 1: {
      const room = r.string(MAX_NAME_BYTES, 'room');
      const user = r.string(MAX_NAME_BYTES, 'user');
      const roleValue = role(r.u8());
      const token = r.lengthPrefixed(MAX_TOKEN_BYTES, 'token');
      const origin = r.varint();
      const which = r.u8();
      let have;
      if (which === 0) have = { type: 'nothing' };
      else if (which === 1) have = { type: 'upTo', roomSeq: r.varint(), digest: r.u64hex() };
      else if (which === 2) have = { type: 'partialSnapshot', snapshotRoomSeq: r.varint(), lastChunk: r.varint32('lastChunk') };
      else fail('invalidValue', 'have');
      return { type: 'join', room, user, role: roleValue, token, origin, have };
    }
    case 2: return { type: 'batch', originSeq: r.varint(), payload: r.lengthPrefixed(MAX_BATCH_PAYLOAD_BYTES, 'payload') };
    case 3: return { type: 'grantDraw', user: r.string(MAX_NAME_BYTES, 'user') };
    case 4: return { type: 'revokeDraw', user: r.string(MAX_NAME_BYTES, 'user') };
    case 5: return { type: 'syncAck', syncID: r.varint32('syncID'), chunk: r.varint32('chunk') };
    case 6: return { type: 'leave' };
    case 7: {
      const hash = r.hash();
      const size = r.varint32('size');
      const offset = r.varint32('offset');
      const data = r.lengthPrefixed(MAX_BLOB_PART_BYTES, 'data');
      if (size < 1 || size > MAX_BLOB_BYTES || offset + data.length > size) fail('invalidValue', 'offset');
      return { type: 'blobPut', hash, size, offset, data };
    }
    case 8: return { type: 'blobRequest', hash: r.hash(), firstChunk: r.varint32('firstChunk') };
    case 9: return { type: 'blobAck', hash: r.hash(), chunk: r.varint32('chunk') };
    case 10: return { type: 'ping' };
    default:
      if (kind >= 32 && kind <= LAST_SERVER_KIND) fail('wrongDirection', String(kind));
      return { type: 'unknown', kind };
  }
}

// ---- daemon -> device ----

export function encodeServer(m) {
  const w = new Writer();
  switch (m.type) {
    case 'joinAccepted':
      w.varint(m.member);
      w.u8(ROLES[m.role]);
      w.varint(m.roomHead);
      w.u8(m.syncFollows ? 1 : 0);
      break;
    case 'joinRefused':
    case 'goingAway':
      w.varint((m.type === 'joinRefused' ? JOIN_REFUSAL : GOING_AWAY).indexOf(m.reason));
      w.string(bounded(m.text));
      break;
    case 'roomBatch':
      w.varint(m.roomSeq);
      w.varint(m.author);
      w.varint(m.timeMs);
      w.lengthPrefixed(m.payload);
      break;
    case 'batchAck':
      w.varint(m.originSeq);
      w.varint(m.roomSeq);
      break;
    case 'error':
      w.varint(ERROR_CODE.indexOf(m.code));
      w.varint(m.originSeq);
      w.string(bounded(m.text));
      break;
    case 'member':
      w.varint(m.member);
      w.string(m.user);
      w.u8(ROLES[m.role]);
      w.u8(m.present ? 1 : 0);
      break;
    case 'syncBegin':
      w.varint(m.syncID);
      w.u8(m.mode === 'snapshot' ? 0 : 1);
      w.varint(m.afterRoomSeq);
      w.varint(m.throughRoomSeq);
      w.varint(m.firstChunk);
      break;
    case 'syncChunk':
      w.varint(m.syncID);
      w.varint(m.index);
      w.varint(m.items.length);
      for (const item of m.items) {
        w.varint(item.roomSeq);
        w.varint(item.author);
        w.varint(item.timeMs);
        w.lengthPrefixed(item.payload);
      }
      break;
    case 'syncDone':
      w.varint(m.syncID);
      w.varint(m.roomSeq);
      w.u64hex(m.digest);
      break;
    case 'blobChunk':
      w.raw(hashBytes(m.hash));
      w.varint(m.size);
      w.varint(m.index);
      w.varint(m.count);
      w.lengthPrefixed(m.data);
      break;
    case 'blobStored':
      w.raw(hashBytes(m.hash));
      w.varint(m.width);
      w.varint(m.height);
      break;
    case 'blobMissing':
      w.raw(hashBytes(m.hash));
      break;
    default:
      throw new TypeError(`not a daemon message: ${m.type}`);
  }
  return frame(SERVER_KINDS[m.type], w.bytes);
}

const named = (list, n) => list[n] ?? 'other';

export function decodeServer(bytes) {
  const [kind, r] = open(bytes);
  switch (kind) {
    case 32: {
      const member = r.varint32('member');
      const roleValue = role(r.u8());
      return { type: 'joinAccepted', member, role: roleValue, roomHead: r.varint(), syncFollows: r.bool('syncFollows') };
    }
    case 33: {
      const reason = named(JOIN_REFUSAL, r.varint16('reason'));
      return { type: 'joinRefused', reason, text: r.string(MAX_TEXT_BYTES, 'text') };
    }
    case 34: {
      const roomSeq = r.varint();
      const author = r.varint32('author');
      const timeMs = r.varint();
      return { type: 'roomBatch', roomSeq, author, timeMs, payload: r.lengthPrefixed(MAX_BATCH_PAYLOAD_BYTES, 'payload') };
    }
    case 35: return { type: 'batchAck', originSeq: r.varint(), roomSeq: r.varint() };
    case 36: {
      const code = named(ERROR_CODE, r.varint16('code'));
      const originSeq = r.varint();
      return { type: 'error', code, originSeq, text: r.string(MAX_TEXT_BYTES, 'text') };
    }
    case 37: {
      const member = r.varint32('member');
      const user = r.string(MAX_NAME_BYTES, 'user');
      const roleValue = role(r.u8());
      return { type: 'member', member, user, role: roleValue, present: r.bool('present') };
    }
    case 38: {
      const syncID = r.varint32('syncID');
      const mode = r.u8();
      if (mode > 1) fail('invalidValue', 'mode');
      const afterRoomSeq = r.varint();
      const throughRoomSeq = r.varint();
      return { type: 'syncBegin', syncID, mode: mode === 0 ? 'snapshot' : 'tail', afterRoomSeq, throughRoomSeq, firstChunk: r.varint32('firstChunk') };
    }
    case 39: {
      const syncID = r.varint32('syncID');
      const index = r.varint32('index');
      const count = r.varint();
      if (count > MAX_SYNC_ITEMS) fail('tooLarge', 'items');
      const items = [];
      for (let n = 0; n < count; n++) {
        const roomSeq = r.varint();
        const author = r.varint32('author');
        const timeMs = r.varint();
        items.push({ roomSeq, author, timeMs, payload: r.lengthPrefixed(MAX_BATCH_PAYLOAD_BYTES, 'payload') });
      }
      return { type: 'syncChunk', syncID, index, items };
    }
    case 40: return { type: 'syncDone', syncID: r.varint32('syncID'), roomSeq: r.varint(), digest: r.u64hex() };
    case 41: {
      const reason = named(GOING_AWAY, r.varint16('reason'));
      return { type: 'goingAway', reason, text: r.string(MAX_TEXT_BYTES, 'text') };
    }
    case 42: {
      const hash = r.hash();
      const size = r.varint32('size');
      const index = r.varint32('index');
      const count = r.varint32('count');
      const data = r.lengthPrefixed(MAX_BLOB_PART_BYTES, 'data');
      if (size < 1 || size > MAX_BLOB_BYTES || count < 1 || index >= count) fail('invalidValue', 'index');
      return { type: 'blobChunk', hash, size, index, count, data };
    }
    case 43: return { type: 'blobStored', hash: r.hash(), width: r.varint32('width'), height: r.varint32('height') };
    case 44: return { type: 'blobMissing', hash: r.hash() };
    default:
      if (kind >= 1 && kind <= LAST_CLIENT_KIND) fail('wrongDirection', String(kind));
      return { type: 'unknown', kind };
  }
}

export { kindName, CLIENT_KINDS, SERVER_KINDS };
