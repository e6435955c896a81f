import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Board, Fnv64 } from '../lib/board.mjs';
import { CodecState, decodeBatch, encodeBatch } from '../lib/codec.mjs';
import { vectorLines, parseCommands, lessonTraceText } from './vectors.mjs';

test('FNV-1a 64 of "123456789"', () => {
  const h = new Fnv64();
  for (const c of '123456789') h.byte(c.charCodeAt(0));
  assert.equal(h.hex, '06d5573923c6cdfc');
});

test('the board-fold vectors give their digests', () => {
  const board = new Board();
  for (const line of vectorLines('board-folds.txt')) {
    const [name, author, commands, digest] = line.split('|').map((s) => s.trim());
    board.applyBatch(Number(author), parseCommands(commands));
    assert.equal(board.digest, digest, name);
  }
});

test('points past the stroke bound are dropped and undo depth is bounded', () => {
  const board = new Board();
  const commands = [];
  for (let i = 1; i <= 1030; i++) commands.push({ t: i, type: 'point', stroke: i, tool: 1, phase: 1, x: i, y: i });
  board.applyBatch(1, commands);
  assert.equal(board.author(1).undo.length, 1024);
  assert.equal(board.author(1).undo[0], 7);
});

test('a digest computed on a large board is quick', () => {
  const board = new Board();
  const commands = [];
  for (let i = 0; i < 200000; i++) commands.push({ t: 0, type: 'point', stroke: 1 + Math.floor(i / 100), tool: 1, phase: i % 100 === 0 ? 1 : 2, x: i, y: -i });
  board.applyBatch(1, commands);
  const started = performance.now();
  assert.match(board.digest, /^[0-9a-f]{16}$/);
  assert.ok(performance.now() - started < 2000);
});

test('state stays in step: batches decoded in order fold to the sender board', () => {
  const text = lessonTraceText();
  if (text === null) return;
  const tx = new CodecState();
  const rx = new CodecState();
  const a = new Board();
  const b = new Board();
  let stroke = 0;
  for (const line of text.split('\n').slice(0, 3000)) {
    const f = line.split(',');
    if (f[1] !== '1' && f[1] !== '2') continue;
    if (f[4] === '1') stroke++;
    const cmd = [{ t: Number(f[0]), type: 'point', stroke, tool: Number(f[1]), phase: Number(f[4]), x: Math.round(f[2] * 1e6), y: Math.round(f[3] * 1e6) }];
    a.applyBatch(3, cmd);
    const batch = decodeBatch(encodeBatch(3, cmd, tx), rx);
    b.applyBatch(batch.author, batch.commands);
  }
  assert.equal(a.digest, b.digest);
});
