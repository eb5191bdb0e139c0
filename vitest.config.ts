import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two files at a time: most of a file's time is waiting on the processes it starts (servers,
    // Chromium, SDK clients), so on two cores the default (cores − 1 = one file) leaves a core idle.
    maxWorkers: 2,
  },
});
