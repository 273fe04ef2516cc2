/**
 * Several statements in ONE round trip on a node-postgres connection, with the semantics of one: every
 * statement's Parse/Bind/Execute is written, then a single Sync. Postgres runs them in order and, at the first
 * error, skips everything up to the Sync — so `[BEGIN, claim]` never runs the claim outside a transaction, and
 * `[completion, COMMIT]` never commits without the completion. (node-postgres' own pipeline mode gives every
 * query its own Sync, where a failed statement does not stop the next one: an aborted transaction's COMMIT then
 * answers ROLLBACK without an error.)
 *
 * It is a node-postgres "submittable" (what `client.query()` accepts besides text: pg-cursor is one), so the
 * client queues it like any query and routes the backend's messages to it. Named statements are parsed once
 * per connection and recorded where node-postgres records its own, so both agree on what is prepared.
 */

/** A statement of a batch. `name`: prepare it once per connection under that name ('' or absent: unnamed). */
export interface BatchStatement {
  text: string;
  values: readonly unknown[];
  name?: string;
}

/** One statement's outcome, in node-postgres' result shape (what Prisma's pg adapter reads). */
export interface BatchResult {
  command: string;
  rowCount: number | null;
  fields: Array<{ name: string; dataTypeID: number }>;
  rows: Array<Record<string, unknown>>;
}

/** The slice of node-postgres' `Connection` a batch writes to. */
interface PgConnection {
  parsedStatements: Record<string, string>;
  submittedNamedStatements: Record<string, string>;
  stream: { cork?: () => void; uncork?: () => void };
  parse(message: { text: string; name?: string; types?: number[] }): void;
  bind(message: { portal: string; statement: string; values: unknown[] }): void;
  describe(message: { type: 'P'; name: string }): void;
  execute(message: { portal: string; rows: number }): void;
  sync(): void;
  on(event: 'parseComplete', listener: () => void): void;
  removeListener(event: 'parseComplete', listener: () => void): void;
}

/** The slice of a node-postgres `Client` (a pool's client included) a batch needs. */
export interface PgClientLike {
  query(submittable: object): unknown;
  getTypeParser(oid: number, format?: 'text'): (value: string) => unknown;
  getTransactionStatus?(): string | null;
}

interface Field {
  name: string;
  dataTypeID: number;
}

/** Sends `statements` in one round trip; resolves to one result per statement, or rejects with the first error. */
export function sendBatch(
  client: PgClientLike,
  statements: readonly BatchStatement[],
): Promise<BatchResult[]> {
  return new Promise((resolve, reject) => {
    client.query(new StatementBatch(client, statements, resolve, reject));
  });
}

class StatementBatch {
  /** Set by node-postgres when the client has a `query_timeout` (its timer is cleared through it). */
  callback: ((error: unknown, results?: BatchResult[]) => void) | undefined;
  private readonly results: BatchResult[] = [];
  private current: BatchResult | undefined;
  private parsers: Array<(value: string) => unknown> = [];
  /** The Parses this batch sent, in order: each ParseComplete the server sends confirms the next one. */
  private readonly parsing: Array<{ name: string; text: string }> = [];
  private connection: PgConnection | undefined;
  private failure: unknown;
  private settled = false;
  private readonly onParseComplete = () => {
    const parsed = this.parsing.shift();
    if (!parsed?.name || !this.connection) return;
    this.connection.parsedStatements[parsed.name] = parsed.text;
    delete this.connection.submittedNamedStatements[parsed.name];
  };

