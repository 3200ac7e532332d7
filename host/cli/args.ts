// Flag parsing shared by every subcommand: node's parseArgs, with unknown
// flags turned into a KWP_ERR_USAGE that names the flag and the closest
// known one, as kubectl and cilium do.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { isKwpError, KwpError } from '../errors.js';
import { didYouMean, suggestion } from '../suggest.js';

import { subcommandsOf } from './main.js';

type Options = NonNullable<ParseArgsConfig['options']>;

const declared = new Map<string, string[]>();

/**
 * Records the flags a command's parser accepts, spelled as on the command
 * line; `parseFlags` does it for every command, so a test can hold each
 * command's --help to what it really parses.
 */
export function declareFlags(command: string, flags: string[]): void {
  declared.set(command, flags);
}

/** The flags the last parse of `command` accepted (undefined: it parsed none). */
export function declaredFlags(command: string): readonly string[] | undefined {
  return declared.get(command);
}

function spellings(options: Options): string[] {
  return Object.entries(options).flatMap(([name, o]) => [`--${name}`, ...(o.short ? [`-${o.short}`] : [])]);
}

/** The ` (did you mean "--X"?)` for a mistyped flag among the flags a command accepts. */
export function flagSuggestion(flag: string, known: string[]): string {
  return suggestion(flag, known.filter((k) => k.startsWith('--')));
}

function unknownFlagMessage(command: string, err: Error, options: Options): string | undefined {
  const m = /Unknown option '(-{1,2}[^']+)'/.exec(err.message);
  if (!m) return undefined;
  const flag = m[1];
  return `kwp ${command}: unknown flag "${flag}"${flagSuggestion(flag, spellings(options))}; see "kwp ${command} --help"`;
}

export function parseFlags<T extends Options>(command: string, argv: string[], options: T, allowPositionals = false): ReturnType<typeof parseArgs<{ options: T; allowPositionals: boolean; strict: true }>> {
  declareFlags(command, spellings(options));
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (err) {
    const message = unknownFlagMessage(command, err as Error, options);
    throw new KwpError('KWP_ERR_USAGE', message ?? `kwp ${command}: ${(err as Error).message}; see "kwp ${command} --help"`);
  }
}

export function requireFlag<T>(command: string, name: string, value: T | undefined): T {
  if (value === undefined || (Array.isArray(value) && value.length === 0)) {
    throw new KwpError('KWP_ERR_USAGE', `kwp ${command}: --${name} is required; see "kwp ${command} --help"`);
  }
  return value;
}

/** `-o`/`--output` checked against the formats a command prints, with "did you mean". */
export function outputFormat<F extends string>(command: string, value: string | undefined, formats: readonly F[], fallback: F): F {
  if (value === undefined) return fallback;
  if ((formats as readonly string[]).includes(value)) return value as F;
  throw new KwpError('KWP_ERR_USAGE', `kwp ${command}: --output must be ${formats.join(', ')}, got "${value}"${didYouMean(value, formats)}`);
}

/** A port flag: a whole number 1-65535. */
export function portFlag(command: string, flag: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > 65535) throw new KwpError('KWP_ERR_USAGE', `kwp ${command}: --${flag} must be a port 1-65535, got "${value}"`);
  return n;
}

/**
 * The subcommand of `kwp module push`-style commands, from the command
 * table's list: `undefined` asks for the help (no subcommand, `help`,
 * `--help` or `-h` first); an unknown one is a KWP_ERR_USAGE with the
 * closest known subcommand.
 */
export function subcommand(command: string, argv: string[]): { sub?: string; rest: string[] } {
  const known = subcommandsOf(command);
  const [first, ...rest] = argv;
  if (first === undefined || first === 'help' || first === '--help' || first === '-h') return { rest };
  if (first.startsWith('-')) {
    // `kwp module -o json ls`: flags before the subcommand.
    const at = argv.findIndex((a) => known.includes(a));
    if (at < 0) return argv.includes('--help') || argv.includes('-h') ? { rest: [] } : fail(command, first, known);
    return { sub: argv[at], rest: [...argv.slice(0, at), ...argv.slice(at + 1)] };
  }
  if (!known.includes(first)) return fail(command, first, known);
  return { sub: first, rest };
}

function fail(command: string, word: string, known: readonly string[]): never {
  throw new KwpError('KWP_ERR_USAGE', `kwp ${command}: unknown subcommand "${word}"${suggestion(word, known)}; the subcommands are ${known.join(', ')} (see "kwp ${command} --help")`);
}

/**
 * For commands whose exit status 1 is an answer (`kwp diff`: flows flip;
 * `kwp recommend`: a flow stays denied): every input problem, a KwpError,
 * exits 2 instead, so it never reads as that answer. Internal errors still throw.
 */
export function inputErrorsExit2(run: (argv: string[]) => Promise<number>): (argv: string[]) => Promise<number> {
  return async (argv) => {
    try {
      return await run(argv);
    } catch (err) {
      if (!isKwpError(err) || err.code === 'KWP_ERR_INTERNAL') throw err;
      process.stderr.write(`${err.code}: ${err.message}\n`);
      return 2;
    }
  };
}
