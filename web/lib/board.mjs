// The board: the deterministic fold over a room's log (docs/protocol.md section 1), and its
// digest. The same fold runs in the daemon (Sources/InkCodec/Board.swift); equal logs give equal
// digests, which is how a page checks that it shows the room's board.

export const MAX_STROKES = 1 << 20;
export const MAX_POINTS_PER_STROKE = 1 << 16;
export const MAX_PAGES = 1024;
export const MAX_UNDO_DEPTH = 1024;
export const MAX_AUTHORS = 1 << 16;
export const ERASER_COLOR = 5;

const key = (author, stroke) => `${author}:${stroke}`;
const newAuthor = () => ({ color: 0, width: 1, page: 0, undo: [], redo: [] });
const isInitial = (a) => a.color === 0 && a.width === 1 && a.page === 0 && a.undo.length === 0 && a.redo.length === 0;

/// A stroke as the board keeps it; `xs`/`ys` are its points in millionths of the view.
class Stroke {
  constructor(author, id, page, tool, color, width) {
    this.author = author;
    this.id = id;
    this.page = page;
    this.tool = tool;
    this.color = color;
    this.width = width;
    this.xs = [];
    this.ys = [];
    this.visible = true;
    this.ended = false;
    this.deleted = false;
  }
  get pointCount() { return this.xs.length; }
  /// `author:id`, unique in the room.
  get key() { return key(this.author, this.id); }
}

export class Board {
  constructor() {
    this.pages = [0];
    this.locked = false;
    this.presentedPage = null;
    /// Each page's background image {hash, width, height, fit}, if it has one.
    this.backgrounds = new Map();
    /// Strokes by `author:id`, and their drawing order (eraser strokes erase what is below).
    this.strokes = new Map();
    this.order = [];
    this.authors = new Map();
    /// Bumped by every change; renderers compare it to know when to redraw.
    this.version = 0;
    /// The stroke the last point went to (a cache; `deleted` marks one that left the board).
    this.lastStroke = null;
  }

  get strokeCount() { return this.order.length; }
  stroke(author, id) { return this.strokes.get(key(author, id)); }
  author(id) { return this.authors.get(id) ?? newAuthor(); }
  /// The strokes on `page` (visible and undone), in drawing order.
  strokesOn(page) { return this.order.map((k) => this.strokes.get(k)).filter((s) => s.page === page); }
  visibleStrokesOn(page) { return this.strokesOn(page).filter((s) => s.visible); }

  applyBatch(author, commands) {
    for (const c of commands) this.apply(author, c);
  }

  apply(author, c) {
    this.version += 1;
    switch (c.type) {
      case 'point': return this.addPoint(author, c);
      case 'pen': return this.updateAuthor(author, (a) => { a.color = c.color; a.width = c.width; });
      case 'undo': return this.undo(author, c.stroke);
      case 'redo': return this.redo(author, c.stroke);
      case 'clear': {
        const page = this.author(author).page;
        return this.deleteStrokes(this.order.filter((k) => this.strokes.get(k).page === page));
      }
      case 'erase': return this.deleteStrokes([key(c.author, c.stroke)]);
      case 'addPage':
        if (!this.pages.includes(c.page) && this.pages.length < MAX_PAGES) this.pages.push(c.page);
        return undefined;
      case 'switchPage':
        if (this.pages.includes(c.page)) this.updateAuthor(author, (a) => { a.page = c.page; });
        return undefined;
      case 'lock': this.locked = true; return undefined;
      case 'unlock': this.locked = false; return undefined;
      case 'present':
        if (this.pages.includes(c.page)) this.presentedPage = c.page;
        return undefined;
      case 'background':
        if (!this.pages.includes(c.page)) return undefined;
        if (c.image === null) this.backgrounds.delete(c.page); else this.backgrounds.set(c.page, c.image);
        return undefined;
      default: return undefined; // unknown kinds: kept by relays, ignored by the fold
    }
  }

  updateAuthor(id, change) {
    let a = this.authors.get(id);
    if (a === undefined) {
      if (this.authors.size >= MAX_AUTHORS) return;
      a = newAuthor();
      this.authors.set(id, a);
    }
    change(a);
  }

  addPoint(author, p) {
    // Most points continue the stroke the previous point went to: skip the key and the lookup.
    const last = this.lastStroke;
    if (last !== null && last.author === author && last.id === p.stroke && !last.deleted) {
      if (p.phase === 3) last.ended = true;
      if (last.xs.length < MAX_POINTS_PER_STROKE) {
        last.xs.push(p.x);
        last.ys.push(p.y);
      }
      return;
    }
    const k = key(author, p.stroke);
    let s = this.strokes.get(k);
    if (s === undefined) {
      if (this.order.length >= MAX_STROKES || (!this.authors.has(author) && this.authors.size >= MAX_AUTHORS)) return;
      const a = this.authors.get(author) ?? newAuthor();
      this.authors.set(author, a);
      const discarded = a.redo;
      a.redo = [];
      a.undo.push(p.stroke);
      if (a.undo.length > MAX_UNDO_DEPTH) a.undo.shift();
      this.deleteStrokes(discarded.map((id) => key(author, id)));
      s = new Stroke(author, p.stroke, a.page, p.tool, a.color, a.width);
      this.strokes.set(k, s);
      this.order.push(k);
    }
    this.lastStroke = s;
    if (p.phase === 3) s.ended = true;
    if (s.xs.length < MAX_POINTS_PER_STROKE) {
      s.xs.push(p.x);
      s.ys.push(p.y);
    }
  }

