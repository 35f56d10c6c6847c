// A small terminal widget: it parses the VT escape sequences a shell and
// readline use (cursor moves, erase, insert/delete) into a grid of plain
// characters and shows them as text nodes. Nothing the sandbox prints is
// ever parsed as HTML; unknown sequences (colours, OSC titles, modes) are
// consumed and dropped.
export class Terminal {
  rows = 24; cols = 80;
  private grid: string[][] = [];
  private x = 0; private y = 0;
  private state = 0; // 0 ground, 1 ESC, 2 CSI, 3 OSC, 4 charset, 5 OSC-ESC
  private params = '';
  private dec = new TextDecoder();
  private history: HTMLElement;
  private screen: HTMLElement;
  private pending = false;
  onData: (s: string) => void = () => {};
  onResize: (rows: number, cols: number) => void = () => {};

  constructor(public el: HTMLElement) {
    el.classList.add('term');
    el.tabIndex = 0;
    el.setAttribute('role', 'textbox');
    el.setAttribute('aria-multiline', 'true');
    this.history = document.createElement('div');
    this.screen = document.createElement('div');
    el.append(this.history, this.screen);
    this.reset();
    el.addEventListener('keydown', (e) => this.key(e));
    el.addEventListener('paste', (e) => {
      e.preventDefault();
      this.onData(e.clipboardData?.getData('text') ?? '');
    });
    new ResizeObserver(() => this.fit()).observe(el);
  }

  private blank(): string[] { return new Array(this.cols).fill(' '); }
  private reset() { this.grid = Array.from({ length: this.rows }, () => this.blank()); }

  fit() {
    const probe = document.createElement('span');
    probe.textContent = 'MMMMMMMMMM';
    this.el.append(probe);
    const r = probe.getBoundingClientRect();
    probe.remove();
    const cw = r.width / 10 || 8, ch = r.height || 16;
    const cols = Math.max(20, Math.floor((this.el.clientWidth - 8) / cw));
    const rows = Math.max(5, Math.floor((this.el.clientHeight - 8) / ch));
    if (cols === this.cols && rows === this.rows) return;
    this.grid = this.grid.slice(Math.max(0, this.grid.length - rows)).map((l) =>
      l.length >= cols ? l.slice(0, cols) : l.concat(new Array(cols - l.length).fill(' ')));
    while (this.grid.length < rows) this.grid.push(new Array(cols).fill(' '));
    this.y = Math.min(this.y, rows - 1); this.x = Math.min(this.x, cols - 1);
    this.rows = rows; this.cols = cols;
    this.el.dataset.size = rows + ' ' + cols;
    this.onResize(rows, cols);
    this.draw();
  }

