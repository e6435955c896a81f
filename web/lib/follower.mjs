// Follows one room from the device side (docs/protocol.md 5a and 6), as RoomFollower does for
// native devices (Sources/InkProtocol/SessionMessageFollower.swift): folds every batch into the
// board in room order (its own batches at the roomSeq their acknowledgements name), keeps both
// directions' codec states, numbers its own batches and keeps them until they are durable,
// acknowledges sync chunks, and says what to ask for when it joins again. It fetches the
// background images the board names (blobs.mjs) once the strokes are in: a {type:
// 'blobArrived'} event's bytes must be checked (checkBlob) and given to blobChecked().
//
// Call order: join() -> send; handle(message) for every daemon message in order, sending each
// {type: 'reply'} event's message; submit(commands) -> send. After a reconnect: join() again,
// then send resend() once the 'joined' event arrives.
import { BlobFetcher } from './blobs.mjs';
import { Board } from './board.mjs';
import { CodecState, decodeBatch, encodeBatch } from './codec.mjs';
import { MAX_BATCH_PAYLOAD_BYTES } from './messages.mjs';

export const MAX_PENDING_BATCHES = 4096;
export const MAX_HELD_BATCHES = 65536;

export class RoomFollower {
  constructor(origin) {
    this.origin = origin;
    this.board = new Board();
    /// Every batch up to this room sequence number is folded into the board.
    this.appliedThrough = 0;
    this.member = null;
    this.role = null;
    this.syncing = false;
    this.inbound = new CodecState();
    this.outbound = new CodecState();
    this.nextOriginSeq = 1;
    /// Own batches sent and not yet acknowledged, ascending by originSeq: {originSeq, commands}.
    this.pending = [];
    /// Own acknowledged batches beyond appliedThrough, and others' beyond a gap, by roomSeq.
    this.placed = new Map();
    this.held = new Map();
    this.sync = null;
    this.verify = null;
    this.blobs = new BlobFetcher();
  }

  get pendingCount() { return this.pending.length; }

  /// What to ask for when joining: nothing, the last applied roomSeq, or the rest of a snapshot.
  get have() {
    if (this.sync && this.sync.mode === 'snapshot') {
      if (this.sync.lastChunk !== null) return { type: 'partialSnapshot', snapshotRoomSeq: this.sync.through, lastChunk: this.sync.lastChunk };
      return { type: 'nothing' };
    }
    return this.appliedThrough === 0 ? { type: 'nothing' } : { type: 'upTo', roomSeq: this.appliedThrough, digest: '0000000000000000' };
  }

  /// The join for a new session; both codec states are per session.
  join({ room, user, role, token }) {
    this.inbound = new CodecState();
    this.outbound = new CodecState();
    this.held = new Map();
    this.blobs.sessionStarted();
    return { type: 'join', room, user, role, token: token ?? new Uint8Array(0), origin: this.origin, have: this.have };
  }

  /// The device's own commands as its next batch message; throws when too many are pending.
  submit(commands) {
    if (this.pending.length >= MAX_PENDING_BATCHES) throw new Error('tooManyPending');
    const state = this.outbound.clone();
    const payload = encodeBatch(this.member ?? 0, commands, state);
    if (payload.length > MAX_BATCH_PAYLOAD_BYTES) throw new Error(`tooLarge(${payload.length})`);
    this.outbound = state;
    const originSeq = this.nextOriginSeq++;
    this.pending.push({ originSeq, commands });
    return { type: 'batch', originSeq, payload };
  }

  /// The batches not yet acknowledged, encoded again for the current session, same numbers.
  resend() {
    return this.pending.map((p) => ({ type: 'batch', originSeq: p.originSeq, payload: encodeBatch(this.member ?? 0, p.commands, this.outbound) }));
  }

  /// Own commands not yet folded (sent, or acknowledged but waiting for an earlier roomSeq):
  /// what a page draws on top of the board so its user sees its strokes at once.
  unfoldedOwnBatches() {
    return [...this.placed.values(), ...this.pending.map((p) => p.commands)];
  }

