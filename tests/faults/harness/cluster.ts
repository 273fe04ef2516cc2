/**
 * The multi-process fault harness: N web processes on free ports, all against ONE scratch database, plus one
 * payment provider (in-process). Each web process is the app's test server (apps/web/test/server/main.ts: the
 * app's API built from its own modules, with the fault point and controls its environment picks); each can be
 * stopped, SIGKILLed and restarted with its own environment.
 * Each start's stdout and stderr (pino JSON lines) go to a file of its own under `logDir`, kept after the run,
 * so a 5xx can be explained afterwards by the log line that carries its errorId.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createPrismaClient, type Database } from '@idem/db';
import { migrateDatabase, repoRoot } from '@idem/dev-db/migrate';
import { createDatabase, dropDatabase, scratchDatabaseName } from '@idem/dev-db/postgres';
import { seedDatabase } from '@idem/dev-db/seed';
import { startProvider } from '@idem/provider';
import { freePort } from '../../setup/free-port.ts';

export type Provider = Awaited<ReturnType<typeof startProvider>>;
export type FaultEnv = Record<string, string | undefined>;

const WEB_DIR = path.join(repoRoot, 'apps/web');
/** Node's arguments that start the test server, from WEB_DIR (its tsconfig maps `~/`). */
const TEST_SERVER_ARGS = ['--conditions=react-server', '--import', 'tsx', 'test/server/main.ts'];

export interface WebNode {
  readonly index: number;
  port: number;
  url: string;
  child: ChildProcess | null;
  exited: Promise<void>;
  /** The extra environment this node was last started with. */
  env: FaultEnv;
  starts: number;
  /** Exits that this harness did not ask for (a fault point's SIGKILL, a crash). */
  unexpectedExits: number;
}

export interface ClusterOptions {
  /** The server's maintenance database URL (vitest: `inject('postgresAdminUrl')`). */
  adminUrl: string;
  processes?: number;
  /** Extra environment for every web process (e.g. IDEM_LEASE_SECONDS). */
  env?: FaultEnv;
  /** Extra environment for process #index's first start (e.g. its fault point). */
  nodeEnv?: (index: number) => FaultEnv;
  /** Also forward the web processes' output to this process (default: only when IDEM_FAULTS_VERBOSE=1). */
  verbose?: boolean;
}

export class Cluster {
  /** Encrypts the stored responses of every web process (as IDEM_RESPONSE_SECRET does in production). */
  readonly responseSecret = randomBytes(32).toString('base64url');

  readonly nodes: WebNode[] = [];
  #stopping = new Set<ChildProcess>();

  private constructor(
    readonly adminUrl: string,
    readonly databaseName: string,
    readonly databaseUrl: string,
    readonly db: Database,
    readonly provider: Provider,
    readonly baseEnv: FaultEnv,
    readonly verbose: boolean,
    readonly sessionSecret: string,
    /** Where every web process start writes its output: `web-<index>-<start>.log`. */
    readonly logDir: string,
  ) {}

  static async start(options: ClusterOptions): Promise<Cluster> {
    const name = scratchDatabaseName('idem_faults');
    const databaseUrl = await createDatabase(options.adminUrl, name);
    let db: Database | undefined;
    try {
      await migrateDatabase(databaseUrl);
      db = createPrismaClient({ connectionString: databaseUrl, max: 4 });
      await seedDatabase(db);
      // NODE_ENV=production refuses the provider's public demo secrets: both sides get generated ones.
      const providerSecrets = {
        PROVIDER_SECRET_KEY: `sk_faults_${randomBytes(32).toString('base64url')}`,
        PROVIDER_WEBHOOK_SECRET: `whsec_faults_${randomBytes(32).toString('base64url')}`,
      };
      const provider = await startProvider({
        databaseUrl,
        port: 0,
        testKnobs: true,
        secretKey: providerSecrets.PROVIDER_SECRET_KEY,
        webhookSecret: providerSecrets.PROVIDER_WEBHOOK_SECRET,
        log: () => {},
      });
      const cluster = new Cluster(
        options.adminUrl,
        name,
        databaseUrl,
        db,
        provider,
        { ...providerSecrets, ...options.env },
        options.verbose ?? process.env.IDEM_FAULTS_VERBOSE === '1',
        randomBytes(32).toString('base64url'),
        mkdtempSync(path.join(os.tmpdir(), 'idem-faults-logs-')),
      );
      const count = options.processes ?? 3;
      for (let index = 0; index < count; index += 1) {
        cluster.nodes.push({
          index,
          port: 0,
          url: '',
          child: null,
          exited: Promise.resolve(),
          env: {},
          starts: 0,
          unexpectedExits: 0,
        });
      }
      await Promise.all(
        cluster.nodes.map((node) => cluster.startNode(node.index, options.nodeEnv?.(node.index) ?? {})),
      );
      return cluster;
    } catch (error) {
      await db?.$disconnect();
      await dropDatabase(options.adminUrl, name);
      throw error;
    }
  }

  node(index: number): WebNode {
    const node = this.nodes[index];
    if (!node) throw new Error(`no web process #${index}`);
    return node;
  }

  isAlive(index: number): boolean {
    const child = this.node(index).child;
    return child !== null && child.exitCode === null && child.signalCode === null;
  }

