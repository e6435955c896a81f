// The compact binary codec (docs/protocol.md section 2): command batches <-> bytes, against a
// codec state that sender and receiver advance batch by batch. Written from the spec; its tests
// (web/test/codec.test.mjs) check it against Vectors/binary-batches.txt and binary-invalid.txt.
//
// Commands are plain objects, each with its time `t` in ms (a Number; a BigInt only for times
// past 2^53, which the codec allows):
//   {t, type: 'point', stroke, tool: 1 pen | 2 eraser, phase: 1 start | 2 move | 3 end, x, y}
//   {t, type: 'pen', color: 0..5, width: 1..3}   {t, type: 'undo' | 'redo', stroke}
//   {t, type: 'clear'}   {t, type: 'erase', author, stroke}
//   {t, type: 'addPage' | 'switchPage', page}   {t, type: 'lock' | 'unlock'}   {t, type: 'present', page}
//   {t, type: 'background', page, image: null | {hash: Uint8Array(32), width, height, fit: 1 contain | 2 cover | 3 stretch}}
//   {t, type: 'unknown', kind, payload: Uint8Array}
import { HEADER, KIND, TIME, RESIDUAL, SIGN } from './tables.mjs';

export const MAX_COMMANDS = 65536;
export const MAX_BATCH_BYTES = 1 << 22;
export const MAX_OPAQUE_BYTES = 1 << 16;
/// Authors a codec state keeps a stroke context for (2.4); one more empties the table.
export const MAX_AUTHORS = 1024;

const M = 4096;
const L = 1 << 24;
const MAX_RAW_BITS = 23;
const GRID_LIMIT = 2 ** 40;
const UINT32_MAX = 0xffffffff;
const SAFE = Number.MAX_SAFE_INTEGER;

/// A typed codec error; `code` names the BinaryCodecError case of the spec (2.5).
export class CodecError extends Error {
  constructor(code, detail) {
    super(detail === undefined ? code : `${code}(${detail})`);
    this.code = code;
  }
}
const fail = (code, detail) => { throw new CodecError(code, detail); };

// Table ids in the spec's flat order: H, K[0..3], T[0..3], R[0..19], S[0..11].
const ROWS = [...HEADER, ...KIND, ...TIME, ...RESIDUAL, ...SIGN];
const TABLES = ROWS.map((row) => {
  const freq = Uint16Array.from(row);
  const start = new Uint16Array(row.length);
  const lut = new Uint8Array(M);
  let c = 0;
  row.forEach((f, s) => {
    start[s] = c;
    lut.fill(s, c, c + f);
    c += f;
  });
  if (c !== M) throw new Error('codec table does not sum to 4096');
  return { freq, start, lut };
});
const T_HEADER = 0;
const tKind = (c) => 1 + c;
const tTime = (g) => 5 + g;
const tResidual = (i) => 9 + i;
const tSign = (i) => 29 + i;

// Kind symbols (2.1).
const K_MOVE = 1, K_END = 2, K_START_PEN = 3, K_START_ERASER = 4, K_POINT = 5, K_PEN = 6, K_UNDO = 7;
const K_REDO = 8, K_CLEAR = 9, K_ERASE = 10, K_ADD_PAGE = 11, K_SWITCH_PAGE = 12, K_ROOM = 13;
const K_OPAQUE = 14, K_MOVE_NEXT_FRAME = 15;
/// The command kind number of `background` (protocol.md 1), carried in the opaque form.
export const KIND_BACKGROUND = 10;
export const MAX_BACKGROUND_SIDE = 16384;

/// A background's payload: page:varint, then 0, or 1 hash[32] width:varint height:varint fit:u8.
function encodeBackground(cmd) {
  const out = [];
  const varint = (v) => { while (v >= 0x80) { out.push((v % 128) | 0x80); v = Math.floor(v / 128); } out.push(v); };
  varint(cmd.page);
  if (cmd.image === null) { out.push(0); return out; }
  out.push(1, ...cmd.image.hash);
  varint(cmd.image.width);
  varint(cmd.image.height);
  out.push(cmd.image.fit);
  return out;
}

