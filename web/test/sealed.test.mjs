// The device side of sealed stream sessions (web/lib/sealed.mjs) against Vectors/sealed-sessions.txt
// (written by an independent Python implementation of docs/protocol.md 4), in node's WebCrypto.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { webcrypto } from 'node:crypto';
import { SealedStream, SealedStreamError, importEphemeral, encodePublicKey, decodePublicKey, TYPE } from '../lib/sealed.mjs';
import { vectorLines, unhex, hex, repoRoot } from './vectors.mjs';

const subtle = webcrypto.subtle;
const present = existsSync(join(repoRoot, 'Vectors', 'sealed-sessions.txt'));
const skip = present ? false : 'Vectors/sealed-sessions.txt is not in this tree (protocol 2 has not landed)';
const V = present ? Object.fromEntries(vectorLines('sealed-sessions.txt').map((l) => {
  const at = l.indexOf(': ');
  return [l.slice(0, at), unhex(l.slice(at + 2).replace(/ /g, ''))];
})) : {};

/// A stream of the vectors' device: the daemon's static key pinned, the fixed ephemeral key.
async function vectorStream(extra = {}) {
  const ephemeral = await importEphemeral(V['device-ephemeral-private'], V['device-ephemeral-public'], subtle);
  return new SealedStream({ serverKey: V['daemon-static-public'], join: V['join-message'], subtle, ephemeral, ...extra });
}

/// The daemon's side of a stream message, written here from protocol.md 4.6 with the vectors' keys.
async function daemonMessage(rawKey, n, phaseBit, plaintext) {
  const key = await subtle.importKey('raw', rawKey, 'AES-GCM', false, ['encrypt']);
  const iv = new Uint8Array(12);
  new DataView(iv.buffer).setBigUint64(4, BigInt(n));
  const type = Uint8Array.of(0x20 | phaseBit);
  const sealed = new Uint8Array(await subtle.encrypt({ name: 'AES-GCM', iv, additionalData: type }, key, plaintext));
  return Uint8Array.from([...type, ...sealed]);
}

async function openDevice(rawKey, n, message) {
  const key = await subtle.importKey('raw', rawKey, 'AES-GCM', false, ['decrypt']);
  const iv = new Uint8Array(12);
  new DataView(iv.buffer).setBigUint64(4, BigInt(n));
  return new Uint8Array(await subtle.decrypt({ name: 'AES-GCM', iv, additionalData: message.subarray(0, 1) }, key, message.subarray(1)));
}

const rejects = (promise, code) => assert.rejects(promise, (e) => e instanceof SealedStreamError && e.code === code);

test('the handshake and first messages are the vectors, byte for byte', { skip }, async () => {
  const stream = await vectorStream();
  const [initiation] = await stream.start();
  assert.equal(hex(initiation), hex(V['stream-initiation']));
  const queued = await stream.seal(Uint8Array.of(1, 2, 3));
  assert.deepEqual(queued, [], 'a message before the response waits for it');
  const first = await stream.handle(V['stream-response']);
  assert.deepEqual(first.events, [{ type: 'established' }]);
  assert.equal(hex(stream.handshakeHash), hex(V['stream-handshake-hash']));
  // What waited goes first (no keepalive needed: it confirms the session).
  assert.equal(first.send.length, 1);
  assert.equal(hex(await openDevice(V['stream-key-device-to-daemon'], 0, first.send[0])), '010203');
  const delivered = await stream.handle(V['stream-daemon-message-0']);
  assert.deepEqual(delivered.delivered.map(hex), [hex(V['stream-daemon-plaintext-0'])]);
});

test('with nothing waiting, the device confirms with the vectors keepalive', { skip }, async () => {
  const stream = await vectorStream();
  await stream.start();
  const { send } = await stream.handle(V['stream-response']);
  assert.deepEqual(send.map(hex), [hex(V['stream-device-message-0'])]);
  const next = await stream.seal(Uint8Array.of(9));
  assert.equal(hex(await openDevice(V['stream-key-device-to-daemon'], 1, next[0])), '09');
});

test('key update: the daemon moves to phase 1, the device follows; the device updates itself when due', { skip }, async () => {
  let now = 0;
  const stream = await vectorStream({ now: () => now, rekeyAfterMessages: 3 });
  await stream.start();
  await stream.handle(V['stream-response']); // device message 0: the keepalive
  const k2 = V['stream-key-daemon-to-device'];
  await stream.handle(await daemonMessage(k2, 0, 0, Uint8Array.of(1)));
  // The daemon's message 1 is of phase 1: its key is REKEY(k2), the vectors' phase-1 key.
  const m1 = await daemonMessage(V['phase1-key-daemon-to-device'], 1, 1, Uint8Array.of(2));
  assert.deepEqual((await stream.handle(m1)).delivered.map(hex), ['02']);
  assert.equal(stream.receivePhase, 1);
  assert.equal(stream.sendPhase, 1, 'sending follows the peer');
  const [d1] = await stream.seal(Uint8Array.of(3));
  assert.equal(d1[0], TYPE.transport1);
  assert.equal(hex(await openDevice(V['phase1-key-device-to-daemon'], 1, d1)), '03');
  // An old-phase message after the update does not open (a stream has no late messages).
  await rejects(stream.handle(await daemonMessage(k2, 2, 0, Uint8Array.of(4))), 'unauthenticated');

  // The device's own update: after 3 messages in phase 1 (and a phase-1 message opened), phase 2.
  const fresh = await vectorStream({ now: () => now, rekeyAfterMessages: 3 });
  await fresh.start();
  await fresh.handle(V['stream-response']);
  await fresh.handle(await daemonMessage(k2, 0, 0, Uint8Array.of(1)));
  const sent = [];
  for (let i = 0; i < 4; i++) sent.push(...(await fresh.seal(Uint8Array.of(10 + i))));
  // Messages 0 (keepalive), 1, 2 in phase 0; 3 and 4 in phase 1.
  assert.deepEqual(sent.map((m) => m[0]), [0x20, 0x20, 0x21, 0x21]);
  assert.equal(hex(await openDevice(V['phase1-key-device-to-daemon'], 3, sent[2])), '0c');
  // By age too: 120 s in phase 1 once the daemon has shown phase 1.
  const aged = await vectorStream({ now: () => now });
  await aged.start();
  await aged.handle(V['stream-response']);
  now = 120_000;
  const [early] = await aged.seal(Uint8Array.of(1));
  assert.equal(early[0], 0x20, 'no update before a message of the current phase opened');
  await aged.handle(await daemonMessage(k2, 0, 0, Uint8Array.of(1)));
  const [late] = await aged.seal(Uint8Array.of(2));
  assert.equal(late[0], 0x21);
  assert.equal(aged.keyUpdates, 1);
});

