import { test } from 'node:test';
import assert from 'node:assert/strict';
import { webcrypto } from 'node:crypto';
import { RoomFollower } from '../lib/follower.mjs';
import { CodecState, encodeBatch } from '../lib/codec.mjs';
import { checkBlob, hashHex, MAX_ATTEMPTS } from '../lib/blobs.mjs';

const subtle = webcrypto.subtle;
const sha256 = async (bytes) => new Uint8Array(await subtle.digest('SHA-256', bytes));
const CHUNK = 16 * 1024;

async function image(size, seed) {
  const bytes = new Uint8Array(size);
  let s = seed;
  for (let i = 0; i < size; i++) { s = (s * 1103515245 + 12345) >>> 0; bytes[i] = s >>> 24; }
  return { bytes, hash: await sha256(bytes) };
}

function chunks(img, from = 0) {
  const count = Math.ceil(img.bytes.length / CHUNK);
  const out = [];
  for (let index = from; index < count; index++) {
    out.push({ type: 'blobChunk', hash: img.hash, size: img.bytes.length, index, count, data: img.bytes.subarray(index * CHUNK, (index + 1) * CHUNK) });
  }
  return out;
}

/// A live follower (joined without a sync) that has folded a batch naming `img` on page 0.
function liveFollowerNaming(img) {
  const f = new RoomFollower(7);
  f.join({ room: 'r', user: 'u', role: 'viewer' });
  const events = f.handle({ type: 'joinAccepted', member: 2, role: 'viewer', roomHead: 0, syncFollows: false });
  const state = new CodecState();
  const payload = encodeBatch(1, [{ t: 0, type: 'background', page: 0, image: { hash: img.hash, width: 640, height: 480, fit: 1 } }], state);
  events.push(...f.handle({ type: 'roomBatch', roomSeq: 1, author: 1, timeMs: 0, payload }));
  return { f, events };
}

const replies = (events) => events.filter((e) => e.type === 'reply').map((e) => e.message);

test('a live member asks for a named image once, acknowledges every chunk, and checks the SHA-256', async () => {
  const img = await image(40_000, 1);
  const { f, events } = liveFollowerNaming(img);
  const asked = replies(events).filter((m) => m.type === 'blobRequest');
  assert.equal(asked.length, 1);
  assert.equal(hashHex(asked[0].hash), hashHex(img.hash));
  assert.equal(asked[0].firstChunk, 0);
  let arrived = null;
  const acks = [];
  for (const c of chunks(img)) {
    for (const e of f.handle(c)) {
      if (e.type === 'reply') acks.push(e.message.chunk);
      if (e.type === 'blobArrived') arrived = e;
    }
  }
  assert.deepEqual(acks, [0, 1, 2]);
  assert.ok(arrived);
  assert.deepEqual(arrived.bytes, img.bytes);
  const ok = await checkBlob(subtle, arrived.hash, arrived.bytes);
  assert.equal(ok, true);
  const done = f.blobChecked(arrived, ok);
  assert.deepEqual(done.map((e) => e.type), ['blob']);
  assert.deepEqual(f.blobs.blob(hashHex(img.hash)), img.bytes);
  // Named again (another page, a later batch): not asked for again.
  f.blobs.want(img.hash);
  assert.equal(f.blobs.requests().length, 0);
});

test('a late joiner asks only once its sync is done; a reconnect resumes from the first chunk it lacks', async () => {
  const img = await image(50_000, 2);
  const f = new RoomFollower(8);
  f.join({ room: 'r', user: 'late', role: 'viewer' });
  f.handle({ type: 'joinAccepted', member: 3, role: 'viewer', roomHead: 1, syncFollows: true });
  f.handle({ type: 'syncBegin', syncID: 1, mode: 'snapshot', afterRoomSeq: 0, throughRoomSeq: 1, firstChunk: 0 });
  const state = new CodecState();
  const payload = encodeBatch(1, [{ t: 0, type: 'background', page: 0, image: { hash: img.hash, width: 10, height: 10, fit: 2 } }], state);
  const during = f.handle({ type: 'syncChunk', syncID: 1, index: 0, items: [{ roomSeq: 0, author: 1, timeMs: 0, payload }] });
  assert.deepEqual(replies(during).map((m) => m.type), ['syncAck'], 'strokes first: no image request during the sync');
  const done = f.handle({ type: 'syncDone', syncID: 1, roomSeq: 1, digest: f.board.digest });
  assert.deepEqual(replies(done).map((m) => m.type), ['blobRequest']);
  // Two chunks, then the connection drops.
  for (const c of chunks(img).slice(0, 2)) f.handle(c);
  f.join({ room: 'r', user: 'late', role: 'viewer' });
  const again = f.handle({ type: 'joinAccepted', member: 3, role: 'viewer', roomHead: 1, syncFollows: false });
  const request = replies(again).find((m) => m.type === 'blobRequest');
  assert.equal(request.firstChunk, 2);
  // The daemon resends chunk 1 (acknowledged again) and the rest.
  let arrived = null;
  for (const c of chunks(img, 1)) for (const e of f.handle(c)) if (e.type === 'blobArrived') arrived = e;
  assert.deepEqual(arrived.bytes, img.bytes);
});

test('bytes that do not match the hash are asked for again, at most three times; a missing image is given up', async () => {
  const img = await image(20_000, 3);
  const { f } = liveFollowerNaming(img);
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    let arrived = null;
    for (const c of chunks(img)) {
      const bad = { ...c, data: Uint8Array.from(c.data, (b) => b ^ 1) };
      for (const e of f.handle(bad)) if (e.type === 'blobArrived') arrived = e;
    }
    assert.ok(arrived, `attempt ${attempt}`);
    const ok = await checkBlob(subtle, arrived.hash, arrived.bytes);
    assert.equal(ok, false);
    const events = f.blobChecked(arrived, ok);
    assert.ok(events.some((e) => e.type === 'blobFailed'));
    assert.equal(replies(events).length, attempt < MAX_ATTEMPTS ? 1 : 0, `attempt ${attempt}`);
  }
  const other = await image(100, 4);
  const { f: g } = liveFollowerNaming(other);
  const gone = g.handle({ type: 'blobMissing', hash: other.hash });
  assert.deepEqual(gone.map((e) => e.type), ['blobFailed']);
  assert.equal(g.blobs.requests().length, 0);
  assert.equal(await checkBlob(undefined, other.hash, other.bytes), false, 'no WebCrypto: nothing is shown unchecked');
});
