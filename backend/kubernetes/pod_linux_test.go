package kubernetes

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// testPolicy is a resolved policy as a server makes one: a workspace on
// the host mounted at /workspace, the system directories, a private home.
func testPolicy() *policy.Policy {
	return &policy.Policy{
		Version: 1,
		Filesystem: policy.Filesystem{
			Workspace: "/srv/airlock/ws/sb-1", WorkspaceMount: "/workspace",
			ReadOnly:  []string{"/usr", "/etc"},
			ReadWrite: []string{"/srv/airlock/ws/sb-1"},
			Deny:      []string{"/etc/shadow"},
			Tmpfs:     []string{"/home/sandbox"},
		},
		Network: policy.Network{Mode: policy.NetworkNone},
		Limits:  policy.Limits{Memory: 512 << 20, CPUs: 1.5, DiskBytes: 1 << 30},
	}
}

func testInput() podInput {
	return podInput{Policy: testPolicy(), Image: "debian:bookworm", RuntimeClass: "airlock", NodeAgent: "/usr/local/bin/airlock", Secret: "airlock-sb-1",
		Files: []sandbox.File{{Path: "/run/airlock/ca.pem", Data: []byte("pem"), Mode: 0o444}}}
}

// The pod runs the node's airlock as the agent on an attachable stdin,
// under the airlock runtime class, with every protection a pod spec has.
func TestPodSpecShape(t *testing.T) {
	ps, err := podSpec(testInput())
	if err != nil {
		t.Fatal(err)
	}
	if deref(ps.RuntimeClassName) != "airlock" || ps.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("runtime class %q, restart %q", deref(ps.RuntimeClassName), ps.RestartPolicy)
	}
	if deref(ps.AutomountServiceAccountToken) || deref(ps.EnableServiceLinks) || ps.HostNetwork || ps.HostPID || ps.HostIPC || deref(ps.ShareProcessNamespace) {
		t.Error("a service account token, service links or host namespaces")
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers", len(ps.Containers))
	}
	c := ps.Containers[0]
	if strings.Join(c.Command, " ") != AgentPath+" agent serve" || !c.Stdin || !c.StdinOnce || c.TTY {
		t.Errorf("command %v stdin %v once %v tty %v", c.Command, c.Stdin, c.StdinOnce, c.TTY)
	}
	sc := c.SecurityContext
	if deref(sc.RunAsUser) != NodeIDBase || !deref(sc.RunAsNonRoot) || deref(sc.AllowPrivilegeEscalation) || deref(sc.Privileged) ||
		!deref(sc.ReadOnlyRootFilesystem) || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
		t.Errorf("security context %+v", sc)
	}
	if m := c.Resources.Limits[corev1.ResourceMemory]; m.Value() != 512<<20 {
		t.Errorf("memory limit %s", m.String())
	}
	if cpu := c.Resources.Limits[corev1.ResourceCPU]; cpu.MilliValue() != 1500 {
		t.Errorf("cpu limit %s", cpu.String())
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	vols := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		vols[v.Name] = v
	}
	if m, ok := mounts[AgentPath]; !ok || !m.ReadOnly || vols[m.Name].HostPath == nil || vols[m.Name].HostPath.Path != "/usr/local/bin/airlock" {
		t.Errorf("agent mount %+v", m)
	}
	for _, p := range []string{"/workspace", "/tmp", "/home/sandbox"} {
		m, ok := mounts[p]
		if !ok || vols[m.Name].EmptyDir == nil || vols[m.Name].EmptyDir.SizeLimit.Cmp(*resource.NewQuantity(1<<30, resource.BinarySI)) != 0 {
			t.Errorf("%s: mount %+v volume %+v", p, m, vols[m.Name])
		}
	}
	if m, ok := mounts["/run/airlock/ca.pem"]; !ok || !m.ReadOnly || m.SubPath != "file-0" || vols[m.Name].Secret == nil || vols[m.Name].Secret.SecretName != "airlock-sb-1" {
		t.Errorf("file mount %+v", m)
	}
	for _, v := range ps.Volumes {
		if v.HostPath != nil && v.Name != volAgent {
			t.Errorf("host path volume %+v", v)
		}
	}
}

// What a pod cannot honour is refused, naming the field and the path as
// the sandbox sees it.
func TestPodSpecRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(*podInput)
	}{
		{"rootfs", "filesystem.rootfs", func(in *podInput) { in.Policy.Filesystem.Rootfs = "/srv/root" }},
		{"read_only", `filesystem.read_only "/var/lib/kubelet"`, func(in *podInput) {
			in.Policy.Filesystem.ReadOnly = append(in.Policy.Filesystem.ReadOnly, "/var/lib/kubelet")
		}},
		{"read_write", `filesystem.read_write "/root"`, func(in *podInput) {
			in.Policy.Filesystem.ReadWrite = append(in.Policy.Filesystem.ReadWrite, "/root")
		}},
		{"deny in workspace", `filesystem.deny "/workspace/.git"`, func(in *podInput) {
			in.Policy.Filesystem.Deny = append(in.Policy.Filesystem.Deny, "/srv/airlock/ws/sb-1/.git")
		}},
		{"cache", "volume or cache at /data", func(in *podInput) { in.Caches = []sandbox.Bind{{Src: "/srv/v", Dst: "/data"}} }},
		{"file path", `file 0 path "run/x"`, func(in *podInput) { in.Files[0].Path = "run/x" }},
		{"cpus", "limits.cpus", func(in *podInput) { in.Policy.Limits.CPUs = 0.0001 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := testInput()
			tc.edit(&in)
			_, err := podSpec(in)
			if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalid naming %s", err, tc.want)
			}
		})
	}
}

// A policy's ids are the container's; non-root is marked so.
func TestPodSpecCredentials(t *testing.T) {
	in := testInput()
	uid, gid := 1000, 5
	in.Policy.Process.UID, in.Policy.Process.GID = &uid, &gid
	ps, err := podSpec(in)
	if err != nil {
		t.Fatal(err)
	}
	sc := ps.Containers[0].SecurityContext
	if deref(sc.RunAsUser) != NodeIDBase+1000 || deref(sc.RunAsGroup) != NodeIDBase+5 || !deref(sc.RunAsNonRoot) {
		t.Errorf("uid %d gid %d non-root %v", deref(sc.RunAsUser), deref(sc.RunAsGroup), deref(sc.RunAsNonRoot))
	}
	big := MaxID + 1
	in.Policy.Process.UID = &big
	if _, err := podSpec(in); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("uid %d: %v", big, err)
	}
}

func TestNames(t *testing.T) {
	if n := objectName("sb-1"); n != "airlock-sb-1" {
		t.Errorf("objectName(sb-1) = %q", n)
	}
	for _, id := range []string{"Sb_Upper", strings.Repeat("a", 100)} {
		if n := objectName(id); !dnsLabel().MatchString(n) || len(n) > 53 {
			t.Errorf("objectName(%q) = %q", id, n)
		}
	}
	if v := labelValue("airlock-serve-1234abcd-kubernetes"); v != "airlock-serve-1234abcd-kubernetes" {
		t.Errorf("labelValue kept %q", v)
	}
	if v := labelValue("/var/lib/airlock"); !labelChars().MatchString(v) {
		t.Errorf("labelValue(/var/lib/airlock) = %q", v)
	}
}
