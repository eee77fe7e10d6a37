package lockward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lockward.dev/go/lockwardtest"
)

// daemonAddress is the address of the daemon TestMain starts.
var daemonAddress string

// lockwardBinary is the lockward command the tests run: $LOCKWARD_BIN, or
// the workspace's debug build (cargo build -p lockward-cli).
func lockwardBinary() string {
	if bin := os.Getenv("LOCKWARD_BIN"); bin != "" {
		return bin
	}
	bin, _ := filepath.Abs("../../target/debug/lockward")
	return bin
}

// startDaemon starts `lockward serve` on store, on a free loopback port,
// and returns its address and process. It ends with the test binary.
func startDaemon(store string, options ...string) (string, *exec.Cmd, error) {
	daemon, err := lockwardtest.Start(lockwardBinary(), store, options...)
	if err != nil {
		return "", nil, err
	}
	return daemon.Address, daemon.Cmd, nil
}

// serveForTest starts `lockward serve` on store for one test, which fails
// if it cannot start; it is stopped when the test ends.
func serveForTest(t *testing.T, store string, options ...string) string {
	t.Helper()
	address, cmd, err := startDaemon(store, options...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	return address
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(holderChildEnv); spec != "" {
		holdAsAChild(spec)
	}
	dir, err := os.MkdirTemp("", "lockward-go-")
	if err != nil {
		panic(err)
	}
	address, cmd, err := startDaemon("sqlite://" + filepath.Join(dir, "locks.db"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	daemonAddress = address
	// The examples dial the same daemon.
	_ = os.Setenv("LOCKWARD_EXAMPLE_ADDRESS", address)
	code := m.Run()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// dial connects to the daemon at address, or to the store itself
// (Open) when address is a redis URL, so one check runs on both paths.
func dial(t *testing.T, address string) *Client {
	t.Helper()
	var client *Client
	var err error
	if strings.HasPrefix(address, "redis") || strings.HasPrefix(address, "redlock") {
		client, err = Open(context.Background(), address)
	} else {
		client, err = Dial(context.Background(), address)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func TestFencesGrowAcrossReleases(t *testing.T) { fencesGrowAcrossReleases(t, daemonAddress) }

func fencesGrowAcrossReleases(t *testing.T, address string) {
	client := dial(t, address)
	ctx := context.Background()
	var last uint64
	for range 3 {
		lease, err := client.Lock(ctx, "go/fences", WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if lease.Fence() <= last {
			t.Fatalf("fence %d after %d", lease.Fence(), last)
		}
		last = lease.Fence()
		if until := time.Until(lease.Deadline()); until <= time.Second || until > 2*time.Second {
			t.Fatalf("deadline in %v for a 2s lease", until)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTryLockOnAHeldLockIsBusy(t *testing.T) { tryLockOnAHeldLockIsBusy(t, daemonAddress) }

func tryLockOnAHeldLockIsBusy(t *testing.T, address string) {
	client := dial(t, address)
	ctx := context.Background()
	lease, err := client.Lock(ctx, "go/busy")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	_, err = client.TryLock(ctx, "go/busy")
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("want ErrBusy, got %v", err)
	}
	_, err = client.Lock(ctx, "go/busy", WithWait(100*time.Millisecond))
	if !errors.Is(err, ErrTimedOut) {
		t.Fatalf("want ErrTimedOut, got %v", err)
	}
	if _, err := client.TryLock(ctx, "bad\x00name"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("want ErrInvalidArgument, got %v", err)
	}
}

func TestAWaiterIsWokenPromptlyByTheRelease(t *testing.T) {
	aWaiterIsWokenPromptlyByTheRelease(t, daemonAddress)
}

func aWaiterIsWokenPromptlyByTheRelease(t *testing.T, address string) {
	client := dial(t, address)
	ctx := context.Background()
	var handoffs []time.Duration
	for range 10 {
		holder, err := client.Lock(ctx, "go/handoff")
		if err != nil {
			t.Fatal(err)
		}
		granted := make(chan time.Time, 1)
		go func() {
			lease, err := client.Lock(ctx, "go/handoff")
			if err != nil {
				t.Error(err)
				granted <- time.Time{}
				return
			}
			granted <- time.Now()
			_ = lease.Release(ctx)
		}()
		time.Sleep(50 * time.Millisecond)
		released := time.Now()
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		handoffs = append(handoffs, (<-granted).Sub(released))
	}
	sort.Slice(handoffs, func(i, j int) bool { return handoffs[i] < handoffs[j] })
	median := handoffs[len(handoffs)/2]
	t.Logf("handoff median %v (all %v)", median, handoffs)
	if median > 25*time.Millisecond {
		t.Fatalf("handoff median %v, want at most 25ms", median)
	}
}

func TestACancelledWaitEndsAtOnceAndLeavesNoHolder(t *testing.T) {
	aCancelledWaitEndsAtOnceAndLeavesNoHolder(t, daemonAddress)
}

func aCancelledWaitEndsAtOnceAndLeavesNoHolder(t *testing.T, address string) {
	client := dial(t, address)
	ctx := context.Background()
	holder, err := client.Lock(ctx, "go/cancel")
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := client.Lock(wait, "go/cancel")
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancelled := time.Now()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if took := time.Since(cancelled); took > 100*time.Millisecond {
		t.Fatalf("the wait ended %v after its cancel", took)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The cancelled waiter holds nothing: the lock is free.
	after, err := client.TryLock(ctx, "go/cancel")
	if err != nil {
		t.Fatalf("a cancelled wait left a holder: %v", err)
	}
	_ = after.Release(ctx)
}

func TestALeaseThatIsNotRenewedIsLostAndPassesOnWithALargerFence(t *testing.T) {
	client := dial(t, daemonAddress)
	ctx := context.Background()
	quiet, err := client.Lock(ctx, "go/quiet", WithTTL(300*time.Millisecond), WithoutRenewal())
	if err != nil {
		t.Fatal(err)
	}
	work := quiet.Context(ctx)
	select {
	case <-quiet.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("Lost() did not fire")
	}
	if !errors.Is(quiet.Err(), ErrLost) {
		t.Fatalf("want ErrLost, got %v", quiet.Err())
	}
	select {
	case <-work.Done():
		if !errors.Is(context.Cause(work), ErrLost) {
			t.Fatalf("the work's context ended with %v", context.Cause(work))
		}
	case <-time.After(time.Second):
		t.Fatal("the lease's context was not cancelled")
	}
	next, err := client.Lock(ctx, "go/quiet", WithWait(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if next.Fence() <= quiet.Fence() {
		t.Fatalf("fence %d after %d", next.Fence(), quiet.Fence())
	}
	_ = next.Release(ctx)
}

func TestARenewedLeaseOutlivesItsTTL(t *testing.T) {
	client := dial(t, daemonAddress)
	ctx := context.Background()
	lease, err := client.Lock(ctx, "go/renewed", WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := lease.Err(); err != nil {
		t.Fatalf("lost while renewed: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestKillingTheDaemonFiresLostAtOnce(t *testing.T) {
	dir := t.TempDir()
	address, cmd, err := startDaemon("sqlite://" + filepath.Join(dir, "locks.db"))
	if err != nil {
		t.Fatal(err)
	}
	client := dial(t, address)
	lease, err := client.Lock(context.Background(), "go/daemon", WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	select {
	case <-lease.Lost():
		if took := time.Since(killed); took > time.Second {
			t.Fatalf("Lost() fired %v after the kill", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() did not fire when the daemon died")
	}
}

func TestFencedIncrementsFromEightGoroutinesAreExact(t *testing.T) {
	fencedIncrementsFromEightGoroutinesAreExact(t, daemonAddress)
}

func fencedIncrementsFromEightGoroutinesAreExact(t *testing.T, address string) {
	client := dial(t, address)
	ctx := context.Background()
	var (
		mu      sync.Mutex
		counter int
		last    uint64
		stale   int
	)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				err := client.WithLock(ctx, "go/counter", func(ctx context.Context, lease *Lease) error {
					mu.Lock()
					defer mu.Unlock()
					// The resource refuses a fence older than the last it took.
					if lease.Fence() <= last {
						stale++
						return nil
					}
					last = lease.Fence()
					counter++
					return nil
				}, WithTTL(5*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if counter != 800 || stale != 0 {
		t.Fatalf("counter %d (want 800), %d stale fences", counter, stale)
	}
}

func TestInspectShowsTheHolder(t *testing.T) {
	client := dial(t, daemonAddress)
	ctx := context.Background()
	lease, err := client.Lock(ctx, "go/inspect", WithLabel("go-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	holder, err := client.Inspect(ctx, "go/inspect")
	if err != nil {
		t.Fatal(err)
	}
	if holder == nil || holder.GetFence() != lease.Fence() || holder.GetLabel() != "go-test" {
		t.Fatalf("inspect showed %v", holder)
	}
	rows, err := client.List(ctx, "go/inspect")
	if err != nil || len(rows) != 1 {
		t.Fatalf("list: %v %v", rows, err)
	}
}

// testserverBinary starts the test servers: $LOCKWARD_TESTSERVER_BIN, or
// the workspace's debug build (cargo build -p lockward-testkit).
func testserverBinary() string {
	if bin := os.Getenv("LOCKWARD_TESTSERVER_BIN"); bin != "" {
		return bin
	}
	bin, _ := filepath.Abs("../../target/debug/lockward-testserver")
	return bin
}

// startStore starts a real server of kind (redis, etcd, postgres) on a
// free loopback port, for the rest of the test, and returns its store URL.
func startStore(t *testing.T, kind string) string {
	t.Helper()
	bin := testserverBinary()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no lockward-testserver at %s (cargo build -p lockward-testkit; its servers come from scripts/install-test-deps.sh): %v", bin, err)
	}
	cmd := exec.Command(bin, kind)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Closing its stdin stops the server and removes its files.
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("lockward-testserver %s printed no URL: %v", kind, err)
	}
	return strings.TrimSpace(url)
}

// TestOnServerStores runs the lease checks through a daemon on each
// server store (the others run on SQLite).
func TestOnServerStores(t *testing.T) {
	for _, kind := range []string{"redis", "etcd", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			address := serveForTest(t, startStore(t, kind))
			t.Run("fences", func(t *testing.T) { fencesGrowAcrossReleases(t, address) })
			t.Run("busy", func(t *testing.T) { tryLockOnAHeldLockIsBusy(t, address) })
			t.Run("handoff", func(t *testing.T) { aWaiterIsWokenPromptlyByTheRelease(t, address) })
			t.Run("cancel", func(t *testing.T) { aCancelledWaitEndsAtOnceAndLeavesNoHolder(t, address) })
			t.Run("counter", func(t *testing.T) { fencedIncrementsFromEightGoroutinesAreExact(t, address) })
			t.Run("election", func(t *testing.T) { electionHandsOverOnResign(t, address) })
			t.Run("idempotent", func(t *testing.T) { idempotentRunsOnce(t, address) })
			t.Run("once", func(t *testing.T) { onceRunsOnce(t, address) })
		})
	}
}

func TestADaemonAtItsMostLeasesRefusesOneMore(t *testing.T) {
	address := serveForTest(t, "sqlite://"+t.TempDir()+"/locks.db", "--max-leases", "1")
	ctx := context.Background()
	client := dial(t, address)
	held, err := client.TryLock(ctx, "go/first")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.TryLock(ctx, "go/second"); !errors.Is(err, ErrTooManyLeases) {
		t.Fatalf("want ErrTooManyLeases, got %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The place is free once the lease's stream has ended.
	deadline := time.Now().Add(5 * time.Second)
	for {
		second, err := client.TryLock(ctx, "go/second")
		if err == nil {
			_ = second.Release(ctx)
			return
		}
		if !errors.Is(err, ErrTooManyLeases) || time.Now().After(deadline) {
			t.Fatalf("the place was not freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
