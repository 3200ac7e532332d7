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
  /** Send "later": the server echoes it, then speaks on its own 1.5 s later. */
  | { id: number; op: 'later'; conn: number; timeoutMs: number }
  /** Whether the server's own line after "later" arrived (waits up to 4 s after "later"). */
  | { id: number; op: 'late'; conn: number }
  | { id: number; op: 'close'; conn: number }
  | { id: number; op: 'dns'; server: string; name: string; timeoutMs: number };

export interface PodAgentReply {
  id: number;
  ok: boolean;
  ms: number;
  error?: string;
}
