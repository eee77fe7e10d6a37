// Package daprgo checks that Dapr's own Go SDK, with no Dapr runtime, locks
// through `lockward serve`, and that its locks, the Go client's and the
// shell's (`lockward run`) are one lock.
package daprgo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dapr "github.com/dapr/go-sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lockward "lockward.dev/go"
	"lockward.dev/go/lockwardtest"
)

// storeName is the name Dapr's lock API addresses the daemon's store by.
const storeName = "lockward"

// A daemon on a SQLite store of its own, started by TestMain.
var (
	daemonAddress string
	daemonStore   string
)

func lockwardBinary() string {
	if bin := os.Getenv("LOCKWARD_BIN"); bin != "" {
		return bin
	}
	return filepath.Join("..", "..", "..", "..", "target", "debug", "lockward")
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lockward-dapr-go-")
	if err != nil {
		panic(err)
	}
	daemonStore = "sqlite://" + filepath.Join(dir, "locks.db")
	daemon, err := lockwardtest.Start(lockwardBinary(), daemonStore)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	daemonAddress = daemon.Address
	code := m.Run()
	daemon.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// daprClient connects Dapr's SDK to the daemon and checks it did not wait
// for a health check first.
func daprClient(t *testing.T, address string) dapr.Client {
	t.Helper()
	started := time.Now()
	client, err := dapr.NewClientWithAddressContext(context.Background(), address)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(started); took > 2*time.Second {
		t.Fatalf("the Dapr client took %v to start", took)
	}
	t.Cleanup(client.Close)
	return client
}

func tryLock(t *testing.T, client dapr.Client, resource, owner string, seconds int32) bool {
	t.Helper()
	response, err := client.TryLockAlpha1(context.Background(), storeName, &dapr.LockRequest{
		ResourceID:      resource,
		LockOwner:       owner,
		ExpiryInSeconds: seconds,
	})
	if err != nil {
		t.Fatalf("TryLockAlpha1(%s, %s): %v", resource, owner, err)
	}
	return response.Success
}

func unlock(t *testing.T, client dapr.Client, resource, owner string) string {
	t.Helper()
	response, err := client.UnlockAlpha1(context.Background(), storeName, &dapr.UnlockRequest{
		ResourceID: resource,
		LockOwner:  owner,
	})
	if err != nil {
		t.Fatalf("UnlockAlpha1(%s, %s): %v", resource, owner, err)
	}
	return response.Status
}

// runNoWait is `lockward run NAME --no-wait -- true`'s exit code: 75 when
// the lock is held elsewhere.
func runNoWait(t *testing.T, name string) int {
	t.Helper()
	err := exec.Command(lockwardBinary(), "--store", daemonStore, "run", name, "--no-wait", "--", "true").Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	default:
		t.Fatal(err)
		return -1
	}
}

func TestOneOwnerWinsAndUnlockAnswersAsDaprDefines(t *testing.T) {
	client := daprClient(t, daemonAddress)
	if !tryLock(t, client, "orders", "owner-a", 30) {
		t.Fatal("the first owner did not get a free lock")
	}
	if tryLock(t, client, "orders", "owner-b", 30) {
		t.Fatal("a second owner got a held lock")
	}
	if got := unlock(t, client, "orders", "owner-b"); got != "LOCK_BELONGS_TO_OTHERS" {
		t.Fatalf("unlock by another owner: %s", got)
	}
	if got := unlock(t, client, "orders", "owner-a"); got != "SUCCESS" {
		t.Fatalf("unlock by the owner: %s", got)
	}
	if got := unlock(t, client, "orders", "owner-a"); got != "LOCK_DOES_NOT_EXIST" {
		t.Fatalf("a repeated unlock: %s", got)
	}
	if !tryLock(t, client, "orders", "owner-b", 30) {
		t.Fatal("the lock was not free after its unlock")
	}
	unlock(t, client, "orders", "owner-b")
}

func TestALockExpiresWithoutAnUnlock(t *testing.T) {
	client := daprClient(t, daemonAddress)
	if !tryLock(t, client, "expiring", "a", 1) {
		t.Fatal("a free lock was refused")
	}
	if tryLock(t, client, "expiring", "b", 30) {
		t.Fatal("a held lock was given before its expiry")
	}
	deadline := time.Now().Add(3 * time.Second)
	for !tryLock(t, client, "expiring", "b", 30) {
		if time.Now().After(deadline) {
			t.Fatal("a lock of 1 s was still held 3 s later")
		}
		time.Sleep(50 * time.Millisecond)
	}
	unlock(t, client, "expiring", "b")
}

func TestAnUnknownStoreIsAnInvalidArgument(t *testing.T) {
	client := daprClient(t, daemonAddress)
	_, err := client.TryLockAlpha1(context.Background(), "redis", &dapr.LockRequest{
		ResourceID: "x", LockOwner: "a", ExpiryInSeconds: 5,
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a lock on a store the daemon does not serve: %v", err)
	}
}

// One lock, three clients: the Go client, Dapr's SDK and the shell exclude
// one another on one name, both ways.
func TestTheGoClientDaprAndTheShellShareOneLock(t *testing.T) {
	ctx := context.Background()
	client := daprClient(t, daemonAddress)
	native, err := lockward.Dial(ctx, daemonAddress)
	if err != nil {
		t.Fatal(err)
	}
	defer native.Close()

	lease, err := native.TryLock(ctx, "ledger", lockward.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if code := runNoWait(t, "ledger"); code != 75 {
		t.Fatalf("lockward run --no-wait on a lock the Go client holds exited %d, not 75", code)
	}
	if tryLock(t, client, "ledger", "dapr", 10) {
		t.Fatal("Dapr took a lock the Go client holds")
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if code := runNoWait(t, "ledger"); code != 0 {
		t.Fatalf("lockward run --no-wait on a free lock exited %d", code)
	}

	// The other way round: the shell holds it while its command runs.
	shell := exec.Command(lockwardBinary(), "--store", daemonStore, "run", "ledger", "--", "sleep", "10")
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = shell.Process.Kill()
		_ = shell.Wait()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		early, err := native.TryLock(ctx, "ledger")
		if errors.Is(err, lockward.ErrBusy) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		// Taken before the shell got it: give it back and look again.
		if err := early.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell never held the lock")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if tryLock(t, client, "ledger", "dapr", 10) {
		t.Fatal("Dapr took a lock the shell holds")
	}
}

// A daemon with a token serves Dapr's SDK when DAPR_API_TOKEN carries it,
// and refuses it otherwise.
func TestDaprsAPITokenIsTheDaemonsToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token-for-dapr-go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon, err := lockwardtest.Start(lockwardBinary(), "sqlite://"+filepath.Join(dir, "locks.db"), "--token-file", tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Stop()
	address := daemon.Address

	t.Setenv("DAPR_API_TOKEN", "wrong")
	refused := daprClient(t, address)
	_, err = refused.TryLockAlpha1(context.Background(), storeName, &dapr.LockRequest{
		ResourceID: "guarded", LockOwner: "a", ExpiryInSeconds: 5,
	})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a wrong token: %v", err)
	}
	if strings.Contains(fmt.Sprint(err), "s3cret") || strings.Contains(fmt.Sprint(err), "wrong") {
		t.Fatalf("the refusal shows a token: %v", err)
	}

	t.Setenv("DAPR_API_TOKEN", "s3cret-token-for-dapr-go")
	allowed := daprClient(t, address)
	if !tryLock(t, allowed, "guarded", "a", 5) {
		t.Fatal("the right token did not get a free lock")
	}
}