/// Null unless `p` is exactly one well-formed background (minimal varints, nothing after it).
function decodeBackground(p) {
  let i = 0;
  const varint = () => {
    let v = 0, scale = 1;
    for (let n = 0; n < 5 && i < p.length; n++) {
      const b = p[i++];
      if (b === 0 && n > 0) return null;
      v += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return v <= UINT32_MAX ? v : null;
      scale *= 128;
    }
    return null;
  };
  const page = varint();
  if (page === null || i >= p.length) return null;
  const flag = p[i++];
  if (flag === 0) return i === p.length ? { page, image: null } : null;
  if (flag !== 1 || p.length - i < 32) return null;
  const hash = p.slice(i, i + 32);
  i += 32;
  const width = varint(), height = varint();
  if (width === null || height === null || i + 1 !== p.length) return null;
  const fit = p[i];
  if (![1, 2, 3].includes(fit) || width < 1 || height < 1 || width > MAX_BACKGROUND_SIDE || height > MAX_BACKGROUND_SIDE) return null;
  return { page, image: { hash, width, height, fit } };
}

// ---- 64-bit helpers: Numbers while exact, BigInts beyond 2^53 ----

const POW2 = Array.from({ length: 65 }, (_, k) => 2 ** k);
const pow2 = (k) => POW2[k];
function bitLength(v) {
  if (typeof v === 'bigint') return v === 0n ? 0 : v.toString(2).length;
  if (v === 0) return 0;
  if (v < 2 ** 32) return 32 - Math.clz32(v);
  return 64 - Math.clz32(Math.floor(v / 2 ** 32));
}
const normal = (b) => (b <= BigInt(SAFE) ? Number(b) : b);
function zigzag(d) {
  if (typeof d === 'number' && Math.abs(d) < 2 ** 51) return d >= 0 ? 2 * d : -2 * d - 1;
  const b = BigInt.asIntN(64, BigInt(d));
  return normal(BigInt.asUintN(64, (b << 1n) ^ (b >> 63n)));
}
function unzigzag(z) {
  if (typeof z === 'number') return z % 2 === 1 ? -(z + 1) / 2 : z / 2;
  return normal((z >> 1n) ^ -(z & 1n));
}
/// (a + d) mod 2^64, a and the result unsigned.
function add64(a, d) {
  if (typeof a === 'number' && typeof d === 'number') {
    const r = a + d;
    if (r >= 0 && r <= SAFE) return r;
  }
  return normal(BigInt.asUintN(64, BigInt(a) + BigInt(d)));
}
/// (a - b) as a signed 64-bit difference.
function sub64(a, b) {
  if (typeof a === 'number' && typeof b === 'number') {
    const r = a - b;
    if (Math.abs(r) <= SAFE) return r;
  }
  return normal(BigInt.asIntN(64, BigInt(a) - BigInt(b)));
}

// ---- times on the 60 Hz grid (2.1) ----

const frameOf = (t) => Math.floor((t * 60 + 500) / 1000);
const gridTime = (f) => Math.floor((f * 1000 + 30) / 60);
const isOnGrid = (t) => typeof t === 'number' && t < GRID_LIMIT && gridTime(frameOf(t)) === t;

// ---- stroke context and codec state (2.4) ----

function initialContext() {
  return { t: 0, frame: 0, stroke: 0, tool: 1, open: false, count: 0, x0: 0, x1: 0, x2: 0, y0: 0, y1: 0, y2: 0, ax: 0, ay: 0 };
}
const copyContext = (c) => ({ ...c });
function setTime(c, t) {
  c.t = t;
  c.frame = isOnGrid(t) ? frameOf(t) : -1;
}
function record(c, p, continues) {
  c.x2 = c.x1; c.x1 = c.x0; c.x0 = p.x;
  c.y2 = c.y1; c.y1 = c.y0; c.y0 = p.y;
  if (continues) {
    if (c.count < 3) c.count += 1;
  } else {
    c.count = 1;
    c.ax = p.x;
    c.ay = p.y;
  }
  c.stroke = p.stroke;
  c.tool = p.tool;
  c.open = p.phase !== 3;
}
const continuesStroke = (c, stroke, phase) => c.count > 0 && stroke === c.stroke && phase !== 1;
const kindContext = (c) => (c.open ? c.count : 0);

