'use client';

import { useActionState } from 'react';
import { type SignInState, signIn } from '../actions';

export function AdminLoginForm() {
  const [state, action, pending] = useActionState<SignInState, FormData>(signIn, { error: null });
  return (
    <form action={action} className="mt-6 space-y-4">
      <label className="block text-sm font-medium" htmlFor="admin-token">
        Admin API token
      </label>
      <input
        id="admin-token"
        name="token"
        type="password"
        required
        autoComplete="off"
        spellCheck={false}
        placeholder="idem_…"
        className="w-full rounded-lg border border-stone-300 px-3 py-2 font-mono text-sm focus:border-brand-600 focus:outline-none"
      />
      {state.error && (
        <p role="alert" className="rounded-lg bg-red-50 px-3 py-2 text-sm text-red-800">
          {state.error}
        </p>
      )}
      <button
        type="submit"
        disabled={pending}
        className="w-full rounded-full bg-stone-900 px-4 py-2 text-sm font-medium text-white hover:bg-stone-700 disabled:opacity-60"
      >
        {pending ? 'Checking…' : 'Sign in'}
      </button>
    </form>
  );
}
