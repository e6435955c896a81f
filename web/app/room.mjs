// The board page, /room/NAME#token=...&user=...&role=...: watch and draw in a room as a
// first-class member (its own author id, history sync, digest check) over the WebSocket.
// The fragment never reaches the daemon in a request (browsers do not send it); the token goes
// only inside the join message.
import { RoomSession, sealingUnavailableReason } from '../lib/session.mjs';
import { decodePublicKey, encodePublicKey } from '../lib/sealed.mjs';
import { COLORS, drawBackground, drawStrokes } from '../lib/render.mjs';
import { hashHex } from '../lib/blobs.mjs';

const $ = (id) => document.getElementById(id);
const roomName = decodeURIComponent(location.pathname.slice('/room/'.length));
const params = new URLSearchParams(location.hash.slice(1));
const token = params.get('token') ?? '';

/// The claims of an `iw1.` token (protocol.md 8.3): readable by anyone, signed for the daemon.
function tokenClaims(text) {
  const parts = text.split('.');
  if (parts.length !== 3 || parts[0] !== 'iw1') return null;
  try {
    const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
    const claims = new TextDecoder().decode(Uint8Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0))).split('\n');
    return claims.length === 4 ? { room: claims[0], user: claims[1], role: claims[2], expiry: Number(claims[3]) } : null;
  } catch {
    return null;
  }
}

const claims = tokenClaims(token);
function defaultUser() {
  let name = localStorage.getItem('inkwire.user');
  if (!name) {
    name = `web-${Math.floor(Math.random() * 0x10000).toString(16).padStart(4, '0')}`;
    localStorage.setItem('inkwire.user', name);
  }
  return name;
}
const user = params.get('user') ?? claims?.user ?? defaultUser();
const role = params.get('role') ?? claims?.role ?? 'presenter';
const canDrawRole = role !== 'viewer';
/// A producer id for this page's life (protocol.md 5a): batches sent again keep it.
const origin = Math.floor(Math.random() * 2 ** 52) + 1;

document.title = `${roomName} — Inkwire`;
$('room-title').textContent = roomName;
$('who').textContent = `${user} (${role})`;
if (!canDrawRole) document.body.classList.add('viewer');

// ---- sealing: the page seals its session, or says visibly why it cannot ----

/// What the daemon offers (/info.json, protocol.md 8.5): `sealing` is `required` (protocol 2)
/// or `none`; `publicKey` its static key.
async function daemonInfo() {
  try {
    return await (await fetch('/info.json', { cache: 'no-store' })).json();
  } catch {
    return { sealing: 'unknown' };
  }
}
const info = await daemonInfo();
const unsealable = sealingUnavailableReason();
// A key in the link (`#key=`, as the status page's links carry) is pinned; else the key the
// daemon that served this page names (the same trust as the page's own code).
const linkKeyText = params.get('key');
const linkKey = linkKeyText === null ? null : decodePublicKey(linkKeyText);
const serverKey = linkKey ?? (info.publicKey ? decodePublicKey(info.publicKey) : null);
// Sealed unless the daemon says it does not seal (an unreadable /info.json is no reason to send in clear).
const daemonSeals = info.sealing !== 'none';
let cannotStart = null;
if (linkKeyText !== null && linkKey === null) cannotStart = `The link's key (${linkKeyText}) is not a daemon public key (43 characters of base64url, or 64 hex digits).`;
else if (daemonSeals && unsealable) {
  const secure = `https://${location.host}${location.pathname}${location.hash}`;
  cannotStart = `This page cannot seal its session: ${unsealable}. Nothing was sent. Open ${secure} instead.`;
}

function showSealing() {
  const pill = $('sealing');
  const warn = $('seal-warning');
  warn.textContent = '';
  if (cannotStart !== null) {
    pill.textContent = 'cannot seal';
    pill.className = 'pill bad';
    warn.textContent = cannotStart;
  } else if (daemonSeals) {
    pill.textContent = 'sealed';
    pill.className = 'pill ok';
    pill.title = `Noise NK with the daemon's key ${encodePublicKey(serverKey ?? new Uint8Array(32))}`;
  } else {
    pill.textContent = 'not sealed';
    pill.className = 'pill bad';
    warn.textContent = `Not sealed: strokes${token ? ' and the join token' : ''} travel unencrypted, because this daemon does not seal sessions`
      + (unsealable ? `, and ${unsealable}.` : '.');
  }
  warn.hidden = warn.textContent === '';
}
showSealing();

