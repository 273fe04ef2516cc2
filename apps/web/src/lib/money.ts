const formatters = new Map<string, Intl.NumberFormat>();

/** 1999, 'usd' → "$19.99". Money is integer cents everywhere; only the UI turns it into text. */
export function formatMoney(cents: number, currency = 'usd'): string {
  const key = currency.toUpperCase();
  let formatter = formatters.get(key);
  if (!formatter) {
    formatter = new Intl.NumberFormat('en-US', { style: 'currency', currency: key });
    formatters.set(key, formatter);
  }
  return formatter.format(cents / 100);
}
