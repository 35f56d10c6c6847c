/**
 * The /v1 API operations this SDK calls, by name. Every HTTP call goes
 * through this table, and sdk/conformance_test.go (in the Go module) checks
 * it against api/openapi.yaml: a route added to or changed in the API
 * without this SDK fails CI.
 */
export const ROUTES = {
  health: ["GET", "/healthz"],
  createSandbox: ["POST", "/v1/sandboxes"],
  listSandboxes: ["GET", "/v1/sandboxes"],
  getSandbox: ["GET", "/v1/sandboxes/{id}"],
  patchSandbox: ["PATCH", "/v1/sandboxes/{id}"],
  deleteSandbox: ["DELETE", "/v1/sandboxes/{id}"],
  setNetwork: ["PUT", "/v1/sandboxes/{id}/network"],
  exec: ["POST", "/v1/sandboxes/{id}/exec"],
  runCode: ["POST", "/v1/sandboxes/{id}/code"],
  browserNavigate: ["POST", "/v1/sandboxes/{id}/browser/navigate"],
  browserScreenshot: ["POST", "/v1/sandboxes/{id}/browser/screenshot"],
  listProcesses: ["GET", "/v1/sandboxes/{id}/processes"],
  getProcess: ["GET", "/v1/sandboxes/{id}/processes/{pid}"],
  deleteProcess: ["DELETE", "/v1/sandboxes/{id}/processes/{pid}"],
  signalProcess: ["POST", "/v1/sandboxes/{id}/processes/{pid}/signal"],
  waitProcess: ["POST", "/v1/sandboxes/{id}/processes/{pid}/wait"],
  processOutput: ["GET", "/v1/sandboxes/{id}/processes/{pid}/output"],
  processStdin: ["POST", "/v1/sandboxes/{id}/processes/{pid}/stdin"],
  readFile: ["GET", "/v1/sandboxes/{id}/files"],
  writeFile: ["PUT", "/v1/sandboxes/{id}/files"],
  removeFile: ["DELETE", "/v1/sandboxes/{id}/files"],
  statFile: ["GET", "/v1/sandboxes/{id}/files/stat"],
  listFiles: ["GET", "/v1/sandboxes/{id}/files/list"],
  renameFile: ["POST", "/v1/sandboxes/{id}/files/rename"],
  makeDir: ["POST", "/v1/sandboxes/{id}/files/mkdir"],
  downloadArchive: ["GET", "/v1/sandboxes/{id}/archive"],
  uploadArchive: ["PUT", "/v1/sandboxes/{id}/archive"],
  events: ["GET", "/v1/sandboxes/{id}/events"],
  portToken: ["POST", "/v1/sandboxes/{id}/port-tokens"],
  accessToken: ["POST", "/v1/sandboxes/{id}/access-tokens"],
  pause: ["POST", "/v1/sandboxes/{id}/pause"],
  resume: ["POST", "/v1/sandboxes/{id}/resume"],
  createCheckpoint: ["POST", "/v1/sandboxes/{id}/checkpoints"],
  listCheckpoints: ["GET", "/v1/sandboxes/{id}/checkpoints"],
  deleteCheckpoint: ["DELETE", "/v1/sandboxes/{id}/checkpoints/{checkpoint}"],
  rollback: ["POST", "/v1/sandboxes/{id}/rollback"],
} as const satisfies Record<string, readonly [string, string]>;

export type Operation = keyof typeof ROUTES;

/** Operations of the API this SDK deliberately leaves out, with the reason. */
export const NOT_COVERED: Record<string, string> = {
  "GET /v1/sandboxes/{id}/pty": "an interactive terminal over a WebSocket: use the CLI (airlock sandbox exec -it) or the Go SDK",
  "GET /metrics": "Prometheus scrapes it directly",
  "GET /v1/openapi.yaml": "the document itself",
  "GET /v1/images": "image management belongs to the operator (pull, import, rm and prune need the local socket) and the Go SDK and airlock image cover it; create a sandbox from an image with image=",
  "POST /v1/images/pull": "image management belongs to the operator (pull, import, rm and prune need the local socket) and the Go SDK and airlock image cover it; create a sandbox from an image with image=",
  "POST /v1/images/import": "image management belongs to the operator (pull, import, rm and prune need the local socket) and the Go SDK and airlock image cover it; create a sandbox from an image with image=",
  "POST /v1/images/prune": "image management belongs to the operator (pull, import, rm and prune need the local socket) and the Go SDK and airlock image cover it; create a sandbox from an image with image=",
  "GET /v1/images/{ref}": "image management belongs to the operator (pull, import, rm and prune need the local socket) and the Go SDK and airlock image cover it; create a sandbox from an image with image=",
  "DELETE /v1/images/{ref}": "image management belongs to the operator (pull, import, rm and prune need the local socket) and the Go SDK and airlock image cover it; create a sandbox from an image with image=",
  "GET /v1/sandboxes/{id}/ports/{port}/{path}": "the app inside, not the API: reach it at sandbox.url(port) with any HTTP or WebSocket client",
  "POST /v1/sandboxes/{id}/ports/{port}/{path}": "the app inside, not the API: reach it at sandbox.url(port) with any HTTP or WebSocket client",
  "PUT /v1/sandboxes/{id}/ports/{port}/{path}": "the app inside, not the API: reach it at sandbox.url(port) with any HTTP or WebSocket client",
  "PATCH /v1/sandboxes/{id}/ports/{port}/{path}": "the app inside, not the API: reach it at sandbox.url(port) with any HTTP or WebSocket client",
  "DELETE /v1/sandboxes/{id}/ports/{port}/{path}": "the app inside, not the API: reach it at sandbox.url(port) with any HTTP or WebSocket client",
  "GET /v1/sandboxes/{id}/tcp/{port}": "raw TCP over a WebSocket: use airlock sandbox port-forward or the Go SDK (DialPort)",
  "GET /v1/sandboxes/{id}/files/watch": "a long-lived event stream: use the Go SDK (WatchFiles) or airlock sandbox watch",
  "POST /v1/volumes": "named volumes: manage them with the Go SDK (CreateVolume, Volumes, DeleteVolume); not yet in this SDK",
  "GET /v1/volumes": "named volumes: manage them with the Go SDK (CreateVolume, Volumes, DeleteVolume); not yet in this SDK",
  "GET /v1/volumes/{name}": "named volumes: manage them with the Go SDK (CreateVolume, Volumes, DeleteVolume); not yet in this SDK",
  "DELETE /v1/volumes/{name}": "named volumes: manage them with the Go SDK (CreateVolume, Volumes, DeleteVolume); not yet in this SDK",
};
