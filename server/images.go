package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/sandbox"
)

// imageRoutes are the /v1/images endpoints. Every caller may list and
// inspect the server's images (and create sandboxes from them); pulling,
// importing, removing and pruning change what every tenant shares and
// make the server fetch from wherever a reference points, so they are
// the operator's: the trusted local socket only.
func (s *Server) imageRoutes() []route {
	return []route{
		{"GET /v1/images", s.handleImageList},
		{"POST /v1/images/pull", s.needsStorage(s.handleImagePull)},
		{"POST /v1/images/import", s.needsStorage(s.handleImageImport)},
		{"POST /v1/images/prune", s.handleImagePrune},
		{"GET /v1/images/{ref}", s.handleImageGet},
		{"DELETE /v1/images/{ref}", s.handleImageDelete},
	}
}

func apiImage(im *images.Image) api.Image {
	out := api.Image{
		ID: im.ID, Digest: im.Digest, RepoDigests: im.RepoDigests, Created: im.Created, Added: im.Added,
		Platform: im.Platform, Size: im.Size, Unpacked: im.Unpacked,
		Config: api.ImageConfig{Env: im.Config.Env, User: im.Config.User, WorkingDir: im.Config.WorkingDir,
			Entrypoint: im.Config.Entrypoint, Cmd: im.Config.Cmd, Labels: im.Config.Labels},
	}
	for _, n := range im.Names {
		out.Names = append(out.Names, images.ShortName(n))
	}
	for _, l := range im.Layers {
		out.Layers = append(out.Layers, l.Digest)
	}
	return out
}

func apiImages(ims []*images.Image) api.ImageList {
	out := api.ImageList{Images: []api.Image{}}
	for _, im := range ims {
		out.Images = append(out.Images, apiImage(im))
	}
	return out
}

// imageStore returns the store, or answers that there is none.
func (s *Server) imageStore(w http.ResponseWriter, r *http.Request, operator bool) *images.Store {
	if s.cfg.Images == nil {
		s.writeError(w, r, fmt.Errorf("images: this server has no image store: %w", sandbox.ErrNotSupported))
		return nil
	}
	if operator && !callerOf(r).trusted {
		s.writeError(w, r, fmt.Errorf("%s %s: pulling, importing, removing and pruning images are the operator's (the server's local socket): %w", r.Method, r.URL.Path, sandbox.ErrPermission))
		return nil
	}
	return s.cfg.Images
}

func (s *Server) handleImageList(w http.ResponseWriter, r *http.Request) {
	st := s.imageStore(w, r, false)
	if st == nil {
		return
	}
	ims, err := st.List(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiImages(ims))
}

func (s *Server) handleImageGet(w http.ResponseWriter, r *http.Request) {
	st := s.imageStore(w, r, false)
	if st == nil {
		return
	}
	im, err := st.Inspect(r.Context(), r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiImage(im))
}

func (s *Server) handleImagePull(w http.ResponseWriter, r *http.Request) {
	st := s.imageStore(w, r, true)
	if st == nil {
		return
	}
	var req api.PullImageRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.Ref == "" {
		s.writeError(w, r, errBadRequest("pull image: ref is required"))
		return
	}
	im, err := st.Pull(r.Context(), req.Ref, images.PullOptions{Platform: req.Platform})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("image pulled", "ref", req.Ref, "id", im.ID)
	s.sweepPools(time.Now()) // a name may stand for another image now
	writeJSON(w, http.StatusCreated, apiImage(im))
}

// handleImageImport takes a `docker save` tarball (plain or gzip) as the
// body, spooled to the data directory first (bounded by the upload limit).
func (s *Server) handleImageImport(w http.ResponseWriter, r *http.Request) {
	st := s.imageStore(w, r, true)
	if st == nil {
		return
	}
	tmp, done, err := s.spoolUpload(w, r, "image-*.tar")
	if err != nil {
		s.writeError(w, r, fmt.Errorf("import image: %w", err))
		return
	}
	defer done()
	ims, err := st.Import(r.Context(), tmp.Name(), images.ImportOptions{Tag: r.URL.Query().Get("tag")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.sweepPools(time.Now()) // a name may stand for another image now
	writeJSON(w, http.StatusCreated, apiImages(ims))
}

// spoolUpload copies a request's tar body (plain or gzip, bounded by the
// upload limit and by the data disk's reserve) into a private temp file of
// the data directory, named because the image store opens it by path;
// done closes and removes it (reconcile sweeps what a crash left).
func (s *Server) spoolUpload(w http.ResponseWriter, r *http.Request, pattern string) (*os.File, func(), error) {
	tmp, err := os.CreateTemp(filepath.Join(s.cfg.DataDir), pattern)
	if err != nil {
		return nil, nil, fmt.Errorf("spool: %w", err)
	}
	done := func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}
	if err := spoolArchive(&guardedWriter{w: tmp, check: s.storageErr}, http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload), s.cfg.MaxUpload); err != nil {
		done()
		return nil, nil, err
	}
	return tmp, done, nil
}

func (s *Server) handleImageDelete(w http.ResponseWriter, r *http.Request) {
	st := s.imageStore(w, r, true)
	if st == nil {
		return
	}
	im, err := st.Remove(r.Context(), r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.sweepPools(time.Now()) // pooled sandboxes of it go (and their leases)
	writeJSON(w, http.StatusOK, apiImage(im))
}

func (s *Server) handleImagePrune(w http.ResponseWriter, r *http.Request) {
	st := s.imageStore(w, r, true)
	if st == nil {
		return
	}
	var req api.PruneImagesRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	s.retireDemandPools("warm pool retired for an image prune")
	rep, err := st.Prune(r.Context(), req.All)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PruneImagesResult{Images: rep.Images, Layers: rep.Layers, Blobs: rep.Blobs, Bytes: rep.Bytes})
}
