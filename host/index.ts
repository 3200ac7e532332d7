/**
 * The public API of kube-wasm-policies: the pieces an embedder composes into
 * its own node agent (the way kindnet embeds kube-network-policies). `kwp
 * agent` is built from exactly these exports. Anything not exported here is
 * internal and may change without notice; docs/embedding.md lists this surface
 * and a test keeps the two identical.
 *
 * @packageDocumentation
 */

// The contract: objects, PodInfo, packets, verdicts, traces.
export type {
  KubeObject, KindKey, ObjectEvent, ObjectSink, ObjectSource, PodInfo, ContainerPort, Packet,
  Direction, FailurePolicy, StageMode, StageTrace, DirectionResult, Decision, VerdictName,
  SourceRefusal,
} from './contract.js';
export { Kinds, kindKeyOf, Verdict, verdictName, Protocol } from './contract.js';
export { KwpError, ErrorCatalogue, isKwpError } from './errors.js';
export type { ErrorCode } from './errors.js';

// The module loader and sandbox.
export { compileEvaluator } from './runtime/loader.js';
export { ABI_MAJOR, ABI_MINOR } from './abi/version.js';
export type { CompiledEvaluator, ModuleMeta } from './runtime/loader.js';
export { DEFAULT_LIMITS, resolveLimits, parseLimitSettings } from './runtime/limits.js';
export type { SandboxLimits } from './runtime/limits.js';

// The pipeline and its builder.
export { PolicyEngine } from './pipeline/engine.js';
export type { PolicyEngineOptions, EngineListener } from './pipeline/engine.js';
export { Pipeline } from './pipeline/pipeline.js';
export { Stage, type StageIsolation, type InstanceFailure } from './pipeline/stage.js';
export { BuiltinModules, ChainedModules, builtinWasmDir } from './pipeline/modules.js';
export type { ModuleResolver } from './pipeline/modules.js';
export { defaultPipeline, parsePipelineText, readPipelineFile, validatePipelineSpec, formatPipelineYAML } from './pipeline/spec.js';
export type { PipelineSpec, StageSpec } from './pipeline/spec.js';

// Cluster state and the sources that feed it.
export { ClusterState } from './state/cluster-state.js';
export type { StateListener, ClusterStateOptions } from './state/cluster-state.js';
export { expireResolvedNamesPeriodically } from './state/resolved-name-expiry.js';
export { ManifestSource, ManifestRefusal, loadManifests } from './sources/manifest-files.js';
export type { ManifestSourceOptions } from './sources/manifest-files.js';
export { KubernetesSource, loadKubeConfig, defaultWatchedKinds } from './sources/kubernetes.js';
export type { KubernetesSourceOptions } from './sources/kubernetes.js';

// The dataplane.
export { Dataplane } from './dataplane/dataplane.js';
export type { DataplaneOptions, DataplaneCounters } from './dataplane/dataplane.js';
export type { PacketJudge } from './dataplane/judge.js';
export { marksAt } from './dataplane/rules.js';
export { refreshOnChange } from './dataplane/refresh-on-change.js';
export { FastPath, INVALIDATION_CAUSES } from './dataplane/fast-path.js';
export type { FastPathOptions, FastPathCounters, InvalidationCause } from './dataplane/fast-path.js';
export { DEFAULT_FAST_PATH } from './dataplane/fast-path-rules.js';
export { invalidateFastPathOnChange, fastPathBlocker } from './dataplane/fast-path-invalidation.js';
export { registerFastPathMetrics } from './admin/fast-path-metrics.js';
export type { RefreshOnChangeOptions } from './dataplane/refresh-on-change.js';
export { parsePacket } from './dataplane/packet-parser.js';

// Control plane and the admin API (a Fastify plugin, or a ready server).
export { ModuleStore } from './control/module-store.js';
export type { ModuleStoreOptions } from './control/module-store.js';
export { PipelineController } from './control/pipeline-controller.js';
export type { PipelineControllerOptions, AutoRollbackOptions } from './control/pipeline-controller.js';
export { loadTrustedKeys } from './control/signature.js';
export { ensureStateDir } from './control/state-dir.js';
export { loadNfqueue } from './dataplane/nfqueue.js';
export { adminApi } from './admin/plugin.js';
export type { AdminApiOptions } from './admin/options.js';
export { createAdminServer } from './admin/server.js';
export type { AdminServer, AdminServerOptions } from './admin/server.js';
export { AdminMetrics } from './admin/metrics.js';
export { registerSourceMetrics, registerObjectRejectionMetrics, registerClusterStateMetrics } from './admin/input-metrics.js';
export { loadAdminToken } from './admin/auth.js';

// Multicluster (flat network): remote pods from the IP tracker's etcd, and the pipeline that uses them.
export { multiclusterSource, multiclusterPipeline } from './multicluster/agent-wiring.js';
export type { MulticlusterAgentConfig } from './multicluster/agent-wiring.js';
export { parseEtcdEndpoints } from './multicluster/etcd-client.js';
export { kubeSystemUid } from './multicluster/cluster-id.js';

// The fleet (docs/fleet.md)
export { FleetWiring } from './fleet/agent-wiring.js';
export type { FleetConfig } from './fleet/agent-wiring.js';

// Offline evaluation.
export { evaluateFlows, OfflineEvaluator } from './eval.js';
export { ServiceDirectory, endpointAddressesOf } from './services/service-directory.js';
export type { FlowInput, FlowResult } from './eval.js';

// Flow records (docs/flows.md).
export { FlowRecorder } from './flow-records/flow-recorder.js';
export { FlowLogWriter } from './flow-records/flow-log-writer.js';
export type { FlowRecord } from './flow-records/flow-record.js';

// Logging: one interface every part takes; pino's loggers are HostLoggers.
export { createLogger } from './log.js';
export type { Logger } from './log.js';
export { loggerOf, silentLogger } from './logger.js';
export type { HostLogger, LogLevel } from './logger.js';
