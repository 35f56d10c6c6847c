"""The /v1 API operations this SDK calls, by name.

Every HTTP call of the SDK goes through this table, and a test of the Go
module (sdk/conformance_test.go) checks it against api/openapi.yaml: a route
added to or changed in the API without this SDK fails CI.
"""

from typing import Dict, Tuple

ROUTES: Dict[str, Tuple[str, str]] = {
    "health": ("GET", "/healthz"),
    "create_sandbox": ("POST", "/v1/sandboxes"),
    "list_sandboxes": ("GET", "/v1/sandboxes"),
    "get_sandbox": ("GET", "/v1/sandboxes/{id}"),
    "patch_sandbox": ("PATCH", "/v1/sandboxes/{id}"),
    "delete_sandbox": ("DELETE", "/v1/sandboxes/{id}"),
    "set_network": ("PUT", "/v1/sandboxes/{id}/network"),
    "exec": ("POST", "/v1/sandboxes/{id}/exec"),
    "run_code": ("POST", "/v1/sandboxes/{id}/code"),
    "browser_navigate": ("POST", "/v1/sandboxes/{id}/browser/navigate"),
    "browser_screenshot": ("POST", "/v1/sandboxes/{id}/browser/screenshot"),
    "list_processes": ("GET", "/v1/sandboxes/{id}/processes"),
    "get_process": ("GET", "/v1/sandboxes/{id}/processes/{pid}"),
    "delete_process": ("DELETE", "/v1/sandboxes/{id}/processes/{pid}"),
    "signal_process": ("POST", "/v1/sandboxes/{id}/processes/{pid}/signal"),
    "wait_process": ("POST", "/v1/sandboxes/{id}/processes/{pid}/wait"),
    "process_output": ("GET", "/v1/sandboxes/{id}/processes/{pid}/output"),
    "process_stdin": ("POST", "/v1/sandboxes/{id}/processes/{pid}/stdin"),
    "read_file": ("GET", "/v1/sandboxes/{id}/files"),
    "write_file": ("PUT", "/v1/sandboxes/{id}/files"),
    "remove_file": ("DELETE", "/v1/sandboxes/{id}/files"),
    "stat_file": ("GET", "/v1/sandboxes/{id}/files/stat"),
    "list_files": ("GET", "/v1/sandboxes/{id}/files/list"),
    "rename_file": ("POST", "/v1/sandboxes/{id}/files/rename"),
    "make_dir": ("POST", "/v1/sandboxes/{id}/files/mkdir"),
    "download_archive": ("GET", "/v1/sandboxes/{id}/archive"),
    "upload_archive": ("PUT", "/v1/sandboxes/{id}/archive"),
    "events": ("GET", "/v1/sandboxes/{id}/events"),
    "port_token": ("POST", "/v1/sandboxes/{id}/port-tokens"),
    "access_token": ("POST", "/v1/sandboxes/{id}/access-tokens"),
    "pause": ("POST", "/v1/sandboxes/{id}/pause"),
    "resume": ("POST", "/v1/sandboxes/{id}/resume"),
    "create_checkpoint": ("POST", "/v1/sandboxes/{id}/checkpoints"),
    "list_checkpoints": ("GET", "/v1/sandboxes/{id}/checkpoints"),
    "delete_checkpoint": ("DELETE", "/v1/sandboxes/{id}/checkpoints/{checkpoint}"),
    "rollback": ("POST", "/v1/sandboxes/{id}/rollback"),
}

# Operations of the API this SDK deliberately leaves out, with the reason.
NOT_COVERED: Dict[str, str] = {
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
    "POST /v1/sandboxes/{id}/fork": "fork and snapshots: use the Go SDK (Fork, Snapshot, Snapshots, DeleteSnapshot, CreateFromSnapshot) or the E2B door; not yet in this SDK",
    "POST /v1/sandboxes/{id}/snapshots": "fork and snapshots: use the Go SDK (Fork, Snapshot, Snapshots, DeleteSnapshot, CreateFromSnapshot) or the E2B door; not yet in this SDK",
    "GET /v1/snapshots": "fork and snapshots: use the Go SDK (Fork, Snapshot, Snapshots, DeleteSnapshot, CreateFromSnapshot) or the E2B door; not yet in this SDK",
    "GET /v1/snapshots/{snapshot}": "fork and snapshots: use the Go SDK (Fork, Snapshot, Snapshots, DeleteSnapshot, CreateFromSnapshot) or the E2B door; not yet in this SDK",
    "DELETE /v1/snapshots/{snapshot}": "fork and snapshots: use the Go SDK (Fork, Snapshot, Snapshots, DeleteSnapshot, CreateFromSnapshot) or the E2B door; not yet in this SDK",
    "POST /v1/snapshots/{snapshot}/sandboxes": "fork and snapshots: use the Go SDK (Fork, Snapshot, Snapshots, DeleteSnapshot, CreateFromSnapshot) or the E2B door; not yet in this SDK",
}
