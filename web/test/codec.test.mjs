import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { CodecState, CodecError, decodeBatch, encodeBatch, isSelfContained } from '../lib/codec.mjs';
import * as tables from '../lib/tables.mjs';
import { readSwiftTables } from '../tools/swift-tables.mjs';
import { vectorLines, unhex, hex, parseCommands, repoRoot, lessonTraceText } from './vectors.mjs';

const batches = vectorLines('binary-batches.txt').map((line) => {
  const [name, who, commands, bytes] = line.split('|').map((s) => s.trim());
  const [author, self] = who.split(/\s+/).map(Number);
  return { name, author, selfContained: self === 1, commands: parseCommands(commands), bytes };
});

test('the tables are the normative ones of BinaryTables.swift', () => {
  const swift = readSwiftTables(join(repoRoot, 'Sources/InkCodec/BinaryTables.swift'));
  assert.deepEqual(tables.HEADER, swift.header);
  assert.deepEqual(tables.KIND, swift.kind);
  assert.deepEqual(tables.TIME, swift.time);
  assert.deepEqual(tables.RESIDUAL, swift.residual);
  assert.deepEqual(tables.SIGN, swift.sign);
});

test('encoding the vector batches in order gives their bytes', () => {
  const state = new CodecState();
  for (const v of batches) {
    const bytes = encodeBatch(v.author, v.commands, state, { selfContained: v.selfContained });
    assert.equal(hex(bytes), v.bytes, v.name);
  }
});

test('decoding the vector bytes in order gives their commands', () => {
  const state = new CodecState();
  for (const v of batches) {
    const bytes = unhex(v.bytes);
    assert.equal(isSelfContained(bytes), v.selfContained, v.name);
    const batch = decodeBatch(bytes, state);
    assert.equal(batch.author, v.author, v.name);
    assert.deepEqual(batch.commands, v.commands, v.name);
  }
});

test('invalid vectors are rejected with their error, leaving the state unchanged', () => {
  for (const line of vectorLines('binary-invalid.txt')) {
    const [name, bytes, expected] = line.split('|').map((s) => s.trim());
    const reason = expected.replace(/^error\s+/, '');
    const state = new CodecState();
    assert.throws(() => decodeBatch(unhex(bytes), state), (e) => e instanceof CodecError && e.code === reason, name);
    assert.equal(state.lastAuthor, null, name);
  }
});

test('a lesson trace round-trips through 60 ms live batches', () => {
  const text = lessonTraceText();
  if (text === null) return; // the trace is optional (../shared)
  const commands = [];
  let stroke = 0;
  let open = false;
  // LegacyTranslator's rules (protocol.md 3): undo and redo name the stroke on top of the stacks.
  const undo = [];
  const redo = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    const f = line.split(',');
    const t = Number(f[0]);
    const code = Number(f[1]);
    if (code === 1 || code === 2) {
      const phase = Number(f[4]);
      if (phase === 1 || !open) {
        stroke += 1;
        undo.push(stroke);
        redo.length = 0;
      }
      open = phase !== 3;
      // The printed millionths, exactly (protocol.md 3).
      const mill = (s) => {
        const [whole, frac = ''] = s.replace('-', '').split('.');
        const v = Number(whole) * 1e6 + Number(frac.padEnd(6, '0'));
        return s.startsWith('-') ? -v : v;
      };
      commands.push({ t, type: 'point', stroke, tool: code, phase, x: mill(f[2]), y: mill(f[3]) });
    } else if (code === 3) commands.push({ t, type: 'pen', color: Number(f[2]), width: Number(f[3]) });
    else if (code === 4) {
      const s = undo.pop() ?? 0;
      if (s) redo.push(s);
      commands.push({ t, type: 'undo', stroke: s });
    } else if (code === 5) {
      const s = redo.pop() ?? 0;
      if (s) undo.push(s);
      commands.push({ t, type: 'redo', stroke: s });
    } else if (code === 6) {
      undo.length = 0;
      redo.length = 0;
      commands.push({ t, type: 'clear' });
    }
  }
  const tx = new CodecState();
  const rx = new CodecState();
  let bytes = 0;
  let points = 0;
  for (let i = 0; i < commands.length;) {
    const w = Math.floor(commands[i].t / 60);
    let j = i;
    while (j < commands.length && Math.floor(commands[j].t / 60) === w) j++;
    const batch = commands.slice(i, j);
    const encoded = encodeBatch(1, batch, tx);
    bytes += encoded.length;
    points += batch.filter((c) => c.type === 'point').length;
    assert.deepEqual(decodeBatch(encoded, rx).commands, batch);
    i = j;
  }
  // protocol.md 2.7: 98 888 bytes for the 27 744 points of lesson-a.
  assert.equal(points, 27744);
  assert.equal(bytes, 98888);
});

test('random batches round-trip and mutated bytes never throw anything but CodecError', () => {
  let seed = 12345;
  const rand = (n) => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed % n;
  };
  const tx = new CodecState();
  const rx = new CodecState();
  for (let round = 0; round < 300; round++) {
    const author = 1 + rand(3);
    const commands = [];
    let t = rand(2) === 0 ? rand(100000) : Math.round(rand(60000) * 1000 / 60);
    for (let i = rand(20); i > 0; i--) {
      t += rand(3) === 0 ? rand(50) : 17;
      const pick = rand(12);
      if (pick < 8) commands.push({ t, type: 'point', stroke: rand(5), tool: 1 + rand(2), phase: 1 + rand(3), x: rand(2000000) - 500000, y: rand(1100000) });
      else if (pick === 8) commands.push({ t, type: 'pen', color: rand(6), width: 1 + rand(3) });
      else if (pick === 9) commands.push({ t, type: 'undo', stroke: rand(5) });
      else if (pick === 10) commands.push({ t, type: 'erase', author: rand(4), stroke: rand(9) });
      else commands.push({ t, type: 'present', page: rand(3) });
    }
    const bytes = encodeBatch(author, commands, tx, { selfContained: rand(10) === 0 });
    assert.deepEqual(decodeBatch(bytes, rx), { author, commands });
    const mutated = Uint8Array.from(bytes);
    mutated[rand(mutated.length)] ^= 1 << rand(8);
    try {
      decodeBatch(mutated, rx.clone());
    } catch (e) {
      assert.ok(e instanceof CodecError, String(e));
    }
  }
});
