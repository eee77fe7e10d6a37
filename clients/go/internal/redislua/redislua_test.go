package redislua

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Rust crate's copy, which this package's must equal.
const source = "../../../../crates/lockward/src/backend/redis/lua"

func TestTheFilesAreTheRustCrates(t *testing.T) {
	want, err := os.ReadDir(source)
	if err != nil {
		t.Fatalf("the Rust crate's scripts: %v", err)
	}
	got, err := files.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d files here, %d in %s: run go generate ./internal/redislua", len(got), len(want), source)
	}
	for _, entry := range want {
		rust, err := os.ReadFile(filepath.Join(source, entry.Name()))
		if err != nil {
			t.Fatal(err)
		}
		ours, err := files.ReadFile("lua/" + entry.Name())
		if err != nil || string(ours) != string(rust) {
			t.Errorf("lua/%s differs from %s: run go generate ./internal/redislua", entry.Name(), source)
		}
	}
}

func TestEveryScriptIsBuiltFromItsPieces(t *testing.T) {
	text, err := Script("acquire")
	if err != nil {
		t.Fatal(err)
	}
	// line, next_fence, then acquire itself, in that order.
	line := strings.Index(text, "local function first_in_line")
	fence := strings.Index(text, "local function next_fence")
	grant := strings.Index(text, "redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])")
	if line < 0 || fence < line || grant < fence {
		t.Fatalf("acquire is not line + next_fence + acquire: %d %d %d", line, fence, grant)
	}
	for _, name := range []string{"release", "reader_read", "permit_take", "redlock_grant"} {
		if text, err := Script(name); err != nil || !strings.Contains(text, "return") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Script("nothing"); err == nil {
		t.Error("a script the manifest does not have was built")
	}
}
