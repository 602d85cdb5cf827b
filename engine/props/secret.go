package props

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Redacted replaces a literal secret wherever kmirror prints settings.
const Redacted = "[redacted]"

// IsSecretKey reports whether a setting holds a secret: sasl.jaas.config,
// sasl.password, ssl.keystore.key and every *.password or *.secret key (all
// ssl.*.password among them). Erring towards secret only costs a redaction.
func IsSecretKey(key string) bool {
	switch key {
	case KeySASLJAASConfig, KeySASLPassword, "ssl.keystore.key":
		return true
	}
	return strings.HasSuffix(key, ".password") || strings.HasSuffix(key, ".secret")
}

// refPattern finds ${provider:body} the way Kafka's ConfigTransformer does.
var refPattern = regexp.MustCompile(`\$\{([A-Za-z0-9_.-]+):([^}]*)\}`)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reference is one parsed ${env:NAME} or ${file:path:key}.
type reference struct {
	provider string // "env" or "file"
	name     string // variable name, or key in the file
	path     string // file path
}

// parseRef parses the provider and body of a ${…} match. Like Kafka, the
// file path ends at the first ':' of the body.
func parseRef(provider, body string) (reference, bool) {
	switch provider {
	case "env":
		return reference{provider: provider, name: body}, envName.MatchString(body)
	case "file":
		path, key, ok := strings.Cut(body, ":")
		return reference{provider: provider, path: path, name: key}, ok && path != "" && key != ""
	}
	return reference{}, false
}

// IsReference reports whether v is exactly one ${env:NAME} or
// ${file:/path:key} reference, the form secrets are stored in.
func IsReference(v string) bool {
	m := refPattern.FindStringSubmatchIndex(v)
	if m == nil || m[0] != 0 || m[1] != len(v) {
		return false
	}
	_, ok := parseRef(v[m[2]:m[3]], v[m[4]:m[5]])
	return ok
}

// jaasOption matches name=value options of a JAAS configuration.
var jaasOption = regexp.MustCompile(`([A-Za-z0-9_.-]+)\s*=\s*("((?:[^"\\]|\\.)*)"|[^\s;"]+)`)

// IsLiteralSecret reports whether storing or printing key=v would expose a
// secret: the key is secret and the value is neither empty nor a reference.
// A sasl.jaas.config counts as a reference when every password- or
// secret-like option in it is one, e.g.
// `... username="mirror" password="${env:KMIRROR_PW}";`.
func IsLiteralSecret(key, v string) bool {
	if !IsSecretKey(key) || v == "" || IsReference(v) {
		return false
	}
	if key != KeySASLJAASConfig {
		return true
	}
	for _, m := range jaasOption.FindAllStringSubmatch(v, -1) {
		name := strings.ToLower(m[1])
		if !strings.Contains(name, "password") && !strings.Contains(name, "secret") {
			continue
		}
		val := m[2]
		if strings.HasPrefix(val, `"`) {
			val = m[3]
		}
		if !IsReference(val) {
			return true
		}
	}
	return false
}

// Redact returns the value to show for key=v: Redacted for a literal secret,
// v itself otherwise (references are safe to show and tell the operator
// where the secret comes from).
func Redact(key, v string) string {
	if IsLiteralSecret(key, v) {
		return Redacted
	}
	return v
}

// Resolve replaces every ${env:NAME} and ${file:path:key} reference in v.
// env looks a variable up; readFile reads a .properties file, whose key is
// taken. References to other providers are left as they are, as Kafka does.
// Errors name the reference, never a secret value.
func Resolve(v string, env func(string) (string, bool), readFile func(string) ([]byte, error)) (string, error) {
	return resolve(v, env, readFile, nil)
}

func resolve(v string, env func(string) (string, bool), readFile func(string) ([]byte, error), policy *Policy) (string, error) {
	files := map[string]Properties{}
	var firstErr error
	out := refPattern.ReplaceAllStringFunc(v, func(match string) string {
		if firstErr != nil {
			return match
		}
		sub := refPattern.FindStringSubmatch(match)
		provider := sub[1]
		if provider != "env" && provider != "file" {
			return match
		}
		ref, ok := parseRef(provider, sub[2])
		if !ok {
			firstErr = fmt.Errorf("malformed reference %s (want ${env:NAME} or ${file:/path:key})", match)
			return match
		}
		if err := policy.allow(ref); err != nil {
			firstErr = fmt.Errorf("resolve %s: %w", match, err)
			return match
		}
		val, err := resolveRef(ref, env, readFile, files)
		if err != nil {
			firstErr = fmt.Errorf("resolve %s: %w", match, err)
			return match
		}
		return val
	})
	if firstErr != nil {
		return "", firstErr
	}
	return out, nil
}

func resolveRef(ref reference, env func(string) (string, bool), readFile func(string) ([]byte, error), files map[string]Properties) (string, error) {
	if ref.provider == "env" {
		val, ok := env(ref.name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", ref.name)
		}
		return val, nil
	}
	p, ok := files[ref.path]
	if !ok {
		data, err := readFile(ref.path)
		if err != nil {
			return "", err
		}
		if p, err = Parse(bytes.NewReader(data)); err != nil {
			// The message of a syntax error may quote the file's text,
			// which is a secret here: keep only the line.
			var pe *ParseError
			if errors.As(err, &pe) {
				return "", fmt.Errorf("%s: line %d: not a valid properties file", ref.path, pe.Line)
			}
			return "", fmt.Errorf("%s: not a valid properties file", ref.path)
		}
		files[ref.path] = p
	}
	val, ok := p.Get(ref.name)
	if !ok {
		return "", fmt.Errorf("%s has no key %q", ref.path, ref.name)
	}
	return val, nil
}