/// One direction's codec state: the last batch's author and a stroke context per author.
export class CodecState {
  constructor() { this.reset(); }
  reset() {
    this.hasCurrent = false;
    this.currentAuthor = 0;
    this.current = initialContext();
    this.others = new Map();
  }
  get lastAuthor() { return this.hasCurrent ? this.currentAuthor : null; }
  context(author) {
    if (this.hasCurrent && this.currentAuthor === author) return this.current;
    return this.others.get(author) ?? initialContext();
  }
  commit(author, context) {
    if (this.hasCurrent && this.currentAuthor === author) {
      this.current = context;
      return;
    }
    if (this.hasCurrent) {
      if (!this.others.has(this.currentAuthor) && this.others.size + 1 >= MAX_AUTHORS) this.others.clear();
      this.others.set(this.currentAuthor, this.current);
    }
    this.others.delete(author);
    this.currentAuthor = author;
    this.hasCurrent = true;
    this.current = context;
  }
  clone() {
    const s = new CodecState();
    s.hasCurrent = this.hasCurrent;
    s.currentAuthor = this.currentAuthor;
    s.current = copyContext(this.current);
    s.others = new Map([...this.others].map(([a, c]) => [a, copyContext(c)]));
    return s;
  }
}

// ---- prediction and residual symbols (2.1) ----

function predict(p0, p1, p2, count, c) {
  if (count === 1) return p0;
  const v1 = p0 - p1;
  let q;
  if (count === 2) {
    q = p0 + Math.floor((v1 * (c === 0 ? 59 : 8) + 32) / 64);
  } else {
    const v2 = p1 - p2;
    if (c === 0) q = p0 + Math.floor((v1 * 99 - v2 * 45 + 32) / 64);
    else if (c === 1) q = p0 + Math.floor((v1 * 11 - v2 * 2 + 32) / 64);
    else q = p0 + Math.floor((v1 * 35 - v2 * 11 + 32) / 64);
  }
  return Math.min(Math.max(q, -2147483648), 2147483647);
}
const timeClass = (timeSymbol) => (timeSymbol === 1 ? 0 : timeSymbol === 2 ? 1 : 2);
const residualBase = (n, c) => (n === 0 ? 0 : 2 + ((n - 1) * 3 + c) * 2);
const extraBits = (s) => (s < 4 ? (s === 0 ? 0 : 1) : Math.floor(s / 4));
/// A residual's magnitude symbol, and its extra raw bits (mantissa, then the sign) and their count.
function residualSymbol(r) {
  const a = Math.abs(r);
  const sign = r < 0 ? 1 : 0;
  if (a < 4) return [a, sign, a === 0 ? 0 : 1];
  const c = bitLength(a);
  const low = c - 3;
  const symbol = 4 * (c - 2) + (Math.floor(a / pow2(low)) & 3);
  return [symbol, (a % pow2(low)) * 2 + sign, c - 2];
}
function residualValue(s, extra) {
  const a = s < 4 ? s : (4 | (s & 3)) * pow2(Math.floor(s / 4) - 1) + Math.floor(extra / 2);
  return extra % 2 === 1 ? -a : a;
}

// ---- the rANS decoder (2.2) ----

