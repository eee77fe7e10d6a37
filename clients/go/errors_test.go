package lockward

import (
	"errors"
	"os"
	"regexp"
	"testing"
)

// TestEveryKindOfTheLibraryHasASentinel reads the kinds the Rust library
// lists (Error::KINDS, what the daemon sends) and wants a sentinel of each.
func TestEveryKindOfTheLibraryHasASentinel(t *testing.T) {
	source, err := os.ReadFile("../../crates/lockward/src/error.rs")
	if err != nil {
		t.Fatalf("the library's errors: %v", err)
	}
	block := regexp.MustCompile(`(?s)pub const KINDS: \[&'static str; \d+\] = \[(.*?)\];`).FindSubmatch(source)
	if block == nil {
		t.Fatal("no Error::KINDS in error.rs")
	}
	kinds := regexp.MustCompile(`"(\w+)"`).FindAllSubmatch(block[1], -1)
	sentinels := map[string]*Error{}
	for _, s := range []*Error{
		ErrBusy, ErrNoPermits, ErrTimedOut, ErrLost, ErrNotOwner, ErrInvalidArgument,
		ErrContended, ErrUnavailable, ErrDenied, ErrProtocol, ErrStale, ErrNotSupported,
		ErrNotBuilt, ErrUnauthenticated, ErrTooManyLeases,
	} {
		sentinels[s.Kind] = s
	}
	if len(kinds) < 13 {
		t.Fatalf("only %d kinds read from error.rs", len(kinds))
	}
	for _, k := range kinds {
		kind := string(k[1])
		sentinel, ok := sentinels[kind]
		if !ok {
			t.Errorf("no sentinel for the library's kind %q", kind)
			continue
		}
		sent := &Error{Kind: kind, Message: "as the daemon says it"}
		if !errors.Is(sent, sentinel) {
			t.Errorf("errors.Is(%v, %v) is false", sent, sentinel)
		}
	}
}