  handle(m) {
    const events = [];
    switch (m.type) {
      case 'joinAccepted':
        this.member = m.member;
        this.role = m.role;
        this.syncing = m.syncFollows;
        if (!m.syncFollows && this.appliedThrough === 0) this.appliedThrough = m.roomHead;
        events.push({ type: 'joined', member: m.member, role: m.role, roomHead: m.roomHead, syncFollows: m.syncFollows });
        if (!m.syncFollows) this.requestBlobs(events);
        break;
      case 'joinRefused':
        events.push({ type: 'refused', reason: m.reason, text: m.text });
        break;
      case 'roomBatch': {
        let batch;
        try {
          batch = decodeBatch(m.payload, this.inbound);
        } catch {
          events.push({ type: 'undecodable', roomSeq: m.roomSeq });
          break;
        }
        this.arrive(m.roomSeq, { author: m.author, commands: batch.commands }, events);
        break;
      }
      case 'batchAck':
        this.acknowledge(m.originSeq, m.roomSeq, events);
        break;
      case 'error':
        // A refused batch is not in the log: forget it.
        if (m.originSeq !== 0 && m.code !== 'malformedMessage') this.pending = this.pending.filter((p) => p.originSeq !== m.originSeq);
        events.push({ type: 'error', code: m.code, originSeq: m.originSeq, text: m.text });
        break;
      case 'member':
        if (m.member === this.member && m.present) this.role = m.role;
        events.push({ type: 'member', member: m.member, user: m.user, role: m.role, present: m.present });
        break;
      case 'syncBegin': {
        this.syncing = true;
        const s = this.sync;
        const resumes = m.mode === 'snapshot' && s?.mode === 'snapshot' && s.through === m.throughRoomSeq && m.firstChunk > 0
          && s.lastChunk !== null && s.lastChunk + 1 === m.firstChunk;
        if (m.mode === 'snapshot' && !resumes) {
          this.board = new Board();
          this.held = new Map();
          this.placed = new Map();
          this.appliedThrough = 0;
          events.push({ type: 'boardReset' });
        }
        this.sync = { id: m.syncID, mode: m.mode, through: m.throughRoomSeq, lastChunk: resumes ? m.firstChunk - 1 : null };
        events.push({ type: 'syncStarted', mode: m.mode, through: m.throughRoomSeq });
        break;
      }
      case 'syncChunk': {
        const s = this.sync;
        if (!s || s.id !== m.syncID) break;
        for (const item of m.items) {
          let batch;
          try {
            batch = decodeBatch(item.payload, new CodecState());
          } catch {
            events.push({ type: 'undecodable', roomSeq: item.roomSeq });
            continue;
          }
          const b = { author: item.author, commands: batch.commands };
          if (s.mode === 'snapshot') {
            this.board.applyBatch(b.author, b.commands);
            this.wantBlobs(b.commands);
            events.push({ type: 'applied', roomSeq: 0, batch: b, own: false, fromSync: true });
          } else {
            this.arrive(item.roomSeq, b, events, true);
          }
        }
        s.lastChunk = m.index;
        events.push({ type: 'reply', message: { type: 'syncAck', syncID: m.syncID, chunk: m.index } });
        break;
      }
      case 'syncDone': {
        const s = this.sync;
        if (!s || s.id !== m.syncID) break;
        if (s.mode === 'snapshot') this.appliedThrough = m.roomSeq;
        this.sync = null;
        this.syncing = false;
        // The digest is the room's at roomSeq; own batches still awaiting their
        // acknowledgement may keep the board below it for a moment: checked when reached.
        this.verify = { roomSeq: m.roomSeq, digest: m.digest };
        this.drain(events);
        this.requestBlobs(events); // the strokes are in: now the backgrounds
        break;
      }
      case 'goingAway':
        events.push({ type: 'goingAway', reason: m.reason, text: m.text });
        break;
      case 'blobChunk':
        this.blobs.handleChunk(m, events);
        break;
      case 'blobMissing':
        this.blobs.handleMissing(m.hash, events);
        break;
      case 'blobStored':
        events.push({ type: 'blobStored', hash: m.hash, width: m.width, height: m.height });
        break;
      default:
        break;
    }
    return events;
  }

  arrive(roomSeq, batch, events, fromSync = false) {
    if (roomSeq <= this.appliedThrough) return;
    if (this.held.size < MAX_HELD_BATCHES) this.held.set(roomSeq, { ...batch, fromSync });
    this.drain(events);
  }

  acknowledge(originSeq, roomSeq, events) {
    // Cumulative: everything of this origin up to originSeq is in the log.
    while (this.pending.length > 0 && this.pending[0].originSeq <= originSeq) {
      const first = this.pending.shift();
      if (first.originSeq === originSeq && roomSeq > this.appliedThrough) {
        this.placed.set(roomSeq, { author: this.member, commands: first.commands });
      }
    }
    events.push({ type: 'acknowledged', originSeq, roomSeq });
    this.drain(events);
  }

  drain(events) {
    for (;;) {
      const v = this.verify;
      if (v && this.appliedThrough >= v.roomSeq) {
        this.verify = null;
        const matches = this.appliedThrough === v.roomSeq && this.board.digest === v.digest;
        events.push({ type: 'synced', roomSeq: v.roomSeq, digest: v.digest, matches });
      }
      const next = this.appliedThrough + 1;
      let b = this.placed.get(next);
      let own = true;
      if (b) this.placed.delete(next);
      else {
        b = this.held.get(next);
        own = false;
        if (!b) return;
        this.held.delete(next);
      }
      this.board.applyBatch(b.author, b.commands);
      events.push({ type: 'applied', roomSeq: next, batch: b, own, fromSync: b.fromSync ?? false });
      this.appliedThrough = next;
      if (this.wantBlobs(b.commands) && !this.syncing) this.requestBlobs(events);
    }
  }

  /// The images a batch names; true when it named any.
  wantBlobs(commands) {
    let named = false;
    for (const c of commands) {
      if (c.type === 'background' && c.image) {
        this.blobs.want(c.image.hash);
        named = true;
      }
    }
    return named;
  }

  requestBlobs(events) {
    for (const r of this.blobs.requests()) events.push({ type: 'reply', message: r });
  }

  /// The check of a 'blobArrived' event's bytes: its events ('blob', or 'blobFailed' and replies).
  blobChecked(arrived, ok) {
    return this.blobs.checked(arrived.hex, arrived.hash, arrived.bytes, ok);
  }
}