class RansDecoder {
  constructor(bytes) {
    const n = bytes.length;
    const stateBytes = n <= 4 ? n : 4;
    let x = 0;
    for (let i = 0; i < stateBytes; i++) x = x * 256 + bytes[i];
    if (x === 0 || (n <= 4 && bytes[0] === 0) || (n > 4 && x < L)) fail('badState');
    this.x = x;
    this.bytes = bytes;
    this.i = stateBytes;
    this.canonical = true;
  }
  renormalise(xMax) {
    const b = this.bytes;
    if (this.x >= L || this.i >= b.length) return;
    this.x = this.x * 256 + b[this.i++];
    const first = this.x;
    while (this.x < L && this.i < b.length) this.x = this.x * 256 + b[this.i++];
    if (this.x < L && first < xMax) this.canonical = false;
  }
  get(table) {
    const t = TABLES[table];
    const slot = this.x & (M - 1);
    const s = t.lut[slot];
    const f = t.freq[s];
    this.x = f * (this.x >>> 12) + slot - t.start[s];
    if (this.x < L && this.i < this.bytes.length) this.renormalise(f * 1048576);
    return s;
  }
  bits(k) {
    if (k === 0) return 0;
    const v = this.x & (POW2[k] - 1);
    this.x >>>= k;
    if (this.x < L && this.i < this.bytes.length) this.renormalise(POW2[32 - k]);
    return v;
  }
  /// Any number (0..64) of raw bits, most significant chunk first.
  wide(k) {
    if (k <= 52) {
      let v = 0;
      for (let r = k; r > 0;) {
        const c = Math.min(MAX_RAW_BITS, r);
        r -= c;
        v = v * pow2(c) + this.bits(c);
      }
      return v;
    }
    let v = 0n;
    for (let r = k; r > 0;) {
      const c = Math.min(MAX_RAW_BITS, r);
      r -= c;
      v = (v << BigInt(c)) | BigInt(this.bits(c));
    }
    return normal(v);
  }
  /// An unsigned integer (bit length in 7 bits, then the bits below the leading one); null past 64 bits.
  uint() {
    const n = this.bits(7);
    if (n === 0) return 0;
    if (n > 64) return null;
    const rest = this.wide(n - 1);
    return n <= 53 ? pow2(n - 1) + rest : normal((1n << BigInt(n - 1)) | BigInt(rest));
  }
  get atEnd() { return this.i === this.bytes.length && this.x === 1; }
  get cleanEnd() { return this.atEnd && this.canonical; }
}

function uint32(d) {
  const v = d.uint();
  if (v === null || v > UINT32_MAX) fail('badField');
  return v;
}
function strokeDelta(d, c) {
  const z = d.uint();
  if (z === null || z > UINT32_MAX) fail('badField');
  return (c.stroke + unzigzag(z)) >>> 0;
}

/// getTime's second result (the time symbol), without allocating a pair per command.
let timeSymbolOut = 0;

/// Reads a command's time (2.1) and records it in the context; the symbol goes to timeSymbolOut.
function getTime(group, d, c) {
  const s = d.get(tTime(group));
  timeSymbolOut = s;
  if (s <= 24) {
    if (c.frame < 0) fail('badTime');
    let frames = s;
    if (s === 24) {
      const extra = d.uint();
      if (extra === null || extra >= GRID_LIMIT) fail('badTime');
      frames = extra + 24;
    }
    const f = c.frame + frames;
    const t = gridTime(f);
    if (t >= GRID_LIMIT) fail('badTime');
    c.t = t;
    c.frame = f;
    return t;
  }
  if (s === 25) {
    const z = d.uint();
    if (z === null) fail('badTime');
    const previous = c.t;
    const previousOnGrid = c.frame >= 0;
    const t = add64(previous, unzigzag(z));
    setTime(c, t);
    // The grid form is used whenever it applies (canonical form).
    if (t >= previous && previousOnGrid && c.frame >= 0) fail('badTime');
    return t;
  }
  return fail('badTime');
}

/// getCoordinates' results, without allocating a pair per point.
let xOut = 0;
let yOut = 0;

function getCoordinates(n, timeSymbol, d, c) {
  const cls = timeClass(timeSymbol);
  const base = residualBase(n, cls);
  const px = n === 0 ? c.ax : predict(c.x0, c.x1, c.x2, n, cls);
  const py = n === 0 ? c.ay : predict(c.y0, c.y1, c.y2, n, cls);
  const sx = d.get(tResidual(base));
  const sy = d.get(tResidual(base + 1));
  let bx = extraBits(sx);
  let by = extraBits(sy);
  let signX = 0;
  let signY = 0;
  const modelled = n < 3;
  if (modelled) {
    if (sx !== 0) {
      signX = d.get(tSign(4 * n));
      bx -= 1;
    }
    if (sy !== 0) {
      signY = d.get(tSign(4 * n + 1 + (sx === 0 ? 0 : 1 + signX)));
      by -= 1;
    }
  }
  let ex;
  let ey;
  if (bx + by <= MAX_RAW_BITS) {
    const both = d.bits(bx + by);
    ex = Math.floor(both / pow2(by));
    ey = both % pow2(by);
  } else {
    ex = d.wide(bx);
    ey = d.wide(by);
  }
  if (modelled) {
    ex = ex * 2 + signX;
    ey = ey * 2 + signY;
  }
  const x = px + residualValue(sx, ex);
  const y = py + residualValue(sy, ey);
  if (x < -2147483648 || x > 2147483647 || y < -2147483648 || y > 2147483647) fail('coordinateOutOfRange');
  xOut = x;
  yOut = y;
}

