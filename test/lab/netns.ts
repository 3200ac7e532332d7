// Thin wrappers over `ip` for the lab: namespaces, veth pairs, addresses,
// routes, and running commands inside a namespace.

import { execFileSync } from 'node:child_process';
import { runCommand, describeFailure, type CommandResult } from '../../host/dataplane/command-runner.js';

export async function ip(args: string[]): Promise<CommandResult> {
  const result = await runCommand('ip', args);
  if (result.code !== 0) throw new Error(describeFailure('ip', args, result));
  return result;
}

export async function inNetns(netns: string, command: string, args: string[], stdin?: string): Promise<CommandResult> {
  return runCommand('ip', ['netns', 'exec', netns, command, ...args], stdin);
}

export async function inNetnsChecked(netns: string, command: string, args: string[], stdin?: string): Promise<CommandResult> {
  const result = await inNetns(netns, command, args, stdin);
  if (result.code !== 0) throw new Error(describeFailure(`ip netns exec ${netns} ${command}`, args, result));
  return result;
}

export function listNetns(): string[] {
  try {
    return execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
      .split('\n')
      .map((line) => line.split(' ')[0])
      .filter((name) => name.length > 0);
  } catch {
    return [];
  }
}

/** Kill every process inside the namespace, then delete it. Synchronous: it also runs from exit handlers. */
export function destroyNetnsSync(netns: string): void {
  try {
    const pids = execFileSync('ip', ['netns', 'pids', netns], { encoding: 'utf8' }).split('\n').filter(Boolean);
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // already gone
      }
    }
  } catch {
    // namespace already gone
  }
  try {
    execFileSync('ip', ['netns', 'del', netns], { stdio: 'ignore' });
  } catch {
    // already gone
  }
}
