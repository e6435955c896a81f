import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeClient, decodeServer, encodeClient, encodeServer, MessageError } from '../lib/messages.mjs';
import { vectorLines, unhex, hex } from './vectors.mjs';

const BYTE_FIELDS = new Set(['token', 'payload', 'hash', 'data']);
/// The vectors' JSON with its hex byte fields as Uint8Arrays (what the codec uses).
const revive = (value) => JSON.parse(JSON.stringify(value), (k, v) => (BYTE_FIELDS.has(k) && typeof v === 'string' ? unhex(v) : v));

const vectors = vectorLines('session-messages.txt').map((line) => {
  const [name, bytes, ...json] = line.split(' ');
  return { name, bytes, message: revive(JSON.parse(json.join(' '))) };
});
const isClient = (m) => ['join', 'batch', 'grantDraw', 'revokeDraw', 'syncAck', 'leave', 'blobPut', 'blobRequest', 'blobAck', 'ping'].includes(m.type);

test('every vector encodes to its bytes and decodes to its message', () => {
  assert.ok(vectors.length >= 18);
  for (const v of vectors) {
    const encode = isClient(v.message) ? encodeClient : encodeServer;
    const decode = isClient(v.message) ? decodeClient : decodeServer;
    assert.equal(hex(encode(v.message)), v.bytes, v.name);
    assert.deepEqual(decode(unhex(v.bytes)), v.message, v.name);
  }
});

test('malformed messages are typed errors', () => {
  const cases = [
    ['', 'truncated'],
    ['02', 'unsupportedVersion'],
    ['012203', 'truncated'],
    ['0123020401c8', 'trailingBytes'],
    ['01238300', 'nonMinimalVarint'],
    ['01ffffffffffffffffff02', 'varintOverflow'],
    ['01010100', 'wrongDirection'],
    ['01250403016300', 'invalidValue'],
  ];
  for (const [bytes, code] of cases) {
    assert.throws(() => decodeServer(unhex(bytes)), (e) => e instanceof MessageError && e.code === code, bytes);
  }
  assert.deepEqual(decodeServer(unhex('017f00')), { type: 'unknown', kind: 127 });
});

test('large varints and texts', () => {
  const m = { type: 'roomBatch', roomSeq: 2 ** 60, author: 1, timeMs: 1, payload: new Uint8Array(0) };
  const back = decodeServer(encodeServer({ ...m, roomSeq: 2n ** 60n }));
  assert.equal(back.roomSeq, 2n ** 60n);
  const long = 'é'.repeat(400);
  const refused = decodeServer(encodeServer({ type: 'joinRefused', reason: 'badToken', text: long }));
  assert.equal(refused.text, 'é'.repeat(256));
});

test('protocol 2 numbers have their names', () => {
  // A protocol 2 daemon's answer to a protocol 1 join (protocol.md 8.1): joinRefused, reason 10.
  const refusal = encodeServer({ type: 'joinRefused', reason: 'unsupportedVersion', text: 'update' });
  assert.equal(hex(refusal.subarray(0, 4)), '0121080a');
  assert.equal(decodeServer(refusal).reason, 'unsupportedVersion');
  for (const [code, n] of [['originSeqGap', 11], ['originSeqReused', 12]]) {
    assert.equal(decodeServer(encodeServer({ type: 'error', code, text: '' })).code, code, String(n));
  }
  for (const reason of ['tokenExpired', 'tokenRevoked']) assert.equal(decodeServer(encodeServer({ type: 'goingAway', reason, text: '' })).reason, reason);
});

test('blob messages: bounds and directions', () => {
  const hash = new Uint8Array(32).fill(7);
  const chunk = (index, count) => encodeServer({ type: 'blobChunk', hash, size: 10, index, count, data: new Uint8Array(2) });
  assert.throws(() => decodeServer(chunk(3, 3)), (e) => e instanceof MessageError && e.code === 'invalidValue');
  assert.throws(() => decodeClient(encodeClient({ type: 'blobPut', hash, size: 2, offset: 1, data: new Uint8Array(2) })),
    (e) => e instanceof MessageError && e.code === 'invalidValue');
  assert.throws(() => decodeClient(encodeServer({ type: 'blobMissing', hash })), (e) => e.code === 'wrongDirection');
  assert.throws(() => decodeServer(encodeClient({ type: 'blobAck', hash, chunk: 0 })), (e) => e.code === 'wrongDirection');
  assert.throws(() => decodeServer(encodeServer({ type: 'blobMissing', hash }).subarray(0, 20)), (e) => e.code === 'truncated');
  assert.throws(() => encodeClient({ type: 'blobRequest', hash: new Uint8Array(31), firstChunk: 0 }), TypeError);
  assert.equal(decodeServer(encodeServer({ type: 'error', code: 'blobRefused', originSeq: 0, text: 'x' })).code, 'blobRefused');
});
