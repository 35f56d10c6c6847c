package kubernetes

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// MaxID bounds the uid and gid a sandbox's policy may name.
const MaxID = 65535

// Volume names in the pod.
const (
	volAgent     = "airlock-agent"
	volFiles     = "airlock-files"
	volWorkspace = "workspace"
	volTmp       = "tmp"
)

// podInput is what a sandbox's pod is made from.
type podInput struct {
	Policy       *policy.Policy
	Image        string
	Files        []sandbox.File
	Caches       []sandbox.Bind
	RuntimeClass string
	NodeAgent    string
	Secret       string // the Secret holding Files (its name)
}

// NodeIDBase is where a sandbox's ids start on the node: its uid u (and
// gid) runs as NodeIDBase+u there. Pods under the airlock handler have
// no user namespace, so this is what keeps a sandbox, its root included,
// from being any node user, as docker's leased ids do on a host. It lies
// just above airlock's reserved range (idmap.DefaultBase, up to
// 0x6FFFFFFF), above the ids useradd and the subordinate-id allocator
// hand out, and below 2^31.
const NodeIDBase = 0x70000000

// credentials are the node ids for the policy's uid and gid (a server
// resolves its own, root, when the request names none).
func credentials(p policy.Process) (uid, gid int64, err error) {
	if p.UID != nil {
		uid = int64(*p.UID)
	}
	if p.GID != nil {
		gid = int64(*p.GID)
	}
	if uid < 0 || gid < 0 || uid > MaxID || gid > MaxID {
		return 0, 0, fmt.Errorf("process uid/gid %d/%d: a sandbox on the kubernetes backend has ids 0..%d: %w", uid, gid, MaxID, sandbox.ErrInvalid)
	}
	return NodeIDBase + uid, NodeIDBase + gid, nil
}

// podSpec is the pod of one sandbox: the node's airlock binary as the
// container's command, its stdin held open for the host's attach, every
// protection a pod spec offers, the policy's limits and its workspace,
// /tmp and tmpfs directories as emptyDirs. It refuses (ErrInvalid) what a
// pod cannot honour; it touches nothing.
func podSpec(in podInput) (corev1.PodSpec, error) {
	pol := in.Policy
	if err := refuseHostPaths(pol, in.Caches); err != nil {
		return corev1.PodSpec{}, err
	}
	res, err := resources(pol.Limits)
	if err != nil {
		return corev1.PodSpec{}, err
	}
	vols, mounts, err := volumes(in)
	if err != nil {
		return corev1.PodSpec{}, err
	}
	uid, gid, err := credentials(pol.Process)
	if err != nil {
		return corev1.PodSpec{}, err
	}
	no, yes := false, true
	var grace int64
	c := corev1.Container{
		Name:            ContainerName,
		Image:           in.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{AgentPath, "agent", "serve"},
		WorkingDir:      "/",
		// The first attach is the host's: when it ends (serve exited,
		// even by SIGKILL) the container's stdin closes, the agent sees
		// EOF and exits, and every process of the sandbox with it.
		Stdin:        true,
		StdinOnce:    true,
		Resources:    res,
		VolumeMounts: mounts,
		// The agent channel is the container's stdout: a message, not a
		// log line, when it dies.
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: &uid, RunAsGroup: &gid, RunAsNonRoot: ptr(true),
			Privileged: &no, AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			ProcMount:      ptr(corev1.DefaultProcMount),
		},
	}
	return corev1.PodSpec{
		RuntimeClassName:              ptr(in.RuntimeClass),
		RestartPolicy:                 corev1.RestartPolicyNever,
		AutomountServiceAccountToken:  &no,
		EnableServiceLinks:            &no,
		HostNetwork:                   false,
		HostPID:                       false,
		HostIPC:                       false,
		ShareProcessNamespace:         &no,
		Hostname:                      "airlock",
		TerminationGracePeriodSeconds: &grace,
		Containers:                    []corev1.Container{c},
		Volumes:                       vols,
	}, nil
}

func ptr[T any](v T) *T { return &v }

// refuseHostPaths fails for every host path the policy would mount: a
// pod runs on a node, where the server's paths are not. The system
// directories are the image's own, and a denied host path is already
// out of reach (no host path is mounted), except under the workspace,
// which is the pod's own directory and cannot hold a hole.
func refuseHostPaths(pol *policy.Policy, caches []sandbox.Bind) error {
	f := pol.Filesystem
	ws := f.WorkspacePath()
	under := func(p, dir string) bool { return dir != "" && (p == dir || strings.HasPrefix(p, dir+"/")) }
	if f.Rootfs != "" {
		return fmt.Errorf("filesystem.rootfs %q: the kubernetes backend runs images, not host directories: %w", f.Rootfs, sandbox.ErrInvalid)
	}
	for _, p := range f.ReadOnly {
		if hostfs.IsSystemDir(p) {
			continue
		}
		return fmt.Errorf("filesystem.read_only %q: host paths cannot be mounted into a pod on the kubernetes backend: %w", f.Inside(p), sandbox.ErrInvalid)
	}
	for _, p := range f.ReadWrite {
		if under(p, ws) || inTmpfs(f, p) {
			continue
		}
		return fmt.Errorf("filesystem.read_write %q: host paths cannot be mounted into a pod on the kubernetes backend: %w", f.Inside(p), sandbox.ErrInvalid)
	}
	for _, p := range f.Deny {
		if under(p, ws) && p != ws {
			return fmt.Errorf("filesystem.deny %q: a path inside the workspace cannot be denied on the kubernetes backend (the workspace is one pod volume): %w", f.Inside(p), sandbox.ErrInvalid)
		}
	}
	if len(caches) > 0 {
		return fmt.Errorf("volume or cache at %s: host directories cannot be mounted into a pod on the kubernetes backend: %w", caches[0].Dst, sandbox.ErrInvalid)
	}
	return nil
}

