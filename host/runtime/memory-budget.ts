// The memory all kept pipelines may reserve together. Each stage, from the
// moment its module is resolved until it is disposed, reserves the most its
// instance can hold (CompiledEvaluator.reservedBytes): so the active
// pipeline, the warm rollback one and one being built are all counted, and a
// stage that would take the total past the budget is refused before it is
// instantiated, instead of the agent running out of memory later.
import { KwpError } from '../errors.js';

const MiB = 1024 * 1024;

export class MemoryBudget {
  private reserved = 0;

  constructor(readonly budgetMiB: number) {}

  get reservedBytes(): number { return this.reserved; }

  /** Reserves `bytes` for `what` (names the stage and its module); returns the release, which is safe to call twice. */
  reserve(what: string, bytes: number): () => void {
    const limit = this.budgetMiB * MiB;
    if (this.reserved + bytes > limit) {
      throw new KwpError('KWP_ERR_MEMORY_BUDGET', `${what} may use up to ${mib(bytes)} MiB of memory and tables, but the pipelines kept (active, rollback and being built) already reserve ${mib(this.reserved)} MiB of the memory budget of ${this.budgetMiB} MiB (sandbox limit memoryBudgetMiB); lower the module's maximum memory, use fewer stages, or raise the budget`);
    }
    this.reserved += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.reserved -= bytes;
    };
  }
}

function mib(bytes: number): string {
  return (bytes / MiB).toFixed(bytes % MiB === 0 ? 0 : 1);
}
