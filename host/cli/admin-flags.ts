// Flags every command that talks to the admin API shares: --server and
// --token-file (or $KWP_ADMIN_TOKEN).
import { AdminClient, DEFAULT_SERVER } from '../admin/client.js';
import { loadAdminToken, TOKEN_ENV } from '../admin/auth.js';

export const adminFlagSpec = {
  server: { type: 'string' },
  'token-file': { type: 'string' },
  output: { type: 'string', short: 'o' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const ADMIN_FLAGS_HELP = `  --server URL        the agent's admin API (default ${DEFAULT_SERVER}; for TLS with your own CA set NODE_EXTRA_CA_CERTS)
  --token-file FILE   the admin token (default: $${TOKEN_ENV})
  -o, --output FORMAT text (default) or json`;

export function adminClient(values: { server?: string; 'token-file'?: string }): AdminClient {
  return new AdminClient(values.server ?? DEFAULT_SERVER, loadAdminToken({ file: values['token-file'] }));
}

export function print(text: string): void {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}

export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  return [line(head), ...rows.map(line)].join('\n') + '\n';
}
