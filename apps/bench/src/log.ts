/** `pnpm bench`'s progress lines on stdout, each marked `[bench]`. */
export function log(line: string): void {
  console.log(`[bench] ${line}`);
}
