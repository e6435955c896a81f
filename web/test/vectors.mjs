// Reads the project's test vectors (Vectors/, docs/protocol.md) for the JavaScript tests.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export function vectorLines(name) {
  return readFileSync(join(repoRoot, 'Vectors', name), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('#'));
}

export const unhex = (h) => Uint8Array.from(h.match(/../g) ?? [], (b) => parseInt(b, 16));
export const hex = (bytes) => [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');

const time = (text) => {
  const n = BigInt(text);
  return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
};

/// One command in the vectors' notation (Vectors/binary-batches.txt header): T:KIND:FIELDS.
export function parseCommand(text) {
  const f = text.split(':');
  const t = time(f[0]);
  switch (f[1]) {
    case 'pt':
      return { t, type: 'point', stroke: Number(f[2]), tool: f[3] === 'pen' ? 1 : 2, phase: { start: 1, move: 2, end: 3 }[f[4]], x: Number(f[5]), y: Number(f[6]) };
    case 'pen': return { t, type: 'pen', color: Number(f[2]), width: Number(f[3]) };
    case 'undo': return { t, type: 'undo', stroke: Number(f[2]) };
    case 'redo': return { t, type: 'redo', stroke: Number(f[2]) };
    case 'clear': return { t, type: 'clear' };
    case 'erase': return { t, type: 'erase', author: Number(f[2]), stroke: Number(f[3]) };
    case 'addpage': return { t, type: 'addPage', page: Number(f[2]) };
    case 'page': return { t, type: 'switchPage', page: Number(f[2]) };
    case 'lock': return { t, type: 'lock' };
    case 'unlock': return { t, type: 'unlock' };
    case 'present': return { t, type: 'present', page: Number(f[2]) };
    case 'bg':
      if (f[3] === 'none') return { t, type: 'background', page: Number(f[2]), image: null };
      return { t, type: 'background', page: Number(f[2]), image: { hash: unhex(f[3]), width: Number(f[4]), height: Number(f[5]), fit: { contain: 1, cover: 2, stretch: 3 }[f[6]] } };
    case 'unknown': return { t, type: 'unknown', kind: Number(f[2]), payload: unhex(f[3] ?? '') };
    default: throw new Error(`unknown command notation ${text}`);
  }
}

export const parseCommands = (text) => (text.trim() === '-' ? [] : text.trim().split(/\s+/).map(parseCommand));

/// ../shared/traces/lesson-a.csv (beside the clone, or two levels up from a worktree), or null.
export function lessonTraceText() {
  for (const up of [['..'], ['..', '..']]) {
    try {
      return readFileSync(join(repoRoot, ...up, 'shared', 'traces', 'lesson-a.csv'), 'utf8');
    } catch {
      // try the next place
    }
  }
  return null;
}