// ---- the session ----

const board = () => session.board;
let member = null;
let joinedOnce = false;
const state = {
  pen: 0,
  width: 1,
  viewPage: 0,
  follow: true,
  /// The page's own commands not yet handed to the session (flushed each animation frame).
  queue: [],
  /// Its own strokes' undo and redo stacks, as the board keeps them once folded.
  undo: [],
  redo: [],
  nextStroke: 1,
  drawing: null,
  startMs: performance.now(),
  lastT: 0,
  dirty: true,
  errors: [],
};

const session = new RoomSession({
  url: `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/ws`,
  room: roomName,
  user,
  role,
  token,
  origin,
  sealed: daemonSeals,
  serverKey,
  start: cannotStart === null,
  onEvent,
});
if (cannotStart !== null) setConnection('not connected', false);

function setConnection(text, ok) {
  const pill = $('connection');
  pill.textContent = text;
  pill.className = `pill ${ok ? 'ok' : 'bad'}`;
}

function onEvent(e) {
  switch (e.type) {
    case 'connected': setConnection('joining…', true); break;
    case 'joined':
      member = e.member;
      if (timing.joinedAt === null) timing.joinedAt = performance.now();
      if (!e.syncFollows && timing.syncedAt === null) timing.syncedAt = performance.now();
      setConnection(`joined as member ${e.member}`, true);
      if (!joinedOnce) {
        joinedOnce = true;
        adoptOwnState();
      }
      break;
    case 'refused':
      setConnection('refused', false);
      $('refused').textContent = `Join refused (${e.reason}): ${e.text}`;
      $('refused').hidden = false;
      break;
    case 'goingAway':
      if (session.ended) {
        setConnection(`ended: ${e.reason}`, false);
        $('refused').textContent = `The daemon ended this session (${e.reason}): ${e.text}`;
        $('refused').hidden = false;
      }
      break;
    case 'disconnected': if (!session.ended) setConnection('offline, reconnecting…', false); break;
    case 'sealError':
      if (e.fatal) {
        setConnection('refused', false);
        $('refused').textContent = `Not connected: ${e.text}. What this page sent was sealed to the pinned key, which that daemon does not hold.`;
        $('refused').hidden = false;
      } else {
        $('status-line').textContent = `sealed session failed (${e.code}): ${e.text}; reconnecting`;
      }
      break;
    case 'learnedKey': $('sealing').title = `the daemon's key ${encodePublicKey(e.key)} (learned, not pinned)`; break;
    case 'reconnecting': setConnection(`offline, retrying in ${(e.inMs / 1000).toFixed(1)} s`, false); break;
    case 'error':
      state.errors.push(e);
      $('status-line').textContent = e.code === 'permissionDenied' ? `You may not draw here: ${e.text}` : `${e.code}: ${e.text}`;
      break;
    case 'applied':
      // Arrival times of others' live batches (a bounded record, for benchmarks).
      if (!e.own && !e.fromSync) {
        arrivals.push([e.roomSeq, performance.timeOrigin + performance.now()]);
        if (arrivals.length > 20000) arrivals.splice(0, 10000);
      }
      break;
    case 'blob':
      decodeImage(e.hex, e.bytes);
      break;
    case 'blobFailed':
      images.set(e.hex, { state: 'failed', bitmap: null, reason: e.reason });
      break;
    case 'synced':
      if (timing.syncedAt === null) timing.syncedAt = performance.now();
      if (!e.matches) $('status-line').textContent = `board digest differs from the room's (${e.digest}); rejoining would repair it`;
      adoptOwnState();
      break;
    default: break;
  }
  state.dirty = true;
}

/// Takes this user's pen, page and undo history from the board (a rejoin of the same user
/// continues them) and picks stroke ids after its last.
function adoptOwnState() {
  if (member === null) return;
  const a = board().author(member);
  let last = 0;
  for (const s of board().strokes.values()) if (s.author === member && s.id > last) last = s.id;
  for (const id of [...a.undo, ...a.redo]) if (id > last) last = id;
  state.nextStroke = Math.max(state.nextStroke, last + 1);
  if (state.undo.length === 0 && state.redo.length === 0) {
    state.undo = [...a.undo];
    state.redo = [...a.redo];
  }
}

