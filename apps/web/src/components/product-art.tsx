/** A generated product tile: no external image hosts, so the shop works offline. */
export function ProductArt({ name, hue, size = 'lg' }: { name: string; hue: number; size?: 'lg' | 'sm' }) {
  const initials = name
    .split(/\s+/)
    .slice(0, 2)
    .map((word) => word[0])
    .join('');
  return (
    <div
      aria-hidden
      className={`grid place-items-center font-semibold text-white/90 ${size === 'lg' ? 'aspect-[4/3] rounded-xl text-4xl' : 'size-14 shrink-0 rounded-lg text-base'}`}
      style={{
        background: `linear-gradient(135deg, hsl(${hue} 45% 42%), hsl(${(hue + 40) % 360} 50% 62%))`,
      }}
    >
      {initials}
    </div>
  );
}
