'use client';

import { useRouter } from 'next/navigation';
import type { KeyView } from '~/server/admin/key-rows';
import { EvictKeyControl } from '../../evict-key';

/** The trail page's evict control: after an eviction the server-rendered trail is rendered again. */
export function TrailEvict({ target }: { target: KeyView }) {
  const router = useRouter();
  return <EvictKeyControl target={target} onEvicted={() => router.refresh()} />;
}
