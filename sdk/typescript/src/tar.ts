/**
 * A minimal tar (ustar) writer and reader for directory upload/download:
 * regular files and directories only, which is all the API accepts and all
 * this SDK extracts. Node has no tar in its standard library.
 */

const BLOCK = 512;

export interface TarEntry {
  name: string; // relative, "/"-separated; directories without a trailing slash
  dir: boolean;
  mode: number;
  data?: Uint8Array;
}

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, "0") + "\0";
}

function header(name: string, size: number, mode: number, type: string): Uint8Array {
  const h = new Uint8Array(BLOCK);
  const enc = new TextEncoder();
  let prefix = "";
  if (enc.encode(name).length > 100) {
    const cut = name.lastIndexOf("/", 155);
    if (cut <= 0 || enc.encode(name.slice(cut + 1)).length > 100) throw new Error(`tar: name too long: ${name}`);
    prefix = name.slice(0, cut);
    name = name.slice(cut + 1);
  }
  const put = (s: string, off: number, len: number) => h.set(enc.encode(s).subarray(0, len), off);
  put(name, 0, 100);
  put(octal(mode & 0o7777, 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(Math.floor(Date.now() / 1000), 12), 136, 12);
  put("        ", 148, 8);
  put(type, 156, 1);
  put("ustar\0", 257, 6);
  put("00", 263, 2);
  put(prefix, 345, 155);
  let sum = 0;
  for (const b of h) sum += b;
  put(octal(sum, 7) + " ", 148, 8);
  return h;
}

/** Packs entries into a tar archive. */
export function pack(entries: TarEntry[]): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const e of entries) {
    const size = e.dir ? 0 : e.data?.length ?? 0;
    parts.push(header(e.dir ? e.name + "/" : e.name, size, e.mode, e.dir ? "5" : "0"));
    if (!e.dir && e.data) {
      parts.push(e.data);
      const pad = (BLOCK - (size % BLOCK)) % BLOCK;
      if (pad) parts.push(new Uint8Array(pad));
    }
  }
  parts.push(new Uint8Array(2 * BLOCK));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function str(b: Uint8Array): string {
  const z = b.indexOf(0);
  return new TextDecoder().decode(z >= 0 ? b.subarray(0, z) : b);
}

/** Unpacks a tar archive; entries other than files and directories are skipped. */
export function unpack(buf: Uint8Array): TarEntry[] {
  const out: TarEntry[] = [];
  let off = 0;
  let longName: string | undefined;
  while (off + BLOCK <= buf.length) {
    const h = buf.subarray(off, off + BLOCK);
    if (h.every((b) => b === 0)) break;
    const size = parseInt(str(h.subarray(124, 136)).trim() || "0", 8);
    const type = String.fromCharCode(h[156] || 48);
    const prefix = str(h.subarray(345, 500));
    let name = (prefix ? prefix + "/" : "") + str(h.subarray(0, 100));
    const mode = parseInt(str(h.subarray(100, 108)).trim() || "0", 8);
    const data = buf.subarray(off + BLOCK, off + BLOCK + size);
    off += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    if (type === "x") {
      // PAX extended header: "LEN key=value\n" records; only path matters here.
      for (const rec of new TextDecoder().decode(data).split("\n")) {
        const m = /^\d+ path=(.*)$/.exec(rec);
        if (m) longName = m[1];
      }
      continue;
    }
    if (type === "L") {
      longName = str(data);
      continue;
    }
    if (longName !== undefined) {
      name = longName;
      longName = undefined;
    }
    if (type === "5") out.push({ name: name.replace(/\/+$/, ""), dir: true, mode });
    else if (type === "0" || type === "\0") out.push({ name, dir: false, mode, data: data.slice() });
  }
  return out;
}
