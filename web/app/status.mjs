// The status page: rooms, their members (transport, address, RTT, loss) and history, from
// /status.json every 2 s; the certificate's fingerprint so an IT person can check what a
// browser shows.
const $ = (id) => document.getElementById(id);
const text = (tag, value, attrs = {}) => {
  const e = document.createElement(tag);
  e.textContent = value;
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};
/// A room's board; with the daemon's key in the fragment, so a copied link pins it (the board
/// page refuses a daemon that cannot prove it).
let publicKey = null;
const roomLink = (name) => `/room/${encodeURIComponent(name)}${publicKey ? `#key=${publicKey}` : ''}`;
const bytes = (n) => (n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`);
const number = (v, unit) => (v === null || v === undefined ? '–' : `${v}${unit}`);

function table(headings, rows) {
  const t = document.createElement('table');
  const head = t.createTHead().insertRow();
  for (const h of headings) head.appendChild(text('th', h));
  const body = t.createTBody();
  for (const cells of rows) {
    const r = body.insertRow();
    for (const c of cells) r.insertCell().append(c);
  }
  return t;
}

function render(status) {
  $('daemon').textContent = `inkwired ${status.version}, up ${Math.round(status.uptimeSeconds / 60)} min, ${status.tokenRequired ? 'join tokens required' : 'open rooms (no tokens)'}`;
  // https, or localhost: the pages a board link opens have WebCrypto.
  const secure = window.isSecureContext;
  const notes = [];
  if (status.certificateSHA256) {
    notes.push(`Certificate SHA-256 ${status.certificateSHA256}${status.certificateSelfMade ? ' (made by this daemon: ' : ''}`);
  }
  const security = $('security');
  security.replaceChildren();
  if (!secure) security.append(`This page came over plain http from another host: boards opened from it cannot seal their sessions. Open it over https instead. `);
  if (status.certificateSHA256) {
    security.append(`TLS certificate SHA-256: `, text('code', status.certificateSHA256));
    if (status.certificateSelfMade) {
      const a = text('a', 'certificate.pem', { href: '/certificate.pem', download: 'inkwired.pem' });
      security.append(' (self-signed by this daemon: install ', a, ' as a trusted authority on the school\'s devices, after checking this fingerprint).');
    }
  }
  publicKey = status.publicKey ?? null;
  if (status.sealing === 'none') security.append(' Sessions: not sealed (this daemon does not seal sessions).');
  else {
    security.append(' Sessions: sealed (Noise NK, AES-256-GCM). The daemon\'s public key (devices pin it): ', text('code', publicKey ?? '?'), '.');
  }
  const rooms = $('rooms');
  rooms.replaceChildren(text('h2', `Rooms (${status.rooms.length})`));
  if (status.rooms.length === 0) rooms.append(text('p', 'No room is open yet.'));
  for (const room of status.rooms) {
    const h = text('h3', '');
    h.append(text('a', room.name, { href: roomLink(room.name) }));
    h.append(` — ${room.members.length} members, ${room.strokes} strokes, room log at ${room.roomSeq}, history ${bytes(room.historyBytes)} in ${room.historyBatches} batches`);
    rooms.append(h);
    if (room.members.length === 0) continue;
    rooms.append(table(['user', 'id', 'role', 'transport', 'address', 'RTT', 'loss', 'state', 'sealed'], room.members.map((m) => [
      m.user, String(m.member), m.role, m.transport, m.address, number(m.rttMs, ' ms'), number(m.lossPercent, ' %'),
      m.live ? 'live' : 'syncing', m.sealed ? 'yes' : 'no',
    ])));
  }
  const l = status.listeners;
  $('listeners').replaceChildren(text('h2', 'Listeners'), table(['kind', 'addresses'], [
    ['udp', l.udp.join(', ') || 'off'], ['tcp', l.tcp.join(', ') || 'off'], ['web', l.web.join(', ') || 'off'], ['legacy', l.legacy.join(', ') || 'none'],
  ]));
}

async function refresh() {
  try {
    const response = await fetch('/status.json', { cache: 'no-store' });
    render(await response.json());
  } catch (e) {
    $('daemon').textContent = `status unavailable: ${e.message}`;
  }
}

$('open-room').addEventListener('submit', (e) => {
  e.preventDefault();
  const name = $('room-name').value.trim();
  if (name) location.href = roomLink(name);
});
refresh();
setInterval(refresh, 2000);
