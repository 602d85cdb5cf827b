package props

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The environment variables of the secret reference policy, kmirror's
// counterparts of Kafka's org.apache.kafka.automatic.config.providers
// system property and FileConfigProvider's allowed.paths (KIP-993): a
// configuration file someone else can edit must not make kmirror read any
// variable or file it can.
const (
	EnvConfigProviders = "KMIRROR_CONFIG_PROVIDERS"              // comma list: env, file; "none" for no references
	EnvAllowedPaths    = "KMIRROR_CONFIG_PROVIDER_ALLOWED_PATHS" // comma list of directories ${file:…} may read under
)

// ErrNotAllowed matches a reference the policy refuses.
var ErrNotAllowed = errors.New("not allowed")

// Policy restricts which references resolve. The zero value allows every
// ${env:…} and ${file:…}.
type Policy struct {
	Providers    []string // nil: env and file
	AllowedPaths []string // nil: any path; absolute, cleaned
}

// PolicyFromEnv reads the policy from EnvConfigProviders and EnvAllowedPaths.
func PolicyFromEnv(lookup func(string) (string, bool)) (Policy, error) {
	var p Policy
	if v, ok := lookup(EnvConfigProviders); ok {
		p.Providers = []string{}
		for _, name := range SplitList(v) {
			switch name = strings.ToLower(name); name {
			case "env", "file":
				p.Providers = append(p.Providers, name)
			case "none":
			default:
				return p, fmt.Errorf("%s: unknown provider %q (want env, file or none)", EnvConfigProviders, name)
			}
		}
	}
	if v, ok := lookup(EnvAllowedPaths); ok {
		p.AllowedPaths = []string{}
		for _, dir := range SplitList(v) {
			if !filepath.IsAbs(dir) {
				return p, fmt.Errorf("%s: %q is not an absolute path", EnvAllowedPaths, dir)
			}
			p.AllowedPaths = append(p.AllowedPaths, realPath(dir))
		}
	}
	return p, nil
}

// Resolve is the package's Resolve under the policy.
func (p Policy) Resolve(v string, env func(string) (string, bool), readFile func(string) ([]byte, error)) (string, error) {
	return resolve(v, env, readFile, &p)
}

// ResolveFromEnv resolves v with the process's environment, files and the
// policy its environment sets: what the CLI and instances use.
func ResolveFromEnv(v string) (string, error) {
	p, err := PolicyFromEnv(os.LookupEnv)
	if err != nil {
		return "", err
	}
	return p.Resolve(v, os.LookupEnv, os.ReadFile)
}

func (p *Policy) allow(ref reference) error {
	if p == nil {
		return nil
	}
	if p.Providers != nil && !slices.Contains(p.Providers, ref.provider) {
		return fmt.Errorf("provider %s %w (%s=%s)", ref.provider, ErrNotAllowed, EnvConfigProviders, strings.Join(p.Providers, ","))
	}
	if ref.provider != "file" || p.AllowedPaths == nil {
		return nil
	}
	if !filepath.IsAbs(ref.path) {
		return fmt.Errorf("%s is relative: %w with %s set", ref.path, ErrNotAllowed, EnvAllowedPaths)
	}
	// Symbolic links are followed first: a link inside an allowed
	// directory must not lead out of it.
	path := realPath(ref.path)
	for _, dir := range p.AllowedPaths {
		if rel, err := filepath.Rel(dir, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil
		}
	}
	return fmt.Errorf("%s is outside %s: %w", ref.path, EnvAllowedPaths, ErrNotAllowed)
}

// realPath is path cleaned, with symbolic links resolved where it exists.
func realPath(path string) string {
	path = filepath.Clean(path)
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}
