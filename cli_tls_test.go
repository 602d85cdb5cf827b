package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/engine/enginetest"
)

// TestCLIKeystorePasswords: the CLI reads PKCS12 and JKS stores, for the
// destination (--command-config) and for the source (--mirror-config), and
// a wrong store password is one line naming the setting, exit 1, the
// password never echoed.
func TestCLIKeystorePasswords(t *testing.T) {
	const storePW = "cli-store-pw-e41b"
	t.Setenv("KMIRROR_SOURCE_TEST_STORE_PASSWORD", storePW)
	t.Setenv("KMIRROR_SOURCE_TEST_WRONG_PASSWORD", "cli-wrong-pw-09fa")
	dstPKI, srcPKI := enginetest.NewPKI(t), enginetest.NewPKI(t)
	dst := enginetest.NewCluster(t, "kmirror-test-destination", kfake.TLS(dstPKI.Server))
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.TLS(srcPKI.ServerOnly))
	work := t.TempDir()
	file := func(name string, lines ...string) string {
		path := filepath.Join(work, name)
		if err := writeFile(path, strings.Join(lines, "\n")); err != nil {
			t.Fatal(err)
		}
		return path
	}
	destination := func(name, pwEnv string) string {
		return file(name, "security.protocol=SSL",
			"ssl.keystore.type=PKCS12", "ssl.keystore.location="+dstPKI.PKCS12Keystore(t, storePW),
			"ssl.keystore.password=${env:"+pwEnv+"}",
			"ssl.truststore.type=PKCS12", "ssl.truststore.location="+dstPKI.PKCS12Truststore(t, storePW),
			"ssl.truststore.password=${env:KMIRROR_SOURCE_TEST_STORE_PASSWORD}")
	}
	source := func(name, pwEnv string) string {
		return file(name, "bootstrap.servers="+addrs(src), "security.protocol=SSL",
			"ssl.truststore.type=JKS", "ssl.truststore.location="+srcPKI.JKSTruststore(t, storePW),
			"ssl.truststore.password=${env:"+pwEnv+"}")
	}
	B := addrs(dst)
	good := destination("destination.properties", "KMIRROR_SOURCE_TEST_STORE_PASSWORD")
	if out := kmirrorCLI(t, 0, "--bootstrap-server", B, "--command-config", good, "--list"); !strings.Contains(out, "No mirrors found.") {
		t.Errorf("--list over PKCS12 stores: %q", out)
	}

	refused := func(want string, args ...string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		msg := errb.String()
		t.Logf("exit %d: %s", code, msg)
		if code != exitFail {
			t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, exitFail, out.String(), msg)
		}
		if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "kmirror: ") || !strings.Contains(msg, want) {
			t.Errorf("want one line starting with \"kmirror: \" and saying %q, got %q", want, msg)
		}
		if strings.Contains(msg, "cli-wrong-pw") || strings.Contains(msg, storePW) {
			t.Errorf("the error echoes a password: %q", msg)
		}
	}
	refused("wrong ssl.keystore.password", "--bootstrap-server", B,
		"--command-config", destination("wrong-destination.properties", "KMIRROR_SOURCE_TEST_WRONG_PASSWORD"), "--list")
	refused("wrong ssl.truststore.password", "--bootstrap-server", B, "--command-config", good,
		"--create", "--mirror", "a-to-b", "--mirror-config", source("wrong-source.properties", "KMIRROR_SOURCE_TEST_WRONG_PASSWORD"))
	if list := kmirrorCLI(t, 0, "--bootstrap-server", B, "--command-config", good, "--list"); strings.Contains(list, "a-to-b") {
		t.Errorf("a refused mirror was recorded:\n%s", list)
	}
	out := kmirrorCLI(t, 0, "--bootstrap-server", B, "--command-config", good,
		"--create", "--mirror", "a-to-b", "--mirror-config", source("source.properties", "KMIRROR_SOURCE_TEST_STORE_PASSWORD"))
	if !strings.Contains(out, "created mirror a-to-b") {
		t.Errorf("--create over a JKS trust store: %q", out)
	}
}
