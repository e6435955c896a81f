// The device side of blob sync (docs/protocol.md 6a), as BlobFetcher does for native devices
// (Sources/InkProtocol/BlobFetcher.swift): which background images the board names and the
// device lacks, asking for each once the strokes are in, acknowledging every chunk, resuming
// after a reconnect from the first chunk it lacks, and checking the whole image against its
// SHA-256 (with WebCrypto, `checkBlob`) before it is shown.
//
// Call order: want(hash) for each image a folded batch names; requests() when the device may
// ask (its sync done, or live); handleChunk / handleMissing for the daemon's messages (their
// {type: 'reply'} events are sent, a {type: 'blobArrived'} event is checked with checkBlob and
// handed to checked()); sessionStarted() on every new session.

export const MAX_ATTEMPTS = 3;
/// Images kept once checked, in bytes; the oldest go past it (fetched again if shown again).
export const MAX_KEPT_BYTES = 64 * 1024 * 1024;
/// The largest image taken (a daemon's own bound is lower).
export const MAX_BLOB_BYTES = 64 * 1024 * 1024;

export const hashHex = (hash) => Array.from(hash, (b) => b.toString(16).padStart(2, '0')).join('');

export class BlobFetcher {
  constructor() {
    /// Checked images by hex hash, oldest first.
    this.complete = new Map();
    /// Partly received: hex -> {hash, size, count, bytes, received, nextIndex}.
    this.arriving = new Map();
    /// Named by the board, not complete, in naming order: hex -> hash.
    this.wanted = new Map();
    /// Asked for on the current session.
    this.asked = new Set();
    /// Whole, being checked.
    this.checking = new Set();
    this.failures = new Map();
  }

  blob(hex) { return this.complete.get(hex) ?? null; }

  sessionStarted() { this.asked.clear(); }

  want(hash) {
    const hex = hashHex(hash);
    if (this.complete.has(hex) || this.wanted.has(hex) || this.checking.has(hex) || (this.failures.get(hex) ?? 0) >= MAX_ATTEMPTS) return;
    this.wanted.set(hex, hash);
  }

  /// A request for every wanted image not yet asked for on this session (resuming partial ones).
  requests() {
    const out = [];
    for (const [hex, hash] of this.wanted) {
      if (this.asked.has(hex)) continue;
      this.asked.add(hex);
      out.push({ type: 'blobRequest', hash, firstChunk: this.arriving.get(hex)?.nextIndex ?? 0 });
    }
    return out;
  }

  handleChunk(m, events) {
    const hex = hashHex(m.hash);
    if (!this.wanted.has(hex) || m.size > MAX_BLOB_BYTES) return;
    let a = this.arriving.get(hex);
    if (!a || a.size !== m.size || a.count !== m.count) {
      a = { hash: m.hash, size: m.size, count: m.count, bytes: null, received: 0, nextIndex: 0 };
      this.arriving.set(hex, a);
    }
    // In order on one session; a chunk already held (sent again after a resume) is acked again.
    if (m.index < a.nextIndex) {
      events.push({ type: 'reply', message: { type: 'blobAck', hash: m.hash, chunk: m.index } });
      return;
    }
    if (m.index !== a.nextIndex || a.received + m.data.length > a.size) return;
    if (a.bytes === null) a.bytes = new Uint8Array(a.size);
    a.bytes.set(m.data, a.received);
    a.received += m.data.length;
    a.nextIndex += 1;
    events.push({ type: 'reply', message: { type: 'blobAck', hash: m.hash, chunk: m.index } });
    if (a.nextIndex < a.count) return;
    this.arriving.delete(hex);
    this.wanted.delete(hex);
    this.asked.delete(hex);
    if (a.received !== a.size) {
      this.failed(hex, a.hash, 'the image is shorter than its size', events);
      return;
    }
    this.checking.add(hex);
    events.push({ type: 'blobArrived', hash: a.hash, hex, bytes: a.bytes });
  }

  handleMissing(hash, events) {
    const hex = hashHex(hash);
    this.wanted.delete(hex);
    this.arriving.delete(hex);
    events.push({ type: 'blobFailed', hash, hex, reason: 'the room has no such image' });
  }

  /// The result of checking an arrived image's SHA-256: kept and handed over, or asked for again.
  checked(hex, hash, bytes, ok) {
    const events = [];
    this.checking.delete(hex);
    if (!ok) {
      this.failed(hex, hash, "the image's bytes do not match its hash", events);
      return events;
    }
    this.complete.set(hex, bytes);
    let total = 0;
    for (const b of this.complete.values()) total += b.length;
    for (const [k, b] of this.complete) {
      if (total <= MAX_KEPT_BYTES || this.complete.size <= 1) break;
      this.complete.delete(k);
      total -= b.length;
    }
    events.push({ type: 'blob', hash, hex, bytes });
    return events;
  }

  failed(hex, hash, reason, events) {
    this.failures.set(hex, (this.failures.get(hex) ?? 0) + 1);
    events.push({ type: 'blobFailed', hash, hex, reason });
    this.want(hash);
    for (const r of this.requests()) events.push({ type: 'reply', message: r });
  }
}

/// Whether `bytes` hash to `hash` (SHA-256 through WebCrypto's `subtle`).
export async function checkBlob(subtle, hash, bytes) {
  if (!subtle) return false;
  const digest = new Uint8Array(await subtle.digest('SHA-256', bytes));
  return digest.length === hash.length && digest.every((b, i) => b === hash[i]);
}
