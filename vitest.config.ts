import { defineConfig } from 'vitest/config';

// Unit and conformance suites: no root, no kernel. The netns suites live in
// vitest.e2e.config.ts and run under `npm run test:e2e`.
export default defineConfig({
  test: {
    include: ['host/**/*.test.ts', 'bench/**/*.test.ts', 'test/**/*.test.ts', 'sdk/**/*.test.ts', 'evaluators/**/*.test.ts'],
    exclude: ['**/*.e2e.test.ts', 'test/scale/**', 'node_modules/**', 'dist/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
