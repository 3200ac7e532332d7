// `kwp version` / `kwp --version`: the package version and the ABI version
// modules must speak, as `kubectl version --client` prints the client's.
import { readFileSync } from 'node:fs';
import { ABI_MAJOR, ABI_MINOR } from '../abi/version.js';
import { packageRoot } from '../package-root.js';
import { outputFormat, parseFlags } from './args.js';

export function kwpVersion(): string {
  return JSON.parse(readFileSync(`${packageRoot()}/package.json`, 'utf8')).version;
}

export async function runVersion(argv: string[]): Promise<number> {
  const { values } = parseFlags('version', argv, { output: { type: 'string', short: 'o' }, help: { type: 'boolean', short: 'h' } });
  if (values.help) { process.stdout.write('usage: kwp version [-o|--output text|json]\n\nPrints the version of kwp, of the module ABI it implements and of Node.js.\n'); return 0; }
  const output = outputFormat('version', values.output, ['text', 'json'] as const, 'text');
  const info = { version: kwpVersion(), abi: `${ABI_MAJOR}.${ABI_MINOR}`, node: process.version };
  process.stdout.write(output === 'json' ? `${JSON.stringify(info, null, 2)}\n` : `kwp ${info.version} (module ABI ${info.abi}, Node.js ${info.node})\n`);
  return 0;
}
