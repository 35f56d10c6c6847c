package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/backend/microvm"
	"github.com/airlock-dev/airlock/internal/cpio"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func main() {
	n := flag.Int("n", 8, "runs of each")
	agent := flag.String("agent", "bin/airlock", "the airlock binary (static)")
	kernel := flag.String("kernel", "var/microvm/kernel", "the guest kernel directory")
	trivial := flag.String("trivial-init", "", "the trivial init binary (static)")
	jsonOut := flag.String("json", "", "write the result as JSON to `FILE`")
	flag.Parse()
	if err := run(*n, *agent, *kernel, *trivial, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "bench/microvm:", err)
		os.Exit(1)
	}
}

type series struct {
	Name     string    `json:"name"`
	MedianMS float64   `json:"median_ms"`
	P90MS    float64   `json:"p90_ms"`
	Runs     []float64 `json:"runs_ms"`
}

func stats(name string, d []time.Duration) series {
	s := series{Name: name}
	for _, x := range d {
		s.Runs = append(s.Runs, float64(x.Microseconds())/1000)
	}
	v := append([]float64(nil), s.Runs...)
	sort.Float64s(v)
	s.MedianMS = v[len(v)/2]
	s.P90MS = v[min(len(v)-1, len(v)*9/10)]
	return s
}

func run(n int, agent, kernelDir, trivial, jsonOut string) error {
	ctx := context.Background()
	agent, _ = filepath.Abs(agent)
	kernelDir, _ = filepath.Abs(kernelDir)
	work, err := os.MkdirTemp("", "airlock-bench-microvm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ws := filepath.Join(work, "ws")
	os.Mkdir(ws, 0o755)
	cfg := microvm.Config{AgentBinary: agent, KernelDir: kernelDir, Accel: microvm.AccelTCG,
		StateDir: filepath.Join(work, "state"), CacheDir: filepath.Join(work, "cache"), CgroupParent: "airlock-bench-microvm"}
	cold := cfg
	cold.NoTemplates = true
	coldB, warmB := microvm.New(cold), microvm.New(cfg)
	p, err := policy.Profile("default")
	if err != nil {
		return err
	}
	p.Filesystem.Workspace = ws
	off := false
	p.Filesystem.ProtectConfig = &off
	pol, err := p.Resolve(policy.ResolveEnv{Cwd: ws, Home: "/root", Environ: []string{"PATH=/usr/bin:/bin", "HOME=/root"}, UID: 0, GID: 0})
	if err != nil {
		return err
	}
	seq := 0
	spec := func() sandbox.Spec {
		seq++
		return sandbox.Spec{ID: "bench-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(seq), Policy: pol}
	}
	if _, err := warmB.Prepare(ctx, spec()); err != nil {
		return fmt.Errorf("template: %w", err)
	}
	// The peer boots the same kernel, same machine, same command line.
	info := coldB.Info(ctx)
	if info.Err != nil {
		return info.Err
	}
	initrd := filepath.Join(work, "trivial.cpio")
	if err := trivialInitramfs(initrd, trivial); err != nil {
		return err
	}
	mem := strconv.Itoa(vmMiB(pol)) + "M"
	peer := []string{info.QEMU, "-machine", "microvm,acpi=on,x-option-roms=off,pit=off,pic=off,rtc=off", "-m", mem, "-smp", strconv.Itoa(vcpus(pol)),
		"-accel", "tcg", "-cpu", "max", "-nodefaults", "-no-user-config", "-nographic", "-display", "none", "-serial", "stdio", "-no-reboot",
		"-kernel", filepath.Join(kernelDir, "vmlinux"), "-initrd", initrd, "-append", microvm.GuestCmdline(false)}
	fmt.Printf("%s, %s, TCG, %s RAM, %d vCPU\n", info.QEMUVersion, info.KernelPkg, mem, vcpus(pol))
	var coldT, warmT, peerT []time.Duration
	for i := 0; i < n+1; i++ { // the first round is a warm-up
		c, err := createExec(ctx, coldB, spec())
		if err != nil {
			return fmt.Errorf("cold: %w", err)
		}
		q, err := bootPeer(peer)
		if err != nil {
			return fmt.Errorf("peer: %w", err)
		}
		w, err := createExec(ctx, warmB, spec())
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if i > 0 {
			coldT, peerT, warmT = append(coldT, c), append(peerT, q), append(warmT, w)
		}
	}
	res := []series{stats("cold boot to first exec (airlock)", coldT), stats("restore to first exec (airlock)", warmT), stats("qemu boot, trivial init (peer)", peerT)}
	for _, s := range res {
		fmt.Printf("%-36s median %8.1f ms   p90 %8.1f ms\n", s.Name, s.MedianMS, s.P90MS)
	}
	ratios := map[string]float64{"cold/peer": res[0].MedianMS / res[2].MedianMS, "restore/peer": res[1].MedianMS / res[2].MedianMS}
	fmt.Printf("ratio cold/peer %.2f, restore/peer %.2f (target <= 1.1)\n", ratios["cold/peer"], ratios["restore/peer"])
	if jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"series": res, "ratios": ratios, "qemu": info.QEMUVersion, "kernel": info.KernelPkg}, "", "  ")
		return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// vmMiB and vcpus size the peer like the backend sizes the sandbox's VM
// (memory limit plus the guest's reserve; the CPU limit rounded up).
func vmMiB(p *policy.Policy) int { return int(int64(p.Limits.Memory)>>20) + 192 }

func vcpus(p *policy.Policy) int {
	c := int(p.Limits.CPUs + 0.999)
	return max(1, min(c, runtime.NumCPU()))
}

// createExec is one sandbox to its first exec's exit (then destroyed,
// untimed).
func createExec(ctx context.Context, b *microvm.Backend, spec sandbox.Spec) (time.Duration, error) {
	t0 := time.Now()
	s, err := b.Create(ctx, spec)
	if err != nil {
		return 0, err
	}
	defer s.Destroy(ctx)
	p, err := s.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/true"}})
	if err != nil {
		return 0, err
	}
	if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
		return 0, fmt.Errorf("exec: %+v %v", st, err)
	}
	return time.Since(t0), nil
}

// bootPeer runs the peer until its init's line appears on the console.
func bootPeer(argv []string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "AIRLOCK-BENCH-READY") {
			return time.Since(t0), nil
		}
	}
	return 0, fmt.Errorf("no ready line from the trivial init")
}

func trivialInitramfs(path, initBin string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := cpio.NewWriter(f)
	if err := w.HostFile("init", 0o755, initBin); err != nil {
		return err
	}
	return w.Close()
}
