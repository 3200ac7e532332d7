// Flag parsing shared by every subcommand: node's parseArgs, with unknown
// flags turned into a KWP_ERR_USAGE that names the flag.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { KwpError } from '../errors.js';

type Options = NonNullable<ParseArgsConfig['options']>;

export function parseFlags<T extends Options>(command: string, argv: string[], options: T, allowPositionals = false): ReturnType<typeof parseArgs<{ options: T; allowPositionals: boolean; strict: true }>> {
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (err) {
    throw new KwpError('KWP_ERR_USAGE', `kwp ${command}: ${(err as Error).message}; see "kwp ${command} --help"`);
  }
}

export function requireFlag<T>(command: string, name: string, value: T | undefined): T {
  if (value === undefined || (Array.isArray(value) && value.length === 0)) {
    throw new KwpError('KWP_ERR_USAGE', `kwp ${command}: --${name} is required; see "kwp ${command} --help"`);
  }
  return value;
}
