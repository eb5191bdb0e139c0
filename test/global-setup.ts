// Runs once before the suite: tools that live outside the root package.
import { ensureNode22 } from './tools/node22.js';

export default function setup(): void {
  ensureNode22();
}
