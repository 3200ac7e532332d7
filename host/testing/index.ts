// kube-wasm-policies/testing: run a plugin module in the agent's runtime from
// a test. See docs/plugin-guide.md for a walk-through.
export { loadModule, startPluginCluster, PluginCluster, PolicyAssertionError } from './plugin.js';
export type { PluginClusterOptions, PluginStageOptions, PluginPlacement, FlowInput, FlowResult, CompiledEvaluator } from './plugin.js';
export { namespace, pod, service, type PodOptions } from './objects.js';
export type { KubeObject, StageTrace } from '../contract.js';