// ---- own commands ----

function now() {
  // On the 60 Hz grid of the trace format (protocol.md 2.1), never decreasing.
  const frame = Math.round(((performance.now() - state.startMs) * 60) / 1000);
  const t = Math.max(state.lastT, Math.floor((frame * 1000 + 30) / 60));
  state.lastT = t;
  return t;
}

/// The author's pen and page as the room will have them once everything queued is folded.
function ownPenAndPage() {
  const a = member === null ? { color: 0, width: 1, page: 0 } : board().author(member);
  let { color, width, page } = a;
  for (const c of [...session.follower.unfoldedOwnBatches().flat(), ...session.deferred.flat(), ...state.queue]) {
    if (c.type === 'pen') ({ color, width } = c);
    else if (c.type === 'switchPage') page = c.page;
  }
  return { color, width, page };
}

function onMyPage() {
  const own = ownPenAndPage();
  if (own.page !== state.viewPage) state.queue.push({ t: now(), type: 'switchPage', page: state.viewPage });
  return own;
}

/// Queues an own command; the queue goes out as one batch when this input event is handled
/// (a timer, not an animation frame: a page in the background still sends).
let flushTimer = null;
function push(command) {
  state.queue.push(command);
  state.dirty = true;
  if (flushTimer === null) {
    flushTimer = setTimeout(() => {
      flushTimer = null;
      flush();
    }, 0);
  }
}

function flush() {
  if (state.queue.length === 0) return;
  const batch = state.queue;
  state.queue = [];
  sent.push(...batch);
  sentAt.push(performance.timeOrigin + performance.now());
  if (sentAt.length > 20000) sentAt.splice(0, 10000);
  if (sent.length > 20000) sent.splice(0, sent.length - 10000);
  if (!session.send(batch)) $('status-line').textContent = 'too many strokes waiting for the daemon';
}

/// The page's own commands as it sent them (newest 10 000 or more), and when each batch left
/// (epoch ms), for tests and benchmarks.
const sent = [];
const sentAt = [];
const arrivals = [];
/// When (ms since navigation) the first join's sync ended and the board was first drawn after it.
const timing = { joinedAt: null, syncedAt: null, drawnAt: null };

// ---- input ----

const canvas = $('board');
function pointToModel(e) {
  const r = canvas.getBoundingClientRect();
  return [Math.round(((e.clientX - r.left) / r.width) * 1e6), Math.round(((e.clientY - r.top) / r.height) * 1e6)];
}

function mayDraw() {
  return canDrawRole && !session.ended && !(board().locked && session.role !== 'teacher');
}

canvas.addEventListener('pointerdown', (e) => {
  if (!mayDraw() || state.drawing) return;
  canvas.setPointerCapture(e.pointerId);
  const own = onMyPage();
  const color = state.pen;
  const eraser = color === 5;
  if (own.color !== color || own.width !== state.width) push({ t: now(), type: 'pen', color, width: state.width });
  const stroke = state.nextStroke++;
  state.drawing = { pointer: e.pointerId, stroke, tool: eraser ? 2 : 1 };
  state.undo.push(stroke);
  state.redo = [];
  const [x, y] = pointToModel(e);
  push({ t: now(), type: 'point', stroke, tool: state.drawing.tool, phase: 1, x, y });
});

canvas.addEventListener('pointermove', (e) => {
  const d = state.drawing;
  if (!d || e.pointerId !== d.pointer) return;
  const events = typeof e.getCoalescedEvents === 'function' && e.getCoalescedEvents().length ? e.getCoalescedEvents() : [e];
  for (const c of events) {
    const [x, y] = pointToModel(c);
    push({ t: now(), type: 'point', stroke: d.stroke, tool: d.tool, phase: 2, x, y });
  }
});

function endStroke(e) {
  const d = state.drawing;
  if (!d || e.pointerId !== d.pointer) return;
  const [x, y] = pointToModel(e);
  push({ t: now(), type: 'point', stroke: d.stroke, tool: d.tool, phase: 3, x, y });
  state.drawing = null;
}
canvas.addEventListener('pointerup', endStroke);
canvas.addEventListener('pointercancel', endStroke);