  write(data: Uint8Array | string) {
    const s = typeof data === 'string' ? data : this.dec.decode(data, { stream: true });
    for (const c of s) this.put(c);
    if (!this.pending) {
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.draw(); });
    }
  }

  text(): string {
    return this.history.textContent + this.grid.map((l) => l.join('').trimEnd()).join('\n');
  }

  private scroll() {
    const line = this.grid.shift()!;
    const d = document.createElement('div');
    d.textContent = line.join('').trimEnd() || '\u00a0';
    this.history.append(d);
    while (this.history.childElementCount > 1000) this.history.firstChild!.remove();
    this.grid.push(this.blank());
  }

  private put(c: string) {
    switch (this.state) {
      case 1:
        this.state = c === '[' ? 2 : c === ']' ? 3 : c === '(' || c === ')' ? 4 : 0;
        this.params = '';
        return;
      case 2:
        if (c >= '@' && c <= '~') { this.state = 0; this.csi(c, this.params); } else this.params += c;
        return;
      case 3:
        if (c === '\x07') this.state = 0; else if (c === '\x1b') this.state = 5;
        return;
      case 5: this.state = c === '\\' ? 0 : 3; return;
      case 4: this.state = 0; return;
    }
    const code = c.codePointAt(0)!;
    if (c === '\x1b') this.state = 1;
    else if (c === '\r') this.x = 0;
    else if (c === '\n' || c === '\v' || c === '\f') { if (++this.y >= this.rows) { this.y = this.rows - 1; this.scroll(); } }
    else if (c === '\b') this.x = Math.max(0, this.x - 1);
    else if (c === '\t') this.x = Math.min(this.cols - 1, (this.x + 8) & ~7);
    else if (code < 32 || code === 127) { /* other controls: dropped */ }
    else {
      if (this.x >= this.cols) { this.x = 0; if (++this.y >= this.rows) { this.y = this.rows - 1; this.scroll(); } }
      this.grid[this.y][this.x++] = c;
    }
  }

  private csi(f: string, p: string) {
    const priv = p.startsWith('?');
    const n = (priv ? p.slice(1) : p).split(';').map((v) => parseInt(v, 10));
    const a = n[0] || 1, row = this.grid[this.y];
    switch (f) {
      case 'A': this.y = Math.max(0, this.y - a); break;
      case 'B': this.y = Math.min(this.rows - 1, this.y + a); break;
      case 'C': this.x = Math.min(this.cols - 1, this.x + a); break;
      case 'D': this.x = Math.max(0, this.x - a); break;
      case 'G': this.x = Math.min(this.cols - 1, a - 1); break;
      case 'd': this.y = Math.min(this.rows - 1, a - 1); break;
      case 'H': case 'f':
        this.y = Math.min(this.rows - 1, (n[0] || 1) - 1); this.x = Math.min(this.cols - 1, (n[1] || 1) - 1); break;
      case 'K': {
        const m = n[0] || 0;
        for (let i = m === 0 ? this.x : 0; i < (m === 1 ? this.x + 1 : this.cols); i++) row[i] = ' ';
        break;
      }
      case 'J': {
        const m = n[0] || 0;
        if (m === 2 || m === 3) { this.reset(); break; }
        const from = m === 0 ? this.y + 1 : 0, to = m === 0 ? this.rows : this.y;
        for (let y = from; y < to; y++) this.grid[y] = this.blank();
        this.csi('K', String(m));
        break;
      }
      case 'P': row.splice(this.x, a); while (row.length < this.cols) row.push(' '); break;
      case '@': row.splice(this.x, 0, ...new Array(a).fill(' ')); row.length = this.cols; break;
      case 'X': for (let i = this.x; i < Math.min(this.cols, this.x + a); i++) row[i] = ' '; break;
      case 'L': for (let i = 0; i < a; i++) { this.grid.splice(this.y, 0, this.blank()); this.grid.pop(); } break;
      case 'M': for (let i = 0; i < a; i++) { this.grid.splice(this.y, 1); this.grid.push(this.blank()); } break;
      case 'S': for (let i = 0; i < a; i++) this.scroll(); break;
      case 'h': case 'l': if (priv && n[0] === 1049) { this.reset(); this.x = this.y = 0; } break;
      default: break; // m (colours), r, t, n, ...: no effect on the text
    }
  }

  private draw() {
    const s = this.screen;
    while (s.childElementCount < this.rows) s.append(document.createElement('div'));
    while (s.childElementCount > this.rows) s.lastChild!.remove();
    this.grid.forEach((line, y) => {
      const d = s.children[y] as HTMLElement;
      if (y !== this.y || document.activeElement !== this.el) {
        const t = line.join('').trimEnd() || '\u00a0';
        if (d.textContent !== t || d.childElementCount) d.textContent = t;
        return;
      }
      const cur = document.createElement('span');
      cur.className = 'cursor';
      cur.textContent = line[this.x] ?? ' ';
      d.replaceChildren(line.slice(0, this.x).join(''), cur, line.slice(this.x + 1).join('').trimEnd());
    });
    this.el.scrollTop = this.el.scrollHeight;
  }

  private key(e: KeyboardEvent) {
    const seq: Record<string, string> = {
      Enter: '\r', Backspace: '\x7f', Escape: '\x1b', ArrowUp: '\x1b[A', ArrowDown: '\x1b[B',
      ArrowRight: '\x1b[C', ArrowLeft: '\x1b[D', Home: '\x1b[H', End: '\x1b[F', Delete: '\x1b[3~',
      PageUp: '\x1b[5~', PageDown: '\x1b[6~',
    };
    let out = '';
    if (e.ctrlKey && !e.altKey && e.key.length === 1) {
      const k = e.key.toLowerCase();
      if (k === 'c' && (window.getSelection()?.toString() ?? '') !== '') return; // copy
      if (k === 'v') return; // paste event
      if (k >= 'a' && k <= 'z') out = String.fromCharCode(k.charCodeAt(0) - 96);
    } else if (seq[e.key]) out = seq[e.key];
    else if (e.key.length === 1 && !e.metaKey) out = (e.altKey ? '\x1b' : '') + e.key;
    if (!out) return; // Tab moves focus (Ctrl+I completes), F-keys etc. pass
    e.preventDefault();
    this.onData(out);
  }
}
