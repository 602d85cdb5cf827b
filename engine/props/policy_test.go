package props

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	allowed := filepath.Join(dir, "secrets")
	other := filepath.Join(dir, "other")
	for _, d := range []string{allowed, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "s.properties"), []byte("pw=hunter2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(other, "s.properties"), filepath.Join(allowed, "link.properties")); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) { return map[string]string{"PW": "from-env"}[k], k == "PW" }
	policy := func(vars map[string]string) Policy {
		p, err := PolicyFromEnv(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	inAllowed := "${file:" + filepath.Join(allowed, "s.properties") + ":pw}"
	inOther := "${file:" + filepath.Join(other, "s.properties") + ":pw}"
	escape := "${file:" + filepath.Join(allowed, "..", "other", "s.properties") + ":pw}"
	link := "${file:" + filepath.Join(allowed, "link.properties") + ":pw}"
	tests := []struct {
		name  string
		vars  map[string]string
		ref   string
		want  string
		error bool
	}{
		{"no policy: env", nil, "${env:PW}", "from-env", false},
		{"no policy: any file", nil, inOther, "hunter2", false},
		{"file only: env refused", map[string]string{EnvConfigProviders: "file"}, "${env:PW}", "", true},
		{"file only: file", map[string]string{EnvConfigProviders: "file"}, inOther, "hunter2", false},
		{"none", map[string]string{EnvConfigProviders: "none"}, inAllowed, "", true},
		{"allowed path", map[string]string{EnvAllowedPaths: allowed}, inAllowed, "hunter2", false},
		{"outside", map[string]string{EnvAllowedPaths: allowed}, inOther, "", true},
		{"dot-dot out", map[string]string{EnvAllowedPaths: allowed}, escape, "", true},
		{"symlink out", map[string]string{EnvAllowedPaths: allowed}, link, "", true},
		{"paths leave env alone", map[string]string{EnvAllowedPaths: allowed}, "${env:PW}", "from-env", false},
	}
	for _, tt := range tests {
		got, err := policy(tt.vars).Resolve(tt.ref, env, os.ReadFile)
		if (err != nil) != tt.error || got != tt.want {
			t.Errorf("%s: %q, %v", tt.name, got, err)
		}
		if err != nil && !errors.Is(err, ErrNotAllowed) {
			t.Errorf("%s: %v is not ErrNotAllowed", tt.name, err)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "from-env")) {
			t.Errorf("%s: the error leaks the secret: %v", tt.name, err)
		}
	}
	for _, bad := range []map[string]string{{EnvConfigProviders: "vault"}, {EnvAllowedPaths: "relative/dir"}} {
		if _, err := PolicyFromEnv(func(k string) (string, bool) { v, ok := bad[k]; return v, ok }); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