function simplePoint(kind, d, c) {
  let t;
  let timeSymbol = 1;
  if (kind === K_MOVE_NEXT_FRAME) {
    if (c.frame < 0) fail('badTime');
    const f = c.frame + 1;
    t = gridTime(f);
    if (t >= GRID_LIMIT) fail('badTime');
    c.t = t;
    c.frame = f;
  } else {
    t = getTime(kind === K_MOVE ? 0 : kind === K_END ? 1 : 2, d, c);
    timeSymbol = timeSymbolOut;
    if (kind === K_MOVE && timeSymbol === 1) fail('badTime');
  }
  const starts = kind === K_START_PEN || kind === K_START_ERASER;
  if (!starts && !c.open) fail('badField');
  getCoordinates(starts ? 0 : c.count, timeSymbol, d, c);
  const x = xOut;
  const y = yOut;
  const p = starts
    ? { t, type: 'point', stroke: (c.stroke + 1) >>> 0, tool: kind === K_START_PEN ? 1 : 2, phase: 1, x, y }
    : { t, type: 'point', stroke: c.stroke, tool: c.tool, phase: kind === K_END ? 3 : 2, x, y };
  record(c, p, !starts);
  return p;
}

function otherCommand(kind, d, c, budget) {
  switch (kind) {
    case K_POINT: {
      const t = getTime(2, d, c);
      const timeSymbol = timeSymbolOut;
      const stroke = strokeDelta(d, c);
      const tool = d.bits(1) === 0 ? 1 : 2;
      const phase = d.bits(2);
      if (phase === 0) fail('badField');
      const continues = continuesStroke(c, stroke, phase);
      if (c.open && continues && tool === c.tool) fail('badField');
      if (phase === 1 && stroke === ((c.stroke + 1) >>> 0)) fail('badField');
      getCoordinates(continues ? c.count : 0, timeSymbol, d, c);
      const p = { t, type: 'point', stroke, tool, phase, x: xOut, y: yOut };
      record(c, p, continues);
      return p;
    }
    case K_PEN: {
      const t = getTime(3, d, c);
      const color = d.bits(3);
      const width = d.bits(2);
      if (color > 5 || width < 1) fail('badField');
      return { t, type: 'pen', color, width };
    }
    case K_UNDO:
    case K_REDO: {
      const t = getTime(3, d, c);
      return { t, type: kind === K_UNDO ? 'undo' : 'redo', stroke: strokeDelta(d, c) };
    }
    case K_CLEAR:
      return { t: getTime(3, d, c), type: 'clear' };
    case K_ERASE: {
      const t = getTime(3, d, c);
      const author = uint32(d);
      return { t, type: 'erase', author, stroke: uint32(d) };
    }
    case K_ADD_PAGE:
    case K_SWITCH_PAGE: {
      const t = getTime(3, d, c);
      return { t, type: kind === K_ADD_PAGE ? 'addPage' : 'switchPage', page: uint32(d) };
    }
    case K_ROOM: {
      const t = getTime(3, d, c);
      const which = d.bits(2);
      if (which === 0) return { t, type: 'lock' };
      if (which === 1) return { t, type: 'unlock' };
      if (which === 2) return { t, type: 'present', page: uint32(d) };
      return fail('badField');
    }
    case K_OPAQUE: {
      const t = getTime(3, d, c);
      const code = d.bits(8);
      const length = d.uint();
      if (length === null) fail('badField');
      // Raw bytes cost their size in the coder: a valid payload never exceeds the input.
      if (length > MAX_OPAQUE_BYTES || length > budget.bytes) fail('payloadTooLarge', length);
      budget.bytes -= length;
      const payload = new Uint8Array(length);
      for (let i = 0; i < length; i++) payload[i] = d.bits(8);
      if (code === KIND_BACKGROUND) {
        const background = decodeBackground(payload);
        if (background === null) return fail('badField');
        return { t, type: 'background', ...background };
      }
      return { t, type: 'unknown', kind: code, payload };
    }
    default:
      return fail('reservedKind', kind);
  }
}

