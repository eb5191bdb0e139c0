/**
 * A Dockerfile read into stages and instructions, for tests that check
 * deploy/Dockerfile without a Docker engine: continuation lines joined,
 * comments dropped, global ARG defaults put into FROM, exec-form (JSON)
 * arguments parsed.
 */
import { readFileSync } from 'node:fs';

export interface Instruction {
  keyword: string;
  /** Everything after the keyword, continuation lines joined. */
  args: string;
  /** The exec form (`["node", "..."]`), when the arguments are one. */
  exec?: string[];
  /** `--name=value` flags before the arguments (COPY --from, HEALTHCHECK --interval). */
  flags: Record<string, string>;
}

export interface Stage {
  name: string | undefined;
  /** The base image, global ARG defaults substituted. */
  image: string;
  instructions: Instruction[];
}

export interface Dockerfile {
  globalArgs: Record<string, string>;
  stages: Stage[];
}

export function parseDockerfile(file: string): Dockerfile {
  const lines: string[] = [];
  let pending = '';
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    lines.push(pending + line);
    pending = '';
  }

  const globalArgs: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, keyword = '', rest = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const { flags, args } = splitFlags(rest);
    const instruction: Instruction = { keyword: keyword.toUpperCase(), args, flags, exec: execForm(args) };
    if (instruction.keyword === 'FROM') {
      const [image = '', as, name] = args.split(/\s+/);
      stages.push({ name: as?.toUpperCase() === 'AS' ? name : undefined, image: image.replace(/\$\{?(\w+)\}?/g, (_, v: string) => globalArgs[v] ?? ''), instructions: [] });
    } else if (stages.length === 0) {
      if (instruction.keyword !== 'ARG') throw new Error(`${file}: ${instruction.keyword} before the first FROM`);
      const [name = '', value = ''] = args.split('=', 2);
      globalArgs[name] = value;
    } else {
      stages.at(-1)!.instructions.push(instruction);
    }
  }
  return { globalArgs, stages };
}

function splitFlags(rest: string): { flags: Record<string, string>; args: string } {
  const flags: Record<string, string> = {};
  let args = rest;
  for (let m = /^--([\w-]+)=(\S+)\s*/.exec(args); m; m = /^--([\w-]+)=(\S+)\s*/.exec(args)) {
    flags[m[1]!] = m[2]!;
    args = args.slice(m[0].length);
  }
  return { flags, args };
}

function execForm(args: string): string[] | undefined {
  const json = args.startsWith('CMD ') ? args.slice(4) : args; // HEALTHCHECK ... CMD [...]
  if (!json.trimStart().startsWith('[')) return undefined;
  const value: unknown = JSON.parse(json);
  return Array.isArray(value) && value.every((v) => typeof v === 'string') ? value : undefined;
}

/** The stage's instructions with this keyword. */
export function instructions(stage: Stage, keyword: string): Instruction[] {
  return stage.instructions.filter((i) => i.keyword === keyword);
}
