// Airlock's JavaScript kernel: a stateful interpreter for Node.js that runs
// code cells sent by the host, one at a time, in one vm context. It runs
// INSIDE a sandbox, started by the host through /bin/sh with the protocol
// streams moved to fd 4 (requests in) and fd 3 (answers out); fd 0 is
// /dev/null and fd 1 is the kernel's stderr, so a child process that
// inherits stdout cannot corrupt the protocol. Node's core modules only.
//
// Protocol: the same as the Python kernel's (interp/doc.go): one JSON object
// per line each way; "ready" once, then one "result" per request.
'use strict';

const fs = require('fs');
const vm = require('vm');
const util = require('util');
const path = require('path');
const { createRequire } = require('module');

const OUT = 3;
const IN = 4;
const MAX_STREAM = 1 << 20;
const MAX_TEXT = 64 << 10;
const MAX_REQUEST = 8 << 20;

function send(msg) {
  const b = Buffer.from(JSON.stringify(msg) + '\n');
  let off = 0;
  while (off < b.length) {
    try {
      off += fs.writeSync(OUT, b, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
}

function clip(s, limit) {
  const b = Buffer.from(String(s));
  if (b.length <= limit) return String(s);
  return b.subarray(0, limit).toString() + '\n[... truncated]';
}

// Output of the running cell: process.stdout/stderr writes and console.
let cur = null;
function capture(which) {
  return function (chunk, enc, cb) {
    if (cur) {
      const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk), typeof enc === 'string' ? enc : 'utf8');
      const room = MAX_STREAM - cur[which + 'Len'];
      if (room > 0 && cur.stream) {
        send({ type: 'stream', id: cur.id, name: which === 'out' ? 'stdout' : 'stderr', text: (b.length > room ? b.subarray(0, room) : b).toString() });
      } else if (room > 0) cur[which].push(b.length > room ? b.subarray(0, room) : b);
      if (b.length > room) cur.truncated = true;
      cur[which + 'Len'] += Math.min(b.length, Math.max(room, 0));
    }
    const done = typeof enc === 'function' ? enc : cb;
    if (done) process.nextTick(done);
    return true;
  };
}
process.stdout.write = capture('out');
process.stderr.write = capture('err');
const cellConsole = new console.Console({ stdout: process.stdout, stderr: process.stderr });

const cwd = process.cwd();
const context = vm.createContext({
  console: cellConsole,
  require: createRequire(path.join(cwd, '[cell]')),
  process, Buffer, URL, URLSearchParams, TextEncoder, TextDecoder,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask, structuredClone, fetch: globalThis.fetch,
  module: { exports: {} }, __dirname: cwd, __filename: path.join(cwd, '[cell]'),
});
context.globalThis = context;

let interrupt = null; // rejects the await of a running async cell
let running = false;
process.on('SIGINT', () => {
  if (running && interrupt) interrupt(new Error('Script execution interrupted.'));
});

function errorOf(e) {
  if (e === null || typeof e !== 'object') {
    return { name: 'Error', value: clip(util.inspect(e), MAX_TEXT), traceback: '' };
  }
  const stack = String(e.stack || '')
    .split('\n')
    .filter((l) => !l.includes('[eval]') && !l.includes('node:vm') && !l.includes('node:internal'))
    .join('\n');
  return { name: String(e.name || 'Error'), value: clip(e.message || '', MAX_TEXT), traceback: clip(stack, MAX_TEXT) };
}

// cellEnv sets a cell's environment in process.env (what it starts
// inherits it) and returns what puts back the values from before.
function cellEnv(env) {
  if (env === undefined || env === null) return () => {};
  if (typeof env !== 'object' || Array.isArray(env)) throw new Error('env: want an object');
  const saved = [];
  for (const [k, v] of Object.entries(env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) || typeof v !== 'string' || v.includes('\0')) throw new Error(`env: bad variable ${JSON.stringify(k)}`);
  }
  for (const [k, v] of Object.entries(env)) {
    saved.push([k, Object.prototype.hasOwnProperty.call(process.env, k), process.env[k]]);
    process.env[k] = v;
  }
  return () => {
    for (const [k, had, old] of saved) {
      if (had) process.env[k] = old;
      else delete process.env[k];
    }
  };
}

async function runCell(req, count) {
  if (typeof req.code !== 'string') throw new Error('code: want a string');
  const restoreEnv = cellEnv(req.env);
  cur = { out: [], outLen: 0, err: [], errLen: 0, truncated: false, stream: !!req.stream, id: req.id };
  const reply = { type: 'result', id: req.id, result: null, error: null, images: [] };
  running = true;
  try {
    const script = new vm.Script(req.code, { filename: `<cell ${count}>` });
    let value = script.runInContext(context, { breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function') {
      value = await Promise.race([value, new Promise((_, reject) => { interrupt = reject; })]);
    }
    if (value !== undefined) {
      context._ = value;
      reply.result = clip(util.inspect(value, { depth: 4, maxArrayLength: 100, breakLength: 100 }), MAX_TEXT);
      if (cur.stream) {
        reply.data = { text: reply.result };
        if (value !== null && typeof value === 'object' && !Array.isArray(value) || Array.isArray(value)) {
          try { reply.data.json = JSON.parse(JSON.stringify(value)); } catch (e) { /* not JSON */ }
        }
      }
    }
  } catch (e) {
    reply.error = errorOf(e);
  } finally {
    running = false;
    interrupt = null;
    restoreEnv();
  }
  reply.stdout = Buffer.concat(cur.out).toString();
  reply.stderr = Buffer.concat(cur.err).toString();
  reply.truncated = cur.truncated;
  cur = null;
  return reply;
}

// Requests arrive on fd 4, one per line; cells run strictly in order.
const lines = [];
let buf = Buffer.alloc(0);
let busy = false;
let count = 0;

async function pump() {
  if (busy) return;
  busy = true;
  while (lines.length > 0) {
    const line = lines.shift();
    count++;
    let reply;
    let req = null;
    try {
      req = JSON.parse(line);
      reply = await runCell(req, count);
    } catch (e) {
      reply = { type: 'result', id: req && req.id, stdout: '', stderr: '', result: null, images: [],
        error: { name: 'KernelError', value: clip(String(e && e.message), MAX_TEXT), traceback: '' } };
    }
    reply.execution_count = count;
    send(reply);
  }
  busy = false;
}

const input = fs.createReadStream(null, { fd: IN });
input.on('data', (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  let i;
  while ((i = buf.indexOf(10)) >= 0) {
    lines.push(buf.subarray(0, i).toString());
    buf = buf.subarray(i + 1);
  }
  if (buf.length > MAX_REQUEST) {
    send({ type: 'fatal', message: `request larger than ${MAX_REQUEST} bytes` });
    process.exit(1);
  }
  pump();
});
input.on('end', () => {
  const wait = () => (busy || lines.length ? setTimeout(wait, 10) : process.exit(0));
  wait();
});

send({ type: 'ready', language: 'javascript', version: process.versions.node });
