// A small horizontal bar chart in plain SVG (no dependencies), for docs/benchmark.md:
// one panel per measure, one bar per target at its median, with a whisker
// from the lowest to the highest round.

export interface Bar {
  label: string;
  value: number;
  min?: number;
  max?: number;
  /** Text after the value, e.g. "1.31× http-proxy". */
  note?: string;
  highlight?: boolean;
}

export interface Panel {
  title: string;
  unit: string;
  bars: Bar[];
}

const WIDTH = 860;
const LABEL_WIDTH = 270;
const BAR_AREA = 380;
const BAR_HEIGHT = 20;
const BAR_GAP = 8;
const PANEL_TOP = 30;
const PANEL_GAP = 26;

const escapeXml = (text: string) =>
  text.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);

function formatValue(value: number): string {
  if (!Number.isFinite(value)) return '–';
  if (value >= 100) return Math.round(value).toLocaleString('en-US');
  return value.toFixed(value >= 10 ? 1 : 2);
}

export function renderChart(title: string, subtitle: string, panels: readonly Panel[]): string {
  const parts: string[] = [];
  let y = 44;
  parts.push(`<text x="12" y="20" class="title">${escapeXml(title)}</text>`);
  parts.push(`<text x="12" y="36" class="sub">${escapeXml(subtitle)}</text>`);
  for (const panel of panels) {
    y += PANEL_TOP;
    parts.push(`<text x="12" y="${y - 10}" class="panel">${escapeXml(panel.title)} (${escapeXml(panel.unit)})</text>`);
    // Scaled to the bars, not the whiskers: one wild round must not flatten the chart. A whisker
    // beyond the scale is drawn to the edge without its end cap.
    const scaleMax = Math.max(...panel.bars.map((bar) => bar.value).filter(Number.isFinite), 1e-9) * 1.15;
    const x = (value: number) => LABEL_WIDTH + (Math.min(Math.max(0, value), scaleMax) / scaleMax) * BAR_AREA;
    for (const bar of panel.bars) {
      const mid = y + BAR_HEIGHT / 2;
      parts.push(`<text x="${LABEL_WIDTH - 8}" y="${mid + 4}" class="label" text-anchor="end">${escapeXml(bar.label)}</text>`);
      if (Number.isFinite(bar.value)) {
        const width = x(bar.value) - LABEL_WIDTH;
        parts.push(`<rect x="${LABEL_WIDTH}" y="${y}" width="${width.toFixed(1)}" height="${BAR_HEIGHT}" class="${bar.highlight ? 'bar hl' : 'bar'}"/>`);
      }
      if (bar.min !== undefined && bar.max !== undefined && Number.isFinite(bar.min) && Number.isFinite(bar.max)) {
        const [x1, x2] = [x(bar.min), x(bar.max)];
        const cap = bar.max <= scaleMax ? `M${x2.toFixed(1)} ${mid - 5}V${mid + 5}` : '';
        parts.push(`<path d="M${x1.toFixed(1)} ${mid}H${x2.toFixed(1)}M${x1.toFixed(1)} ${mid - 5}V${mid + 5}${cap}" class="whisker"/>`);
      }
      const text = `${formatValue(bar.value)}${bar.note ? ` · ${bar.note}` : ''}`;
      const textX = Math.max(x(bar.value), x(bar.max ?? 0)) + 8;
      parts.push(`<text x="${textX.toFixed(1)}" y="${mid + 4}" class="value">${escapeXml(text)}</text>`);
      y += BAR_HEIGHT + BAR_GAP;
    }
    y += PANEL_GAP - BAR_GAP;
  }
  const height = y + 6;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="${escapeXml(title)}">`,
    '<style>',
    'text{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;fill:#24292f}',
    '.title{font-size:15px;font-weight:600}.sub{font-size:11px;fill:#57606a}.panel{font-size:12px;font-weight:600}',
    '.label,.value{font-size:12px}.bar{fill:#8c959f}.hl{fill:#0969da}.whisker{stroke:#24292f;stroke-width:1.2;fill:none}',
    '@media (prefers-color-scheme:dark){text{fill:#e6edf3}.sub{fill:#8d96a0}.whisker{stroke:#e6edf3}}',
    '</style>',
    `<rect width="${WIDTH}" height="${height}" fill="none"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
