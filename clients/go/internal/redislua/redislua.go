// Package redislua holds the Lua scripts lockward runs on Redis, the same
// files the Rust crate builds its scripts from
// (crates/lockward/src/backend/redis/lua), so that a Go holder and a Rust
// holder speak one protocol on one key layout. lua/scripts.txt says which
// pieces, in order, make each script.
package redislua

import (
	"embed"
	"fmt"
	"strings"
)

//go:generate sh -c "rm -rf lua && cp -r ../../../../crates/lockward/src/backend/redis/lua lua"

//go:embed lua/*.lua lua/scripts.txt
var files embed.FS

// Script returns the text of the script name: its pieces joined in the
// order lua/scripts.txt gives.
func Script(name string) (string, error) {
	manifest, err := files.ReadFile("lua/scripts.txt")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(manifest), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		script, pieces, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(script) != name {
			continue
		}
		var text strings.Builder
		for _, piece := range strings.Fields(pieces) {
			body, err := files.ReadFile("lua/" + piece + ".lua")
			if err != nil {
				return "", fmt.Errorf("script %s: piece %s: %w", name, piece, err)
			}
			text.Write(body)
		}
		return text.String(), nil
	}
	return "", fmt.Errorf("no script %q in lua/scripts.txt", name)
}