/// Decodes one batch and advances `state`; returns {author, commands}. On error (a
/// CodecError) `state` is unchanged.
export function decodeBatch(bytes, state) {
  if (bytes.length === 0 || bytes.length > MAX_BATCH_BYTES) fail('badLength', bytes.length);
  const d = new RansDecoder(bytes);
  const header = d.get(T_HEADER);
  let author;
  if (header === 0) {
    if (!state.hasCurrent) fail('missingContext');
    author = state.currentAuthor;
  } else if (header === 1 || header === 2) {
    const raw = d.uint();
    if (raw === null || raw > UINT32_MAX) fail('badField');
    author = raw;
    if (header === 1 && state.hasCurrent && state.currentAuthor === author) fail('badField');
  } else {
    fail('unsupportedHeader', header);
  }
  const c = header === 2 ? initialContext() : copyContext(state.context(author));
  const budget = { bytes: bytes.length };
  const commands = [];
  let decoded = 0;
  while (!d.atEnd) {
    const kind = d.get(tKind(kindContext(c)));
    if (++decoded > MAX_COMMANDS) fail('tooManyCommands');
    if ((kind >= K_MOVE && kind <= K_START_ERASER) || kind === K_MOVE_NEXT_FRAME) commands.push(simplePoint(kind, d, c));
    else commands.push(otherCommand(kind, d, c, budget));
  }
  if (!d.cleanEnd) fail('corrupt');
  if (header === 2) state.reset();
  state.commit(author, c);
  return { author, commands };
}

/// Whether `bytes` start a self-contained batch (header 2); false for anything else.
export function isSelfContained(bytes) {
  try {
    return new RansDecoder(bytes).get(T_HEADER) === 2;
  } catch {
    return false;
  }
}

// ---- the encoder ----

class OpWriter {
  constructor() {
    this.tables = [];
    this.values = [];
  }
  /// A symbol of a table (table id >= 0), or k raw bits (stored as table -k).
  put(table, symbol) {
    this.tables.push(table);
    this.values.push(symbol);
  }
  putBits(value, k) {
    if (k === 0) return;
    this.tables.push(-k);
    this.values.push(value % pow2(k));
  }
  putWide(value, k) {
    if (typeof value === 'bigint') {
      for (let r = k; r > 0;) {
        const c = Math.min(MAX_RAW_BITS, r);
        r -= c;
        this.putBits(Number((value >> BigInt(r)) & ((1n << BigInt(c)) - 1n)), c);
      }
      return;
    }
    for (let r = k; r > 0;) {
      const c = Math.min(MAX_RAW_BITS, r);
      r -= c;
      this.putBits(Math.floor(value / pow2(r)) % pow2(c), c);
    }
  }
  putUInt(value) {
    const n = bitLength(value);
    this.putBits(n, 7);
    if (n > 1) this.putWide(value, n - 1);
  }
  putPair(a, aBits, b, bBits) {
    if (aBits + bBits <= MAX_RAW_BITS) {
      this.putBits(a * pow2(bBits) + b, aBits + bBits);
    } else {
      this.putWide(a, aBits);
      this.putWide(b, bBits);
    }
  }
  /// Codes the ops backwards from state 1 and returns the batch's bytes.
  finish() {
    const emitted = [];
    let x = 1;
    for (let i = this.tables.length - 1; i >= 0; i--) {
      const table = this.tables[i];
      const value = this.values[i];
      if (table < 0) {
        const k = -table;
        const xMax = pow2(32 - k);
        while (x >= xMax) {
          emitted.push(x & 255);
          x >>>= 8;
        }
        x = x * pow2(k) + value;
      } else {
        const t = TABLES[table];
        const f = t.freq[value];
        const xMax = f * 1048576;
        while (x >= xMax) {
          emitted.push(x & 255);
          x >>>= 8;
        }
        x = Math.floor(x / f) * M + (x % f) + t.start[value];
      }
    }
    const stateBytes = emitted.length === 0 ? Math.ceil(bitLength(x) / 8) : 4;
    const out = new Uint8Array(stateBytes + emitted.length);
    for (let i = 0; i < stateBytes; i++) out[i] = Math.floor(x / pow2(8 * (stateBytes - 1 - i))) & 255;
    for (let i = 0; i < emitted.length; i++) out[stateBytes + i] = emitted[emitted.length - 1 - i];
    return out;
  }
}

