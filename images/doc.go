// Package images is Airlock's image store: OCI and Docker images pulled
// from registries (go-containerregistry's client, auth from the usual
// Docker config), imported from `docker save` tarballs and OCI layouts, or
// built (package images/build), kept content-addressed on the host with
// every layer unpacked once into its own directory and shared, read-only,
// by every sandbox that uses it (as the lower layers of an overlay).
//
// Layout under the store's root (mode 0700: unpacked layers hold the
// image's own file owners, so no other host user may reach them):
//
//	blobs/sha256/HEX      manifests, configs and compressed layers as fetched
//	layers/sha256/HEX/fs  a layer (by diff ID) unpacked, in overlayfs form
//	index.json            images: names, config, layers (written atomically)
//	leases/HOLDER         an image in use by a sandbox (a held flock)
//	tmp/                  downloads and unpacks in progress
//	lock                  the store's lock (flock), taken to change index or layers
//
// It must never let a layer write outside its own directory (no "..", no
// absolute names, no parent that is a symlink, no hard link out of the
// layer), never create a device node, never keep set-uid/set-gid bits or
// file capabilities unless asked to, and never leave a half-unpacked layer
// where a sandbox could use it: everything is staged under tmp/ and moved
// into place, with the index, under the lock only once verified against
// its digests.
package images