// ---- tools ----

function toolButtons() {
  const pens = $('pens');
  pens.replaceChildren();
  [...COLORS, null].forEach((color, index) => {
    const b = document.createElement('button');
    b.className = `pen draw${state.pen === index ? ' selected' : ''}`;
    b.title = color ? `pen ${index + 1}` : 'eraser';
    b.style.background = color ?? 'repeating-linear-gradient(45deg,#fff 0 4px,#ccc 4px 8px)';
    b.onclick = () => {
      state.pen = index;
      toolButtons();
    };
    pens.append(b);
  });
  const widths = $('widths');
  widths.replaceChildren();
  for (const w of [1, 2, 3]) {
    const b = document.createElement('button');
    b.className = `draw${state.width === w ? ' selected' : ''}`;
    b.textContent = ['thin', 'medium', 'thick'][w - 1];
    b.onclick = () => {
      state.width = w;
      toolButtons();
    };
    widths.append(b);
  }
  for (const id of ['undo', 'redo', 'clear', 'add-page']) $(id).classList.add('draw');
}
toolButtons();

$('undo').onclick = () => {
  if (!mayDraw()) return;
  const stroke = state.undo.pop();
  if (stroke === undefined) return;
  state.redo.push(stroke);
  push({ t: now(), type: 'undo', stroke });
};
$('redo').onclick = () => {
  if (!mayDraw()) return;
  const stroke = state.redo.pop();
  if (stroke === undefined) return;
  state.undo.push(stroke);
  push({ t: now(), type: 'redo', stroke });
};
$('clear').onclick = () => {
  if (!mayDraw()) return;
  onMyPage();
  push({ t: now(), type: 'clear' });
  state.undo = [];
  state.redo = [];
};
$('add-page').onclick = () => {
  if (!mayDraw()) return;
  const page = Math.max(...board().pages, ...pendingPages()) + 1;
  push({ t: now(), type: 'addPage', page });
  push({ t: now(), type: 'switchPage', page });
  state.follow = false;
  $('follow').checked = false;
  state.viewPage = page;
};
$('page').onchange = () => {
  state.follow = false;
  $('follow').checked = false;
  state.viewPage = Number($('page').value);
  state.dirty = true;
};
$('follow').onchange = () => {
  state.follow = $('follow').checked;
  state.dirty = true;
};
$('present').onclick = () => push({ t: now(), type: 'present', page: state.viewPage });

function pendingPages() {
  return [...session.follower.unfoldedOwnBatches().flat(), ...session.deferred.flat(), ...state.queue].filter((c) => c.type === 'addPage').map((c) => c.page);
}

// ---- backgrounds ----

/// Background images by hex hash: 'decoding', 'ready' (with its bitmap) or 'failed' (reason).
/// The bytes come from the session once their SHA-256 matched the name the board gave them.
const images = new Map();

function decodeImage(hex, bytes) {
  if (images.get(hex)?.state === 'ready' || images.get(hex)?.state === 'decoding') return;
  images.set(hex, { state: 'decoding', bitmap: null });
  createImageBitmap(new Blob([bytes])).then((bitmap) => {
    images.set(hex, { state: 'ready', bitmap });
    state.dirty = true;
  }, (e) => {
    images.set(hex, { state: 'failed', bitmap: null, reason: `the image does not decode: ${e}` });
    state.dirty = true;
  });
}

/// What the background canvas shows: {page, hex, state} (for tests), and what it was drawn for.
const backgroundShown = { page: 0, hex: null, state: 'none' };
let backgroundDrawn = '';

