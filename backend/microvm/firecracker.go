package microvm

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/backend/microvm/guest"
)

// The Firecracker driver speaks Firecracker's REST API (a unix socket, JSON
// bodies). Firecracker cannot run on the machines this was written on (no
// working KVM), so the requests below are tested against the published API
// description (testdata/firecracker-api.json: the paths, methods, fields,
// types and enums of the requests used, taken from Firecracker's swagger
// document), not against a real Firecracker. Untested on real hardware.

// fcRequest is one API call.
type fcRequest struct {
	Method string
	Path   string
	Body   any
}

func (r fcRequest) String() string {
	b, _ := json.Marshal(r.Body)
	return r.Method + " " + r.Path + " " + string(b)
}

// Bodies of the calls (field names as in the API description).
type (
	fcMachineConfig struct {
		VCPUCount int  `json:"vcpu_count"`
		MemMiB    int  `json:"mem_size_mib"`
		SMT       bool `json:"smt"`
	}
	fcBootSource struct {
		KernelImagePath string `json:"kernel_image_path"`
		InitrdPath      string `json:"initrd_path,omitempty"`
		BootArgs        string `json:"boot_args,omitempty"`
	}
	fcDrive struct {
		DriveID      string `json:"drive_id"`
		PathOnHost   string `json:"path_on_host"`
		IsRootDevice bool   `json:"is_root_device"`
		IsReadOnly   bool   `json:"is_read_only"`
	}
	fcVsock struct {
		GuestCID int    `json:"guest_cid"`
		UDSPath  string `json:"uds_path"`
	}
	fcEntropy struct{}
	fcAction  struct {
		ActionType string `json:"action_type"`
	}
	fcState struct {
		State string `json:"state"`
	}
	fcSnapshotCreate struct {
		SnapshotPath string `json:"snapshot_path"`
		MemFilePath  string `json:"mem_file_path"`
		SnapshotType string `json:"snapshot_type"`
	}
	fcMemBackend struct {
		BackendType string `json:"backend_type"`
		BackendPath string `json:"backend_path"`
	}
	fcSnapshotLoad struct {
		SnapshotPath string       `json:"snapshot_path"`
		MemBackend   fcMemBackend `json:"mem_backend"`
		ResumeVM     bool         `json:"resume_vm"`
	}
)

// fcGuestCID is the guest's vsock context ID (the first one a guest may have).
const fcGuestCID = 3

// fcVsockSock is the host side of the guest's vsock device in the VM's dir.
const fcVsockSock = "vsock.sock"

// fcBootRequests configures and starts a VM from m (cold boot): machine,
// boot source (the init's channel is vsock: guest.VsockFlag), drives,
// vsock, entropy, then InstanceStart. Firecracker has no shared-filesystem
// device: m.Shares cannot be expressed and are refused.
func fcBootRequests(m *Machine) ([]fcRequest, error) {
	for _, s := range m.Shares {
		if s.Path != "" && !s.Unused {
			return nil, fmt.Errorf("firecracker has no shared-filesystem device (9p, virtio-fs): share %s of %s cannot be given to the guest", s.Tag, s.Path)
		}
	}
	if m.VCPUs < 1 || m.VCPUs > 32 {
		return nil, fmt.Errorf("firecracker: %d vCPUs (1..32)", m.VCPUs)
	}
	args := m.Cmdline
	if !strings.Contains(args, guest.VsockFlag) {
		args = strings.Replace(args, " -- ", " "+guest.VsockFlag+" -- ", 1)
	}
	reqs := []fcRequest{
		{"PUT", "/machine-config", fcMachineConfig{VCPUCount: m.VCPUs, MemMiB: m.MemoryMiB}},
		{"PUT", "/boot-source", fcBootSource{KernelImagePath: m.Kernel, InitrdPath: m.Initrd, BootArgs: args}},
	}
	for _, d := range m.Disks {
		reqs = append(reqs, fcRequest{"PUT", "/drives/" + d.ID, fcDrive{DriveID: d.ID, PathOnHost: d.Path, IsReadOnly: d.ReadOnly}})
	}
	reqs = append(reqs,
		fcRequest{"PUT", "/vsock", fcVsock{GuestCID: fcGuestCID, UDSPath: m.Dir + "/" + fcVsockSock}},
		fcRequest{"PUT", "/entropy", fcEntropy{}},
		fcRequest{"PUT", "/actions", fcAction{ActionType: "InstanceStart"}},
	)
	return reqs, nil
}

// fcSnapshotRequests pause the VM and write its state and memory.
func fcSnapshotRequests(statePath, memPath string) []fcRequest {
	return []fcRequest{
		{"PATCH", "/vm", fcState{State: "Paused"}},
		{"PUT", "/snapshot/create", fcSnapshotCreate{SnapshotPath: statePath, MemFilePath: memPath, SnapshotType: "Full"}},
	}
}

// fcRestoreRequests load a snapshot into a fresh Firecracker process,
// memory mapped from the file (Firecracker maps it privately), and resume.
func fcRestoreRequests(statePath, memPath string) []fcRequest {
	return []fcRequest{
		{"PUT", "/snapshot/load", fcSnapshotLoad{SnapshotPath: statePath, MemBackend: fcMemBackend{BackendType: "File", BackendPath: memPath}, ResumeVM: true}},
	}
}