  undo(author, id) {
    const a = this.authors.get(author);
    const s = this.strokes.get(key(author, id));
    const index = a ? a.undo.lastIndexOf(id) : -1;
    if (index < 0 || s === undefined) return;
    a.undo.splice(index, 1);
    a.redo.push(id);
    if (a.redo.length > MAX_UNDO_DEPTH) a.redo.shift();
    s.visible = false;
  }

  redo(author, id) {
    const a = this.authors.get(author);
    const s = this.strokes.get(key(author, id));
    const index = a ? a.redo.lastIndexOf(id) : -1;
    if (index < 0 || s === undefined) return;
    a.redo.splice(index, 1);
    a.undo.push(id);
    if (a.undo.length > MAX_UNDO_DEPTH) a.undo.shift();
    s.visible = true;
  }

  /// Deletes strokes and takes them off every undo/redo stack.
  deleteStrokes(keys) {
    const doomed = new Set(keys.filter((k) => this.strokes.has(k)));
    if (doomed.size === 0) return;
    const owners = new Set();
    for (const k of doomed) {
      const s = this.strokes.get(k);
      s.deleted = true;
      owners.add(s.author);
      this.strokes.delete(k);
    }
    this.order = this.order.filter((k) => !doomed.has(k));
    for (const owner of owners) {
      const a = this.authors.get(owner);
      if (!a) continue;
      a.undo = a.undo.filter((id) => !doomed.has(key(owner, id)));
      a.redo = a.redo.filter((id) => !doomed.has(key(owner, id)));
    }
  }

  /// FNV-1a 64 over the canonical encoding of protocol.md section 1, as 16 hex digits.
  get digest() {
    const h = new Fnv64();
    h.byte(1);
    h.u32(this.pages.length);
    for (const p of this.pages) h.u32(p);
    h.byte(this.locked ? 1 : 0);
    h.byte(this.presentedPage !== null ? 1 : 0);
    h.u32(this.presentedPage ?? 0);
    h.u32(this.order.length);
    for (const k of this.order) {
      const s = this.strokes.get(k);
      h.u32(s.author);
      h.u32(s.id);
      h.u32(s.page);
      h.byte(s.tool);
      h.byte(s.color);
      h.byte(s.width);
      h.byte(s.visible ? 1 : 0);
      h.byte(s.ended ? 1 : 0);
      h.u32(s.xs.length);
      for (let i = 0; i < s.xs.length; i++) {
        h.u32(s.xs[i]);
        h.u32(s.ys[i]);
      }
    }
    const active = [...this.authors.keys()].sort((a, b) => a - b).filter((id) => !isInitial(this.authors.get(id)));
    h.u32(active.length);
    for (const id of active) {
      const a = this.authors.get(id);
      h.u32(id);
      h.byte(a.color);
      h.byte(a.width);
      h.u32(a.page);
      h.u32(a.undo.length);
      for (const s of a.undo) h.u32(s);
      h.u32(a.redo.length);
      for (const s of a.redo) h.u32(s);
    }
    // Only when a page has a background, so boards without keep their digests.
    if (this.backgrounds.size > 0) {
      h.u32(this.backgrounds.size);
      for (const p of this.pages) {
        const b = this.backgrounds.get(p);
        if (b === undefined) continue;
        h.u32(p);
        for (const byte of b.hash) h.byte(byte);
        h.u32(b.width);
        h.u32(b.height);
        h.byte(b.fit);
      }
    }
    return h.hex;
  }
}

/// FNV-1a 64 in two 32-bit halves (BigInt arithmetic per byte is far slower).
export class Fnv64 {
  constructor() {
    this.hi = 0xcbf29ce4;
    this.lo = 0x84222325;
  }
  byte(b) {
    // h = (h ^ b) * 0x100000001b3 mod 2^64: h * 0x1b3 plus h << 40.
    const lo = (this.lo ^ b) >>> 0;
    const low = lo * 0x1b3;
    const carry = Math.floor(low / 4294967296);
    this.lo = low >>> 0;
    this.hi = (Math.imul(this.hi, 0x1b3) + carry + (lo << 8)) >>> 0;
  }
  /// Little-endian, fixed width (an Int32 goes as its bit pattern); the four byte steps inline.
  u32(v) {
    const u = v >>> 0;
    let hi = this.hi;
    let lo = this.lo;
    for (let shift = 0; shift < 32; shift += 8) {
      const x = (lo ^ ((u >>> shift) & 255)) >>> 0;
      const low = x * 0x1b3;
      hi = (Math.imul(hi, 0x1b3) + Math.floor(low / 4294967296) + (x << 8)) >>> 0;
      lo = low >>> 0;
    }
    this.hi = hi;
    this.lo = lo;
  }
  get hex() { return this.hi.toString(16).padStart(8, '0') + this.lo.toString(16).padStart(8, '0'); }
}
