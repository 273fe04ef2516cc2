'use client';

import { useEffect, useState } from 'react';

/**
 * The order this tab just placed, so that pressing Back from the confirmation shows "already placed" (and a
 * link to it) instead of an empty cart that invites a second purchase.
 */
const STORAGE_KEY = 'idem:checkout:placed-order';

export function rememberPlacedOrder(orderId: string) {
  window.sessionStorage.setItem(STORAGE_KEY, orderId);
}

export function forgetPlacedOrder() {
  window.sessionStorage.removeItem(STORAGE_KEY);
}

export function usePlacedOrder(): string | null {
  const [orderId, setOrderId] = useState<string | null>(null);
  useEffect(() => setOrderId(window.sessionStorage.getItem(STORAGE_KEY)), []);
  return orderId;
}