  constructor(
    private readonly client: PgClientLike,
    private readonly statements: readonly BatchStatement[],
    private readonly resolve: (results: BatchResult[]) => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  /** Called by the client when the batch's turn comes: writes every statement, then one Sync. */
  submit(connection: PgConnection): Error | null {
    for (const { name, text } of this.statements) {
      const prepared = name ? connection.parsedStatements[name] : undefined;
      if (prepared !== undefined && prepared !== text)
        return new Error(`Prepared statement ${name} was already used for another statement`);
    }
    this.connection = connection;
    connection.on('parseComplete', this.onParseComplete);
    connection.stream.cork?.();
    const parsedHere = new Set<string>();
    try {
      for (const statement of this.statements) {
        const name = statement.name ?? '';
        const known =
          connection.parsedStatements[name] !== undefined ||
          connection.submittedNamedStatements[name] !== undefined ||
          parsedHere.has(name);
        if (name === '' || !known) {
          connection.parse({ text: statement.text, name });
          // As node-postgres does for its own: submitted now, parsed once the server says so.
          if (name !== '') connection.submittedNamedStatements[name] = statement.text;
          this.parsing.push({ name, text: statement.text });
          parsedHere.add(name);
        }
        connection.bind({ portal: '', statement: name, values: statement.values.map(toWireValue) });
        connection.describe({ type: 'P', name: '' });
        connection.execute({ portal: '', rows: 0 });
      }
    } finally {
      connection.sync();
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(message: { fields: Field[] }): void {
    const result = this.next();
    result.fields = message.fields.map(({ name, dataTypeID }) => ({ name, dataTypeID }));
    this.parsers = message.fields.map((field) => this.client.getTypeParser(field.dataTypeID, 'text'));
  }

  handleDataRow(message: { fields: Array<string | null> }): void {
    const result = this.current;
    if (!result || this.failure) return;
    try {
      const row: Record<string, unknown> = {};
      message.fields.forEach((value, i) => {
        const field = result.fields[i];
        if (field) row[field.name] = value === null ? null : (this.parsers[i]?.(value) ?? value);
      });
      result.rows.push(row);
    } catch (error) {
      this.failure = error;
    }
  }

  handleCommandComplete(message: { text: string }): void {
    // A statement without rows (BEGIN, UPDATE) has no RowDescription: its result starts here.
    const result = this.current ?? this.next();
    const [, command = '', first, second] = /^([A-Za-z]+)(?: (\d+))?(?: (\d+))?/.exec(message.text) ?? [];
    result.command = command;
    const count = second ?? first;
    result.rowCount = count === undefined ? null : Number.parseInt(count, 10);
    this.current = undefined;
  }

  handleEmptyQuery(): void {
    (this.current ?? this.next()).command = 'EMPTY';
    this.current = undefined;
  }

  /**
   * The batch failed. An error from the server means it skipped the rest up to the Sync: nothing more comes for
   * this batch, and a statement whose Parse was skipped is not prepared. Any other error (node-postgres'
   * query_timeout) leaves the batch running on the server: its answers, ParseComplete included, are still
   * booked until its ReadyForQuery, so that a later statement neither parses a name twice nor misses one.
   */
  handleError(error: unknown): void {
    if (isServerError(error)) this.finish();
    this.settle(this.failure ?? error);
  }

  handleReadyForQuery(): void {
    this.finish();
    this.settle(this.failure);
  }

  handlePortalSuspended(): void {}
  handleCopyInResponse(): void {}
  handleCopyData(): void {}

  private next(): BatchResult {
    const result: BatchResult = { command: '', rowCount: null, fields: [], rows: [] };
    this.results.push(result);
    this.current = result;
    return result;
  }

  private settle(failure: unknown): void {
    if (this.settled) return;
    this.settled = true;
    if (failure) {
      this.callback?.(failure);
      this.reject(failure);
    } else {
      this.callback?.(null, this.results);
      this.resolve(this.results);
    }
  }

  /** Done with the connection: Parses the server never confirmed are not prepared. */
  private finish(): void {
    const connection = this.connection;
    if (!connection) return;
    connection.removeListener('parseComplete', this.onParseComplete);
    for (const { name } of this.parsing.splice(0)) if (name) delete connection.submittedNamedStatements[name];
  }
}

/** An ErrorResponse from the server (node-postgres' DatabaseError carries its severity). */
function isServerError(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'severity' in error;
}

/** A parameter as text, the way node-postgres sends it (the store's values are strings, numbers and null). */
function toWireValue(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}
