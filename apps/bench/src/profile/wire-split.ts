/**
 * Where a request's time goes on the wire: the server's share and the client's, per round trip, read from a
 * packet capture of `bench:profile` arms talking to Postgres one request at a time. Each arm has its own Prisma
 * client, hence its own connections: the connections that carry the same kinds of round trips are one arm, so
 * arms run interleaved (one capture, the same moments for both) come out apart. For each kind of round trip
 * (the client's messages, then the server's answer) it prints how long the server took to answer (last client
 * packet → first server packet) and how long the client took before its next message on that connection (last
 * server packet → its next packet: the process's own work, whatever it is: JavaScript, GC, waking up). Two
 * arms side by side split an added cost into server time and process time without a profiler's overhead.
 *
 *   tcpdump -i lo -w arms.pcap 'tcp port 5432' &
 *   BENCH_PROFILE_ONLY='trpc: unprotected|trpc: protected, fast path (first execution)' \
 *     BENCH_PROFILE_ITERATIONS=3000 pnpm bench:profile
 *   kill %1; pnpm --filter @idem/bench bench:wire arms.pcap
 *
 * `tsx src/profile/wire-split.ts <capture.pcap> [skip]`: `skip` (default 0.5) is the share of the capture's
 * packets left out at the start (the scratch database's migration and the warm-up). Reads classic libpcap
 * files of IPv4 over Ethernet framing (Linux's `lo`), Postgres on port 5432.
 */
import { readFileSync } from 'node:fs';

const POSTGRES_PORT = 5432;

interface Packet {
  at: number;
  fromClient: boolean;
  /** The client's port: one per connection. */
  connection: number;
  payload: Buffer;
}

/** The TCP payloads of a classic pcap file (microsecond timestamps, Ethernet + IPv4), in capture order. */
function readPackets(file: string): Packet[] {
  const data = readFileSync(file);
  if (data.readUInt32LE(0) !== 0xa1b2c3d4)
    throw new Error(`${file}: not a little-endian microsecond pcap file`);
  const packets: Packet[] = [];
  for (let offset = 24; offset + 16 <= data.length; ) {
    const seconds = data.readUInt32LE(offset);
    const micros = data.readUInt32LE(offset + 4);
    const length = data.readUInt32LE(offset + 8);
    const frame = data.subarray(offset + 16, offset + 16 + length);
    offset += 16 + length;
    const ip = frame.subarray(14);
    if (ip.length < 20 || ip[0] === undefined || ip[0] >> 4 !== 4) continue;
    const tcp = ip.subarray((ip[0] & 15) * 4);
    const payload = tcp.subarray(((tcp[12] ?? 0) >> 4) * 4);
    if (payload.length === 0) continue;
    const [source, destination] = [tcp.readUInt16BE(0), tcp.readUInt16BE(2)];
    const fromClient = destination === POSTGRES_PORT;
    packets.push({
      at: seconds + micros / 1e6,
      fromClient,
      connection: fromClient ? source : destination,
      payload,
    });
  }
  return packets;
}

/**
 * What a run of client messages asks for, e.g. `BEGIN + idem_…`: simple queries by their first words,
 * extended-protocol Binds by their prepared statement's name, or by the text their unnamed Parse carried.
 */
function describe(body: Buffer): string {
  const parts: string[] = [];
  let unnamedText = '';
  for (let offset = 0; offset + 5 <= body.length; ) {
    const type = String.fromCharCode(body[offset] ?? 0);
    const end = offset + 1 + body.readUInt32BE(offset + 1);
    const fields = body
      .subarray(offset + 5, end)
      .toString('latin1')
      .split('\0');
    const firstWords = (sql = '') => sql.trim().split(/\s+/).slice(0, 3).join(' ');
    if (type === 'Q') parts.push(firstWords(fields[0]));
    if (type === 'P' && !fields[0]) unnamedText = firstWords(fields[1]);
    if (type === 'B') parts.push(fields[1] || unnamedText);
    offset = end;
  }
  return parts.join(' + ') || '(no statement)';
}

interface RoundTrip {
  label: string;
  serverMs: number;
  /** Until the client's next message on the same connection; undefined for its last round trip. */
  clientAfterMs?: number;
}

