/**
 * Airlock's TypeScript SDK: sandboxes for AI agents, driven through
 * `airlock serve`. Node.js 20+, fetch-based, no runtime dependencies.
 *
 *   import { Sandbox } from "@airlock-dev/sdk";
 *   const sb = await Sandbox.create();
 *   console.log((await sb.commands.run("uname -a")).stdout);
 *   await sb.kill();
 *
 * The server is $AIRLOCK_HOST (default: the local socket) with $AIRLOCK_API_KEY.
 */
export { Sandbox, Commands, Files, CommandHandle, withSandbox } from "./sandbox.js";
export type { CreateOptions, RunOptions, Duration, OutputCallback } from "./sandbox.js";
export { Transport, unixFetch, defaultSocket } from "./transport.js";
export type { ConnectionOptions, Fetch } from "./transport.js";
export * from "./errors.js";
export type * from "./types.js";
export { ROUTES, NOT_COVERED } from "./routes.js";
