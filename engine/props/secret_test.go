package props

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestIsSecretKey(t *testing.T) {
	for key, want := range map[string]bool{
		"sasl.jaas.config": true, "sasl.password": true, "ssl.key.password": true,
		"ssl.keystore.password": true, "ssl.truststore.password": true, "ssl.keystore.key": true,
		"sasl.oauthbearer.client.credentials.client.secret": true,
		"sasl.username": false, "bootstrap.servers": false, "ssl.truststore.location": false, "password": false,
	} {
		if IsSecretKey(key) != want {
			t.Errorf("IsSecretKey(%q) = %v", key, !want)
		}
	}
}

func TestIsReference(t *testing.T) {
	for v, want := range map[string]bool{
		"${env:KMIRROR_PW}": true, "${env:_x1}": true, "${file:/etc/kmirror/secrets.properties:source.password}": true,
		"${file:/a:b:c}": true, // path ends at the first ':'
		"${env:}":        false, "${env:1X}": false, "${env:A-B}": false, "${file:/a}": false, "${file::k}": false,
		"${vault:x:y}": false, "pw${env:X}": false, "${env:X}${env:Y}": false, "${env:X": false, "": false, "hunter2": false,
	} {
		if IsReference(v) != want {
			t.Errorf("IsReference(%q) = %v", v, !want)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ key, v, want string }{
		{"sasl.password", "hunter2", Redacted},
		{"sasl.password", "${env:PW}", "${env:PW}"},
		{"sasl.password", "", ""},
		{"ssl.keystore.password", "${file:/s.properties:ks}", "${file:/s.properties:ks}"},
		{"ssl.key.password", "pw${env:X}", Redacted},
		{"sasl.username", "kmirror", "kmirror"},
		{"sasl.jaas.config", `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="hunter2";`, Redacted},
		{"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password=hunter2;`, Redacted},
		{"sasl.jaas.config", `x.PlainLoginModule required username="u" password="${env:PW}";`,
			`x.PlainLoginModule required username="u" password="${env:PW}";`},
		{"sasl.jaas.config", `x.OAuthBearerLoginModule required clientSecret="s3";`, Redacted},
		{"sasl.jaas.config", "${file:/jaas.properties:config}", "${file:/jaas.properties:config}"},
	}
	for _, tt := range tests {
		if got := Redact(tt.key, tt.v); got != tt.want {
			t.Errorf("Redact(%q, %q) = %q, want %q", tt.key, tt.v, got, tt.want)
		}
		if IsLiteralSecret(tt.key, tt.v) != (tt.want == Redacted) {
			t.Errorf("IsLiteralSecret(%q, %q) disagrees with Redact", tt.key, tt.v)
		}
	}
}

func TestResolve(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"PW": "s3cr3t", "EMPTY": ""}[k]
		return v, ok
	}
	reads := 0
	readFile := func(path string) ([]byte, error) {
		reads++
		switch path {
		case "/etc/kmirror/secrets.properties":
			return []byte("source.password=from\\u0020file\nks=k1\n"), nil
		case "/broken.properties":
			return []byte("a=1\nb=\\uZZZZhunter2"), nil
		}
		return nil, fs.ErrNotExist
	}
	tests := []struct{ in, want string }{
		{"${env:PW}", "s3cr3t"},
		{"${env:EMPTY}", ""},
		{"plain", "plain"},
		{"${file:/etc/kmirror/secrets.properties:source.password}", "from file"},
		{`x required password="${env:PW}" ks="${file:/etc/kmirror/secrets.properties:ks}";`, `x required password="s3cr3t" ks="k1";`},
		{"${vault:secret/x:y}", "${vault:secret/x:y}"},
	}
	for _, tt := range tests {
		got, err := Resolve(tt.in, env, readFile)
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	reads = 0
	if _, err := Resolve("${file:/etc/kmirror/secrets.properties:ks}${file:/etc/kmirror/secrets.properties:ks}", env, readFile); err != nil || reads != 1 {
		t.Errorf("file read %d times (err %v), want once", reads, err)
	}
	errTests := []struct{ in, want string }{
		{"${env:NOPE}", "environment variable NOPE is not set"},
		{"${env:}", "malformed reference ${env:}"},
		{"${file:/missing:k}", "file does not exist"},
		{"${file:/etc/kmirror/secrets.properties:nokey}", `/etc/kmirror/secrets.properties has no key "nokey"`},
		{"${file:/broken.properties:a}", "/broken.properties: line 2: not a valid properties file"},
	}
	for _, tt := range errTests {
		_, err := Resolve(tt.in, env, readFile)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Resolve(%q) err = %v, want %q", tt.in, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Resolve(%q) leaked file text: %v", tt.in, err)
		}
	}
	if _, err := Resolve("${file:/missing:k}", env, readFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read error not wrapped: %v", err)
	}
}
