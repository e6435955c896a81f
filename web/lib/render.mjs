// Drawing a board the way the HYWhiteboard app draws (its HYWhiteboardView): each stroke is one
// path through its points in millionths of the view: move to the first point, then for every
// later point that differs from the previous one a quadratic curve whose control point is the
// previous point and whose end is the midpoint between the two (so a stroke ends at the midpoint
// of its last two points, and a single point draws nothing). Pens draw with round caps and joins;
// the eraser draws twice as wide with square caps and clears what is below it (earlier strokes),
// not what comes after. Width w (1..3) is w % of the view's width. Colour 5 is the eraser's
// (clear) colour: a pen stroke in it draws nothing.
// The same rules make the canvas (drawStrokes) and SVG (svgDocument; `inkwire export --format
// svg` writes the same document) pictures. A page's background image goes under the strokes
// (drawBackground on a canvas of its own: the eraser clears ink, never the background), placed
// as BackgroundImage.placement places it (backgroundPlacement).

/// The app's pen colours (HYColorPanel), index = pen colour 0..4.
export const COLORS = ['#326ed9', '#306c00', '#66d552', '#ff1ecf', '#4ea1b7'];
export const ERASER_COLOR = 5;
export const UNITS = 1_000_000;

export const lineWidth = (stroke, viewWidth) => (stroke.width * viewWidth / 100) * (stroke.tool === 2 ? 2 : 1);
export const isEraser = (stroke) => stroke.tool === 2;
/// Strokes that put colour down (an eraser removes it; a pen in the clear colour does nothing).
export const inks = (stroke) => stroke.tool !== 2 && stroke.color < ERASER_COLOR;

/// Calls moveTo / quadTo in view pixels for one stroke's points, from point `from` on (drawing
/// from a later point continues the same path: the segment of point i needs points i-1 and i-2).
export function tracePath(xs, ys, width, height, sink, from = 0) {
  const n = xs.length;
  if (n === 0) return;
  const sx = width / UNITS;
  const sy = height / UNITS;
  let start = Math.max(0, from - 1);
  // The pen position before `start`: the midpoint the previous segment ended at.
  let cx = xs[start] * sx;
  let cy = ys[start] * sy;
  if (start === 0) {
    sink.moveTo(cx, cy);
  } else {
    let k = start - 1;
    // Skip back over repeated points, which draw nothing.
    while (k > 0 && xs[k] === xs[start] && ys[k] === ys[start]) k--;
    const px = xs[k] * sx;
    const py = ys[k] * sy;
    sink.moveTo(px === cx && py === cy ? cx : (px + cx) / 2, px === cx && py === cy ? cy : (py + cy) / 2);
  }
  for (let i = start + 1; i < n; i++) {
    const x = xs[i] * sx;
    const y = ys[i] * sy;
    if (x !== cx || y !== cy) sink.quadTo(cx, cy, (cx + x) / 2, (cy + y) / 2);
    cx = x;
    cy = y;
  }
}

/// Draws strokes (in drawing order) on a 2D canvas context of `width` x `height` pixels.
/// `from` (optional, a Map stroke -> first point) draws only the segments after a point.
export function drawStrokes(ctx, strokes, width, height, from) {
  for (const s of strokes) {
    if (!s.visible && s.visible !== undefined) continue;
    if (!isEraser(s) && !inks(s)) continue;
    ctx.beginPath();
    tracePath(s.xs, s.ys, width, height, { moveTo: (x, y) => ctx.moveTo(x, y), quadTo: (a, b, c, d) => ctx.quadraticCurveTo(a, b, c, d) }, from?.get(s) ?? 0);
    ctx.lineWidth = lineWidth(s, width);
    ctx.lineJoin = 'round';
    if (isEraser(s)) {
      ctx.globalCompositeOperation = 'destination-out';
      ctx.lineCap = 'square';
      ctx.strokeStyle = '#000';
    } else {
      ctx.globalCompositeOperation = 'source-over';
      ctx.lineCap = 'round';
      ctx.strokeStyle = COLORS[s.color];
    }
    ctx.stroke();
  }
  ctx.globalCompositeOperation = 'source-over';
}

