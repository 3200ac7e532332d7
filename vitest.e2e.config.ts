import { defineConfig } from 'vitest/config';

// Suites that need root: network namespaces, nftables/iptables, NFQUEUE, etcd.
// They run one file at a time because they share the kernel's netfilter state.
export default defineConfig({
  test: {
    include: ['**/*.e2e.test.ts'],
    exclude: ['node_modules/**', 'dist/**'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
