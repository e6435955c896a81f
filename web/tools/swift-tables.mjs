// Reads the frozen tables from Sources/InkCodec/BinaryTables.swift (normative, protocol.md 2.3).
// Used to write web/lib/tables.mjs and by the test that checks the two agree.
import { readFileSync } from 'node:fs';

export function readSwiftTables(path) {
  const text = readFileSync(path, 'utf8');
  const tables = {};
  for (const name of ['header', 'kind', 'time', 'residual', 'sign']) {
    const start = text.indexOf(`static let ${name}: [[UInt16]] = [`);
    if (start < 0) throw new Error(`table ${name} not found in ${path}`);
    const open = text.indexOf('[', text.indexOf('=', start));
    let depth = 0;
    let end = open;
    for (; end < text.length; end++) {
      if (text[end] === '[') depth++;
      else if (text[end] === ']' && --depth === 0) break;
    }
    const body = text.slice(open + 1, end);
    tables[name] = [...body.matchAll(/\[([^\]]*)\]/g)].map((m) => m[1].split(',').map((s) => s.trim()).filter((s) => s !== '').map(Number));
  }
  return tables;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const t = readSwiftTables(process.argv[2]);
  const rows = (list) => list.map((r) => `  [${r.join(', ')}],`).join('\n');
  process.stdout.write(`// The frozen frequency tables of the compact binary codec (docs/protocol.md 2.3), copied from
// Sources/InkCodec/BinaryTables.swift, which is normative (web/test/codec.test.mjs checks they
// agree). Each row sums to 4096. Written by: node web/tools/swift-tables.mjs Sources/InkCodec/BinaryTables.swift
export const HEADER = [\n${rows(t.header)}\n];
export const KIND = [\n${rows(t.kind)}\n];
export const TIME = [\n${rows(t.time)}\n];
export const RESIDUAL = [\n${rows(t.residual)}\n];
export const SIGN = [\n${rows(t.sign)}\n];
`);
}
