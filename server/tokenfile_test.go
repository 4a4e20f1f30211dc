package server

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTokenFileTrailingData: a token file with anything but white space
// after its JSON object is refused, by the server and by token list.
func TestTokenFileTrailingData(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens.json")
	if _, err := AddToken(file, "ci", []string{"read"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAuth(file); err != nil {
		t.Fatalf("the file as written: %v", err)
	}
	if err := os.WriteFile(file, append(b, "}\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAuth(file); err == nil {
		t.Error("LoadAuth took a token file with a stray '}'")
	}
	if _, err := ListTokens(file); err == nil {
		t.Error("ListTokens took a token file with a stray '}'")
	}
}