/** `items` grouped by `keyOf`, in order (one array per key, appended to: a capture holds tens of thousands). */
function groupBy<T, K>(items: Iterable<T>, keyOf: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group) group.push(item);
    else groups.set(key, [item]);
  }
  return groups;
}

/** Each connection's round trips: its client's messages, then the server's answer. */
function roundTrips(packets: Packet[]): Map<number, RoundTrip[]> {
  const byConnection = groupBy(packets, (packet) => packet.connection);
  const trips = new Map<number, RoundTrip[]>();
  for (const [connection, own] of byConnection) {
    const list: RoundTrip[] = [];
    let previousAnswerEnd: number | undefined;
    for (let index = 0; index < own.length; ) {
      if (!own[index]?.fromClient) {
        index += 1;
        continue;
      }
      const firstSent = own[index]?.at ?? 0;
      const sent: Buffer[] = [];
      let lastSent = firstSent;
      for (let packet = own[index]; packet?.fromClient; packet = own[++index]) {
        sent.push(packet.payload);
        lastSent = packet.at;
      }
      if (index >= own.length) break;
      const firstAnswer = own[index]?.at ?? 0;
      let lastAnswer = firstAnswer;
      for (let packet = own[index]; packet && !packet.fromClient; packet = own[++index])
        lastAnswer = packet.at;
      const previous = list.at(-1);
      if (previous && previousAnswerEnd !== undefined)
        previous.clientAfterMs = (firstSent - previousAnswerEnd) * 1000;
      list.push({ label: describe(Buffer.concat(sent)), serverMs: (firstAnswer - lastSent) * 1000 });
      previousAnswerEnd = lastAnswer;
    }
    trips.set(connection, list);
  }
  return trips;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : (sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN);
};
const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;

const [file, skipArg = '0.5'] = process.argv.slice(2);
if (!file) throw new Error('usage: wire-split.ts <capture.pcap> [skip share, default 0.5]');
const packets = readPackets(file);
const byConnection = roundTrips(packets.slice(Math.floor(packets.length * Number(skipArg))));

// Connections that carried the same kinds of round trips belong to one client (one arm of bench:profile, when
// several run interleaved: each arm has its own Prisma client, so its own pool).
const signatureOf = (trips: RoundTrip[]) =>
  [...groupBy(trips, (trip) => trip.label)]
    .filter(([, group]) => group.length > 10)
    .map(([label]) => label)
    .sort()
    .join(' | ');
const groups = new Map<string, RoundTrip[]>();
for (const [signature, connections] of groupBy(byConnection.values(), signatureOf))
  groups.set(signature, connections.flat());

const fixed = (value: number) => value.toFixed(3);
const endsRequest = (label: string) => /\bcommit\b/i.test(label);
for (const trips of groups.values()) {
  const requests = trips.filter((trip) => endsRequest(trip.label)).length;
  if (requests < 10) continue; // setup: connecting, migrating, preparing
  const byLabel = groupBy(trips, (trip) => trip.label);
  console.log(`\n${requests} requests (round trips ending with COMMIT) on ${file}`);
  console.log(
    '| round trip (client messages) | count | server p50 ms | server mean ms | client after p50 ms |',
  );
  console.log('|---|---|---|---|---|');
  let serverP50 = 0;
  for (const [label, group] of [...byLabel].sort((a, b) => b[1].length - a[1].length)) {
    if (group.length < requests / 10) continue; // one-offs: statements prepared once per connection
    const server = group.map((trip) => trip.serverMs);
    serverP50 += median(server);
    // After the COMMIT the next message on this connection is a later request: not this request's time.
    const after = group.flatMap((trip) => (trip.clientAfterMs === undefined ? [] : [trip.clientAfterMs]));
    const afterText = endsRequest(label) ? '–' : fixed(median(after));
    console.log(
      `| ${label} | ${group.length} | ${fixed(median(server))} | ${fixed(mean(server))} | ${afterText} |`,
    );
  }
  console.log(`server time per request: ${fixed(serverP50)} ms (sum of the p50s)`);
}
