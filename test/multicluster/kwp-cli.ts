// The `kwp` command from source, for tests that run it as a child process
// (started through test/lab/node-script.ts, which transpiles it once).
import { main } from '../../host/cli/main.js';

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${String(err?.stack ?? err)}\n`);
    process.exit(1);
  },
);