function renderBackground(page, cssWidth, cssHeight, dpr) {
  const layer = $('background');
  const image = board().backgrounds.get(page) ?? null;
  const hex = image ? hashHex(image.hash) : null;
  // An image fetched before (a page shown again): decode it from the session's copy.
  if (hex && !images.has(hex)) {
    const bytes = session.follower.blobs.blob(hex);
    if (bytes) decodeImage(hex, bytes);
  }
  const entry = hex ? images.get(hex) : null;
  const ready = entry?.state === 'ready' ? entry.bitmap : null;
  backgroundShown.page = page;
  backgroundShown.hex = hex;
  backgroundShown.state = hex ? (ready ? 'shown' : (entry?.state ?? 'fetching')) : 'none';
  const key = `${page}|${hex}|${ready ? 1 : 0}|${image ? `${image.width}x${image.height}/${image.fit}` : ''}|${cssWidth}x${cssHeight}x${dpr}`;
  if (key === backgroundDrawn) return;
  backgroundDrawn = key;
  layer.style.width = `${cssWidth}px`;
  layer.style.height = `${cssHeight}px`;
  layer.width = Math.round(cssWidth * dpr);
  layer.height = Math.round(cssHeight * dpr);
  const ctx = layer.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  drawBackground(ctx, ready, image ?? { width: 1, height: 1, fit: 1 }, cssWidth, cssHeight);
}

// ---- drawing ----

/// What the page shows of `page`: the board's strokes, with this user's own commands that
/// are not folded yet applied on top (so a stroke shows as it is drawn).
function displayList(page) {
  const b = board();
  const own = [...session.follower.unfoldedOwnBatches().flat(), ...session.deferred.flat(), ...state.queue];
  let pen = member === null ? { color: 0, width: 1, page: 0 } : { ...b.author(member) };
  const hidden = new Set();
  const shown = new Set();
  const created = new Map();
  const extra = new Map();
  const clearedBoardPages = new Set();
  for (const c of own) {
    if (c.type === 'pen') pen = { ...pen, color: c.color, width: c.width };
    else if (c.type === 'switchPage') pen = { ...pen, page: c.page };
    else if (c.type === 'undo') { hidden.add(c.stroke); shown.delete(c.stroke); }
    else if (c.type === 'redo') { shown.add(c.stroke); hidden.delete(c.stroke); }
    else if (c.type === 'clear') {
      clearedBoardPages.add(pen.page);
      for (const [id, s] of created) if (s.page === pen.page) created.delete(id);
    } else if (c.type === 'point') {
      const onBoard = member !== null && b.stroke(member, c.stroke);
      if (onBoard && !created.has(c.stroke) && !clearedBoardPages.has(onBoard.page)) {
        if (!extra.has(c.stroke)) extra.set(c.stroke, { xs: [], ys: [] });
        extra.get(c.stroke).xs.push(c.x);
        extra.get(c.stroke).ys.push(c.y);
      } else {
        if (!created.has(c.stroke)) created.set(c.stroke, { key: `${member}:${c.stroke}`, author: member, id: c.stroke, tool: c.tool, color: pen.color, width: pen.width, page: pen.page, xs: [], ys: [], visible: true });
        created.get(c.stroke).xs.push(c.x);
        created.get(c.stroke).ys.push(c.y);
      }
    }
  }
  const list = [];
  if (!clearedBoardPages.has(page)) {
    for (const s of b.strokesOn(page)) {
      let visible = s.visible;
      if (s.author === member && hidden.has(s.id)) visible = false;
      if (s.author === member && shown.has(s.id)) visible = true;
      if (!visible) continue;
      const more = s.author === member ? extra.get(s.id) : undefined;
      list.push(more ? { ...s, key: `${s.author}:${s.id}`, xs: s.xs.concat(more.xs), ys: s.ys.concat(more.ys) } : s);
    }
  }
  for (const s of created.values()) if (s.page === page && !hidden.has(s.id)) list.push(s);
  return list;
}

