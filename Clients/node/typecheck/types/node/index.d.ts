// The few Node.js declarations index.d.ts and the README's snippets use (no @types/node here:
// Debian does not package it), so `tsc` can check the client's declarations without a download.
declare module 'node:events' {
  export class EventEmitter {
    on(event: string | symbol, listener: (...args: any[]) => void): this;
    once(event: string | symbol, listener: (...args: any[]) => void): this;
    off(event: string | symbol, listener: (...args: any[]) => void): this;
    emit(event: string | symbol, ...args: any[]): boolean;
  }
}
declare module 'node:fs' {
  export function readFileSync(path: string): Buffer;
  export function readFileSync(path: string, encoding: string): string;
}
interface Buffer extends Uint8Array {
  toString(encoding?: string): string;
}
declare var Buffer: { from(data: string | ArrayLike<number> | ArrayBuffer, encoding?: string): Buffer };
declare var process: { env: Record<string, string | undefined>; argv: string[]; exit(code?: number): never };
