import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One file at a time (vitest's default on two cores). Two were tried and were no faster: 863 s
    // for 226 files against 738 s for 205 with one; module import alone went from 90 s to 328 s (the
    // cores are busy, not waiting), and tests that pick a free port raced each other (EADDRINUSE).
  },
});
