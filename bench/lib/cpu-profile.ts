// Summarises a V8 .cpuprofile (node --cpu-prof): where the gateway's CPU time
// went, by function (self time), by area (node internals, each dependency,
// each gateway file) and by gateway function including what it calls. Frames
// of the built dist are mapped back to src/*.ts lines through the source maps.
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';
import { relative } from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  /** Microseconds on the monotonic clock (the same clock as process.hrtime in any process on the host). */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileEntry {
  name: string;
  ms: number;
  /** Share of the busy (not idle) time. */
  pct: number;
}

export interface ProfileSummary {
  sampledMs: number;
  /** Sampled time minus idle time: what the percentages are shares of. */
  busyMs: number;
  /** Share of time the process had nothing to do. */
  idlePct: number;
  topSelf: ProfileEntry[];
  areas: ProfileEntry[];
  gatewayInclusive: ProfileEntry[];
  /** Every area's self time in µs (for comparing two profiles). */
  areaUs: Record<string, number>;
}

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const sourceMaps = new Map<string, SourceMap | null>();

function sourceMapFor(path: string): SourceMap | null {
  let map = sourceMaps.get(path);
  if (map === undefined) {
    const file = `${path}.map`;
    map = existsSync(file) ? new SourceMap(JSON.parse(readFileSync(file, 'utf8')) as ConstructorParameters<typeof SourceMap>[0]) : null;
    sourceMaps.set(path, map);
  }
  return map;
}

/** `file:line` of a frame, in the repository's own terms (src/… for the built gateway). */
function location(frame: CallFrame): string {
  const { url } = frame;
  if (!url) return '';
  if (!url.startsWith('file://')) return `${url}:${frame.lineNumber + 1}`;
  const path = fileURLToPath(url);
  const map = path.includes('/dist/') ? sourceMapFor(path) : null;
  const entry = map?.findEntry(frame.lineNumber, frame.columnNumber) as { originalSource?: string; originalLine?: number } | undefined;
  if (entry?.originalSource && entry.originalLine !== undefined) {
    const original = entry.originalSource.startsWith('file://') ? fileURLToPath(entry.originalSource) : entry.originalSource;
    const resolved = original.startsWith('/') ? original : new URL(original, url).pathname;
    return `${relative(repoRoot, resolved)}:${entry.originalLine + 1}`;
  }
  return `${relative(repoRoot, path)}:${frame.lineNumber + 1}`;
}

/** The area a frame's time is charged to: a gateway file, a dependency, or a part of Node. */
function area(frame: CallFrame, where: string): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return url.replace(/^node:(internal\/)?/, 'node:').split('/').slice(0, 2).join('/');
  const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dependency) return dependency[1]!;
  return where.replace(/:[0-9]+$/, '');
}

const isGatewayCode = (where: string) => where.startsWith('src/');

/** Monotonic microseconds (`process.hrtime.bigint() / 1000n`): only samples inside count, e.g. the load run without start-up. */
export interface ProfileWindow {
  startUs: number;
  endUs: number;
}

export function summariseProfile(file: string, window?: ProfileWindow, top = 25): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<number, number>();
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (window && (at < window.startUs || at > window.endUs)) return;
    selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
  });
  const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

  const frameKey = new Map<number, { key: string; where: string; area: string }>();
  for (const node of profile.nodes) {
    const where = location(node.callFrame);
    const name = node.callFrame.functionName || '(anonymous)';
    frameKey.set(node.id, { key: where ? `${name} ${where}` : name, where, area: area(node.callFrame, where) });
  }

  const self = new Map<string, number>();
  const areas = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const frame = frameKey.get(id)!;
    self.set(frame.key, (self.get(frame.key) ?? 0) + us);
    areas.set(frame.area, (areas.get(frame.area) ?? 0) + us);
  }

  // Inclusive time of gateway functions: a function counts once per stack, however deep it recurses.
  const inclusive = new Map<string, number>();
  const walk = (id: number, onStack: Set<string>): number => {
    const node = byId.get(id)!;
    let us = selfUs.get(id) ?? 0;
    const frame = frameKey.get(id)!;
    const counted = isGatewayCode(frame.where) && !onStack.has(frame.key);
    if (counted) onStack.add(frame.key);
    for (const child of node.children ?? []) us += walk(child, onStack);
    if (counted) {
      onStack.delete(frame.key);
      inclusive.set(frame.key, (inclusive.get(frame.key) ?? 0) + us);
    }
    return us;
  };
  walk(profile.nodes[0]!.id, new Set());

  const idleUs = areas.get('(idle)') ?? 0;
  const busyUs = totalUs - idleUs;
  const entries = (map: Map<string, number>, limit: number): ProfileEntry[] =>
    [...map]
      .filter(([name]) => name !== '(idle)')
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([name, us]) => ({ name, ms: Math.round(us / 100) / 10, pct: Math.round((us / busyUs) * 1000) / 10 }));

  return {
    sampledMs: Math.round(totalUs / 1000),
    busyMs: Math.round(busyUs / 1000),
    idlePct: Math.round((idleUs / totalUs) * 1000) / 10,
    topSelf: entries(self, top),
    areas: entries(areas, top),
    gatewayInclusive: entries(inclusive, top),
    areaUs: Object.fromEntries(areas),
  };
}

/** `requests`: how many requests the profiled process served, for a µs-per-request column. */
export function profileMarkdown(summary: ProfileSummary, title: string, requests?: number): string {
  const perRequest = (ms: number) => (requests ? ` ${((ms * 1000) / requests).toFixed(1)} |` : '');
  const table = (heading: string, rows: ProfileEntry[]) =>
    [
      `### ${heading}`,
      '',
      `| % of busy time | ms |${requests ? ' µs/request |' : ''} where |`,
      `|---:|---:|${requests ? '---:|' : ''}---|`,
      ...rows.map((r) => `| ${r.pct} | ${r.ms} |${perRequest(r.ms)} \`${r.name}\` |`),
      '',
    ].join('\n');
  return [
    `## ${title}`,
    '',
    `${summary.sampledMs} ms sampled during the load, ${summary.idlePct} % idle; ${summary.busyMs} ms busy` +
      (requests ? ` for ${requests.toLocaleString('en-US')} requests: ${((summary.busyMs * 1000) / requests).toFixed(1)} µs of JavaScript-thread time per request.` : '.'),
    '',
    table('Self time by function', summary.topSelf),
    table('Self time by area', summary.areas),
    table('Gateway functions, time including callees', summary.gatewayInclusive),
  ].join('\n');
}