export const FIT = { contain: 1, cover: 2, stretch: 3 };

/// Where a background image {width, height, fit} goes in a view of `viewWidth` x `viewHeight`:
/// contain (the whole image, centred), cover (the view filled, centred, the excess cut off) or
/// stretch. The same numbers as the Swift `BackgroundImage.placement` (Vectors/background-placements.txt).
export function backgroundPlacement(image, viewWidth, viewHeight) {
  if (image.fit === FIT.stretch) return { x: 0, y: 0, width: viewWidth, height: viewHeight };
  const sx = viewWidth / image.width;
  const sy = viewHeight / image.height;
  const s = image.fit === FIT.contain ? Math.min(sx, sy) : Math.max(sx, sy);
  const width = image.width * s;
  const height = image.height * s;
  return { x: (viewWidth - width) / 2, y: (viewHeight - height) / 2, width, height };
}

/// Draws a page's background (a decoded image: an ImageBitmap or an <img>) on a canvas context
/// of `width` x `height` pixels, white around it, the excess of a cover cut at the view's edge.
export function drawBackground(ctx, bitmap, image, width, height) {
  ctx.globalCompositeOperation = 'source-over';
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, width, height);
  if (!bitmap) return;
  const p = backgroundPlacement(image, width, height);
  ctx.save();
  ctx.beginPath();
  ctx.rect(0, 0, width, height);
  ctx.clip();
  ctx.drawImage(bitmap, p.x, p.y, p.width, p.height);
  ctx.restore();
}

const num = (v) => {
  const r = Math.round(v * 100) / 100;
  return Object.is(r, -0) ? '0' : String(r);
};

/// SVG path data of one stroke (coordinates rounded to 1/100 pixel).
export function svgPathData(s, width, height) {
  let d = '';
  tracePath(s.xs, s.ys, width, height, {
    moveTo: (x, y) => { d += `M${num(x)} ${num(y)}`; },
    quadTo: (a, b, c, e) => { d += `Q${num(a)} ${num(b)} ${num(c)} ${num(e)}`; },
  });
  return d;
}

/// An SVG document of the visible strokes of a page, drawn in order on a white background, over
/// the page's background image when one is given ({image, href}: href its address or a data:
/// URI). Each eraser stroke masks everything drawn before it (a mask that is white but for the
/// eraser's path), so it clears what is below and later strokes draw over it; the background is
/// outside the masks.
export function svgDocument(strokes, { width = 1024, height = 768, title = '', background = null } = {}) {
  const visible = strokes.filter((s) => s.visible !== false && (isEraser(s) || inks(s)));
  const defs = [];
  let body = '';
  let masks = 0;
  for (const s of visible) {
    const d = svgPathData(s, width, height);
    const w = num(lineWidth(s, width));
    if (isEraser(s)) {
      masks += 1;
      defs.push(`<mask id="e${masks}" maskUnits="userSpaceOnUse" x="${-width}" y="${-height}" width="${3 * width}" height="${3 * height}">`
        + `<rect x="${-width}" y="${-height}" width="${3 * width}" height="${3 * height}" fill="#fff"/>`
        + `<path d="${d}" fill="none" stroke="#000" stroke-width="${w}" stroke-linecap="square" stroke-linejoin="round"/></mask>`);
      body = `<g mask="url(#e${masks})">${body}</g>`;
    } else {
      body += `<path d="${d}" fill="none" stroke="${COLORS[s.color]}" stroke-width="${w}" stroke-linecap="round" stroke-linejoin="round"/>`;
    }
  }
  const escaped = title.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  let under = '';
  if (background) {
    const p = backgroundPlacement(background.image, width, height);
    const href = background.href.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
    under = `<svg x="0" y="0" width="${width}" height="${height}"><image x="${num(p.x)}" y="${num(p.y)}" width="${num(p.width)}" height="${num(p.height)}" preserveAspectRatio="none" href="${href}"/></svg>`;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`
    + (escaped ? `<title>${escaped}</title>` : '')
    + (defs.length ? `<defs>${defs.join('')}</defs>` : '')
    + `<rect width="${width}" height="${height}" fill="#fff"/>${under}${body}</svg>\n`;
}
