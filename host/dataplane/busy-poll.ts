// Keeps the packet thread polling, instead of sleeping, for a short window
// after each packet. A decision made after the thread slept in epoll runs on
// cold CPU caches (the client, the server, softirqs and other processes ran
// on its core meanwhile) and costs several times one made on warm caches
// (bench/tools/judge-after-sleep.mjs, docs/performance.md "The judge inside
// the agent"). While an immediate is pending, libuv polls its descriptors
// with a zero timeout, so the queue's next packet is read as soon as it
// arrives and the thread keeps its core and caches. The price is CPU: the
// thread spins for up to `windowMicros` after every packet, so a steady
// stream of packets closer together than the window keeps one core busy.
// The window is bounded and restarts only on a packet, so an idle agent
// sleeps as before.

export class BusyPoll {
  private lastPacketAt = 0;
  private polling = false;
  private stopped = false;
  private windowMs: number;
  /** Turns of the poll loop since start (a spin costs one each), for the bench and tests. */
  turns = 0;

  constructor(windowMicros: number, private readonly now: () => number = () => performance.now()) {
    this.windowMs = windowMicros / 1000;
  }

  /** The window in microseconds; 0 turns polling off (a poll under way ends at its next turn). */
  get windowMicros(): number { return this.windowMs * 1000; }
  set windowMicros(micros: number) { this.windowMs = micros / 1000; }

  /** A packet was answered at `at` (performance.now() milliseconds): poll until the window after it ends. */
  packet(at: number): void {
    this.lastPacketAt = at;
    if (this.polling || this.stopped || this.windowMs <= 0) return;
    this.polling = true;
    setImmediate(this.turn);
  }

  /** Whether the thread is polling now. */
  get active(): boolean { return this.polling; }

  stop(): void {
    this.stopped = true;
  }

  private readonly turn = (): void => {
    this.turns++;
    if (!this.stopped && this.now() - this.lastPacketAt < this.windowMs) setImmediate(this.turn);
    else this.polling = false;
  };
}
