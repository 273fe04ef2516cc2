import type { PaymentAnnouncement } from './payment-announcement';

/**
 * The checkout's two live regions, for screen readers: progress in a polite status region, what needs the
 * customer in an alert. Rendered from the checkout's first paint (before the cart has loaded), so each state's
 * text arrives in a region that already exists — a region inserted together with its text is often not read.
 */
export function PaymentLiveRegions({ announcement }: { announcement: PaymentAnnouncement }) {
  return (
    <>
      <p role="status" data-testid="payment-progress" data-state={announcement.name} className="sr-only">
        {announcement.progress}
      </p>
      <p role="alert" data-testid="payment-attention" className="sr-only">
        {announcement.attention}
      </p>
    </>
  );
}
