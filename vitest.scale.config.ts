import { defineConfig } from 'vitest/config';

// The cluster-scale suites: a real agent over 100,000 NetworkPolicies and
// 20,000 pods. Heavy (minutes, gigabytes), so they run on their own, one
// file at a time, after the unit suites (`npm run test:scale`).
export default defineConfig({
  test: {
    include: ['test/scale/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 30 * 60_000,
    hookTimeout: 10 * 60_000,
  },
});
