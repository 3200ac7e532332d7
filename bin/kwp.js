#!/usr/bin/env node
// The installed entry point; the CLI itself is compiled TypeScript.
// A command's status is the process's: once main() is done the process exits,
// so a handle left open (a watcher, a worker, a socket of a half-started
// agent) can never keep a failed command running. Output to pipes and files
// is written synchronously on Linux, so nothing printed is lost.
import('../dist/host/cli/main.js').then((m) => m.main(process.argv.slice(2))).then(
  (code) => process.exit(typeof code === 'number' ? code : 0),
  (err) => { console.error(err?.stack ?? String(err)); process.exit(1); },
);