let drawn = [];
let drawnSize = '';
function render() {
  const b = board();
  if (state.follow) state.viewPage = b.presentedPage ?? ownPenAndPage().page;
  if (!b.pages.includes(state.viewPage) && !pendingPages().includes(state.viewPage)) state.viewPage = 0;
  const select = $('page');
  const pages = [...new Set([...b.pages, ...pendingPages()])];
  if (select.options.length !== pages.length || select.value !== String(state.viewPage)) {
    select.replaceChildren(...pages.map((p) => new Option(`${p + 1}${b.presentedPage === p ? ' (presented)' : ''}`, String(p))));
    select.value = String(state.viewPage);
  }
  $('present').hidden = session.role !== 'teacher';
  const stage = $('stage');
  const cssWidth = Math.max(200, Math.min(stage.clientWidth - 16, ((window.innerHeight - stage.offsetTop - 40) * 4) / 3));
  const cssHeight = (cssWidth * 3) / 4;
  const dpr = window.devicePixelRatio || 1;
  const size = `${cssWidth}x${cssHeight}x${dpr}`;
  const ctx = canvas.getContext('2d');
  let full = size !== drawnSize;
  if (full) {
    canvas.style.width = `${cssWidth}px`;
    canvas.style.height = `${cssHeight}px`;
    canvas.width = Math.round(cssWidth * dpr);
    canvas.height = Math.round(cssHeight * dpr);
    drawnSize = size;
  }
  const list = displayList(state.viewPage);
  // Incremental when strokes only grew at the end (live drawing): draw just the new segments.
  const from = new Map();
  if (!full) {
    if (list.length < drawn.length) full = true;
    for (let i = 0; !full && i < drawn.length; i++) {
      const s = list[i];
      if (s.key !== drawn[i].key || s.xs.length < drawn[i].count || s.color !== drawn[i].color) full = true;
      else if (s.xs.length > drawn[i].count) {
        if (i < drawn.length - 2) full = true;
        from.set(s, drawn[i].count);
      }
    }
  }
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  if (full) {
    ctx.clearRect(0, 0, cssWidth, cssHeight);
    drawStrokes(ctx, list, cssWidth, cssHeight);
  } else {
    const changed = list.filter((s, i) => i >= drawn.length || from.has(s));
    drawStrokes(ctx, changed, cssWidth, cssHeight, from);
  }
  drawn = list.map((s) => ({ key: s.key, count: s.xs.length, color: s.color }));
  renderBackground(state.viewPage, cssWidth, cssHeight, dpr);
  const unacked = session.unacknowledgedCount + state.queue.length;
  if (!$('status-line').textContent.startsWith('You may not') && !$('status-line').textContent.includes('digest')) {
    $('status-line').textContent = `page ${state.viewPage + 1} of ${b.pages.length}, ${b.strokeCount} strokes, room log at ${session.follower.appliedThrough}`
      + (unacked ? `, ${unacked} batches not yet stored` : '') + (b.locked ? ', board locked' : '');
  }
}

let lastVersion = -1;
let lastPending = -1;
function frame() {
  requestAnimationFrame(frame);
  try {
    drawFrame();
  } catch (e) {
    // Keep drawing and sending next frame; say what went wrong.
    state.errors.push({ type: 'exception', text: String(e && e.stack || e) });
    $('status-line').textContent = `page error: ${e}`;
  }
}

function drawFrame() {
  flush();
  // A late joiner sees the whole board at once: nothing is drawn while its history streams in.
  if (session.follower.syncing && lastBoard !== null) return;
  const b = board();
  const pending = session.unacknowledgedCount * 1e6 + state.queue.length;
  if (state.dirty || b.version !== lastVersion || pending !== lastPending || b !== lastBoard) {
    state.dirty = false;
    lastVersion = b.version;
    lastPending = pending;
    lastBoard = b;
    render();
    if (timing.syncedAt !== null && timing.drawnAt === null) timing.drawnAt = performance.now();
    window.inkwireBoard.renders += 1;
    window.inkwireBoard.lastRenderAt = performance.now();
  }
}
let lastBoard = null;
window.addEventListener('resize', () => { state.dirty = true; });

/// For tests and benchmarks (driven through the DevTools protocol): the session and board.
window.inkwireBoard = {
  session,
  get board() { return board(); },
  get digest() { return board().digest; },
  get appliedThrough() { return session.follower.appliedThrough; },
  get member() { return member; },
  renders: 0,
  lastRenderAt: 0,
  errors: state.errors,
  sent,
  sentAt,
  arrivals,
  timing,
  /// The background of the page shown: {page, hex (its SHA-256), state: none | fetching | decoding | shown | failed}.
  background: backgroundShown,
  images,
  /// Sends commands as this page's own batch, bypassing the page's own checks (a viewer's
  /// attempt, which the daemon must refuse).
  sendRaw(commands) { return session.send(commands); },
  dropConnection() { session.dropConnection(); },
};
requestAnimationFrame(frame);
