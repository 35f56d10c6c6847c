// Package build is airlock's image builder: it runs a Dockerfile's
// FROM, RUN, COPY, ADD (local files), ENV, ARG, WORKDIR, USER,
// ENTRYPOINT, CMD and LABEL, every RUN inside an airlock sandbox of the
// image so far (egress only to an allow-list), and keeps each step's
// result in the image store's build cache. It is small and honest: it is
// not BuildKit, and an instruction or form it does not run is an error
// naming its line, never skipped. It must never read outside the build
// context (COPY sources resolve in an os.Root of it) nor run a step on
// the host.
package build
