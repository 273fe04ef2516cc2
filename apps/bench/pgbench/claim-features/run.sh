#!/usr/bin/env bash
# What each of the claim's features costs Postgres (docs/BENCHMARKS.md, P1): the store's claim statement (the
# transactional variant, with its in-flight cap, its lock bound and its read of the key's row) against a bare
# INSERT … ON CONFLICT DO NOTHING of the key and against the claim without each feature, interleaved at random
# in ONE pgbench run (-r: per-statement latency); then the whole transaction (claim, effect, completion) on the
# key table against a copy whose in-flight index is partial (WHERE state = 'processing').
# Needs a migrated database (the app's migrations: idempotency_keys) with a bench_effects table:
#   createdb pgx; DATABASE_URL=postgresql://postgres@127.0.0.1:5432/pgx pnpm db:deploy
#   bash apps/bench/pgbench/claim-features/run.sh postgresql://postgres@127.0.0.1:5432/pgx
set -euo pipefail
url=${1:?usage: run.sh <database url>}
here=$(dirname "$0")
psql "$url" -qc 'create table if not exists bench_effects (id bigserial primary key, n int, at timestamptz default now())'
psql "$url" -qc "create table if not exists idem_partial (like idempotency_keys including defaults including constraints);
  alter table idem_partial drop constraint if exists idem_partial_pkey;
  alter table idem_partial add constraint idem_partial_pkey primary key (scope, procedure, key);
  create index if not exists idem_partial_expires_at on idem_partial (expires_at);
  create index if not exists idem_partial_in_flight on idem_partial (scope) where state = 'processing'"
pgbench "$url" -n -M prepared -T 30 -r \
  -f "$here/claim-bare-insert.sql" -f "$here/claim.sql" -f "$here/claim-without-lock-bound.sql" \
  -f "$here/claim-without-cap.sql" -f "$here/claim-without-read.sql"
pgbench "$url" -n -M prepared -T 20 -r -f "$here/transaction.sql" -f "$here/transaction-partial-index.sql"
