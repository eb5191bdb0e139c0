// Transitional: the forwarder's types moved to forwarder.ts; removed once
// routes/protected-route.ts imports them from there.
export type { Forwarder } from './forwarder.js';
