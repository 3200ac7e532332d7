// Messages between the lab (lab.ts) and the agent in each pod (pod-agent.ts).

export interface PodAgentConfig {
  tcpPorts: number[];
  udpPorts: number[];
  /** Serve DNS on UDP 53: name → IPv4 addresses. */
  dnsRecords?: Record<string, string[]>;
}

export type PodAgentCommand =
  | { id: number; op: 'tcp'; host: string; port: number; timeoutMs: number }
  | { id: number; op: 'udp'; host: string; port: number; timeoutMs: number }
  | { id: number; op: 'hold'; host: string; port: number; timeoutMs: number }
  | { id: number; op: 'send'; conn: number; timeoutMs: number }
  | { id: number; op: 'close'; conn: number }
  | { id: number; op: 'dns'; server: string; name: string; timeoutMs: number };

export interface PodAgentReply {
  id: number;
  ok: boolean;
  ms: number;
  error?: string;
}