/// The time symbol for `t` after the context's time, and the frame of `t` (-1 off the grid).
function timeSymbolFor(t, c) {
  if (!isOnGrid(t)) return [25, -1];
  const f = frameOf(t);
  if (c.frame < 0 || t < c.t) return [25, f];
  const frames = f - c.frame;
  return [frames < 24 ? frames : 24, f];
}

function putTime(t, group, c, w) {
  const [symbol, f] = timeSymbolFor(t, c);
  w.put(tTime(group), symbol);
  if (symbol === 24) w.putUInt(f - c.frame - 24);
  else if (symbol === 25) w.putUInt(zigzag(sub64(t, c.t)));
  c.t = t;
  c.frame = f;
  return symbol;
}

function putStrokeDelta(stroke, c, w) {
  w.putUInt(zigzag(((stroke - c.stroke) << 0)));
}

function putPoint(p, c, w, kindTable) {
  const continues = continuesStroke(c, p.stroke, p.phase);
  let kind = K_POINT;
  if (c.open && continues && p.tool === c.tool) kind = p.phase === 2 ? K_MOVE : K_END;
  else if (p.phase === 1 && p.stroke === ((c.stroke + 1) >>> 0)) kind = p.tool === 1 ? K_START_PEN : K_START_ERASER;
  const group = kind === K_MOVE ? 0 : kind === K_END ? 1 : 2;
  let [timeSymbol, f] = timeSymbolFor(p.t, c);
  if (kind === K_MOVE && timeSymbol === 1) {
    w.put(kindTable, K_MOVE_NEXT_FRAME);
    c.t = p.t;
    c.frame = f;
  } else {
    w.put(kindTable, kind);
    timeSymbol = putTime(p.t, group, c, w);
  }
  if (kind === K_POINT) {
    putStrokeDelta(p.stroke, c, w);
    w.putBits(p.tool === 1 ? 0 : 1, 1);
    w.putBits(p.phase, 2);
  }
  const cls = timeClass(timeSymbol);
  const n = continues ? c.count : 0;
  const base = residualBase(n, cls);
  const px = n === 0 ? c.ax : predict(c.x0, c.x1, c.x2, n, cls);
  const py = n === 0 ? c.ay : predict(c.y0, c.y1, c.y2, n, cls);
  const [sx, ex, bx] = residualSymbol(p.x - px);
  const [sy, ey, by] = residualSymbol(p.y - py);
  w.put(tResidual(base), sx);
  w.put(tResidual(base + 1), sy);
  if (n < 3) {
    if (sx !== 0) w.put(tSign(4 * n), ex % 2);
    if (sy !== 0) w.put(tSign(4 * n + 1 + (sx === 0 ? 0 : 1 + (ex % 2))), ey % 2);
    w.putPair(Math.floor(ex / 2), bx === 0 ? 0 : bx - 1, Math.floor(ey / 2), by === 0 ? 0 : by - 1);
  } else {
    w.putPair(ex, bx, ey, by);
  }
  record(c, p, continues);
}

