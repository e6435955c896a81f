import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Board } from '../lib/board.mjs';
import { svgDocument, tracePath, drawStrokes, backgroundPlacement, drawBackground } from '../lib/render.mjs';
import { vectorLines, parseCommands, repoRoot } from './vectors.mjs';

function foldedBoard(lines) {
  const board = new Board();
  for (const line of vectorLines('board-folds.txt').slice(0, lines)) {
    const [, author, commands] = line.split('|').map((s) => s.trim());
    board.applyBatch(Number(author), parseCommands(commands));
  }
  return board;
}

test('the SVG of a board is the one inkwire export writes (Vectors/board-folds.svg)', () => {
  const expected = readFileSync(join(repoRoot, 'Vectors', 'board-folds.svg'), 'utf8');
  assert.equal(svgDocument(foldedBoard(6).strokesOn(0)), expected);
});

/// A canvas context that records the calls drawStrokes makes.
function recorder() {
  const calls = [];
  const ctx = new Proxy({}, {
    get: (_, name) => (...args) => calls.push([name, ...args]),
    set: (_, name, value) => { calls.push([`=${String(name)}`, value]); return true; },
  });
  return { ctx, calls };
}

test('canvas drawing: pens source-over with round caps, the eraser destination-out and twice as wide', () => {
  const { ctx, calls } = recorder();
  drawStrokes(ctx, foldedBoard(6).strokesOn(0), 1000, 750);
  const ops = calls.filter((c) => c[0] === '=globalCompositeOperation').map((c) => c[1]);
  assert.deepEqual(ops, ['source-over', 'destination-out', 'source-over', 'source-over']);
  const widths = calls.filter((c) => c[0] === '=lineWidth').map((c) => c[1]);
  assert.deepEqual(widths, [10, 60, 20]);
  assert.deepEqual(calls.filter((c) => c[0] === '=lineCap').map((c) => c[1]), ['round', 'square', 'round']);
});

test('incremental tracing continues the same path', () => {
  const xs = [0, 10, 10, 20, 35, 50];
  const ys = [0, 0, 0, 5, 5, 20];
  const whole = [];
  tracePath(xs, ys, 1e6, 1e6, { moveTo: (x, y) => whole.push(['M', x, y]), quadTo: (...a) => whole.push(['Q', ...a]) });
  const head = [];
  tracePath(xs.slice(0, 4), ys.slice(0, 4), 1e6, 1e6, { moveTo: (x, y) => head.push(['M', x, y]), quadTo: (...a) => head.push(['Q', ...a]) });
  const tail = [];
  tracePath(xs, ys, 1e6, 1e6, { moveTo: (x, y) => tail.push(['M', x, y]), quadTo: (...a) => tail.push(['Q', ...a]) }, 4);
  // The tail starts where the head ended (the midpoint of points 2 and 3) and adds the rest.
  assert.deepEqual(tail[0], ['M', head[head.length - 1][3], head[head.length - 1][4]]);
  assert.deepEqual([...head, ...tail.slice(1)], whole);
});

test('background placements are the Swift ones (Vectors/background-placements.txt)', () => {
  const num = (v) => { const r = Math.round(v * 100) / 100; return Object.is(r, -0) ? '0' : String(r); };
  const lines = vectorLines('background-placements.txt');
  assert.ok(lines.length >= 10);
  for (const line of lines) {
    const [input, output] = line.split('|').map((s) => s.trim().split(' ').map(Number));
    const [width, height, fit, vw, vh] = input;
    const p = backgroundPlacement({ width, height, fit }, vw, vh);
    assert.deepEqual([p.x, p.y, p.width, p.height].map(num).map(Number), output, line);
  }
});

test('the SVG of a page with a background is the one inkwire export writes (Vectors/board-background.svg)', () => {
  const expected = readFileSync(join(repoRoot, 'Vectors', 'board-background.svg'), 'utf8');
  const background = { image: { width: 800, height: 1200, fit: 1 }, href: 'page1.jpg?a=1&b="2"' };
  assert.equal(svgDocument(foldedBoard(6).strokesOn(0), { background }), expected);
  // The background is outside every eraser mask: the eraser clears ink only.
  assert.ok(expected.indexOf('<image') < expected.indexOf('<g mask'));
});

test('drawBackground: white, then the image at its placement, clipped to the view', () => {
  const { ctx, calls } = recorder();
  drawBackground(ctx, { bitmap: true }, { width: 800, height: 1200, fit: 2 }, 1024, 768);
  const draw = calls.find((c) => c[0] === 'drawImage');
  assert.deepEqual(draw.slice(2), [0, -384, 1024, 1536]);
  assert.ok(calls.findIndex((c) => c[0] === 'fillRect') < calls.findIndex((c) => c[0] === 'drawImage'));
  assert.ok(calls.some((c) => c[0] === 'clip'));
  const blank = recorder();
  drawBackground(blank.ctx, null, { width: 1, height: 1, fit: 1 }, 10, 10);
  assert.ok(!blank.calls.some((c) => c[0] === 'drawImage'));
});