test('a forged, corrupted or replayed message ends the stream', { skip }, async () => {
  for (const damage of [(m) => { m[m.length - 1] ^= 1; }, (m) => { m[5] ^= 0x80; }, (m) => { m[0] = 0x21; }]) {
    const stream = await vectorStream();
    await stream.start();
    await stream.handle(V['stream-response']);
    const m = Uint8Array.from(V['stream-daemon-message-0']);
    damage(m);
    await rejects(stream.handle(m), 'unauthenticated');
  }
  const stream = await vectorStream();
  await stream.start();
  await stream.handle(V['stream-response']);
  await stream.handle(V['stream-daemon-message-0']);
  await rejects(stream.handle(V['stream-daemon-message-0']), 'unauthenticated');
  await rejects(stream.handle(Uint8Array.of(0x20, 1, 2)), 'unauthenticated');
});

test('a rogue daemon: a response that does not open, a notice, an unexpected message', { skip }, async () => {
  const forged = Uint8Array.from(V['stream-response']);
  forged[40] ^= 1;
  const a = await vectorStream();
  await a.start();
  await rejects(a.handle(forged), 'keyMismatch');

  const rogueKey = Uint8Array.from(V['daemon-ephemeral-public']);
  const b = await vectorStream();
  await b.start();
  await assert.rejects(b.handle(Uint8Array.from([TYPE.notice, 1, ...rogueKey])), (e) => {
    assert.equal(e.code, 'keyMismatch');
    assert.equal(hex(e.presented), hex(rogueKey));
    assert.match(e.message, new RegExp(`did not prove key ${encodePublicKey(V['daemon-static-public'])} \\(it presents ${encodePublicKey(rogueKey)}\\)`));
    return true;
  });
  const c = await vectorStream();
  await c.start();
  await rejects(c.handle(Uint8Array.from([TYPE.notice, 2, ...rogueKey])), 'busy');

  const d = await vectorStream();
  await d.start();
  await rejects(d.handle(V['stream-daemon-message-0']), 'unexpected');
  await rejects(d.handle(new Uint8Array(0)), 'unexpected');
  await rejects(d.handle(Uint8Array.of(0x01, 0x20, 0x00)), 'unexpected');
});

test('without a pinned key the stream asks for it, then joins with the reply', { skip }, async () => {
  const ephemeral = await importEphemeral(V['device-ephemeral-private'], V['device-ephemeral-public'], subtle);
  const stream = new SealedStream({ serverKey: null, join: V['join-message'], subtle, ephemeral });
  assert.deepEqual((await stream.start()).map(hex), ['25']);
  const reply = await stream.handle(Uint8Array.from([TYPE.keyReply, ...V['daemon-static-public']]));
  assert.equal(reply.events[0].type, 'learnedKey');
  assert.equal(hex(reply.events[0].key), hex(V['daemon-static-public']));
  assert.deepEqual(reply.send.map(hex), [hex(V['stream-initiation'])]);
  assert.equal((await stream.handle(V['stream-response'])).events[0].type, 'established');

  // A low-order "key" (all zeros) cannot key a handshake.
  const bad = new SealedStream({ serverKey: null, join: V['join-message'], subtle });
  await bad.start();
  await rejects(bad.handle(Uint8Array.from([TYPE.keyReply, ...new Uint8Array(32)])), 'badKey');
});

test('fresh ephemeral keys: every initiation differs', { skip }, async () => {
  const a = new SealedStream({ serverKey: V['daemon-static-public'], join: V['join-message'], subtle });
  const b = new SealedStream({ serverKey: V['daemon-static-public'], join: V['join-message'], subtle });
  const [ma] = await a.start();
  const [mb] = await b.start();
  assert.equal(ma.length, V['stream-initiation'].length);
  assert.notEqual(hex(ma), hex(mb));
});

test('public keys as text: base64url or hex, one text per key', () => {
  const key = Uint8Array.from({ length: 32 }, (_, i) => i * 7);
  const text = encodePublicKey(key);
  assert.equal(text.length, 43);
  assert.deepEqual(decodePublicKey(text), key);
  assert.deepEqual(decodePublicKey(hex(key)), key);
  assert.deepEqual(decodePublicKey(hex(key).toUpperCase()), key);
  assert.equal(decodePublicKey(text.slice(0, 42)), null);
  assert.equal(decodePublicKey(text + '='), null);
  assert.equal(decodePublicKey('!'.repeat(43)), null);
  // The last character carries 2 padding bits: a non-zero one is another text for the same bytes.
  const last = text.at(-1);
  const sibling = text.slice(0, 42) + 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'.indexOf(last) ^ 1];
  assert.equal(decodePublicKey(sibling), null);
});
