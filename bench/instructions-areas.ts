// node --import tsx bench/instructions-areas.ts <requests per dump> <callgrind dump>...
// Where the instructions of bench/instructions.ts's dumps (--keep DIR) go, per request, side by
// side: the inclusive count of native entry points that stand for one area each (V8's garbage
// collector, the HTTP parser, microtasks, strings and buffers crossing into C++, regular
// expressions, JSON, hashing). JavaScript compiled by V8 has no symbols for valgrind, so the
// gateway's own functions are not named here: what is left of the total after these areas is
// JavaScript (the gateway's, Node's and undici's) and the builtins it calls.
import { execFile } from 'node:child_process';
import { basename } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Area → the functions whose inclusive counts make it (callees of one another are not summed twice: one per area). */
const AREAS: [string, RegExp[]][] = [
  ['total', [/PROGRAM TOTALS/]],
  ['optimising compiler (left out of the totals)', [/OptimizingCompileDispatcher::CompileTask::RunInternal/]],
  ['main thread (libuv loop)', [/deps\/uv\/src\/unix\/core\.c:uv_run /]],
  ['GC, main thread (scavenges, mark-compact)', [/v8::internal::Heap::CollectGarbage\(/]],
  ['GC, helper threads (concurrent marking, sweeping)', [/ConcurrentMarking::RunMajor\(/, /Sweeper::SweeperJob::Run\(/, /ArrayBufferSweeper::SweepingJob::SweepYoung\(/, /ScavengerCollector::JobTask::Run\(/]],
  ['HTTP parser, its own code (llhttp, self)', [/^SELF llhttp__internal_execute /, /^SELF llhttp__internal_execute\.cold /]],
  ['microtasks (promise jobs)', [/^Builtins_RunMicrotasks /]],
  ['strings and buffers into and out of C++', [/node::StringBytes::Write\(/, /node::StringBytes::Encode\(v8::Isolate\*, char const\*, unsigned long, node::encoding, v8::Local<v8::Value>\*\) \[/]],
  ['ArrayBuffer allocation', [/v8::ArrayBuffer::NewBackingStore\(/]],
  ['regular expressions', [/Builtins_RegExpPrototypeTestFast /, /Builtins_RegExpPrototypeExec /, /Builtins_RegExpMatchFast /, /Builtins_RegExpReplace /]],
  ['JSON', [/Builtins_JsonParse /, /Builtins_JsonStringify /]],
  ['hashing (node:crypto)', [/node::crypto::Hash::/]],
];

const [perDump, ...dumps] = process.argv.slice(2);
const requests = Number(perDump);
if (!requests || dumps.length === 0) throw new Error('usage: instructions-areas.ts <requests per dump> <dump>...');

const columns = await Promise.all(dumps.map(areasOf));
console.log(`| area (instructions per request) | ${dumps.map((d) => basename(d)).join(' | ')} |`);
console.log(`|---|${dumps.map(() => '---:').join('|')}|`);
for (const [area] of AREAS) console.log(`| ${area} | ${columns.map((c) => Math.round(c.get(area)! / requests).toLocaleString('en')).join(' | ')} |`);

async function areasOf(dump: string): Promise<Map<string, number>> {
  const annotate = async (inclusive: boolean, prefix: string) => {
    const { stdout } = await run('callgrind_annotate', [`--inclusive=${inclusive ? 'yes' : 'no'}`, '--threshold=100', dump], { maxBuffer: 512 * 1024 * 1024 });
    return stdout.split('\n').map((line) => /^\s*([\d,]+) \([\s\d.]+%\)\s+(.*)$/.exec(line)).filter((m) => m !== null).map((m) => [m[1]!, prefix + m[2]!.replace(/^\?\?\?:/, '')] as const);
  };
  // Inclusive counts, and self counts named `SELF <function>`.
  const lines = [...(await annotate(true, '')), ...(await annotate(false, 'SELF '))];
  const found = new Map<string, number>();
  for (const [area, patterns] of AREAS) {
    let sum = 0;
    for (const pattern of patterns) {
      const hit = lines.find(([, name]) => pattern.test(name));
      if (hit) sum += Number(hit[0].replaceAll(',', ''));
    }
    found.set(area, sum);
  }
  return found;
}
