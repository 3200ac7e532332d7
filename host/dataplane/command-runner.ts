// How the dataplane talks to nft, iptables and conntrack: one injectable
// function, so rule programming can be tested without root by recording the
// commands instead of running them.

import { spawn } from 'node:child_process';

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export type CommandRunner = (command: string, args: string[], stdin?: string) => Promise<CommandResult>;

/** Runs a command without a shell; never rejects, a spawn failure is exit code 127. */
export const runCommand: CommandRunner = (command, args, stdin) =>
  new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', (err) => resolve({ code: 127, stdout, stderr: stderr + String(err) }));
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.on('error', () => {});
    child.stdin.end(stdin ?? '');
  });

export function describeFailure(command: string, args: string[], result: CommandResult): string {
  const detail = (result.stderr || result.stdout).trim().split('\n').slice(0, 3).join(' | ');
  return `${command} ${args.join(' ')} exited ${result.code}: ${detail}`;
}