function putCommand(cmd, c, w) {
  const kindTable = tKind(kindContext(c));
  switch (cmd.type) {
    case 'point':
      return putPoint(cmd, c, w, kindTable);
    case 'pen':
      w.put(kindTable, K_PEN);
      putTime(cmd.t, 3, c, w);
      w.putBits(cmd.color, 3);
      w.putBits(cmd.width, 2);
      return;
    case 'undo':
    case 'redo':
      w.put(kindTable, cmd.type === 'undo' ? K_UNDO : K_REDO);
      putTime(cmd.t, 3, c, w);
      return putStrokeDelta(cmd.stroke, c, w);
    case 'clear':
      w.put(kindTable, K_CLEAR);
      putTime(cmd.t, 3, c, w);
      return;
    case 'erase':
      w.put(kindTable, K_ERASE);
      putTime(cmd.t, 3, c, w);
      w.putUInt(cmd.author);
      w.putUInt(cmd.stroke);
      return;
    case 'addPage':
    case 'switchPage':
      w.put(kindTable, cmd.type === 'addPage' ? K_ADD_PAGE : K_SWITCH_PAGE);
      putTime(cmd.t, 3, c, w);
      w.putUInt(cmd.page);
      return;
    case 'lock':
    case 'unlock':
    case 'present':
      w.put(kindTable, K_ROOM);
      putTime(cmd.t, 3, c, w);
      w.putBits(cmd.type === 'lock' ? 0 : cmd.type === 'unlock' ? 1 : 2, 2);
      if (cmd.type === 'present') w.putUInt(cmd.page);
      return;
    case 'background':
    case 'unknown': {
      const kind = cmd.type === 'background' ? KIND_BACKGROUND : cmd.kind;
      const payload = cmd.type === 'background' ? encodeBackground(cmd) : cmd.payload;
      if (payload.length > MAX_OPAQUE_BYTES) fail('payloadTooLarge', payload.length);
      w.put(kindTable, K_OPAQUE);
      putTime(cmd.t, 3, c, w);
      w.putBits(kind, 8);
      w.putUInt(payload.length);
      for (const b of payload) w.putBits(b, 8);
      return;
    }
    default:
      throw new TypeError(`not a command: ${cmd.type}`);
  }
}

function checkCommand(cmd) {
  const int32 = (v) => Number.isInteger(v) && v >= -2147483648 && v <= 2147483647;
  const uint32 = (v) => Number.isInteger(v) && v >= 0 && v <= UINT32_MAX;
  const time = typeof cmd.t === 'bigint' ? cmd.t >= 0n && cmd.t < 2n ** 64n : Number.isSafeInteger(cmd.t) && cmd.t >= 0;
  let ok = time;
  switch (cmd.type) {
    case 'point': ok &&= uint32(cmd.stroke) && (cmd.tool === 1 || cmd.tool === 2) && [1, 2, 3].includes(cmd.phase) && int32(cmd.x) && int32(cmd.y); break;
    case 'pen': ok &&= Number.isInteger(cmd.color) && cmd.color >= 0 && cmd.color <= 5 && [1, 2, 3].includes(cmd.width); break;
    case 'undo': case 'redo': ok &&= uint32(cmd.stroke); break;
    case 'erase': ok &&= uint32(cmd.author) && uint32(cmd.stroke); break;
    case 'addPage': case 'switchPage': case 'present': ok &&= uint32(cmd.page); break;
    case 'background':
      ok &&= uint32(cmd.page) && (cmd.image === null || (cmd.image.hash instanceof Uint8Array && cmd.image.hash.length === 32
        && [cmd.image.width, cmd.image.height].every((v) => Number.isInteger(v) && v >= 1 && v <= MAX_BACKGROUND_SIDE)
        && [1, 2, 3].includes(cmd.image.fit)));
      break;
    case 'unknown': ok &&= Number.isInteger(cmd.kind) && cmd.kind >= 0 && cmd.kind <= 255 && !(cmd.kind >= 1 && cmd.kind <= KIND_BACKGROUND); break;
    default: break;
  }
  if (!ok) throw new TypeError(`invalid command ${JSON.stringify(cmd, (k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
}

/// Encodes a batch of `author` against `state` and advances it; `selfContained` resets the state
/// first (history chunks, snapshots). Returns the bytes. On error `state` is unchanged.
export function encodeBatch(author, commands, state, { selfContained = false } = {}) {
  if (commands.length > MAX_COMMANDS) fail('tooManyCommands');
  const w = new OpWriter();
  if (selfContained) {
    w.put(T_HEADER, 2);
    w.putUInt(author);
  } else if (state.lastAuthor === author) {
    w.put(T_HEADER, 0);
  } else {
    w.put(T_HEADER, 1);
    w.putUInt(author);
  }
  const c = selfContained ? initialContext() : copyContext(state.context(author));
  for (const cmd of commands) {
    checkCommand(cmd);
    putCommand(cmd, c, w);
  }
  const bytes = w.finish();
  if (bytes.length > MAX_BATCH_BYTES) fail('batchTooLarge');
  if (selfContained) state.reset();
  state.commit(author, c);
  return bytes;
}