func inTmpfs(f policy.Filesystem, p string) bool {
	for _, t := range f.Tmpfs {
		if p == t || strings.HasPrefix(p, t+"/") {
			return true
		}
	}
	return false
}

// resources maps the policy's limits on the container: memory and CPU.
// Requests are small, so that what bounds packing is the node's capacity
// and the server's per-tenant ceilings, and never above the limits.
func resources(l policy.Limits) (corev1.ResourceRequirements, error) {
	r := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	if l.CPUs < 0 || l.Memory < 0 {
		return r, fmt.Errorf("limits: negative cpus or memory: %w", sandbox.ErrInvalid)
	}
	if l.Memory > 0 {
		m := resource.NewQuantity(int64(l.Memory), resource.BinarySI)
		r.Limits[corev1.ResourceMemory] = *m
		req := min(int64(l.Memory), 32<<20)
		r.Requests[corev1.ResourceMemory] = *resource.NewQuantity(req, resource.BinarySI)
	}
	if l.CPUs > 0 {
		milli := int64(l.CPUs * 1000)
		if milli < 1 {
			return r, fmt.Errorf("limits.cpus %g: below the 0.001 CPU a pod can be given: %w", l.CPUs, sandbox.ErrInvalid)
		}
		r.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
		r.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(min(milli, 10), resource.DecimalSI)
	}
	return r, nil
}

// volumes are the pod's volumes and the container's mounts: the agent
// binary, the workspace, /tmp and the tmpfs directories (emptyDirs bounded
// by limits.disk), and the injected files (one Secret, each key mounted
// read-only at its path).
func volumes(in podInput) ([]corev1.Volume, []corev1.VolumeMount, error) {
	f := in.Policy.Filesystem
	var size *resource.Quantity
	if d := int64(in.Policy.Limits.DiskBytes); d > 0 {
		size = resource.NewQuantity(d, resource.BinarySI)
	}
	hostFile := corev1.HostPathFile
	vols := []corev1.Volume{{Name: volAgent, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: in.NodeAgent, Type: &hostFile}}}}
	mounts := []corev1.VolumeMount{{Name: volAgent, MountPath: AgentPath, ReadOnly: true}}
	empty := func(name, at string, medium corev1.StorageMedium) {
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium, SizeLimit: size}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: at})
	}
	if ws := f.WorkspaceInside(); ws != "" {
		empty(volWorkspace, ws, corev1.StorageMediumDefault)
	}
	empty(volTmp, "/tmp", corev1.StorageMediumMemory)
	for i, t := range f.Tmpfs {
		if at := f.Inside(t); at != "/tmp" && at != f.WorkspaceInside() {
			empty("tmpfs-"+strconv.Itoa(i), at, corev1.StorageMediumMemory)
		}
	}
	if len(in.Files) == 0 {
		return vols, mounts, nil
	}
	var items []corev1.KeyToPath
	for i, file := range in.Files {
		if !filepath.IsAbs(file.Path) || filepath.Clean(file.Path) != file.Path || file.Path == "/" {
			return nil, nil, fmt.Errorf("file %d path %q: not absolute and clean: %w", i, file.Path, sandbox.ErrInvalid)
		}
		key := fileKey(i)
		mode := int32(file.Mode & 0o777)
		if mode == 0 {
			mode = 0o444
		}
		items = append(items, corev1.KeyToPath{Key: key, Path: key, Mode: &mode})
		mounts = append(mounts, corev1.VolumeMount{Name: volFiles, MountPath: file.Path, SubPath: key, ReadOnly: true})
	}
	vols = append(vols, corev1.Volume{Name: volFiles, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: in.Secret, Items: items}}})
	return vols, mounts, nil
}

func fileKey(i int) string { return "file-" + strconv.Itoa(i) }

// filesSecret holds a sandbox's injected files (nil when it has none).
func filesSecret(name, ns string, labels map[string]string, files []sandbox.File) *corev1.Secret {
	if len(files) == 0 {
		return nil
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr(true),
		Data:       map[string][]byte{},
	}
	for i, f := range files {
		s.Data[fileKey(i)] = f.Data
	}
	return s
}
