\set n random(1, 1000000)
\set k random(1, 9000000000000000)
begin;
with live as (select (select count(*)::int from ( select 1 from "idempotency_keys" where scope = 'pgbench' and state = 'processing' and locked_until > now() limit 20) as held) as n), claimed as ( insert into "idempotency_keys" (scope, procedure, key, fingerprint, state, response, http_status, lease_owner, locked_until, created_at, expires_at, replay_count) select 'pgbench', 'bench.protected', 'k' || :k, repeat('a', 64), 'completed', null, null::int, '00000000-0000-0000-0000-000000000001'::uuid, null::timestamptz, now(), now() + make_interval(secs => 86400::double precision), 0 from (select set_config('lock_timeout', '5000', true)) as session where (select n from live) < 20 on conflict (scope, procedure, key) do nothing returning 1 ) select exists (select 1 from claimed) as inserted, (select n from live) >= 20 as at_cap;
commit;
