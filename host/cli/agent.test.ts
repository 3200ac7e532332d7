import { describe, expect, it } from 'vitest';
import { isKwpError } from '../errors.js';
import { dataplaneSettings } from '../agent.js';
import { agentConfigFromFlags, parseAgentFlags } from './agent.js';

function usageError(argv: string[]): string {
  try {
    parseAgentFlags(argv);
  } catch (err) {
    return isKwpError(err) ? `${err.code}: ${err.message}` : `not a KwpError: ${String(err)}`;
  }
  return 'no error';
}

/** What `kwp agent ARGV` would hand the Dataplane, short of starting it. */
const dataplaneFor = (argv: string[]) => dataplaneSettings(agentConfigFromFlags(parseAgentFlags(argv)));

const fastPathFor = (argv: string[]) => dataplaneFor(argv).fastPath;

describe('kwp agent flags', () => {
  it.each([
    [['--packet-thread-nice=-10']],
    [['--packet-thread-nice', '-10']],
  ])('hands --packet-thread-nice to the dataplane as packetThreadNice (%j)', (argv) => {
    expect(dataplaneFor(argv)).toMatchObject({ packetThreadNice: -10 });
  });

  it('accepts both ends of the nice range', () => {
    expect(dataplaneFor(['--packet-thread-nice=-20']).packetThreadNice).toBe(-20);
    expect(dataplaneFor(['--packet-thread-nice=19']).packetThreadNice).toBe(19);
  });

  it('has the kernel fast path on by default, with the default entry timeout or --fast-path-timeout, and off with --fast-path=false or --no-fast-path', () => {
    expect(fastPathFor([])).toEqual({ timeoutSeconds: 120, maxEntries: 131072 });
    expect(fastPathFor(['--fast-path'])).toEqual({ timeoutSeconds: 120, maxEntries: 131072 });
    expect(fastPathFor(['--fast-path-timeout=30'])).toMatchObject({ timeoutSeconds: 30 });
    expect(dataplaneFor(['--fast-path=false'])).not.toHaveProperty('fastPath');
    expect(dataplaneFor(['--no-fast-path'])).not.toHaveProperty('fastPath');
    expect(dataplaneFor(['--no-fast-path', '--fast-path'])).toHaveProperty('fastPath');
    expect(usageError(['--no-fast-path-timeout'])).toMatch(/^KWP_ERR_USAGE: kwp agent: unknown flag "--no-fast-path-timeout"/);
    expect(usageError(['--fast-path-timeout=0'])).toMatch(/^KWP_ERR_USAGE: .*fast-path-timeout/);
  });

  it('delays fast-path invalidations only when the test-only KWP_TEST_FAST_PATH_FLUSH_DELAY_MS asks, and refuses a value that is not whole milliseconds', () => {
    const saved = process.env.KWP_TEST_FAST_PATH_FLUSH_DELAY_MS;
    const configError = (argv: string[]) => {
      try {
        agentConfigFromFlags(parseAgentFlags(argv));
      } catch (err) {
        return isKwpError(err) ? `${err.code}: ${err.message}` : `not a KwpError: ${String(err)}`;
      }
      return 'no error';
    };
    try {
      delete process.env.KWP_TEST_FAST_PATH_FLUSH_DELAY_MS;
      expect(fastPathFor(['--fast-path'])).not.toHaveProperty('testFlushDelayMs');
      process.env.KWP_TEST_FAST_PATH_FLUSH_DELAY_MS = '2500';
      expect(fastPathFor(['--fast-path'])).toMatchObject({ testFlushDelayMs: 2500 });
      process.env.KWP_TEST_FAST_PATH_FLUSH_DELAY_MS = '0';
      expect(fastPathFor(['--fast-path'])).not.toHaveProperty('testFlushDelayMs');
      process.env.KWP_TEST_FAST_PATH_FLUSH_DELAY_MS = '2.5s';
      expect(configError(['--fast-path'])).toMatch(/^KWP_ERR_USAGE: .*KWP_TEST_FAST_PATH_FLUSH_DELAY_MS.*"2\.5s"/);
    } finally {
      if (saved === undefined) delete process.env.KWP_TEST_FAST_PATH_FLUSH_DELAY_MS;
      else process.env.KWP_TEST_FAST_PATH_FLUSH_DELAY_MS = saved;
    }
  });

  it('leaves the packet thread priority alone unless asked', () => {
    expect(dataplaneFor([])).not.toHaveProperty('packetThreadNice');
  });

  it('hands the queue numbers, table and fail mode to the dataplane alongside the nice value', () => {
    expect(dataplaneFor(['--queue-id=7', '--dns-queue-id=8', '--table-name=t2', '--fail-open=false', '--packet-thread-nice=-5'])).toMatchObject({
      queueId: 7, dnsQueueId: 8, tableName: 't2', failOpen: false, strict: true, packetThreadNice: -5,
    });
  });

  it.each(['-21', '20', '-10.5', 'high', '1e1', ''])('rejects --packet-thread-nice=%s naming the flag and the range', (value) => {
    expect(usageError([`--packet-thread-nice=${value}`])).toMatch(
      value === '' ? /^KWP_ERR_USAGE: kwp agent: --packet-thread-nice needs a value/ : /^KWP_ERR_USAGE: kwp agent: --packet-thread-nice takes a whole number from -20 to 19, got "/,
    );
  });

  it('still refuses a negative value for a number flag without a range', () => {
    expect(usageError(['--queue-id=-1'])).toMatch(/^KWP_ERR_USAGE: kwp agent: --queue-id takes a whole number, got "-1"/);
  });
});