  /** Starts process #index (on a new free port) with the base env plus `env`, and waits for /api/health. */
  async startNode(index: number, env: FaultEnv = {}): Promise<WebNode> {
    const node = this.node(index);
    if (this.isAlive(index)) throw new Error(`web process #${index} is already running`);
    node.port = await freePort();
    node.url = `http://127.0.0.1:${node.port}`;
    node.env = env;
    const child = spawn(process.execPath, TEST_SERVER_ARGS, {
      cwd: WEB_DIR,
      env: {
        ...process.env,
        ...this.baseEnv,
        ...env,
        NODE_ENV: 'production',
        NEXT_TELEMETRY_DISABLED: '1',
        DATABASE_URL: this.databaseUrl,
        PROVIDER_URL: this.provider.url,
        SESSION_SECRET: this.sessionSecret,
        IDEM_RESPONSE_SECRET: this.responseSecret,
        PORT: String(node.port),
        HOST: '127.0.0.1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    node.child = child;
    node.starts += 1;
    const log = createWriteStream(path.join(this.logDir, `web-${index}-${node.starts}.log`));
    for (const stream of [child.stdout, child.stderr]) {
      stream?.pipe(log, { end: false });
      if (this.verbose) stream?.pipe(process.stdout, { end: false });
    }
    child.once('close', () => log.end());
    node.exited = new Promise((resolve) => {
      child.once('exit', () => {
        if (!this.#stopping.delete(child)) node.unexpectedExits += 1;
        resolve();
      });
    });
    await waitForHealth(node.url, 60_000, () => this.isAlive(index));
    return node;
  }

  /** SIGTERM, and SIGKILL after `graceMs`. */
  async stopNode(index: number, graceMs = 5_000): Promise<void> {
    const node = this.node(index);
    const child = node.child;
    if (!child || !this.isAlive(index)) return;
    this.#stopping.add(child);
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await node.exited;
    clearTimeout(timer);
  }

  /** SIGKILL from outside (not a fault point): the process gets no chance to clean up. */
  async killNode(index: number): Promise<void> {
    const node = this.node(index);
    const child = node.child;
    if (!child || !this.isAlive(index)) return;
    this.#stopping.add(child);
    child.kill('SIGKILL');
    await node.exited;
  }

  /** SIGSTOP: the process freezes (a long GC pause, a suspended VM) with its sockets and timers as they are. */
  pauseNode(index: number): void {
    this.node(index).child?.kill('SIGSTOP');
  }

  /** SIGCONT: a paused process resumes where it stopped. */
  resumeNode(index: number): void {
    this.node(index).child?.kill('SIGCONT');
  }

  /** Waits until process #index has exited (e.g. killed itself at a fault point), at most `timeoutMs`. */
  async waitForExit(index: number, timeoutMs = 10_000): Promise<boolean> {
    if (!this.isAlive(index)) return true;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const exited = await Promise.race([this.node(index).exited.then(() => true as const), timeout]);
    clearTimeout(timer);
    return exited;
  }

  async restartNode(index: number, env: FaultEnv = this.node(index).env): Promise<WebNode> {
    await this.stopNode(index);
    return this.startNode(index, env);
  }

  /** Every line of every web process's output that contains `needle` (e.g. an errorId), with its file's name. */
  logLinesContaining(needle: string): string[] {
    const found: string[] = [];
    for (const file of readdirSync(this.logDir).sort()) {
      for (const line of readFileSync(path.join(this.logDir, file), 'utf8').split('\n')) {
        if (line.includes(needle)) found.push(`${file}: ${line}`);
      }
    }
    return found;
  }

  urls(): string[] {
    return this.nodes.map((node) => node.url);
  }

  async setProviderKnobs(update: {
    latencyMs?: number;
    chargeHold?: boolean;
    failNext?: number;
    dropResponseNext?: number;
  }) {
    const response = await fetch(`${this.provider.url}/__knobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(update),
    });
    if (!response.ok) throw new Error(`provider knobs: ${response.status}`);
  }

  async resetProviderKnobs() {
    await fetch(`${this.provider.url}/__knobs`, { method: 'DELETE' });
  }

  /** Every charge response waits at the provider (after its commit) until releaseCharges(): a payment in flight. */
  async holdCharges() {
    await this.setProviderKnobs({ chargeHold: true });
  }

  /** Resolves once at least `count` charge responses are held at the provider; throws after 30 s. */
  async chargesHeld(count = 1) {
    const response = await fetch(`${this.provider.url}/__charges/held?atLeast=${count}&timeoutMs=30000`);
    if (response.status !== 200) throw new Error(`${count} charge(s) not held at the provider within 30 s`);
  }

  /** Lets every held charge response go and turns the hold off. */
  async releaseCharges() {
    const response = await fetch(`${this.provider.url}/__charges/release`, { method: 'POST' });
    if (!response.ok) throw new Error(`provider release: ${response.status}`);
  }

  async close(): Promise<void> {
    for (const node of this.nodes) this.resumeNode(node.index);
    await Promise.all(this.nodes.map((node) => this.stopNode(node.index)));
    await this.provider.close();
    await this.db.$disconnect();
    await dropDatabase(this.adminUrl, this.databaseName);
  }
}

async function waitForHealth(url: string, timeoutMs: number, alive: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!alive()) throw new Error(`${url}: the process exited before it answered`);
    try {
      const response = await fetch(`${url}/api/health`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url}/api/health did not answer within ${timeoutMs / 1000} s`);
}
