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
	EnvAllowedEnv      = "KMIRROR_CONFIG_PROVIDER_ALLOWED_ENV"   // comma list of variable names ${env:…} of a mirror definition may read; NAME_* a prefix
)

// The defaults of a mirror definition's references, where the instance
// sets nothing: anyone who may write __mirror_state (--create, --alter)
// writes definitions, and an instance must not hand such a person its own
// secrets (the destination's password, say) by resolving a reference and
// sending the value to a source of their choosing.
const (
	DefaultDefinitionEnv = "KMIRROR_SOURCE_*"     // the variables a definition may read
	DefaultSecretsDir    = "/etc/kmirror/secrets" // the directory its ${file:…} may read under
)

// ErrNotAllowed matches a reference the policy refuses.
var ErrNotAllowed = errors.New("not allowed")

// Policy restricts which references resolve. The zero value allows every
// ${env:…} and ${file:…}.
type Policy struct {
	Providers    []string // nil: env and file
	AllowedPaths []string // nil: any path; absolute, cleaned
	AllowedEnv   []string // nil: any variable; names, or prefixes ending in '*'
}

// DefinitionPolicyFromEnv is the policy of the references in a mirror
// definition (the source's settings in __mirror_state): PolicyFromEnv,
// with EnvAllowedEnv read, and DefaultDefinitionEnv and DefaultSecretsDir
// where EnvAllowedEnv and EnvAllowedPaths are unset. Only the instance's
// own environment sets it, never a definition.
func DefinitionPolicyFromEnv(lookup func(string) (string, bool)) (Policy, error) {
	p, err := PolicyFromEnv(lookup)
	if err != nil {
		return p, err
	}
	if _, ok := lookup(EnvAllowedPaths); !ok {
		p.AllowedPaths = []string{realPath(DefaultSecretsDir)}
	}
	p.AllowedEnv = []string{DefaultDefinitionEnv}
	if v, ok := lookup(EnvAllowedEnv); ok {
		p.AllowedEnv = []string{}
		for _, name := range SplitList(v) {
			if !envName.MatchString(strings.TrimSuffix(name, "*")) && name != "*" {
				return p, fmt.Errorf("%s: %q is not a variable name or a prefix ending in *", EnvAllowedEnv, name)
			}
			p.AllowedEnv = append(p.AllowedEnv, name)
		}
	}
	return p, nil
}

// ResolveDefinition resolves v, a value of a mirror definition, with the
// process's environment and files under DefinitionPolicyFromEnv.
func ResolveDefinition(v string) (string, error) {
	p, err := DefinitionPolicyFromEnv(os.LookupEnv)
	if err != nil {
		return "", err
	}
	return p.Resolve(v, os.LookupEnv, os.ReadFile)
}

// CheckDefinition reports the first reference in v that the instance's
// definition policy refuses, reading no variable and no file: what
// --create and --alter check before they record a definition.
func CheckDefinition(v string) error {
	p, err := DefinitionPolicyFromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	for _, sub := range refPattern.FindAllStringSubmatch(v, -1) {
		ref, ok := parseRef(sub[1], sub[2])
		if !ok {
			continue // resolving reports it
		}
		if err := p.allow(ref); err != nil {
			return fmt.Errorf("resolve %s: %w", sub[0], err)
		}
	}
	return nil
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
	if ref.provider == "env" && p.AllowedEnv != nil && !slices.ContainsFunc(p.AllowedEnv, func(pat string) bool {
		if prefix, ok := strings.CutSuffix(pat, "*"); ok {
			return strings.HasPrefix(ref.name, prefix)
		}
		return pat == ref.name
	}) {
		return fmt.Errorf("environment variable %s %w in a mirror definition (%s=%s; an instance allows more with %s)",
			ref.name, ErrNotAllowed, EnvAllowedEnv, strings.Join(p.AllowedEnv, ","), EnvAllowedEnv)
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
	return fmt.Errorf("%s is outside %s: %w (%s=%s)", ref.path, EnvAllowedPaths, ErrNotAllowed, EnvAllowedPaths, strings.Join(p.AllowedPaths, ","))
}

// realPath is path cleaned, with symbolic links resolved where it exists.
func realPath(path string) string {
	path = filepath.Clean(path)
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}
