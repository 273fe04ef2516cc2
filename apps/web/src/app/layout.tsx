import type { Metadata } from 'next';
import type { ReactNode } from 'react';
import { CartProvider } from '~/components/cart-provider';
import { SiteHeader } from '~/components/site-header';
import { TRPCReactProvider } from '~/trpc/react';
import './globals.css';

export const metadata: Metadata = {
  title: { default: 'Idem Supply Co.', template: '%s · Idem Supply Co.' },
  description: 'A small shop whose checkout is safe to retry.',
};

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body className="flex min-h-screen flex-col">
        <TRPCReactProvider>
          <CartProvider>
            <SiteHeader />
            <main className="mx-auto w-full max-w-6xl flex-1 px-6 py-10">{children}</main>
            <footer className="border-t border-stone-200 py-6 text-center text-xs text-stone-500">
              Test mode: payments go to a local simulated card processor. Use <code>tok_visa</code> to pay.
            </footer>
          </CartProvider>
        </TRPCReactProvider>
      </body>
    </html>
  );
}
