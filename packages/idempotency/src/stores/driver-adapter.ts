/**
 * The slice of Prisma 7's driver adapter interfaces (`@prisma/driver-adapter-utils`) the stores' wrappers use:
 * structural, so the library imports no adapter.
 */
export interface SqlQueryLike {
  sql: string;
  args: unknown[];
  argTypes: Array<{ scalarType: string; arity: 'scalar' | 'list' }>;
}
export interface SqlQueryableLike {
  readonly provider: string;
  readonly adapterName: string;
  queryRaw(query: SqlQueryLike): Promise<{ columnNames: string[]; columnTypes: number[]; rows: unknown[][] }>;
  executeRaw(query: SqlQueryLike): Promise<number>;
}
export interface TransactionLike extends SqlQueryableLike {
  commit(): Promise<void>;
  rollback(): Promise<void>;
}
export interface DriverAdapterLike extends SqlQueryableLike {
  startTransaction(...args: never[]): Promise<TransactionLike>;
}
export interface DriverAdapterFactoryLike {
  readonly provider: string;
  readonly adapterName: string;
  connect(): Promise<DriverAdapterLike>;
}
