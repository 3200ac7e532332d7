// What happened to the pipeline, newest last: kept in the state file and
// answered by GET /v1/pipeline/history.
export type PipelineAction = 'startup' | 'set' | 'rollback' | 'auto-rollback';

export interface HistoryEntry {
  /** The revision active after this action. */
  revision: number;
  /** ISO 8601. */
  time: string;
  action: PipelineAction;
  /** The revision active before, for set and rollbacks. */
  from?: number;
  reason?: string;
}

export const HISTORY_ACTIONS: readonly PipelineAction[] = ['startup', 'set', 'rollback', 'auto-rollback'];

export function isHistoryEntry(v: unknown): v is HistoryEntry {
  const e = v as HistoryEntry;
  return typeof e === 'object' && e !== null && Number.isInteger(e.revision) && typeof e.time === 'string' && HISTORY_ACTIONS.includes(e.action);
}
