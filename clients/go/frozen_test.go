package lockward

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holderChildEnv makes the test binary, run again, a process that takes
// a lock (through the daemon, or on the store itself for a store URL),
// prints its fence and waits to be stopped.
const holderChildEnv = "LOCKWARD_GO_TEST_HOLD"

// holdAsAChild is the child's part: it never returns.
func holdAsAChild(spec string) {
	address, name, _ := strings.Cut(spec, " ")
	ctx := context.Background()
	var client *Client
	var err error
	if strings.Contains(address, "://") && !strings.HasPrefix(address, "unix://") {
		client, err = Open(ctx, address)
	} else {
		client, err = Dial(ctx, address)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	lease, err := client.Lock(ctx, name, WithTTL(2*time.Second))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(lease.Fence())
	select {}
}

func TestAFrozenClientLosesItsLockAtItsTTL(t *testing.T) {
	aFrozenClientLosesItsLockAtItsTTL(t, daemonAddress)
}

func aFrozenClientLosesItsLockAtItsTTL(t *testing.T, address string) {
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holderChildEnv+"="+address+" go/frozen-client")
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	childFence, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
	if err != nil {
		t.Fatalf("the child said %q", line)
	}
	// Frozen: its renewals stop, as in a long GC pause or a stopped VM.
	if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	client := dial(t, address)
	lease, err := client.Lock(context.Background(), "go/frozen-client", WithWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	took := time.Since(frozen)
	if took > 3*time.Second {
		t.Fatalf("the frozen client's 2 s lock passed on after %v", took)
	}
	if lease.Fence() <= childFence {
		t.Fatalf("fence %d after the frozen holder's %d", lease.Fence(), childFence)
	}
	t.Logf("a frozen client's 2 s lock passed on %v after it froze", took.Round(time.Millisecond))
}

func TestAFrozenDaemonFiresLostByTheDeadline(t *testing.T) {
	dir := t.TempDir()
	address, cmd, err := startDaemon("sqlite://" + filepath.Join(dir, "locks.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	client := dial(t, address)
	lease, err := client.Lock(context.Background(), "go/frozen-daemon", WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := lease.Deadline()
	select {
	case <-lease.Lost():
		if late := time.Since(deadline); late > 200*time.Millisecond {
			t.Fatalf("Lost() fired %v after the deadline", late)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() did not fire while the daemon was frozen")
	}
	if err := lease.Err(); err == nil {
		t.Fatal("a lost lease has no error")
	}
}
