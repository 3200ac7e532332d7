// `kwp completion bash|zsh`: a completion script, as kubectl and cilium print
// one. Commands and subcommands are completed from the command table; flags
// are read from `kwp CMD --help` when asked for, so they never drift from
// what each command accepts.
import { subcommand } from './args.js';
import { commandTable, subcommandsOf } from './main.js';

function bashScript(): string {
  const commands = Object.keys(commandTable());
  const subs = commands.filter((c) => subcommandsOf(c).length).map((c) => `    ${c}) words="${subcommandsOf(c).join(' ')}" ;;`).join('\n');
  return `# kwp completion for bash: source <(kwp completion bash)
_kwp() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" words=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${commands.join(' ')} --help --version" -- "$cur"))
    return
  fi
  case "$cur" in
    -*)
      words=$("\${COMP_WORDS[0]}" "\${COMP_WORDS[1]}" --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
      COMPREPLY=($(compgen -W "$words" -- "$cur"))
      return ;;
  esac
  if [ "$COMP_CWORD" -eq 2 ]; then
    case "\${COMP_WORDS[1]}" in
${subs}
    help) words="${commands.join(' ')}" ;;
    esac
    if [ -n "$words" ]; then COMPREPLY=($(compgen -W "$words" -- "$cur")); return; fi
  fi
  COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _kwp kwp
`;
}

function zshScript(): string {
  return `# kwp completion for zsh: source <(kwp completion zsh)
autoload -U +X bashcompinit && bashcompinit
${bashScript().split('\n').slice(1).join('\n')}`;
}

export async function runCompletion(argv: string[]): Promise<number> {
  const [shell] = argv;
  if (shell === undefined || shell === '--help' || shell === '-h') {
    process.stdout.write('usage: kwp completion bash|zsh\n\nPrints a completion script. Load it in the current shell with\n  source <(kwp completion bash)\nor add that line to ~/.bashrc (~/.zshrc for zsh).\n');
    return shell === undefined ? 2 : 0;
  }
  const { sub } = subcommand('completion', argv);
  process.stdout.write(sub === 'zsh' ? zshScript() : bashScript());
  return 0;
}
