// Two readers of one answer (the tools/list filter or learner, and the tasks
// reader): the second reads what the first passes on, in order.
import type { BodyTransform, ResponseTransform } from '../proxy/response-transform.js';

export function chainTransforms(first: ResponseTransform | undefined, second: ResponseTransform): ResponseTransform {
  if (first === undefined) return second;
  return (headers, status) => {
    const a = first(headers, status);
    const b = second(headers, status);
    return a && b ? chained(a, b) : (a ?? b);
  };
}

function chained(a: BodyTransform, b: BodyTransform): BodyTransform {
  const readA = a.readValue;
  const readB = b.readValue;
  return {
    perCaller: a.perCaller === true || b.perCaller === true,
    readsOnly: a.readsOnly === true && b.readsOnly === true,
    // Both only read: each reads the value; otherwise the text goes through both, in order.
    ...(readA && readB && { readValue: (value: unknown, text: string) => (readA(value, text), readB(value, text)) }),
    push: (chunk) => {
      const passed = a.push(chunk);
      return passed.length === 0 ? passed : b.push(passed);
    },
    end: () => {
      const rest = a.end();
      const head = rest.length === 0 ? rest : b.push(rest);
      const tail = b.end();
      return head.length === 0 ? tail : tail.length === 0 ? head : Buffer.concat([head, tail]);
    },
  };
}
