\set n random(1, 1000000)
\set k random(1, 9000000000000000)
begin;
insert into idempotency_keys (scope, procedure, key, fingerprint, state, lease_owner, created_at, expires_at, replay_count) values ('pgbench', 'bench.protected', 'k' || :k, repeat('a', 64), 'completed', '00000000-0000-0000-0000-000000000001'::uuid, now(), now() + make_interval(secs => 86400), 0) on conflict (scope, procedure, key) do nothing returning 1;
commit;
