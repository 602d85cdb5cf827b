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

// TestDefinitionPolicy: a mirror definition's references resolve only
// within the instance's definition policy: by default KMIRROR_SOURCE_*
// variables and files under /etc/kmirror/secrets; the instance's
// environment widens or narrows it; a refusal names the reference's
// variable or path and the setting, never the value.
func TestDefinitionPolicy(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.properties")
	if err := os.WriteFile(file, []byte("pw=hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vals := map[string]string{"KMIRROR_SOURCE_PW": "src-pw", "KMIRROR_DESTINATION_PASSWORD": "dst-pw", "APP_PW": "app-pw"}
	env := func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
	for _, tc := range []struct {
		name    string
		vars    map[string]string
		ref     string
		want    string
		refused string // the setting named by the refusal
	}{
		{"default: source prefix", nil, "${env:KMIRROR_SOURCE_PW}", "src-pw", ""},
		{"default: other variable", nil, "${env:KMIRROR_DESTINATION_PASSWORD}", "", EnvAllowedEnv},
		{"default: file outside the secrets directory", nil, "${file:" + file + ":pw}", "", EnvAllowedPaths},
		{"allowed by name", map[string]string{EnvAllowedEnv: "APP_PW"}, "${env:APP_PW}", "app-pw", ""},
		{"a list replaces the default", map[string]string{EnvAllowedEnv: "APP_*"}, "${env:KMIRROR_SOURCE_PW}", "", EnvAllowedEnv},
		{"any", map[string]string{EnvAllowedEnv: "*"}, "${env:KMIRROR_DESTINATION_PASSWORD}", "dst-pw", ""},
		{"directory allowed", map[string]string{EnvAllowedPaths: dir}, "${file:" + file + ":pw}", "hunter2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DefinitionPolicyFromEnv(func(k string) (string, bool) { v, ok := tc.vars[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Resolve(tc.ref, env, os.ReadFile)
			if tc.refused == "" {
				if err != nil || got != tc.want {
					t.Fatalf("resolve %s: %q, %v; want %q", tc.ref, got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), tc.ref) || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("resolve %s: %v; want a refusal naming it and %s", tc.ref, err, tc.refused)
			}
			for _, v := range append(mapsValues(vals), "hunter2") {
				if strings.Contains(err.Error(), v) {
					t.Errorf("the refusal %q holds the value %q", err, v)
				}
			}
		})
	}
	if _, err := DefinitionPolicyFromEnv(func(k string) (string, bool) { return "bad name", k == EnvAllowedEnv }); err == nil {
		t.Error("a bad variable pattern accepted")
	}
}

func mapsValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
