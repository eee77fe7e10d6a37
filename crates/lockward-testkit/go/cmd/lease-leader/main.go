// Command lease-leader runs client-go's leader election on one Lease and
// prints when it starts and stops leading, for lockward's interoperability test.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path of the kubeconfig to use")
	namespace := flag.String("namespace", "default", "namespace of the Lease")
	lease := flag.String("lease", "", "name of the Lease")
	identity := flag.String("identity", "", "holder identity of this candidate")
	leaseDuration := flag.Duration("lease-duration", 15*time.Second, "client-go's LeaseDuration")
	renewDeadline := flag.Duration("renew-deadline", 10*time.Second, "client-go's RenewDeadline")
	retryPeriod := flag.Duration("retry-period", 2*time.Second, "client-go's RetryPeriod")
	flag.Parse()
	if *lease == "" || *identity == "" || *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "lease-leader: --kubeconfig, --lease and --identity are required")
		os.Exit(2)
	}

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lease-leader: kubeconfig: %v\n", err)
		os.Exit(2)
	}
	client := kubernetes.NewForConfigOrDie(config)

	// SIGTERM and SIGINT end the election and release the Lease; SIGKILL
	// leaves it to expire, which is what the test's kill -9 checks.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: *lease, Namespace: *namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: *identity},
	}
	say("candidate " + *identity)
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   *leaseDuration,
		RenewDeadline:   *renewDeadline,
		RetryPeriod:     *retryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { say("started leading " + *identity) },
			OnStoppedLeading: func() { say("stopped leading " + *identity) },
			OnNewLeader:      func(leader string) { say("leader is " + leader) },
		},
	})
}

// say prints one line with the wall-clock time in milliseconds since the
// epoch, so the test can order what both sides printed.
func say(line string) {
	fmt.Printf("%d %s\n", time.Now().UnixMilli(), line)
}
