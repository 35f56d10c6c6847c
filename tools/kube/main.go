// Command kube is one binary holding the Kubernetes v1.37.2 components the
// test cluster runs (kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet) and kubectl, built from the Go module proxy.
// It dispatches on the name it is called by (a symlink such as kubelet) or,
// failing that, on its first argument (kube kubectl get pods), the way
// hyperkube did: one link instead of five.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // CronJob time zones (kube-apiserver, kube-controller-manager)

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// servers are the long-running components: each is a cobra command run
// by component-base's cli.Run, as its own main does.
var servers = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
}

func main() {
	name := filepath.Base(os.Args[0])
	if !known(name) && len(os.Args) > 1 && known(os.Args[1]) {
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	if name == "kubectl" {
		kubectl()
		return
	}
	newCommand, ok := servers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "kube: unknown component %q; call me as one of %v (a symlink) or with it as the first argument\n", name, components())
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}

// kubectl runs kubectl as its own main does: the verbosity is set before
// the command is built, so building it can log.
func kubectl() {
	_, _ = logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
		kubectlutil.CheckErr(err)
	}
}

func known(name string) bool {
	_, ok := servers[name]
	return ok || name == "kubectl"
}

func components() []string {
	names := []string{"kubectl"}
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
