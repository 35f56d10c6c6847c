// Package browser drives a headless Chromium inside a sandbox from the
// host, for agents that need a browser: Chromium runs as a process of the
// sandbox (under its policy: its filesystem, its network, its limits), and
// the host reaches its DevTools endpoint only through the agent's dial
// stream to the sandbox's own loopback (sandbox.PortDialer), never through
// a port on the host. It speaks the few DevTools protocol methods agents
// need: open a page, read its title, take a PNG screenshot. It works on
// every backend whose sandboxes can dial and whose image has Chromium.
//
// It must never expose the DevTools endpoint outside the host process that
// holds the Session (whoever holds it can drive the browser), and never
// trust what the browser answers beyond bounded sizes.
package browser
