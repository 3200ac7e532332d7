// The shell sessions of a Markdown document, run as a reader pastes them.
//
// A document is read top to bottom:
//   ```sh       commands run as written (their output is not shown, so not compared)
//   ```console  `$ command` lines, each followed by the output it prints (compared)
//   <!-- file: PATH -->  before a code block: the block is written to PATH when reached
//   <!-- docs-test: skip (why) -->  before a block: not run, for the reason given
// Everything runs in one bash, so `cd`, `export` and `alias` carry on as in a
// terminal, and a command ending in `&` keeps running (an agent) while the
// later ones talk to it. The runner only adds what a reader does without
// typing: it waits for a background `kwp agent` to log "agent started"
// before the next line, as a reader waits for the log line.
//
// Output lines are compared exactly, except for explicit placeholders a
// document writes where the value differs from run to run:
//   <time> an RFC 3339 time   <sha256> 64 hex digits   <key> a 16-hex-digit key id
//   <n> a whole number        <duration> 12ms, 1.5s    <dir> a path
//   …   alone on a line: any number of lines (output shown cut)

export interface ConsoleStep { kind: 'console'; command: string; expected: string[]; line: number }
export interface ShellStep { kind: 'sh'; command: string; line: number }
export interface FileStep { kind: 'file'; path: string; text: string; line: number }
export type Step = ConsoleStep | ShellStep | FileStep;

const PLACEHOLDERS: Record<string, string> = {
  '<time>': '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:\\.\\d+)?Z',
  '<sha256>': '[0-9a-f]{64}',
  '<key>': '[0-9a-f]{16}',
  '<n>': '\\d+',
  '<duration>': '\\d+(?:\\.\\d+)?(?:ms|s|m)',
  '<dir>': '\\S+',
};
const ELISION = '…';

/** Joins lines ending in a backslash with the next, as the shell does. */
function commandLines(lines: string[], first: number): Array<{ text: string; line: number }> {
  const out: Array<{ text: string; line: number }> = [];
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let text = lines[i];
    while (text.endsWith('\\') && i + 1 < lines.length) text = `${text.slice(0, -1)}${lines[++i].trimStart()}`;
    if (text.trim() !== '') out.push({ text, line: first + start });
  }
  return out;
}

/** The steps of `markdown`, in order, with their line numbers (1-based). */
export function parseSessions(markdown: string): Step[] {
  const steps: Step[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(\w*)\s*$/.exec(lines[i]);
    if (!fence) continue;
    const start = i;
    let end = i + 1;
    while (end < lines.length && lines[end] !== '```') end++;
    const body = lines.slice(start + 1, end);
    i = end;
    const before = lines[start - 1] ?? '';
    if (/^<!-- docs-test: skip\b/.test(before)) continue;
    const file = /^<!-- file: (\S+) -->$/.exec(before);
    if (file) { steps.push({ kind: 'file', path: file[1], text: body.length ? `${body.join('\n')}\n` : '', line: start + 2 }); continue; }
    if (fence[1] === 'sh') {
      for (const c of commandLines(body, start + 2)) steps.push({ kind: 'sh', command: c.text, line: c.line });
    } else if (fence[1] === 'console') {
      let current: ConsoleStep | undefined;
      for (let j = 0; j < body.length; j++) {
        if (body[j].startsWith('$ ')) {
          current = { kind: 'console', command: body[j].slice(2), expected: [], line: start + 2 + j };
          steps.push(current);
        } else if (current) {
          current.expected.push(body[j]);
        }
      }
      // A blank line separates the sessions of one block; it is no output.
      for (const s of steps) if (s.kind === 'console') while (s.expected.at(-1) === '') s.expected.pop();
    }
  }
  return steps;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The regular expression one expected output (lines, placeholders, elisions) stands for. */
export function outputPattern(expected: string[]): RegExp {
  const names = Object.keys(PLACEHOLDERS).map(escape).join('|');
  const parts = expected.map((line) => {
    if (line === ELISION) return '(?:[^\\n]*\\n)*?';
    const pieces = line.split(new RegExp(`(${names})`));
    return `${pieces.map((p) => PLACEHOLDERS[p] ?? escape(p)).join('')}\\n`;
  });
  return new RegExp(`^${parts.join('')}$`);
}

/** Whether `actual` (a command's whole output) is what `expected` shows. */
export function outputMatches(expected: string[], actual: string): boolean {
  const text = actual === '' || actual.endsWith('\n') ? actual : `${actual}\n`;
  return outputPattern(expected).test(text.replace(/\n+$/, expected.length ? '\n' : ''));
}

/**
 * The bash script that runs `steps` in order, writing each console step's
 * output to `$KWP_DOC_OUT/N.out` (N its index) and its exit status to `N.rc`,
 * and everything else to `$KWP_DOC_OUT/shell.log`.
 */
export function sessionScript(steps: Step[]): string {
  const out: string[] = [
    'shopt -s expand_aliases',
    // Whatever the session left running stops with it.
    "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT",
    'kwp_doc_wait_started() {',
    '  for _ in $(seq 1200); do',
    "    grep -q '\"msg\":\"agent started\"' \"$1\" 2>/dev/null && return 0",
    '    kill -0 "$2" 2>/dev/null || return 1',
    '    sleep 0.1',
    '  done',
    '  return 1',
    '}',
  ];
  steps.forEach((step, n) => {
    out.push(`echo "@@ step ${n}: line ${step.line}" >> "$KWP_DOC_OUT/shell.log"`);
    if (step.kind === 'file') {
      const delimiter = 'KWP_DOC_FILE_END';
      if (step.text.includes(delimiter)) throw new Error(`line ${step.line}: the file block contains ${delimiter}`);
      out.push(`mkdir -p "$(dirname '${step.path}')" && cat > '${step.path}' <<'${delimiter}'\n${step.text}${delimiter}`);
      return;
    }
    const log = step.kind === 'console' ? `"$KWP_DOC_OUT/${n}.out"` : '"$KWP_DOC_OUT/shell.log"';
    const background = /&\s*$/.test(step.command) && !/&&\s*$/.test(step.command);
    const redirect = step.kind === 'console' ? '>' : '>>';
    out.push(`{\n${step.command}\n} ${redirect} ${log} 2>&1`);
    if (background) {
      out.push(`kwp_doc_wait_started ${log} $! || { echo "line ${step.line}: the background command did not log \\"agent started\\"" >> "$KWP_DOC_OUT/shell.log"; exit 97; }`);
    } else if (step.kind === 'console') {
      out.push(`echo $? > "$KWP_DOC_OUT/${n}.rc"`);
    }
  });
  return `${out.join('\n')}\n`;
}
