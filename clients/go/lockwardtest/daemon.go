// Package lockwardtest starts `lockward serve` for tests and benchmarks,
// as net/http/httptest starts HTTP servers.
package lockwardtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
)

// Daemon is a running `lockward serve`.
type Daemon struct {
	// Address is where it listens, as Dial takes it: "127.0.0.1:PORT" or
	// "unix:///PATH".
	Address string
	// Cmd is its process, for tests that signal it (kill -9, SIGSTOP).
	Cmd *exec.Cmd
}

// Start starts the lockward binary bin serving store, with options added
// to `lockward serve` (on a free loopback port unless they give
// --listen), and waits until it says where it listens. The daemon is
// killed when the calling process dies; Stop ends it before.
func Start(bin, store string, options ...string) (*Daemon, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no lockward binary at %s (build it with `cargo build -p lockward-cli`, or set LOCKWARD_BIN): %w", bin, err)
	}
	args := []string{"--store", store, "serve"}
	if !slices.Contains(options, "--listen") {
		args = append(args, "--listen", "127.0.0.1:0")
	}
	cmd := exec.Command(bin, append(args, options...)...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("lockward serve printed no address: %w", err)
	}
	_, address, found := strings.Cut(strings.TrimSpace(line), " on ")
	if !found {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("no address in %q", line)
	}
	return &Daemon{Address: address, Cmd: cmd}, nil
}

// Stop asks the daemon to stop (SIGTERM: it releases what it holds) and
// waits for it to end.
func (d *Daemon) Stop() {
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	_ = d.Cmd.Wait()
}
